//! The server's log: its `tracing` events, one line each on stderr, for people
//! and journald. A line is the time (left out under journald, which stamps each
//! line itself), the level, the message, then the fields as `name=value`.
//!
//! Messages and fields carry names that come from clients (jobs, sets, clients,
//! paths) as they are: the line escapes every control character in them
//! (`escape_controls`), so a name can neither break a line in two nor send a
//! terminal commands.

use std::io::IsTerminal;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::{self, FormatFields, Writer};

/// `--log-level`: the least severe events the log shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl From<LogLevel> for LevelFilter {
    fn from(l: LogLevel) -> Self {
        match l {
            LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Trace => LevelFilter::TRACE,
        }
    }
}

/// What the log shows: `level` when given, else what `RUST_LOG` says (its
/// directives, `warn` or `tapeloom_server=debug`), else info and above.
fn filter(level: Option<LogLevel>) -> EnvFilter {
    match level {
        Some(l) => EnvFilter::default().add_directive(LevelFilter::from(l).into()),
        None => EnvFilter::builder()
            .with_default_directive(LevelFilter::INFO.into())
            .from_env_lossy(),
    }
}

/// The fields of an event, each escaped for people: the message as it is, the
/// others as `name=value`, a space between them.
fn escaped_fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    format::debug_fn(|w: &mut Writer<'_>, field, value| {
        let text = format!("{value:?}");
        let text = tapeloom_engine::escape_controls(&text);
        match field.name() {
            "message" => write!(w, "{text}"),
            name => write!(w, "{name}={text}"),
        }
    })
    .delimited(" ")
}

/// Sends the server's events to stderr from now on, at `level` or what
/// `RUST_LOG` says; coloured only on a terminal.
pub fn init(level: Option<LogLevel>) {
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .fmt_fields(escaped_fields());
    // Set once per process; a second call (none is made) would keep the first.
    let _ = if journald {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the events logged by `f` print, as the server's log prints them
    /// (without the time).
    fn logged(f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&out);
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter(Some(LogLevel::Info)))
            .with_writer(move || Sink(Arc::clone(&sink)))
            .with_ansi(false)
            .with_target(false)
            .without_time()
            .fmt_fields(escaped_fields())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = out.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_event_is_one_line_its_names_escaped() {
        let name = "evil\n\x1b[2Jname";
        let text = logged(|| {
            tracing::warn!(client = %name, job = 7, "job {name} failed");
        });
        assert_eq!(
            text,
            " WARN job evil\\n\\x1b[2Jname failed client=evil\\n\\x1b[2Jname job=7\n"
        );
    }

    #[test]
    fn the_level_leaves_out_less_severe_events() {
        let text = logged(|| {
            tracing::debug!("not shown");
            tracing::info!("shown");
        });
        assert_eq!(text, " INFO shown\n");
    }
}

//! Errors on one line: the cli's own refusals, and how to get past a library's
//! refusal with the flags of the command that met it.

use tapeloom_engine::{escape_controls, Error};

/// What the command line itself refuses, before any library is asked. (A flag's
/// number out of its range is refused earlier still, by its parser.)
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `man` asked for a command tapeloom does not have.
    #[error("tapeloom has no command '{name}' (tapeloom man lists them)")]
    NoSuchCommand {
        /// The command path asked for.
        name: String,
    },
    /// `--stream` without `=`.
    #[error("--stream takes NAME=PATH, not '{0}'")]
    StreamArg(String),
    /// An extent smaller than a block.
    #[error("--extent-size must hold at least one block ({block} bytes), not {extent}")]
    ExtentSize {
        /// The block size.
        block: u64,
        /// The extent size asked for.
        extent: u64,
    },
    /// `restore` or `ls` without --set whose first argument is not a job id.
    #[error("'{0}' is not a job id (a backup set's tree is restored or listed with --set NAME)")]
    NotAJob(String),
    /// `ls` given more than one path.
    #[error("ls takes one path, not {0}")]
    OnePath(usize),
    /// `restore --recall` through a server.
    #[error("--recall brings stubs back from this machine's home: it takes no --server")]
    RecallNeedsHome,
    /// A model's `--scale` under the real clock's floor with the real clock.
    #[error("--scale {scale} needs --clock virtual: at the real clock a factor under {floor} would never end a read")]
    ScaleNeedsVirtualClock {
        /// The factor asked for.
        scale: f64,
        /// The smallest factor the real clock takes.
        floor: f64,
    },
}

/// How a command tells to get past a library's refusal with its own flags.
pub type Hint = fn(&Error) -> Option<&'static str>;

/// For commands that read encrypted jobs with `--key`.
pub fn key_hint(e: &Error) -> Option<&'static str> {
    matches!(e, Error::Crypt(tapeloom_engine::CryptError::NoKey { .. }))
        .then_some("give --key FILE")
}

/// For commands without a flag that gets past a refusal.
pub fn no_hint(_: &Error) -> Option<&'static str> {
    None
}

/// An operation's error as the command line reports it: the engine's own error
/// when the engine failed, so that a hint for it is found ([`one_line`]).
pub fn ops(e: tapeloom_ops::OpsError) -> anyhow::Error {
    match e {
        tapeloom_ops::OpsError::Engine(e) => anyhow::Error::new(*e),
        tapeloom_ops::OpsError::Catalog(e) => anyhow::Error::new(e),
        other => anyhow::Error::new(other),
    }
}

/// An error of the tree crate (a client's packing or placing, or a key it
/// opens) as the command line reports it: the engine's variant of the same name
/// and message, so that a hint for it is found ([`one_line`]). Any other error
/// is returned as it is.
pub fn engine(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<tapeloom_tree::Error>() {
        Ok(e) => anyhow::Error::new(Error::from(e)),
        Err(e) => e,
    }
}

/// An operation's result as the command line reports it (see [`ops`]).
pub trait OpsResult<T> {
    /// The result, its error as [`ops`] makes it.
    fn ops(self) -> anyhow::Result<T>;
}

impl<T> OpsResult<T> for tapeloom_ops::Result<T> {
    fn ops(self) -> anyhow::Result<T> {
        self.map_err(ops)
    }
}

impl<T> OpsResult<T> for tapeloom_ops::s3::Result<T> {
    fn ops(self) -> anyhow::Result<T> {
        self.map_err(|e| match e {
            tapeloom_ops::s3::S3Failure::Failed(e) => ops(e),
            refused => anyhow::Error::new(refused),
        })
    }
}

/// The error and its causes on one line, with how to get past it; control
/// characters a name in it may hold are escaped (`escape_controls`).
pub fn one_line(e: &anyhow::Error, hint: Hint) -> String {
    let mut s = e.to_string();
    for c in e.chain().skip(1) {
        let c = c.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    if let Some(h) = e
        .chain()
        .find_map(|c| c.downcast_ref::<Error>())
        .and_then(hint)
    {
        s.push_str(&format!(" ({h})"));
    }
    escape_controls(&s.replace('\n', " ")).into_owned()
}

/// clap's rendering of a usage error on one line: its message and tips, without the
/// usage and help pointers, control characters of the values it quotes escaped.
pub fn usage_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .fold(String::new(), |mut out, l| {
            if !out.is_empty() {
                out.push_str(if out.ends_with(':') { " " } else { "; " });
            }
            out.push_str(&escape_controls(l));
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_engine::HomeError;

    #[test]
    fn a_hint_is_added_only_by_a_command_that_has_one() {
        let e = || {
            anyhow::Error::from(Error::Home(HomeError::HoldsJobs {
                barcode: "TL0001L9".into(),
                what: "replace it",
            }))
        };
        assert!(!one_line(&e(), no_hint).contains("--force"));
        let force: Hint = |_| Some("--force to do it anyway");
        assert!(one_line(&e(), force).ends_with("(--force to do it anyway)"));
    }

    #[test]
    fn a_tree_error_gets_the_hint_of_the_engines_variant() {
        let e = || {
            anyhow::Error::new(tapeloom_tree::Error::Crypt(
                tapeloom_tree::CryptError::NoKey {
                    job: "7".into(),
                    fingerprint: "0123abcd".into(),
                },
            ))
        };
        assert!(!one_line(&e(), key_hint).contains("--key"));
        let line = one_line(&engine(e()), key_hint);
        assert!(line.ends_with("(give --key FILE)"), "{line}");
        assert!(line.starts_with("job 7 is encrypted"), "{line}");
    }
}

//! `tests/numeric-options.txt`, the table of every numeric option of every
//! command, as its rows. Read by `tests/it/options.rs`, which runs the binary with
//! each row's option given each of `PROBES`, and by the binary's unit test
//! (`src/numeric_options.rs`), which checks the table against the options the
//! command line has.
#![allow(dead_code)]

/// The values every numeric option is given: zero, a negative number, one past
/// what 64 bits hold, a size past any unit's range, 2^64 and 2^63.
pub const PROBES: [&str; 6] = [
    "0",
    "-1",
    "99999999999999999999",
    "16E",
    "18446744073709551616",
    "9223372036854775808",
];

/// One row of the table.
pub struct Row {
    /// The command's words (`library create`).
    pub command: Vec<String>,
    /// `--name`, or `<id>` for a positional argument.
    pub option: String,
    /// How the value is written, `{}` in its place.
    pub form: String,
    /// What else the command needs, with `{src}` and `{new}` to fill in.
    pub args: Vec<String>,
    /// The probes the option takes as valid.
    pub valid: Vec<String>,
}

impl Row {
    /// Whether `probe` is valid for this option.
    pub fn takes(&self, probe: &str) -> bool {
        self.valid.iter().any(|v| v == probe)
    }

    /// The command line after `tapeloom` that gives the option `probe`, the
    /// placeholders replaced by `src` and `new`: the value as `--name=VALUE`, or
    /// after `--` for a positional argument.
    pub fn argv(&self, probe: &str, src: &str, new: &str) -> Vec<String> {
        let mut argv = self.command.clone();
        let fill = |a: &String| a.replace("{src}", src).replace("{new}", new);
        argv.extend(self.args.iter().map(fill));
        let value = self.form.replace("{}", probe);
        if self.option.starts_with("--") {
            argv.push(format!("{}={value}", self.option));
        } else {
            argv.extend(["--".to_string(), value]);
        }
        argv
    }
}

/// The rows of the table.
pub fn rows() -> Vec<Row> {
    let text = include_str!("../../numeric-options.txt");
    let lines = text.lines().map(str::trim);
    lines
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let cols: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(cols.len(), 4, "a row of 4 columns: {l}");
            let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
            let (option, form) = match cols[1].split_once('=') {
                Some((name, form)) => (name.to_string(), form.to_string()),
                None => (cols[1].to_string(), "{}".to_string()),
            };
            Row {
                command: words(cols[0]),
                option,
                form,
                args: words(cols[2]),
                valid: words(cols[3]),
            }
        })
        .collect()
}

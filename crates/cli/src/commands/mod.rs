//! One module per command: its `clap::Args`, its `run`, and the typed output it
//! returns (which `--json` serializes and which prints itself for people).

pub mod backup;
pub mod bench;
pub mod catalog;
pub mod completions;
pub mod devices;
pub mod drive;
pub mod gen;
pub mod jobs;
pub mod key;
pub mod library;
pub mod ls;
pub mod man;
pub mod readrate;
pub mod report;
pub mod restore;
pub mod stage;
pub mod verify;

use anyhow::Result;
use std::path::PathBuf;
use tapeloom_engine::Home;

/// What every command gets from the global flags.
pub struct Context {
    /// `--home`, when given.
    pub home: Option<PathBuf>,
    /// `--json`: the output is one JSON document, progress and tallies go elsewhere.
    pub json: bool,
}

impl Context {
    /// Opens (and locks) the home folder.
    pub fn open_home(&self) -> Result<Home> {
        let dir = self
            .home
            .clone()
            .unwrap_or_else(tapeloom_engine::default_home);
        Ok(Home::open(&dir)?)
    }

    /// Whether the output is for people.
    pub fn human(&self) -> bool {
        !self.json
    }
}

/// The drive clock of a model: add up modeled time, or take that long.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ClockArg {
    // The flags' help says what each does; doc comments here would turn it into
    // the long form.
    Virtual,
    Real,
}

impl From<ClockArg> for tapeloom_device::Clock {
    /// The flag's value as the model's clock.
    fn from(c: ClockArg) -> Self {
        match c {
            ClockArg::Virtual => tapeloom_device::Clock::Virtual,
            ClockArg::Real => tapeloom_device::Clock::Real,
        }
    }
}

//! `tapeloom library ...`: the home's library, virtual or SCSI, and its cartridges.

mod attach;
mod cartridges;
mod create;
mod exercise;
mod inventory;
mod offsite;
mod protect;
mod status;
mod trim;

use super::Context;
use crate::error::{self, Hint};
use crate::output::emit;
use anyhow::Result;
use tapeloom_engine::{Error, HomeError, MediaError};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Drives, slots and cartridges.
    Status,
    /// Use a SCSI media changer and its tape drives as the library (DEV is /dev/sgN or
    /// iscsi://HOST:PORT/TARGET/LUN). Refused while the current library holds jobs.
    Attach(attach::AttachArgs),
    /// Go back to the home's virtual library. Refused while the SCSI library holds jobs.
    Detach(attach::DetachArgs),
    /// What is in each drive and slot.
    Inventory(inventory::Args),
    /// Put a cartridge into a drive and load it.
    Load(cartridges::LoadArgs),
    /// Unload a drive (default: every drive) and put its cartridge back in a slot.
    Unload(cartridges::UnloadArgs),
    /// Move a cartridge (from a drive, a slot or a mail slot) into an empty slot or
    /// mail slot (import/export element: that takes it out of the library).
    Move(cartridges::MoveArgs),
    /// Move cartridges into empty mail slots (import/export elements) to take
    /// them offsite; the catalog marks them offsite.
    Export(offsite::ExportArgs),
    /// Move cartridges from the mail slots back into empty slots (default: every
    /// cartridge in a mail slot); the catalog marks them back onsite.
    Import(offsite::ImportArgs),
    /// Write tapeloom volume labels. A cartridge with data tapeloom did not write, or
    /// with jobs in the catalog, is overwritten only with --force.
    Label(cartridges::LabelArgs),
    /// Clean a drive with a cleaning cartridge (barcode beginning with CLN) from a
    /// slot, putting back the cartridge it holds first.
    Clean(cartridges::CleanArgs),
    /// Set a cartridge's write protection (or clear it with --off); a protected
    /// cartridge is never written.
    Protect(protect::Args),
    /// Mount/dismount stress test: a random cartridge into a random drive and back.
    Exercise(exercise::Args),
    /// Replace the virtual library with a new layout (refused when it holds data).
    Create(create::Args),
    /// Cut the data that failed jobs left at the end of cartridges, and forget those
    /// jobs: on a virtual library, their disk space comes back. Jobs a stage can
    /// still finish are kept, and so is a job `catalog recover` made partial.
    Trim(trim::Args),
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        // Only `library status` reads a home on a read-only file system.
        let mut home = match self.cmd {
            Cmd::Status => ctx.open_home_to_read()?,
            _ => ctx.open_home()?,
        };
        let json = ctx.json;
        match self.cmd {
            Cmd::Status => emit(&status::run(&home)?, json),
            Cmd::Attach(a) => emit(&attach::attach(a, &home)?, json),
            Cmd::Detach(a) => emit(&attach::detach(a, &home)?, json),
            Cmd::Inventory(a) => emit(&inventory::run(a, &home)?, json),
            Cmd::Load(a) => emit(&cartridges::load(a, &home)?, json),
            Cmd::Unload(a) => emit(&cartridges::unload(a, &home)?, json),
            Cmd::Move(a) => emit(&cartridges::move_cartridge(a, &home)?, json),
            Cmd::Export(a) => emit(&offsite::export(a, &home)?, json),
            Cmd::Import(a) => emit(&offsite::import(a, &home)?, json),
            Cmd::Label(a) => emit(&cartridges::label(a, &home)?, json),
            Cmd::Clean(a) => emit(&cartridges::clean(a, &home)?, json),
            Cmd::Protect(a) => emit(&protect::run(a, &home)?, json),
            Cmd::Exercise(a) => emit(&exercise::run(a, &home, ctx.human())?, json),
            Cmd::Create(a) => emit(&create::run(a, &home)?, json),
            Cmd::Trim(a) => emit(&trim::run(a, &mut home)?, json),
        }
    }

    /// How to get past a refusal: only the subcommands with `--force` have a way.
    pub fn hint(&self) -> Hint {
        match self.cmd {
            Cmd::Attach(_) | Cmd::Detach(_) => |e| match e {
                Error::Home(HomeError::HoldsJobs { .. }) => Some("--force to do it anyway"),
                _ => None,
            },
            Cmd::Label(_) => |e| match e {
                Error::Media(MediaError::Foreign { .. }) => Some("--force to overwrite"),
                Error::Media(MediaError::HoldsJobs { .. }) => {
                    Some("--force to overwrite and forget them")
                }
                Error::Media(MediaError::UnknownLabel { .. }) => {
                    Some("--force to overwrite; `catalog rebuild` reads it")
                }
                _ => None,
            },
            _ => error::no_hint,
        }
    }
}

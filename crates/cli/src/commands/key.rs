//! `tapeloom key ...`: key files for encrypted jobs, and the `--key FILE` and
//! `--encrypt FILE` flags' passphrase.
//!
//! The passphrase comes from `TAPELOOM_PASSPHRASE`, else from a prompt on the
//! terminal (`/dev/tty`, without echo).

use super::Context;
use crate::output::Output;
use crate::size;
use anyhow::{Context as _, Result};
use serde::Serialize;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use tapeloom_engine::Home;
use tapeloom_format::{KdfParams, KeyFile, MasterKey};
use zeroize::Zeroizing;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Create a key file (mode 0600): a random master key protected by a
    /// passphrase (Argon2id). Prints its fingerprint.
    Create {
        /// The key file to create; it must not exist.
        file: PathBuf,
        /// Also print the paper form: the key file as numbered lines of hex with a
        /// check each, which `key import` reads back.
        #[arg(long)]
        paper: bool,
        /// Argon2id memory, 8K to 4G (the default makes guessing passphrases
        /// costly).
        #[arg(
            long,
            default_value = "256M",
            value_parser = size::within(
                u64::from(KdfParams::MIN_MEMORY_KIB_PER_LANE) << 10,
                u64::from(KdfParams::MAX_MEMORY_KIB) << 10,
            )
        )]
        kdf_memory: u64,
        /// Argon2id passes, 1 to 64.
        #[arg(
            long,
            default_value_t = 3,
            value_parser = clap::value_parser!(u32).range(1..=i64::from(KdfParams::MAX_ITERATIONS))
        )]
        kdf_passes: u32,
    },
    /// Write a key file from its paper form, read from standard input.
    Import {
        /// The key file to create; it must not exist.
        file: PathBuf,
    },
    /// Print a key file's fingerprint (the passphrase is checked).
    Show {
        /// The key file.
        file: PathBuf,
    },
}

impl Args {
    /// Runs the subcommand and prints its output.
    pub fn run(self, ctx: &Context) -> Result<i32> {
        let out = match self.cmd {
            Cmd::Create {
                file,
                paper,
                kdf_memory,
                kdf_passes,
            } => {
                let kdf = KdfParams {
                    memory_kib: u32::try_from(kdf_memory / 1024).unwrap_or(u32::MAX),
                    iterations: kdf_passes,
                    parallelism: 1,
                };
                let pass = passphrase(&format!("New passphrase for {}: ", file.display()), true)?;
                let kf = tapeloom_engine::create_key_file(&file, &pass, kdf)?;
                KeyOut::new(&file, &kf, paper)
            }
            Cmd::Import { file } => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("read the paper form from standard input")?;
                let kf = KeyFile::from_paper(&text)?;
                tapeloom_engine::write_key_file(&file, &kf)?;
                KeyOut::new(&file, &kf, false)
            }
            Cmd::Show { file } => {
                let master = unlock(&file)?;
                let kf = tapeloom_engine::read_key_file(&file)?;
                debug_assert_eq!(master.fingerprint(), kf.fingerprint);
                KeyOut::new(&file, &kf, false)
            }
        };
        crate::output::emit(&out, ctx.json)
    }
}

/// A key file, as `key` commands print it.
#[derive(Serialize)]
pub struct KeyOut {
    file: String,
    fingerprint: String,
    short: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    paper: Option<String>,
}

impl KeyOut {
    fn new(file: &Path, kf: &KeyFile, paper: bool) -> Self {
        KeyOut {
            file: file.display().to_string(),
            fingerprint: kf.fingerprint.to_string(),
            short: kf.fingerprint.short(),
            paper: paper.then(|| kf.paper()),
        }
    }
}

impl Output for KeyOut {
    fn print(&self) {
        outln!(
            "{}: key {} ({})",
            tapeloom_engine::escape_controls(&self.file),
            self.short,
            self.fingerprint
        );
        if let Some(p) = &self.paper {
            outln!();
            outln!("{}", p.trim_end());
        }
    }
}

/// `--key FILE`: the key file of encrypted jobs to read.
#[derive(clap::Args)]
pub struct KeyArg {
    /// Key file of an encrypted job (the passphrase from TAPELOOM_PASSPHRASE or a
    /// prompt on the terminal).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
}

impl KeyArg {
    /// Whether a key file was given.
    pub fn given(&self) -> bool {
        self.key.is_some()
    }

    /// The key file's master key unlocked, when one was given.
    pub fn keys(&self) -> Result<Vec<MasterKey>> {
        self.key.iter().map(|f| unlock(f)).collect()
    }

    /// Unlocks the key file, when one was given, and gives its key to the home.
    pub fn give(&self, home: &mut Home) -> Result<()> {
        if let Some(f) = &self.key {
            home.keys.push(unlock(f)?);
        }
        Ok(())
    }
}

/// Reads a key file and unlocks it with the passphrase.
pub fn unlock(file: &Path) -> Result<MasterKey> {
    // The file is read first: a missing file is said before a passphrase is asked.
    tapeloom_engine::read_key_file(file)?;
    let pass = passphrase(&format!("Passphrase for {}: ", file.display()), false)?;
    Ok(tapeloom_engine::open_key_file(file, &pass)?)
}

/// The passphrase: `TAPELOOM_PASSPHRASE`, else asked on the terminal without echo
/// (twice when `confirm`).
fn passphrase(prompt: &str, confirm: bool) -> Result<Zeroizing<Vec<u8>>> {
    if let Some(p) = std::env::var_os("TAPELOOM_PASSPHRASE") {
        let p = Zeroizing::new(p.into_encoded_bytes());
        return Ok(p);
    }
    let first = ask(prompt)?;
    if confirm && *ask("Again: ")? != *first {
        anyhow::bail!("the two passphrases differ");
    }
    if first.is_empty() {
        anyhow::bail!("the passphrase is empty");
    }
    Ok(first)
}

/// Asks on `/dev/tty` with echo off.
fn ask(prompt: &str) -> Result<Zeroizing<Vec<u8>>> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|_| {
            anyhow::anyhow!("no passphrase: set TAPELOOM_PASSPHRASE or run on a terminal")
        })?;
    // nix's errors as std's, so they read as every other failure of the system.
    let saved = tcgetattr(&tty)
        .map_err(std::io::Error::from)
        .context("read the terminal's settings")?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(&tty, SetArg::TCSAFLUSH, &quiet)
        .map_err(std::io::Error::from)
        .context("turn the terminal's echo off")?;
    let mut line = Zeroizing::new(String::new());
    let read = (&tty)
        .write_all(prompt.as_bytes())
        .and_then(|()| std::io::BufReader::new(&tty).read_line(&mut line));
    let _ = tcsetattr(&tty, SetArg::TCSAFLUSH, &saved);
    let _ = (&tty).write_all(b"\n");
    read.context("read the passphrase from the terminal")?;
    Ok(Zeroizing::new(
        line.trim_end_matches(['\n', '\r']).as_bytes().to_vec(),
    ))
}

/// The command line's keys: a pool's key file, unlocked with the passphrase
/// ([`unlock`]).
pub struct Passphrase;

impl tapeloom_ops::KeySource for Passphrase {
    fn master_key(
        &self,
        key: &tapeloom_ops::pools::PoolKey,
    ) -> std::result::Result<MasterKey, Box<dyn std::error::Error + Send + Sync>> {
        unlock(Path::new(&key.key_file)).map_err(Into::into)
    }
}

//! Encryption of a job's blocks (FORMAT.md 4.3 and 9): key files, each job's data
//! key, and the randomness the format crate is handed.
//!
//! A backup makes a [`JobCrypt`] from the master key of `--encrypt`; the volume
//! writer encrypts every block but a segment's first (which carries the wrapped data
//! key in clear: the job's first block, and each `Continuation` block) as it writes
//! it, so blocks on a disk stage are still in clear. A reader makes one from the
//! `JobKey` record (the catalog's copy, or the record on tape) and the master keys
//! it was given. The engine wraps each public function with its own error.

use crate::error::{io, CryptError, Error, Result};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use tapeloom_format::{
    DataKey, Fingerprint, JobKey, KdfParams, KeyFile, MasterKey, PackedBlock, CONTINUATION_STREAM,
};

/// `N` bytes from the operating system's random source.
pub fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| Error::Io {
        what: "read random bytes".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(b)
}

/// A job's data key and the record that carries it, wrapped, on tape.
pub struct JobCrypt {
    /// The record that carries the data key, wrapped by the master key.
    pub record: JobKey,
    /// The data key.
    pub data: DataKey,
}

impl JobCrypt {
    /// A fresh data key for job `job_tag`, wrapped by `master`.
    pub fn new(master: &MasterKey, job_tag: u64) -> Result<Self> {
        let key = zeroize::Zeroizing::new(random::<32>()?);
        let record = master.wrap(job_tag, &key, random()?);
        Ok(JobCrypt {
            record,
            data: DataKey::from_bytes(&key),
        })
    }

    /// The data key of job `job` (its id or tag, for messages) from its `JobKey`
    /// record and the master keys given.
    pub fn unwrap(keys: &[MasterKey], job: &str, record: JobKey) -> Result<Self> {
        let Some(master) = keys.iter().find(|k| k.fingerprint() == record.fingerprint) else {
            let fingerprint = record.fingerprint.short();
            return Err(match keys.first() {
                None => CryptError::NoKey {
                    job: job.to_string(),
                    fingerprint,
                },
                Some(k) => CryptError::WrongKey {
                    job: job.to_string(),
                    fingerprint,
                    given: k.fingerprint().short(),
                },
            }
            .into());
        };
        let data = master.unwrap(&record)?;
        Ok(JobCrypt { record, data })
    }

    /// Encrypts a block about to be written, unless it is already encrypted (a
    /// block written again) or of stream 65535 (`Continuation` and `JobKey`, which
    /// open a segment and stay in clear). The job's first block, which also stays
    /// in clear, is never given here.
    pub fn encrypt(&self, b: &mut PackedBlock) -> Result<()> {
        if b.header.stream == CONTINUATION_STREAM || b.header.encrypted {
            return Ok(());
        }
        self.data.encrypt_block(b, random()?)?;
        Ok(())
    }

    /// The master key's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        self.record.fingerprint
    }
}

/// The data key of job `job` from its `JobKey` record's body `record` (as the
/// catalog keeps it) and the master keys given, with the job's tag the record
/// names: what a restore through a server needs to open the job's blocks, the
/// key staying on the machine that places them. Refused naming both keys'
/// fingerprints when none of `keys` is the job's.
pub fn job_data_key(keys: &[MasterKey], job: i64, record: &[u8]) -> Result<(u64, DataKey)> {
    let record = JobKey::decode(record)?;
    let tag = record.job_tag;
    let c = JobCrypt::unwrap(keys, &job.to_string(), record)?;
    Ok((tag, c.data))
}

/// Creates a key file at `path` (which must not exist; mode 0600) holding a new
/// random master key protected by `passphrase`.
pub fn create_key_file(path: &Path, passphrase: &[u8], kdf: KdfParams) -> Result<KeyFile> {
    let master = MasterKey::from_bytes(random()?);
    let kf = KeyFile::create(&master, passphrase, kdf, random()?, random()?)?;
    write_key_file(path, &kf)?;
    Ok(kf)
}

/// Writes a key file (read back from its paper form, say) at `path`, which must not
/// exist, with mode 0600.
pub fn write_key_file(path: &Path, kf: &KeyFile) -> Result<()> {
    let what = || format!("create key file {}", path.display());
    let mut f = io(
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path),
        what,
    )?;
    io(f.write_all(&kf.encode()).and_then(|()| f.sync_all()), what)
}

/// Reads a key file.
pub fn read_key_file(path: &Path) -> Result<KeyFile> {
    let bytes = io(std::fs::read(path), || {
        format!("read key file {}", path.display())
    })?;
    KeyFile::decode(&bytes).map_err(|source| {
        CryptError::KeyFile {
            path: path.to_path_buf(),
            source,
        }
        .into()
    })
}

/// Reads a key file and unlocks its master key with `passphrase`.
pub fn open_key_file(path: &Path, passphrase: &[u8]) -> Result<MasterKey> {
    read_key_file(path)?.unlock(passphrase).map_err(|source| {
        CryptError::KeyFile {
            path: path.to_path_buf(),
            source,
        }
        .into()
    })
}

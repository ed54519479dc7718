//! Encryption of a job's blocks (FORMAT.md 4.3 and 9): what needs no catalog is
//! the tree crate's (`tapeloom_tree::crypt`); what follows finds
//! the data key of a job the catalog holds, and the key functions with the
//! engine's error.

use crate::error::Result;
use std::path::Path;
use tapeloom_format::{DataKey, JobKey, KdfParams, KeyFile, MasterKey};
pub(crate) use tapeloom_tree::crypt::JobCrypt;

/// The data key of a job the catalog holds, when it is encrypted.
pub(crate) fn for_job(keys: &[MasterKey], job: &tapeloom_catalog::Job) -> Result<Option<JobCrypt>> {
    let Some((_, body)) = &job.key else {
        return Ok(None);
    };
    let record = JobKey::decode(body)?;
    Ok(JobCrypt::unwrap(keys, &job.id.to_string(), record).map(Some)?)
}

/// The data key of job `job` from its `JobKey` record's body, as
/// [`tapeloom_tree::job_data_key`] finds it.
pub fn job_data_key(keys: &[MasterKey], job: i64, record: &[u8]) -> Result<(u64, DataKey)> {
    Ok(tapeloom_tree::job_data_key(keys, job, record)?)
}

/// Creates a key file at `path`, as [`tapeloom_tree::create_key_file`] does.
pub fn create_key_file(path: &Path, passphrase: &[u8], kdf: KdfParams) -> Result<KeyFile> {
    Ok(tapeloom_tree::create_key_file(path, passphrase, kdf)?)
}

/// Writes a key file at `path`, as [`tapeloom_tree::write_key_file`] does.
pub fn write_key_file(path: &Path, kf: &KeyFile) -> Result<()> {
    Ok(tapeloom_tree::write_key_file(path, kf)?)
}

/// Reads a key file, as [`tapeloom_tree::read_key_file`] does.
pub fn read_key_file(path: &Path) -> Result<KeyFile> {
    Ok(tapeloom_tree::read_key_file(path)?)
}

/// Reads a key file and unlocks its master key, as
/// [`tapeloom_tree::open_key_file`] does.
pub fn open_key_file(path: &Path, passphrase: &[u8]) -> Result<MasterKey> {
    Ok(tapeloom_tree::open_key_file(path, passphrase)?)
}

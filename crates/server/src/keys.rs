//! The key files the server holds (the configuration's `[[encryption_key]]`s),
//! each unlocked once, at the start: the server does not start when one cannot
//! be. Keys are known by their fingerprint, as pools (their key file's record in
//! the catalog) and jobs (their `JobKey` record) name them.
//!
//! With a pool's key here, a client's backup or a schedule's job into that pool
//! is encrypted by the drives' writers as it is written, as a local backup into
//! it is (the client sends its blocks in clear over TLS, a tail's room left in
//! each); so is a client's backup that names a key here by its fingerprint
//! (`backup --encrypt FILE --server`), over its pool's key. A job encrypted
//! with a key here is verified by the server, and its blocks (a set's jobs'
//! too) are opened for a client's restore that brings no key file.

use super::config::KeyEntry;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tapeloom_format::{open_block, BlockHeader, DataKey, Fingerprint, MasterKey, CRYPT_TAIL_LEN};
use tapeloom_ops::{Catalogued, OpsError};
use zeroize::Zeroizing;

/// Why a configured key could not be unlocked: the server does not start.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The passphrase file could not be read.
    #[error("key file {}: read its passphrase file {}: {source}", file.display(), passphrase.display())]
    PassphraseFile {
        /// The key file.
        file: PathBuf,
        /// Its passphrase file.
        passphrase: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The passphrase file's first line is empty.
    #[error("key file {}: its passphrase file {} holds no passphrase", file.display(), passphrase.display())]
    EmptyPassphrase {
        /// The key file.
        file: PathBuf,
        /// Its passphrase file.
        passphrase: PathBuf,
    },
    /// Neither a passphrase file nor `TAPELOOM_PASSPHRASE`.
    #[error("key file {}: no passphrase_file, and TAPELOOM_PASSPHRASE is not set", file.display())]
    NoPassphrase {
        /// The key file.
        file: PathBuf,
    },
    /// The key file could not be read, or its passphrase is wrong (the engine's
    /// message names the file).
    #[error(transparent)]
    Unlock(#[from] Box<tapeloom_engine::Error>),
}

/// Why a job into a pool cannot be written by this server.
#[derive(Debug, thiserror::Error)]
pub enum PoolKeyError {
    /// The pool encrypts with a key this server was not given.
    #[error(
        "pool {pool} encrypts its jobs with key {fingerprint}, which this server does not \
         hold: its configuration needs an [[encryption_key]] for that key file"
    )]
    NotHeld {
        /// The pool.
        pool: String,
        /// The key's short fingerprint.
        fingerprint: String,
    },
    /// The client named a key (`backup --encrypt FILE`) this server was not given.
    #[error(
        "this server does not hold key {short} ({fingerprint}): its configuration needs an \
         [[encryption_key]] for that key file"
    )]
    KeyNotHeld {
        /// The key's short fingerprint.
        short: String,
        /// Its fingerprint, as the client named it.
        fingerprint: String,
    },
    /// The pool's key broke another rule of the operations layer.
    #[error(transparent)]
    Ops(Box<tapeloom_ops::OpsError>),
    /// The pool's key could not be read from the catalog.
    #[error("read pool {pool}'s key: {source}")]
    Catalog {
        /// The pool.
        pool: String,
        /// Why.
        source: Box<OpsError>,
    },
}

/// The master keys the server holds.
#[derive(Default)]
pub struct Keys(Vec<MasterKey>);

impl Keys {
    /// Unlocks every key of `entries`, saying each one's fingerprint on stderr.
    pub fn unlock(entries: &[KeyEntry]) -> Result<Keys, KeyError> {
        let mut keys: Vec<MasterKey> = Vec::new();
        for e in entries {
            // The key file is read first: a missing one is said before its passphrase.
            tapeloom_engine::read_key_file(&e.file).map_err(Box::new)?;
            let pass = passphrase(e)?;
            let master = tapeloom_engine::open_key_file(&e.file, &pass).map_err(Box::new)?;
            let f = master.fingerprint();
            tracing::info!("key {} ({f}) unlocked from {}", f.short(), e.file.display());
            if !keys.iter().any(|k| k.fingerprint() == f) {
                keys.push(master);
            }
        }
        Ok(Keys(keys))
    }

    /// Every key held.
    pub fn all(&self) -> &[MasterKey] {
        &self.0
    }

    /// The key of fingerprint `hex` (as the catalog keeps it), when held.
    pub fn by_fingerprint(&self, hex: &str) -> Option<&MasterKey> {
        self.0.iter().find(|k| k.fingerprint().to_string() == hex)
    }

    /// The key a job into `pool` is encrypted with: none for a pool without a key
    /// (or none named, as for a local backup); refused when the pool's key is not
    /// held.
    pub fn for_pool(
        &self,
        at: &impl Catalogued,
        pool: Option<&str>,
    ) -> Result<Option<MasterKey>, PoolKeyError> {
        tapeloom_ops::clients::pool_key(at, pool, self).map_err(|e| match e {
            e @ OpsError::Catalog(_) => PoolKeyError::Catalog {
                pool: pool.unwrap_or_default().to_string(),
                source: Box::new(e),
            },
            OpsError::PoolKey { pool, short, .. } => PoolKeyError::NotHeld {
                pool,
                fingerprint: short,
            },
            other => PoolKeyError::Ops(Box::new(other)),
        })
    }

    /// The key a client's job is encrypted with: the key of fingerprint `named`
    /// when the client named one (`backup --encrypt FILE`, over the pool's key, as
    /// a local `--encrypt` is), else its pool's ([`Keys::for_pool`]); refused when
    /// that key is not held.
    pub fn for_job(
        &self,
        at: &impl Catalogued,
        pool: Option<&str>,
        named: Option<&str>,
    ) -> Result<Option<MasterKey>, PoolKeyError> {
        match named {
            Some(hex) => self.named(hex).map(|m| Some(m.clone())),
            None => self.for_pool(at, pool),
        }
    }

    /// The key of fingerprint `hex` a client named; refused when not held.
    pub fn named(&self, hex: &str) -> Result<&MasterKey, PoolKeyError> {
        let f = Fingerprint::parse(hex);
        (self.0.iter())
            .find(|k| Some(k.fingerprint()) == f)
            .ok_or_else(|| PoolKeyError::KeyNotHeld {
                short: hex.chars().take(16).collect(),
                fingerprint: hex.to_string(),
            })
    }

    /// The data key of job `job` from its `JobKey` record's body, when the
    /// server holds the master key that wraps it.
    pub fn data_key(&self, job: i64, record: &[u8]) -> Option<DataKey> {
        let (_, key) = tapeloom_engine::job_data_key(&self.0, job, record).ok()?;
        Some(key)
    }
}

/// A key the server does not hold.
#[derive(Debug, thiserror::Error)]
#[error("this server does not hold it")]
struct NotHeldHere;

/// The server's keys are the ones it unlocked at its start.
impl tapeloom_ops::KeySource for Keys {
    fn master_key(
        &self,
        key: &tapeloom_ops::pools::PoolKey,
    ) -> Result<MasterKey, Box<dyn std::error::Error + Send + Sync>> {
        match self.by_fingerprint(&key.fingerprint) {
            Some(m) => Ok(m.clone()),
            None => Err(Box::new(NotHeldHere)),
        }
    }
}

/// The fingerprint of the key a client's job into `pool` is encrypted with: the
/// one the client `named`, else the pool's; none for a job in clear.
pub fn sealed_with(home: &Path, pool: Option<&str>, named: Option<&str>) -> Option<String> {
    if let Some(f) = named {
        return Some(f.to_string());
    }
    let conn = tapeloom_ops::Conn::open(home).ok()?;
    tapeloom_ops::clients::pool_fingerprint(&conn, pool?).ok()?
}

/// The bytes a client leaves free in each block of a job encrypted with the key
/// of `sealed_with`: an encrypted block's nonce and tag, else none.
pub fn tail(sealed_with: Option<&str>) -> usize {
    match sealed_with {
        Some(_) => CRYPT_TAIL_LEN,
        None => 0,
    }
}

/// The passphrase of `e`: its passphrase file's first line, else
/// `TAPELOOM_PASSPHRASE`.
fn passphrase(e: &KeyEntry) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let Some(path) = &e.passphrase_file else {
        return match std::env::var_os("TAPELOOM_PASSPHRASE") {
            Some(p) => Ok(Zeroizing::new(p.into_encoded_bytes())),
            None => Err(KeyError::NoPassphrase {
                file: e.file.clone(),
            }),
        };
    };
    let unread = |source| KeyError::PassphraseFile {
        file: e.file.clone(),
        passphrase: path.clone(),
        source,
    };
    let text = Zeroizing::new(std::fs::read(path).map_err(unread)?);
    let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode());
    if mode & 0o077 != 0 {
        tracing::warn!(
            "passphrase file {} is mode {:04o}: others than its owner may read it \
             (make it 0600)",
            path.display(),
            mode & 0o7777
        );
    }
    let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(KeyError::EmptyPassphrase {
            file: e.file.clone(),
            passphrase: path.clone(),
        });
    }
    Ok(Zeroizing::new(line.to_vec()))
}

/// Block `block` of an encrypted job opened with its data `key` and sealed
/// again in clear (its header without the encryption and compression flags, the
/// plain payload, its CRC): what a client without the key file places. None for
/// a block in clear, or one that does not open (sent on as read: the client
/// refuses it as a bad block).
pub fn opened(key: &DataKey, block: &[u8], scratch: &mut Vec<u8>) -> Option<Vec<u8>> {
    let h = BlockHeader::open(block).ok().filter(|h| h.encrypted)?;
    open_block(&h, block, Some(key), scratch).ok()?;
    let clear = BlockHeader {
        compressed: false,
        encrypted: false,
        ..h
    };
    let mut out = scratch.clone();
    clear.seal(&mut out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_format::{Kind, StreamPacker};

    #[test]
    fn an_opened_block_reads_as_the_clear_one() {
        let key = DataKey::from_bytes(&[9; 32]);
        let mut p = StreamPacker::new(1, 77, 4096).with_tail(CRYPT_TAIL_LEN);
        p.record(Kind::Data, &b"plain payload".repeat(40));
        p.finish_block();
        let mut b = p.ready.remove(0);
        let clear_payload = b.buf[64..64 + b.header.payload_len as usize].to_vec();
        key.encrypt_block(&mut b, [5; 12]).unwrap();
        b.seal([0; 16], 0);
        let mut scratch = Vec::new();
        let out = opened(&key, &b.buf, &mut scratch).expect("it opens");
        let h = BlockHeader::open(&out).unwrap();
        assert!(!h.encrypted && !h.compressed);
        assert_eq!((h.job_tag, h.stream), (77, 1));
        assert_eq!(h.payload(&out), &clear_payload[..]);
        // Another key does not open it; a block in clear is left as it is.
        let other = DataKey::from_bytes(&[8; 32]);
        assert!(opened(&other, &b.buf, &mut scratch).is_none());
        assert!(opened(&key, &out, &mut scratch).is_none());
    }

    #[test]
    fn a_key_a_client_names_is_found_by_its_fingerprint_or_refused_naming_it() {
        let keys = Keys(vec![MasterKey::from_bytes([3; 32])]);
        let held = keys.0[0].fingerprint().to_string();
        assert!(keys.named(&held).is_ok());
        assert!(keys.named(&held.to_uppercase()).is_ok());
        let other = MasterKey::from_bytes([4; 32]).fingerprint();
        let Err(e) = keys.named(&other.to_string()) else {
            panic!("a key not held was found");
        };
        let why = format!(
            "this server does not hold key {} ({other}): its configuration needs an \
             [[encryption_key]] for that key file",
            other.short()
        );
        assert_eq!(e.to_string(), why);
        assert_eq!(tail(Some(&held)), CRYPT_TAIL_LEN);
        assert_eq!(tail(None), 0);
    }
}

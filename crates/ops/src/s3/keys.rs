//! The S3 front end's access keys. A key's secret is shown once, when it is
//! made. SigV4 needs the secret itself to check a signature, so the catalog
//! keeps it sealed (AES-256-GCM) with a key file of the home, `s3-seal.key`,
//! which never enters the catalog: a copy of the catalog alone (a backup of the
//! SQLite file, a PostgreSQL dump) gives no secret away. Every server of a site
//! needs the same `s3-seal.key` in its home.

use super::{now_ns, Refused, S3Key};
use crate::access::Catalogued;
use crate::{OpsError, Result};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The home's file that seals the secrets.
pub const SEAL_FILE: &str = "s3-seal.key";

/// What an access key id starts with.
pub const PREFIX: &str = "TL";

fn random(n: usize, alphabet: &[u8]) -> Result<String> {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(|e| OpsError::Random(e.to_string()))?;
    // 256 is a multiple of neither alphabet's length; the bias (under 1 in 4)
    // costs well under a bit of the secret's 238.
    Ok(b.iter()
        .map(|x| alphabet[*x as usize % alphabet.len()] as char)
        .collect())
}

const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const MIXED: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The sealing key of home `dir`, made on first use.
fn seal_key(dir: &Path, make: bool) -> Result<(LessSafeKey, PathBuf)> {
    let path = dir.join(SEAL_FILE);
    let io = |what: &str| {
        let what = format!("{what} {}", path.display());
        move |source| OpsError::Io { what, source }
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && make => {
            let mut b = [0u8; 32];
            getrandom::fill(&mut b).map_err(|e| OpsError::Random(e.to_string()))?;
            let mut f = (std::fs::OpenOptions::new().write(true).create_new(true))
                .mode(0o600)
                .open(&path)
                .map_err(io("make"))?;
            f.write_all(&b)
                .and_then(|()| f.sync_all())
                .map_err(io("write"))?;
            b.to_vec()
        }
        Err(e) => return Err(io("read")(e)),
    };
    let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| OpsError::Unseal {
        what: "the sealing key must be 32 bytes".into(),
        file: path.clone(),
    })?;
    Ok((LessSafeKey::new(key), path))
}

fn seal(dir: &Path, access_key: &str, secret: &str) -> Result<Vec<u8>> {
    let (key, _) = seal_key(dir, true)?;
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).map_err(|e| OpsError::Random(e.to_string()))?;
    let mut sealed = secret.as_bytes().to_vec();
    let aad = Aad::from(access_key.as_bytes());
    (key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), aad, &mut sealed))
        .map_err(|_| OpsError::Random("seal a secret".into()))?;
    Ok([&nonce[..], &sealed].concat())
}

fn unseal(dir: &Path, k: &S3Key) -> Result<String> {
    let (key, file) = seal_key(dir, false)?;
    let fail = || OpsError::Unseal {
        what: format!("the secret of S3 key {}", k.name),
        file: file.clone(),
    };
    if k.sealed.len() < NONCE_LEN {
        return Err(fail());
    }
    let (nonce, sealed) = k.sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| fail())?;
    let mut buf = sealed.to_vec();
    let aad = Aad::from(k.access_key.as_bytes());
    let open = key
        .open_in_place(nonce, aad, &mut buf)
        .map_err(|_| fail())?;
    String::from_utf8(open.to_vec()).map_err(|_| fail())
}

/// Makes an access key named `name` that may use `buckets` (every bucket when
/// empty): its row and its secret, which is shown once and kept only sealed.
pub fn add(at: &impl Catalogued, name: &str, buckets: &[String]) -> super::Result<(S3Key, String)> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok) {
        return Err(OpsError::BadName {
            what: "an S3 key's name",
            name: name.to_string(),
        }
        .into());
    }
    for b in buckets {
        super::check_bucket_name(b)?;
    }
    let access_key = format!("{PREFIX}{}", random(18, UPPER)?);
    let secret = random(40, MIXED)?;
    let key = S3Key {
        access_key: access_key.clone(),
        name: name.to_string(),
        sealed: seal(at.ops_dir(), &access_key, &secret)?,
        buckets: buckets.to_vec(),
        created_ns: now_ns()?,
        revoked_ns: None,
    };
    at.ops_catalog().add_s3_key(&key)?;
    Ok((key, secret))
}

/// Every access key, by name.
pub fn list(at: &impl Catalogued) -> Result<Vec<S3Key>> {
    Ok(at.ops_catalog().s3_keys()?)
}

/// Revokes the access key named `name`: from its next request on it is refused.
pub fn revoke(at: &impl Catalogued, name: &str) -> Result<()> {
    Ok(at.ops_catalog().revoke_s3_key(name, now_ns()?)?)
}

/// The key whose id is `access_key` and its secret; none when no key has that
/// id or it was revoked.
pub fn secret(at: &impl Catalogued, access_key: &str) -> Result<Option<(S3Key, String)>> {
    match at.ops_catalog().s3_key(access_key)? {
        Some(k) if k.revoked_ns.is_none() => {
            let s = unseal(at.ops_dir(), &k)?;
            Ok(Some((k, s)))
        }
        _ => Ok(None),
    }
}

/// The key whose id is `access_key`, unless there is none or it was revoked.
pub fn find(at: &impl Catalogued, access_key: &str) -> Result<Option<S3Key>> {
    let k = at.ops_catalog().s3_key(access_key)?;
    Ok(k.filter(|k| k.revoked_ns.is_none()))
}

pub use super::may_use;

/// Whether `key` may make buckets: only a key for every bucket may.
pub fn may_create(key: &S3Key) -> std::result::Result<(), Refused> {
    if key.buckets.is_empty() {
        Ok(())
    } else {
        Err(Refused::NotYours {
            key: key.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_opens_only_with_its_home_key_and_its_access_key_id() {
        let d = tempfile::tempdir().unwrap();
        let sealed = seal(d.path(), "TLA", "s3cr3t").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"s3cr3t"));
        let mut k = S3Key {
            access_key: "TLA".into(),
            name: "n".into(),
            sealed,
            buckets: vec![],
            created_ns: 0,
            revoked_ns: None,
        };
        assert_eq!(unseal(d.path(), &k).unwrap(), "s3cr3t");
        k.access_key = "TLB".into();
        assert!(matches!(unseal(d.path(), &k), Err(OpsError::Unseal { .. })));
        k.access_key = "TLA".into();
        std::fs::write(d.path().join(SEAL_FILE), [7u8; 32]).unwrap();
        assert!(matches!(unseal(d.path(), &k), Err(OpsError::Unseal { .. })));
    }
}

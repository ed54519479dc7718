//! Encryption (FORMAT.md 4.3, 5.8 and 9, format version 3): the key file, the per-job
//! data key wrapped by the key file's master key (`JobKey` record), and blocks whose
//! stored payload is AES-256-GCM ciphertext.
//!
//! No I/O and no randomness here: callers pass the random salts, nonces and keys in,
//! so that every function is deterministic and testable.

use crate::codec::{Dec, Enc};
use crate::{expand_block, BlockHeader, FormatError, PackedBlock, Result, BLOCK_HEADER_LEN};
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce, Tag};
use blake2::Digest;
use zeroize::{Zeroize, Zeroizing};

/// Bytes an encrypted block stores after its ciphertext: the 12-byte nonce and the
/// 16-byte tag.
pub const CRYPT_TAIL_LEN: usize = NONCE_LEN + TAG_LEN;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Length of a wrapped 256-bit key: nonce, ciphertext, tag.
const WRAPPED_LEN: usize = NONCE_LEN + 32 + TAG_LEN;

/// The short identity of a master key: the first 16 bytes of
/// BLAKE2b-512("tapeloom key fingerprint" || key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 16]);

impl Fingerprint {
    /// The first 8 bytes in hex, as commands print it.
    pub fn short(&self) -> String {
        hex(&self.0[..8])
    }

    /// Parses the 32 hex digits [`Fingerprint`]'s `Display` writes.
    pub fn parse(s: &str) -> Option<Self> {
        let b = unhex(s)?;
        Some(Fingerprint(b.try_into().ok()?))
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

fn hex(b: &[u8]) -> String {
    hex::encode(b)
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s).ok()
}

/// The 256-bit key a key file protects; it wraps each job's data key.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

impl Drop for MasterKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MasterKey({})", self.fingerprint())
    }
}

impl MasterKey {
    /// A master key from 32 random bytes.
    pub fn from_bytes(b: [u8; 32]) -> Self {
        MasterKey(b)
    }

    /// The key's fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        let mut h = blake2::Blake2b512::new();
        h.update(b"tapeloom key fingerprint");
        h.update(self.0);
        let d = h.finalize();
        let mut f = [0u8; 16];
        f.copy_from_slice(&d[..16]);
        Fingerprint(f)
    }

    /// Wraps a job's data key (`data_key`, 32 random bytes) with a fresh `nonce`.
    pub fn wrap(&self, job_tag: u64, data_key: &[u8; 32], nonce: [u8; 12]) -> JobKey {
        let fingerprint = self.fingerprint();
        let mut wrapped = [0u8; WRAPPED_LEN];
        wrapped[..NONCE_LEN].copy_from_slice(&nonce);
        wrapped[NONCE_LEN..NONCE_LEN + 32].copy_from_slice(data_key);
        let aad = job_key_aad(job_tag, &fingerprint);
        let tag = cipher(&self.0)
            .encrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &aad,
                &mut wrapped[NONCE_LEN..NONCE_LEN + 32],
            )
            .expect("32 bytes are within AES-GCM's limits");
        wrapped[NONCE_LEN + 32..].copy_from_slice(&tag);
        JobKey {
            job_tag,
            fingerprint,
            wrapped,
        }
    }

    /// Unwraps a job's data key. Fails with [`FormatError::WrongKey`] when the job
    /// was encrypted with another key, [`FormatError::KeyUnwrap`] when the wrapped
    /// key is damaged.
    pub fn unwrap(&self, k: &JobKey) -> Result<DataKey> {
        let mine = self.fingerprint();
        if k.fingerprint != mine {
            return Err(FormatError::WrongKey {
                job: k.fingerprint.to_string(),
                given: mine.to_string(),
            });
        }
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&k.wrapped[NONCE_LEN..NONCE_LEN + 32]);
        cipher(&self.0)
            .decrypt_in_place_detached(
                Nonce::from_slice(&k.wrapped[..NONCE_LEN]),
                &job_key_aad(k.job_tag, &k.fingerprint),
                &mut *key,
                Tag::from_slice(&k.wrapped[NONCE_LEN + 32..]),
            )
            .map_err(|_| FormatError::KeyUnwrap)?;
        Ok(DataKey::from_bytes(&key))
    }
}

fn cipher(key: &[u8; 32]) -> Aes256Gcm {
    Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key))
}

fn job_key_aad(job_tag: u64, f: &Fingerprint) -> Vec<u8> {
    let mut a = b"TLJK".to_vec();
    a.extend_from_slice(&job_tag.to_le_bytes());
    a.extend_from_slice(&f.0);
    a
}

/// The `JobKey` record (kind 9, FORMAT.md 5.8): a job's data key, wrapped by the
/// master key with the given fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobKey {
    /// The job the key belongs to.
    pub job_tag: u64,
    /// Fingerprint of the master key that wraps it.
    pub fingerprint: Fingerprint,
    /// Nonce, encrypted data key and tag.
    pub wrapped: [u8; WRAPPED_LEN],
}

/// Cipher code of AES-256-GCM in a `JobKey` record.
const CIPHER_AES_256_GCM: u8 = 1;

impl JobKey {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u64(self.job_tag);
        e.u8(CIPHER_AES_256_GCM);
        e.raw(&[0; 3]);
        e.raw(&self.fingerprint.0);
        e.raw(&self.wrapped);
        v
    }

    /// Decodes a body.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut d = Dec::new(buf, "job key record");
        let job_tag = d.u64()?;
        let cipher = d.u8()?;
        if cipher != CIPHER_AES_256_GCM {
            return Err(FormatError::UnknownCode {
                what: "cipher",
                value: cipher.into(),
            });
        }
        d.reserved(3)?;
        let fingerprint = Fingerprint(d.array()?);
        let wrapped = d.array()?;
        if d.remaining() != 0 {
            return Err(FormatError::TrailingBytes("job key record"));
        }
        Ok(JobKey {
            job_tag,
            fingerprint,
            wrapped,
        })
    }
}

/// A job's data key: it encrypts and authenticates the job's blocks.
#[derive(Clone)]
pub struct DataKey(Aes256Gcm);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey")
    }
}

impl DataKey {
    /// A data key from its 32 bytes.
    pub fn from_bytes(b: &[u8; 32]) -> Self {
        DataKey(cipher(b))
    }

    /// Encrypts a packed block's stored payload (its payload, or its zstd frame) in
    /// place with `nonce`, which must never be used twice with this key, and marks
    /// the header. The nonce and tag follow the ciphertext; a stored block has room
    /// for them when its packer kept [`CRYPT_TAIL_LEN`] bytes free. A block already
    /// encrypted is left as it is (it is only sealed again where it lands).
    pub fn encrypt_block(&self, b: &mut PackedBlock, nonce: [u8; 12]) -> Result<()> {
        if b.header.encrypted {
            return Ok(());
        }
        let stored = if b.header.compressed {
            b.buf.len() - BLOCK_HEADER_LEN
        } else {
            b.header.payload_len as usize
        };
        let end = BLOCK_HEADER_LEN + stored;
        if !b.header.compressed && b.buf.len() < end + CRYPT_TAIL_LEN {
            return Err(FormatError::PayloadTooLong(b.header.payload_len));
        }
        b.header.encrypted = true;
        b.changed();
        let aad = b.header.associated_data();
        let tag = self
            .0
            .encrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &aad,
                &mut b.buf[BLOCK_HEADER_LEN..end],
            )
            .expect("a block is within AES-GCM's limits");
        if b.header.compressed {
            b.buf.truncate(end);
            b.buf.extend_from_slice(&nonce);
            b.buf.extend_from_slice(&tag);
        } else {
            b.buf[end..end + NONCE_LEN].copy_from_slice(&nonce);
            b.buf[end + NONCE_LEN..end + CRYPT_TAIL_LEN].copy_from_slice(&tag);
        }
        Ok(())
    }

    /// Decrypts an encrypted block opened with [`BlockHeader::open`] into `out` as it
    /// would read stored in clear: header, then stored payload. Fails with
    /// [`FormatError::BadTag`] when the ciphertext, its header or its tag was changed.
    fn decrypt(&self, header: &BlockHeader, block: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let ct = header.payload(block);
        let end = BLOCK_HEADER_LEN + ct.len();
        let tail = block
            .get(end..end + CRYPT_TAIL_LEN)
            .ok_or(FormatError::Truncated("block"))?;
        // The tag covers the header bytes as written, whatever write version wrote
        // them: a header encoded again here would carry this tapeloom's.
        let stored = block.get(..60).ok_or(FormatError::Truncated("block"))?;
        let mut aad = [0u8; 36];
        aad[..8].copy_from_slice(&stored[..8]);
        aad[8..].copy_from_slice(&stored[32..60]);
        out.clear();
        out.extend_from_slice(&block[..end]);
        self.0
            .decrypt_in_place_detached(
                Nonce::from_slice(&tail[..NONCE_LEN]),
                &aad,
                &mut out[BLOCK_HEADER_LEN..],
                Tag::from_slice(&tail[NONCE_LEN..]),
            )
            .map_err(|_| FormatError::BadTag)
    }
}

/// Turns any block opened with [`BlockHeader::open`] into `out` as its header and
/// plain payload of `header.payload_len` bytes: decrypted with `key` when encrypted
/// ([`FormatError::NoKey`] without one), then expanded when compressed
/// ([`expand_block`]).
pub fn open_block(
    header: &BlockHeader,
    block: &[u8],
    key: Option<&DataKey>,
    out: &mut Vec<u8>,
) -> Result<()> {
    if !header.encrypted {
        return expand_block(header, block, out);
    }
    let key = key.ok_or(FormatError::NoKey)?;
    let clear = BlockHeader {
        encrypted: false,
        ..*header
    };
    if !header.compressed {
        return key.decrypt(header, block, out);
    }
    let mut frame = Vec::new();
    key.decrypt(header, block, &mut frame)?;
    expand_block(&clear, &frame, out)
}

/// Argon2id cost of a key file's passphrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    /// Memory, KiB.
    pub memory_kib: u32,
    /// Passes.
    pub iterations: u32,
    /// Lanes.
    pub parallelism: u32,
}

impl KdfParams {
    /// The default: 256 MiB, 3 passes, 1 lane.
    pub const DEFAULT: KdfParams = KdfParams {
        memory_kib: 256 * 1024,
        iterations: 3,
        parallelism: 1,
    };
    /// The most memory a key file may ask for, KiB (4 GiB).
    pub const MAX_MEMORY_KIB: u32 = 4 * 1024 * 1024;
    /// The least memory a key file may ask for, KiB per lane (Argon2's own least).
    pub const MIN_MEMORY_KIB_PER_LANE: u32 = 8;
    /// The most passes a key file may ask for.
    pub const MAX_ITERATIONS: u32 = 64;

    /// The most a key file may ask for (4 GiB, 64 passes, 16 lanes), so that a
    /// damaged or hostile file cannot make a reader allocate without bound.
    fn check(&self) -> Result<()> {
        // Lanes first: the product below is then small.
        if !(1..=16).contains(&self.parallelism)
            || self.memory_kib < Self::MIN_MEMORY_KIB_PER_LANE * self.parallelism
            || self.memory_kib > Self::MAX_MEMORY_KIB
            || !(1..=Self::MAX_ITERATIONS).contains(&self.iterations)
        {
            return Err(FormatError::KdfParams);
        }
        Ok(())
    }

    fn derive(&self, passphrase: &[u8], salt: &[u8; 16]) -> Result<Zeroizing<[u8; 32]>> {
        self.check()?;
        let params = argon2::Params::new(self.memory_kib, self.iterations, self.parallelism, None)
            .map_err(|_| FormatError::KdfParams)?;
        let a = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let mut out = Zeroizing::new([0u8; 32]);
        a.hash_password_into(passphrase, salt, &mut *out)
            .map_err(|_| FormatError::KdfParams)?;
        Ok(out)
    }
}

/// Magic at the start of a key file.
pub const KEY_FILE_MAGIC: &[u8; 8] = b"TLKEY\0\0\x01";
/// Length of a key file.
pub const KEY_FILE_LEN: usize = 116;

/// A key file (FORMAT.md 9): the master key wrapped by a key derived from a
/// passphrase with Argon2id, and the master key's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// The passphrase's cost.
    pub kdf: KdfParams,
    /// Argon2 salt.
    pub salt: [u8; 16],
    /// Nonce, encrypted master key and tag.
    pub wrapped: [u8; WRAPPED_LEN],
    /// The master key's fingerprint.
    pub fingerprint: Fingerprint,
}

impl KeyFile {
    /// Protects `master` with `passphrase`; `salt` and `nonce` must be random.
    pub fn create(
        master: &MasterKey,
        passphrase: &[u8],
        kdf: KdfParams,
        salt: [u8; 16],
        nonce: [u8; 12],
    ) -> Result<Self> {
        let kek = kdf.derive(passphrase, &salt)?;
        let mut k = KeyFile {
            kdf,
            salt,
            wrapped: [0; WRAPPED_LEN],
            fingerprint: master.fingerprint(),
        };
        let aad = k.associated_data();
        k.wrapped[..NONCE_LEN].copy_from_slice(&nonce);
        k.wrapped[NONCE_LEN..NONCE_LEN + 32].copy_from_slice(&master.0);
        let tag = cipher(&kek)
            .encrypt_in_place_detached(
                Nonce::from_slice(&nonce),
                &aad,
                &mut k.wrapped[NONCE_LEN..NONCE_LEN + 32],
            )
            .expect("32 bytes are within AES-GCM's limits");
        k.wrapped[NONCE_LEN + 32..].copy_from_slice(&tag);
        Ok(k)
    }

    fn associated_data(&self) -> Vec<u8> {
        let mut v = self.encode();
        v.truncate(36);
        v.extend_from_slice(&self.fingerprint.0);
        v
    }

    /// The master key, with the passphrase. Fails with
    /// [`FormatError::WrongPassphrase`] when the passphrase (or the file) is wrong.
    pub fn unlock(&self, passphrase: &[u8]) -> Result<MasterKey> {
        let kek = self.kdf.derive(passphrase, &self.salt)?;
        // Zeroed when dropped, on every path.
        let mut m = MasterKey([0u8; 32]);
        m.0.copy_from_slice(&self.wrapped[NONCE_LEN..NONCE_LEN + 32]);
        cipher(&kek)
            .decrypt_in_place_detached(
                Nonce::from_slice(&self.wrapped[..NONCE_LEN]),
                &self.associated_data(),
                &mut m.0,
                Tag::from_slice(&self.wrapped[NONCE_LEN + 32..]),
            )
            .map_err(|_| FormatError::WrongPassphrase)?;
        if m.fingerprint() != self.fingerprint {
            return Err(FormatError::WrongPassphrase);
        }
        Ok(m)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(KEY_FILE_LEN);
        let mut e = Enc(&mut v);
        e.raw(KEY_FILE_MAGIC);
        e.u32(self.kdf.memory_kib);
        e.u32(self.kdf.iterations);
        e.u32(self.kdf.parallelism);
        e.raw(&self.salt);
        e.raw(&self.wrapped);
        e.raw(&self.fingerprint.0);
        e.raw(&[0; 4]);
        v
    }

    /// Decodes a key file's bytes.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        if buf.len() != KEY_FILE_LEN {
            return Err(FormatError::Truncated("key file"));
        }
        if &buf[..8] != KEY_FILE_MAGIC {
            return Err(FormatError::BadMagic("key file"));
        }
        let mut d = Dec::new(&buf[8..], "key file");
        let kdf = KdfParams {
            memory_kib: d.u32()?,
            iterations: d.u32()?,
            parallelism: d.u32()?,
        };
        kdf.check()?;
        Ok(KeyFile {
            kdf,
            salt: d.array()?,
            wrapped: d.array()?,
            fingerprint: Fingerprint(d.array()?),
        })
    }

    /// The paper form: a title line, then the file's bytes in lines of 16, as hex in
    /// groups of 4 digits, each line ending with its check (the low 16 bits of the
    /// CRC32C of the line number and its bytes).
    pub fn paper(&self) -> String {
        let mut s = format!("tapeloom key {}\n", self.fingerprint);
        for (i, chunk) in self.encode().chunks(16).enumerate() {
            let groups: Vec<String> = chunk.chunks(2).map(hex).collect();
            s.push_str(&format!(
                "{:02}: {}  {:04x}\n",
                i + 1,
                groups.join(" "),
                paper_check(i, chunk)
            ));
        }
        s
    }

    /// Reads the paper form back. Lines other than numbered ones are ignored;
    /// [`FormatError::PaperLine`] names a line whose check fails.
    pub fn from_paper(text: &str) -> Result<Self> {
        let mut bytes = Vec::new();
        let mut want = 1;
        for line in text.lines() {
            let Some((num, rest)) = line.trim().split_once(':') else {
                continue;
            };
            let Ok(n) = num.trim().parse::<usize>() else {
                continue;
            };
            let mut words: Vec<&str> = rest.split_whitespace().collect();
            let check = words.pop().and_then(|c| u16::from_str_radix(c, 16).ok());
            let data = unhex(&words.concat());
            match (n == want, check, data) {
                (true, Some(c), Some(d)) if c == paper_check(n - 1, &d) => {
                    bytes.extend_from_slice(&d);
                    want += 1;
                }
                _ => return Err(FormatError::PaperLine(n)),
            }
        }
        KeyFile::decode(&bytes)
    }
}

fn paper_check(i: usize, chunk: &[u8]) -> u16 {
    let c = crc32c::crc32c(&[i as u8]);
    crc32c::crc32c_append(c, chunk) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, StreamPacker};
    use proptest::prelude::*;

    const FAST: KdfParams = KdfParams {
        memory_kib: 64,
        iterations: 1,
        parallelism: 1,
    };

    fn packed(bodies: &[Vec<u8>], block: usize) -> Vec<PackedBlock> {
        let mut p = StreamPacker::new(3, 1, block).with_tail(CRYPT_TAIL_LEN);
        for b in bodies {
            p.record(Kind::StreamEnd, b);
        }
        p.finish_block();
        p.ready.drain(..).collect()
    }

    proptest! {
        #[test]
        fn encrypted_blocks_open_to_what_was_packed(
            bodies in proptest::collection::vec(
                (0u8..4, 1usize..3000).prop_map(|(b, n)| vec![b; n]), 1..8),
            nonce in any::<[u8; 12]>(),
            key in any::<[u8; 32]>(),
            lbn in any::<u64>(),
        ) {
            let k = DataKey::from_bytes(&key);
            for mut b in packed(&bodies, 64 * 1024) {
                let plain = b.buf[..BLOCK_HEADER_LEN + b.header.payload_len as usize].to_vec();
                k.encrypt_block(&mut b, nonce).unwrap();
                b.seal([9; 16], lbn);
                let h = BlockHeader::open(&b.buf).unwrap();
                prop_assert!(h.encrypted);
                let mut out = Vec::new();
                open_block(&h, &b.buf, Some(&k), &mut out).unwrap();
                prop_assert_eq!(h.payload(&out), &plain[BLOCK_HEADER_LEN..]);
                prop_assert_eq!(open_block(&h, &b.buf, None, &mut out), Err(FormatError::NoKey));
            }
        }

        #[test]
        fn any_flip_in_an_encrypted_block_is_caught(pos in 0usize..65536, bit in 0u8..8) {
            let k = DataKey::from_bytes(&[5; 32]);
            let mut b = packed(&[vec![1; 5000]], 64 * 1024).remove(0);
            k.encrypt_block(&mut b, [3; 12]).unwrap();
            b.seal([9; 16], 7);
            b.buf[pos] ^= 1 << bit;
            let mut out = Vec::new();
            let opened = BlockHeader::open(&b.buf)
                .and_then(|h| open_block(&h, &b.buf, Some(&k), &mut out));
            prop_assert!(opened.is_err());
        }

        #[test]
        fn job_keys_round_trip(tag in any::<u64>(), dk in any::<[u8; 32]>(), n in any::<[u8; 12]>()) {
            let m = MasterKey::from_bytes([4; 32]);
            let jk = m.wrap(tag, &dk, n);
            prop_assert_eq!(JobKey::decode(&jk.encode()).unwrap(), jk.clone());
            prop_assert!(m.unwrap(&jk).is_ok());
        }

        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = JobKey::decode(&b);
            let _ = KeyFile::decode(&b);
            let _ = KeyFile::from_paper(&String::from_utf8_lossy(&b));
        }
    }

    #[test]
    fn a_block_recrypted_after_a_reseal_still_opens() {
        let k = DataKey::from_bytes(&[5; 32]);
        let mut b = packed(&[vec![1; 100]], 64 * 1024).remove(0);
        k.encrypt_block(&mut b, [3; 12]).unwrap();
        b.seal([9; 16], 7);
        let first = b.buf.clone();
        // Written again elsewhere: encrypted once, sealed twice.
        k.encrypt_block(&mut b, [4; 12]).unwrap();
        b.seal([8; 16], 70);
        assert_eq!(b.buf[64..], first[64..]);
        let h = BlockHeader::open(&b.buf).unwrap();
        let mut out = Vec::new();
        open_block(&h, &b.buf, Some(&k), &mut out).unwrap();
        let other = DataKey::from_bytes(&[6; 32]);
        assert_eq!(
            open_block(&h, &b.buf, Some(&other), &mut out),
            Err(FormatError::BadTag)
        );
    }

    #[test]
    fn kdf_costs_out_of_bounds_are_refused_without_overflow() {
        for (memory_kib, iterations, parallelism) in [
            (64, 1, u32::MAX),
            (64, 1, 0x3f00_0000),
            (64, 1, 0),
            (u32::MAX, 1, 1),
            (64, 0, 1),
        ] {
            let k = KdfParams {
                memory_kib,
                iterations,
                parallelism,
            };
            assert_eq!(k.check(), Err(FormatError::KdfParams), "{k:?}");
        }
    }

    #[test]
    fn key_files_unlock_with_their_passphrase_only() {
        let m = MasterKey::from_bytes([7; 32]);
        let kf = KeyFile::create(&m, b"secret", FAST, [1; 16], [2; 12]).unwrap();
        let bytes = kf.encode();
        assert_eq!(bytes.len(), KEY_FILE_LEN);
        let back = KeyFile::decode(&bytes).unwrap();
        assert_eq!(back, kf);
        assert_eq!(back.unlock(b"secret").unwrap().0, m.0);
        assert_eq!(
            back.unlock(b"Secret").unwrap_err(),
            FormatError::WrongPassphrase
        );
        assert_eq!(KeyFile::from_paper(&kf.paper()).unwrap(), kf);
        // Spacing and lines other than numbered ones do not matter.
        let retyped = format!("my key\n{}", kf.paper().replace(' ', "  "));
        assert_eq!(KeyFile::from_paper(&retyped).unwrap(), kf);
        let p = kf.paper();
        let line3 = p.lines().nth(3).unwrap();
        let bad = p.replace(line3, &line3.replacen('0', "1", 1));
        assert!(matches!(
            KeyFile::from_paper(&bad),
            Err(FormatError::PaperLine(_))
        ));
    }

    #[test]
    fn a_job_key_of_another_master_key_names_both_fingerprints() {
        let a = MasterKey::from_bytes([1; 32]);
        let b = MasterKey::from_bytes([2; 32]);
        let jk = a.wrap(5, &[9; 32], [0; 12]);
        match b.unwrap(&jk) {
            Err(FormatError::WrongKey { job, given }) => {
                assert_eq!(job, a.fingerprint().to_string());
                assert_eq!(given, b.fingerprint().to_string());
            }
            other => panic!("{other:?}"),
        }
    }
}

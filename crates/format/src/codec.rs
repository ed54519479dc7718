//! Little-endian cursor helpers shared by the encoders and decoders.

use crate::{FormatError, Result};

/// Appends little-endian values to a byte vector.
pub(crate) struct Enc<'a>(pub &'a mut Vec<u8>);

impl Enc<'_> {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn raw(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
    /// A u16 length then the bytes; longer strings are cut (names are short by rule).
    pub fn bytes16(&mut self, v: &[u8]) {
        let n = v.len().min(u16::MAX as usize);
        self.u16(n as u16);
        self.raw(&v[..n]);
    }
    /// A UTF-8 string as `bytes16`, cut at a character boundary when longer, so
    /// that it still decodes.
    pub fn str16(&mut self, v: &str) {
        let mut n = v.len().min(u16::MAX as usize);
        while !v.is_char_boundary(n) {
            n -= 1;
        }
        self.bytes16(&v.as_bytes()[..n]);
    }
    pub fn bytes32(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.raw(v);
    }
}

/// Reads little-endian values from a byte slice, failing on truncation.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Dec { buf, what }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(FormatError::Truncated(self.what));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn bytes16(&mut self) -> Result<Vec<u8>> {
        let n = self.u16()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    pub fn bytes32(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    pub fn string16(&mut self) -> Result<String> {
        String::from_utf8(self.bytes16()?).map_err(|source| FormatError::NotUtf8 {
            what: self.what,
            source,
        })
    }
    /// Reserved bytes must be zero.
    pub fn reserved(&mut self, n: usize) -> Result<()> {
        if self.take(n)?.iter().any(|&b| b != 0) {
            return Err(FormatError::NonZeroReserved(self.what));
        }
        Ok(())
    }
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    /// A count that must fit in what is left, at `min_each` bytes per item.
    pub fn count(&mut self, n: usize, min_each: usize) -> Result<usize> {
        if n.saturating_mul(min_each) > self.buf.len() {
            return Err(FormatError::Truncated(self.what));
        }
        Ok(n)
    }
}

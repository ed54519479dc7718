//! The tokens clients give a server. A token is shown once, when it is made; the
//! catalog keeps only its SHA-256, and a token revoked while a server runs is
//! refused from its next request on.

use crate::access::Catalogued;
use crate::{OpsError, Result};
pub use tapeloom_catalog::Token;

/// What every token starts with, so one found in a file or a log is recognised.
pub const PREFIX: &str = "tl_";

/// The SHA-256 of a token, as the catalog keeps it.
pub fn hash(token: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    let mut h = [0; 32];
    h.copy_from_slice(d.as_ref());
    h
}

/// A new random token: the prefix and 32 random bytes in hex.
fn new_token() -> Result<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| OpsError::Random(e.to_string()))?;
    Ok(format!("{PREFIX}{}", hex::encode(b)))
}

fn now_ns() -> Result<i64> {
    Ok(tapeloom_engine::clock::now()?.as_nanos())
}

/// Makes a token for client `name` (an admin's when `admin`): the catalog's row
/// and the token itself, which is not kept.
pub fn add(at: &impl Catalogued, name: &str, admin: bool) -> Result<(Token, String)> {
    let token = new_token()?;
    let t = at
        .ops_catalog()
        .add_token(name, &hash(token.as_bytes()), admin, now_ns()?)?;
    Ok((t, token))
}

/// Every token, by name.
pub fn list(at: &impl Catalogued) -> Result<Vec<Token>> {
    Ok(at.ops_catalog().tokens()?)
}

/// Revokes the token of `name`.
pub fn revoke(at: &impl Catalogued, name: &str) -> Result<Token> {
    Ok(at.ops_catalog().revoke_token(name, now_ns()?)?)
}

/// The token whose text is `given`, revoked or not; none when no token has it.
pub fn find(at: &impl Catalogued, given: &[u8]) -> Result<Option<Token>> {
    if !given.starts_with(PREFIX.as_bytes()) {
        return Ok(None);
    }
    Ok(at.ops_catalog().token_by_hash(&hash(given))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_prefixed() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 64);
        assert_ne!(hash(a.as_bytes()), hash(b.as_bytes()));
    }
}

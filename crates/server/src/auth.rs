//! Who asks: the token a request carries, checked against the catalog on every
//! request, and the refusal of one that is missing, unknown, revoked or without
//! the rights (401 or 403, counted in `/metrics` and logged with the token's
//! name, never the token).

use crate::http::{failed, Answer, Request};
use crate::metrics::Metrics;
use std::net::SocketAddr;
use tapeloom_ops::tokens::{self, Token};
use tapeloom_ops::{Conn, OpsError};
use tracing::warn;

/// Why a request's token is refused.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("no token given (Authorization: Bearer TOKEN)")]
    NoToken,
    #[error("unknown token")]
    Unknown,
    #[error("the token is revoked")]
    Revoked(String),
    #[error("an admin token is needed")]
    NotAdmin(String),
}

impl Refusal {
    /// Who asked, for the log: the token's name, never the token.
    fn who(&self) -> &str {
        match self {
            Refusal::NoToken => "no token",
            Refusal::Unknown => "unknown token",
            Refusal::Revoked(n) | Refusal::NotAdmin(n) => n,
        }
    }

    fn status(&self) -> u16 {
        match self {
            Refusal::NotAdmin(_) => 403,
            _ => 401,
        }
    }
}

/// The token a request carries, checked against the catalog (so a token revoked
/// while the server runs is refused from its next request on).
fn authenticate(req: &Request, conn: &Conn) -> Result<Result<Token, Refusal>, OpsError> {
    let Some(value) = &req.authorization else {
        return Ok(Err(Refusal::NoToken));
    };
    // The scheme's name is case-insensitive (RFC 9110).
    let (scheme, given) = value.split_at(value.len().min(7));
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return Ok(Err(Refusal::Unknown));
    }
    Ok(match tokens::find(conn, given.trim_ascii())? {
        None => Err(Refusal::Unknown),
        Some(t) if t.revoked_ns.is_some() => Err(Refusal::Revoked(t.name)),
        Some(t) => Ok(t),
    })
}

/// The token of `req` from `peer`, or the refusal to answer (logged on stderr).
pub fn client(
    req: &Request,
    conn: &Conn,
    metrics: &Metrics,
    peer: SocketAddr,
) -> Result<Token, Answer> {
    match authenticate(req, conn) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(r)) => Err(refuse(r, req, metrics, peer)),
        Err(e) => Err(failed(&e, req, peer)),
    }
}

/// The refusal of a request only an admin token may make, by `token`, which is
/// not one.
pub fn not_admin(token: Token, req: &Request, metrics: &Metrics, peer: SocketAddr) -> Answer {
    refuse(Refusal::NotAdmin(token.name), req, metrics, peer)
}

/// Counts and logs refusal `r` of `req` from `peer`, and answers it.
fn refuse(r: Refusal, req: &Request, metrics: &Metrics, peer: SocketAddr) -> Answer {
    metrics.refused();
    let who = r.who();
    warn!(peer = %peer, "refused {who}: {} {}: {r}", req.method, req.path);
    Answer::error(r.status(), &r.to_string())
}

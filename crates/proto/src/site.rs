//! Several servers, one site: what a server tells its clients of the others.
//!
//! - `GET /api/site`: the servers of the site ([`SiteDoc`]), each with the URL and
//!   the certificate fingerprint a client pins it by, and the site's queue. A
//!   client learns them from the server it is pinned to, over that pinned
//!   connection, and so trusts them as it trusts that server.
//! - `303` with a [`SentOn`] document: the request belongs to another server (a
//!   backup it claimed, a job its library holds the cartridges of). The client
//!   asks that server the same, pinned by the fingerprint given.
//! - `300` with a [`SplitRead`] document: a job whose cartridges sit in several
//!   libraries is read in parts, each by the server whose library holds its
//!   cartridges. The client asks each part of its server, in the order given,
//!   with `volume=BARCODE` for each of the part's cartridges, and takes the
//!   blocks of all parts as one answer's: the parts follow the job's volume
//!   order, so every stream's blocks come in the order it was written.

/// HTTP status of a [`SentOn`] answer.
pub const SENT_ON: u16 = 303;

/// HTTP status of a [`SplitRead`] answer.
pub const SPLIT: u16 = 300;

/// A server of the site, as clients reach it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SiteServer {
    /// Its name (its home's).
    pub name: String,
    /// `https://HOST:PORT`.
    pub url: String,
    /// Its certificate's SHA-256, to pin.
    pub fingerprint: String,
    /// Whether it is up: it says so and its heartbeat is recent.
    pub alive: bool,
    /// Seconds since its last heartbeat.
    pub silent_s: i64,
}

/// A backup of the site's queue.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SiteTicket {
    /// Its number, the same on every server.
    pub backup: u64,
    /// The client that asked.
    pub client: String,
    /// The job's name.
    pub name: String,
    /// `queued`, `claimed` or `begun`.
    pub state: String,
    /// The server that claimed it.
    pub server: Option<String>,
    /// Its job in the catalog, once begun.
    pub job: Option<i64>,
}

/// `GET /api/site`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SiteDoc {
    /// The server that answered.
    pub me: String,
    /// Every server of the site, by name.
    pub servers: Vec<SiteServer>,
    /// The site's backups not ended (those the token may see), oldest first.
    pub queue: Vec<SiteTicket>,
}

/// The `303` answer: ask `server` instead.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SentOn {
    /// The backup's number, for a backup sent on.
    pub backup: Option<u64>,
    /// The server to ask.
    pub server: SiteServer,
    /// Why, in a line.
    pub reason: String,
}

/// One part of a job read in parts: its cartridges, in the job's order, and the
/// server whose library holds them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ReadPart {
    /// The server to ask.
    pub server: SiteServer,
    /// The part's cartridges (barcodes), in the job's volume order.
    pub volumes: Vec<String>,
}

/// The `300` answer: the job is read in these parts, in this order.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SplitRead {
    /// The job.
    pub job: i64,
    /// Its parts, in the job's volume order.
    pub parts: Vec<ReadPart>,
    /// Why, in a line.
    pub reason: String,
}

//! `tapeloom backup --server URL ...`: this machine walks, reads and packs its
//! sources and sends the blocks; the server checks them and writes them to its
//! drives (`docs/PROTOCOL.md` says what goes over the wire).
//!
//! With `--encrypt FILE` the client sends only the key file's fingerprint (read
//! without its passphrase); the server encrypts the job with its own copy of
//! that key, and the client sends nothing unless the server says it does.
//!
//! An incremental or differential compares each object with the base's tree the
//! server sends, as a local one does, and sends the base's paths it did not see.
//! The document printed is the server's, but for the figures of reading the
//! sources (`unchanged`, `meta_only`, `source_files_opened`,
//! `source_bytes_read`), which only this machine knows.

use crate::{Server, ServerError};
use anyhow::Result;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tapeloom_format::{Fingerprint, Level};
use tapeloom_proto::backup::{Begin, BeginStream, Begun, StreamState, Waiting};
use tapeloom_proto::frame::{Frame, Framed};
use tapeloom_proto::site::{SentOn, SiteDoc, SiteServer, SENT_ON};
use tapeloom_tree::pack::{Outgoing, PackOptions, Piece, RemotePlan, Scan};
use tapeloom_tree::{escape_controls, BaseTree};

/// What a backup through a server asks for: how this machine packs its sources,
/// and what the server is told of the job.
#[derive(Debug, Clone)]
pub struct Asked {
    /// How the sources are packed: the job's and streams' names, readers, rate.
    pub pack: PackOptions,
    /// The backup set; `None` for the set named after the job.
    pub set: Option<String>,
    /// The media pool; `None` for the default pool.
    pub pool: Option<String>,
    /// Block size in bytes (the server may choose another).
    pub block_size: usize,
    /// The level asked for (a set without a full gets a full).
    pub level: Level,
    /// The fingerprint of the key the server encrypts the job with, when one is
    /// named.
    pub encrypt: Option<Fingerprint>,
}

/// What the server says of the job: the document of `tapeloom backup --json`.
#[derive(serde::Serialize)]
#[serde(transparent)]
pub struct Sent {
    pub doc: serde_json::Value,
    #[serde(skip)]
    pub summary: Summary,
}

/// The figures the human form prints.
#[derive(serde::Deserialize, Default)]
pub struct Summary {
    pub job_id: i64,
    pub status: String,
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    pub volumes: Vec<String>,
    pub errors: Vec<Problem>,
}

/// A source object the job could not back up.
#[derive(serde::Deserialize, Default)]
pub struct Problem {
    pub path: String,
    pub reason: String,
}

/// What the server would refuse of a job's options, said before anything is sent.
#[derive(Debug, thiserror::Error)]
#[error(
    "--{0} cannot be used with --server yet: a client's backup goes straight to the \
     server's drives"
)]
pub struct NotWithServer(pub &'static str);

/// The server did not say it encrypts the job with the key the client named (a
/// server that predates `backup --encrypt FILE --server` ignores the name).
#[derive(Debug, thiserror::Error)]
#[error(
    "the server does not say it encrypts backup {backup} with key {short}: nothing was \
     sent (a server older than this client?)"
)]
pub struct NotSealed {
    /// The backup's number on the server.
    pub backup: u64,
    /// The short fingerprint of the key named.
    pub short: String,
}

impl NotSealed {
    /// Refuses a job `begun` that the server does not encrypt with the key of
    /// fingerprint `asked`, when one was asked.
    fn check(asked: Option<Fingerprint>, begun: &Begun) -> Result<(), NotSealed> {
        match asked {
            Some(f) if begun.encrypt != Some(f.to_string()) => Err(NotSealed {
                backup: begun.backup,
                short: f.short(),
            }),
            _ => Ok(()),
        }
    }
}

/// Backs up `sources` through `server` as `asked`, encrypted there with the
/// server's copy of the key of fingerprint `asked.encrypt` when one is named.
pub fn run(server: &Server, sources: &[PathBuf], asked: &Asked) -> Result<Sent> {
    let (opts, encrypt) = (asked, asked.encrypt);
    let plan = RemotePlan::of_sources(sources, &asked.pack)?;
    let begin = Begin {
        name: plan.name,
        set: opts.set.clone(),
        pool: opts.pool.clone(),
        block_size: opts.block_size,
        level: opts.level.name().to_string(),
        streams: (plan.streams.into_iter())
            .map(|s| BeginStream {
                name: s.name,
                source: s.source,
                root: s.root,
            })
            .collect(),
        encrypt: encrypt.map(|f| f.to_string()),
    };
    let begun = enter(server, &begin)?;
    NotSealed::check(encrypt, &begun)?;
    let scan = Arc::new(match begun.base_job {
        Some(_) => Scan::from_tree(base_tree(server, begun.backup)?),
        None => Scan::default(),
    });
    let mut streams = tapeloom_tree::pack::pack_streams(
        sources,
        &asked.pack,
        (begun.tag, begun.block_size, begun.tail),
        scan.clone(),
    )?;
    // A server that takes keepalives says how often: a stream whose walk passes
    // over unchanged files for long sends them, so its job is not taken as silent.
    if let Some(ms) = begun.keepalive_ms.filter(|&ms| ms > 0) {
        for s in &mut streams {
            s.keep_alive(std::time::Duration::from_millis(ms));
        }
    }
    let sent: Vec<Result<(), ServerError>> = std::thread::scope(|sc| {
        let hs: Vec<_> = streams
            .into_iter()
            .map(|s| sc.spawn(|| send_stream(server, begun.backup, s)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ServerError::BadAnswer("a sender panicked".into())))
            })
            .collect()
    });
    // Every packer ended: the base's paths no walker saw are deleted.
    let told = match (begun.base_job, sent.iter().all(Result::is_ok)) {
        (Some(_), true) => send_deletions(server, begun.backup, &scan),
        _ => Ok(()),
    };
    // The job's end says why it failed, when it did, better than a stream can.
    let (status, body) = until_over(server, &format!("/api/backups/{}", begun.backup), |s, p| {
        s.get(p)
    })?;
    if status != 200 {
        return Err(crate::refusal(status, &body).into());
    }
    for r in sent {
        r?;
    }
    told?;
    let mut doc: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
    let f = scan.figures();
    for (k, v) in [
        ("unchanged", f.unchanged),
        ("meta_only", f.meta_only),
        ("source_files_opened", f.opened),
        ("source_bytes_read", f.read_bytes),
    ] {
        doc[k] = v.into();
    }
    let summary: Summary =
        serde_json::from_value(doc.clone()).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
    for e in &summary.errors {
        eprintln!(
            "tapeloom: warning: {}: {}",
            escape_controls(&e.path),
            escape_controls(&e.reason)
        );
    }
    Ok(Sent { doc, summary })
}

/// The tree of backup `job`'s base, as the server read it from its catalog,
/// taken a row at a time (`net::base`).
fn base_tree(server: &Server, job: u64) -> Result<BaseTree, ServerError> {
    let mut rows = Vec::new();
    server.get_reading(&format!("/api/backups/{job}/base"), |r| {
        tapeloom_proto::base::read_tree(r, |row| rows.push(crate::wire::base_row(row)))
            .map_err(ServerError::from)
    })?;
    Ok(BaseTree { rows })
}

/// Tells the server the base's paths `scan`'s walkers did not see.
fn send_deletions(server: &Server, job: u64, scan: &Scan) -> Result<(), ServerError> {
    let path = format!("/api/backups/{job}/deletions");
    let (status, body) = server.post_raw(&path, &scan.deletions())?;
    if status != 200 {
        return Err(crate::refusal(status, &body));
    }
    Ok(())
}

/// How long a backup waiting in a site's queue goes on asking the site's other
/// servers when the one it asked went away.
const SITE_PATIENCE: Duration = Duration::from_secs(600);

/// Asks the server for a place in its queue, waiting as long as the queue is full.
/// On a site, the backup may be sent on to the server that claimed it (later
/// requests go there); when the server asked goes away while the backup waits,
/// the site's other servers are asked in turn.
fn enter(server: &Server, begin: &Begin) -> Result<Begun, ServerError> {
    let site = site_servers(server);
    let (mut status, mut body) = ask_site(server, &site, |s| s.post_raw("/api/backups", begin))?;
    let mut told = false;
    let mut backup = None;
    let mut lost: Option<Instant> = None;
    loop {
        match status {
            200 => break,
            202 => {
                let w: Waiting = serde_json::from_slice(&body)
                    .map_err(|e| ServerError::BadAnswer(e.to_string()))?;
                if !told {
                    eprintln!(
                        "tapeloom: backup {} waits in the server's queue ({} ahead)",
                        w.backup, w.ahead
                    );
                    told = true;
                }
                backup = Some(w.backup);
            }
            SENT_ON => {
                let sent: SentOn = serde_json::from_slice(&body)
                    .map_err(|e| ServerError::BadAnswer(e.to_string()))?;
                backup = sent.backup.or(backup);
                server.follow_sent_on(&body)?;
            }
            _ => return Err(crate::refusal(status, &body)),
        }
        let Some(n) = backup else {
            return Err(ServerError::BadAnswer("a backup without its number".into()));
        };
        match server.post_raw(&format!("/api/backups/{n}/admit"), &()) {
            Ok(a) => {
                (status, body) = a;
                lost = None;
            }
            Err(e @ ServerError::Io { .. }) if !site.is_empty() => {
                let since = *lost.get_or_insert_with(Instant::now);
                if since.elapsed() > SITE_PATIENCE {
                    return Err(e);
                }
                let next = another(&site, &server.address());
                eprintln!(
                    "tapeloom: {e}; backup {n} waits in the site's queue: asking server {}",
                    escape_controls(&next.name)
                );
                server.follow(next)?;
                std::thread::sleep(Duration::from_secs(1));
                // Asked again at once: as if the server had said to wait.
                status = 202;
                body = serde_json::to_vec(&Waiting {
                    backup: n,
                    state: tapeloom_proto::backup::State::Waiting,
                    ahead: 0,
                })
                .map_err(|e| ServerError::BadAnswer(e.to_string()))?;
                told = true;
            }
            Err(e) => return Err(e),
        }
    }
    serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))
}

/// Asks `ask` of `server`; on a site, when the server cannot be reached, of the
/// site's other servers in turn (each once). A backup whose first request broke
/// off may be queued twice: the copy no client comes for is given up by the
/// server that claims it, and is never begun.
fn ask_site<T>(
    server: &Server,
    site: &[SiteServer],
    ask: impl Fn(&Server) -> Result<T, ServerError>,
) -> Result<T, ServerError> {
    let mut left = site.len();
    loop {
        match ask(server) {
            Err(e @ ServerError::Io { .. }) if left > 1 => {
                left -= 1;
                let next = another(site, &server.address());
                eprintln!(
                    "tapeloom: {e}: asking server {} of the site",
                    escape_controls(&next.name)
                );
                server.follow(next)?;
            }
            r => return r,
        }
    }
}

/// The servers of the site `server` belongs to, as it tells them (none when it
/// is alone, or does not say).
fn site_servers(server: &Server) -> Vec<SiteServer> {
    match server.get_json::<SiteDoc>("/api/site") {
        Ok(doc) => doc.servers,
        Err(_) => Vec::new(),
    }
}

/// The server of `site` after the one at `address` (its URL's `host:port`), in
/// turn.
fn another<'a>(site: &'a [SiteServer], address: &str) -> &'a SiteServer {
    let at = site
        .iter()
        .position(|s| s.url.trim_start_matches("https://").trim_end_matches('/') == address);
    let next = at.map_or(0, |i| (i + 1) % site.len());
    &site[next]
}

/// Asks `path` with `ask` again as long as the server answers that the job is not
/// over (202); the last answer.
pub(crate) fn until_over(
    server: &Server,
    path: &str,
    ask: impl Fn(&Server, &str) -> Result<(u16, Vec<u8>), ServerError>,
) -> Result<(u16, Vec<u8>), ServerError> {
    loop {
        let (status, body) = ask(server, path)?;
        if status != 202 {
            return Ok((status, body));
        }
    }
}

/// Bytes of frames a stream keeps after sending them, to send again when its
/// connection breaks off: more than one connection holds in flight (the socket
/// buffers of both ends and the server's bridge hold a few MiB).
const KEPT_BYTES: usize = 32 << 20;

/// How long a stream whose connection broke off tries to send again (the server
/// waits two of its timeouts, two minutes by default).
const RESUME_FOR: Duration = Duration::from_secs(60);

/// How often a stream whose connection broke off asks the server what it holds.
const RESUME_POLL: Duration = Duration::from_millis(250);

/// The frames of a stream the server may not hold yet: those sent, then those to
/// send before the packer's next.
#[derive(Default)]
struct Kept {
    sent: InFlight,
    pending: VecDeque<Frame>,
}

/// The last frames sent, numbered from `first`.
#[derive(Default)]
struct InFlight {
    first: u64,
    frames: VecDeque<Frame>,
    bytes: usize,
}

impl InFlight {
    /// `f` was sent: kept, the oldest let go past [`KEPT_BYTES`].
    fn keep(&mut self, f: Frame) {
        self.bytes += frame_len(&f);
        self.frames.push_back(f);
        while self.bytes > KEPT_BYTES && self.frames.len() > 1 {
            if let Some(old) = self.frames.pop_front() {
                self.bytes -= frame_len(&old);
                self.first += 1;
            }
        }
    }
}

impl Kept {
    /// The server holds frames up to `held`: those after it are sent again
    /// first. The frames and bytes sent again; none when they are no longer kept.
    fn resume(&mut self, held: u64) -> Option<(usize, usize)> {
        let s = &mut self.sent;
        let sent_to = s.first + s.frames.len() as u64;
        if held < s.first || held > sent_to {
            return None;
        }
        let again = s.frames.split_off((held - s.first) as usize);
        let flight = (again.len(), again.iter().map(frame_len).sum());
        for f in again.into_iter().rev() {
            self.pending.push_front(f);
        }
        s.frames.clear();
        (s.first, s.bytes) = (held, 0);
        Some(flight)
    }
}

fn frame_len(f: &Frame) -> usize {
    match f {
        Frame::Block(b) => b.len(),
        Frame::Note(n) => n.len(),
    }
}

/// A stream's frame of what its packer gave.
fn framed(p: Piece) -> Framed {
    match p {
        Piece::Block(b) => Framed::Frame(Frame::Block(b.into())),
        Piece::Error(path, why) => Framed::Frame(Frame::note(&path, &why)),
        Piece::Idle => Framed::KeepAlive,
    }
}

/// Sends one stream's blocks and the source objects it could not back up, and a
/// keepalive whenever it had nothing to send for a while. When the connection
/// breaks off, the stream goes on over a new one from the frame the server holds
/// next, sending again only what was in flight.
fn send_stream(server: &Server, job: u64, s: Outgoing) -> Result<(), ServerError> {
    let path = format!("/api/backups/{job}/streams/{}", s.stream);
    let mut pieces = s.map(framed);
    let mut kept = Kept::default();
    let mut target = path.clone();
    let mut cut_at = None;
    loop {
        let Kept { pending, sent } = &mut kept;
        let next = || (pending.pop_front().map(Framed::Frame)).or_else(|| pieces.next());
        let r = server.post_frames_keeping(&target, std::iter::from_fn(next), |f| sent.keep(f));
        let broke = match r {
            Ok((200, _)) => return Ok(()),
            Ok((status, body)) => return Err(crate::refusal(status, &body)),
            Err(e @ ServerError::Io { .. }) => e,
            Err(e) => return Err(e),
        };
        let since = *cut_at.get_or_insert_with(Instant::now);
        let state = match resume_point(server, &path, since)? {
            Some(state) if state.ended => return Ok(()),
            Some(state) => state,
            None => return Err(broke),
        };
        let Some((frames, bytes)) = kept.resume(state.held) else {
            return Err(broke);
        };
        eprintln!(
            "tapeloom: stream {} of backup {job}: the connection broke off ({broke}); \
             sending again from frame {} ({frames} frames, {bytes} bytes were in flight)",
            path.rsplit('/').next().unwrap_or(""),
            state.held
        );
        target = format!("{path}?from={}", state.held);
    }
}

/// What the server holds of the stream at `path` once no connection sends it;
/// none when it still did after [`RESUME_FOR`] from `since`, or the server could
/// not be asked. A job the server failed meanwhile is its refusal.
fn resume_point(
    server: &Server,
    path: &str,
    since: Instant,
) -> Result<Option<StreamState>, ServerError> {
    while since.elapsed() < RESUME_FOR {
        match server.get(path) {
            Ok((200, body)) => {
                let state: StreamState = serde_json::from_slice(&body)
                    .map_err(|e| ServerError::BadAnswer(e.to_string()))?;
                if !state.open {
                    return Ok(Some(state));
                }
            }
            // A server older than this client, or one that started again and
            // no longer knows the job.
            Ok((404, _)) => return Ok(None),
            Ok((status, body)) => return Err(crate::refusal(status, &body)),
            // Nothing listens: the server is down, not the network.
            Err(ServerError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                return Ok(None)
            }
            Err(_) => {}
        }
        std::thread::sleep(RESUME_POLL);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begun(encrypt: Option<&str>) -> Begun {
        Begun {
            backup: 7,
            tag: 1,
            block_size: 65536,
            level: None,
            base_job: None,
            promoted: None,
            tail: 28,
            encrypt: encrypt.map(str::to_string),
            keepalive_ms: None,
        }
    }

    fn block(n: u8, len: usize) -> Frame {
        Frame::Block(vec![n; len].into())
    }

    #[test]
    fn a_broken_stream_sends_again_what_was_in_flight_then_the_rest() {
        let mut k = Kept::default();
        for n in 0..5 {
            k.sent.keep(block(n, 10));
        }
        k.pending.push_back(block(5, 10));
        // The server holds frames 0 to 2: 3 and 4 were in flight.
        assert_eq!(k.resume(3), Some((2, 20)));
        let next: Vec<Frame> = k.pending.drain(..).collect();
        assert_eq!(next, vec![block(3, 10), block(4, 10), block(5, 10)]);
        assert_eq!((k.sent.first, k.sent.frames.len()), (3, 0));
        // Held beyond what was sent, or before what is kept: no resume.
        k.sent.keep(block(3, 10));
        assert_eq!(k.resume(5), None);
        assert_eq!(k.resume(2), None);
        assert_eq!(k.resume(4), Some((0, 0)));
    }

    #[test]
    fn a_stream_keeps_at_most_its_share_of_frames_sent() {
        let mut k = Kept::default();
        let big = KEPT_BYTES / 4;
        for n in 0..10 {
            k.sent.keep(block(n, big));
        }
        assert_eq!(k.sent.frames.len(), 4);
        assert_eq!(k.sent.first, 6);
        assert!(k.sent.bytes <= KEPT_BYTES);
        // What the server holds before the kept frames cannot be sent again.
        assert_eq!(k.resume(5), None);
        assert_eq!(k.resume(8), Some((2, 2 * big)));
    }

    #[test]
    fn a_job_the_server_does_not_say_it_encrypts_with_the_key_named_is_refused() {
        let f = Fingerprint([0xab; 16]);
        let hex = f.to_string();
        assert!(NotSealed::check(None, &begun(None)).is_ok());
        assert!(NotSealed::check(Some(f), &begun(Some(&hex))).is_ok());
        // An older server says nothing; another key is not the one named.
        let other = Fingerprint([0xcd; 16]).to_string();
        for b in [begun(None), begun(Some(&other))] {
            let e = NotSealed::check(Some(f), &b).unwrap_err();
            assert!(e.to_string().contains(&f.short()), "{e}");
            assert!(e.to_string().contains("backup 7"), "{e}");
        }
    }
}

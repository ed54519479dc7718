//! `GET /api/jobs/ID/restore[?path=P...]`: a client's restore. The server opens
//! the home with its lock, reads the blocks a local restore of the job (or of the
//! paths asked) would read, and streams them to the client as they come off tape
//! (`tapeloom_proto::restore` gives the answer's shape); the client decodes and places
//! them. A client token restores only its own jobs: another's is a 404, and
//! nothing is read. An encrypted job is read without its key: its blocks go out
//! sealed, after a note with its wrapped data key (from the catalog), which only
//! the client's key file opens. But when the server holds the job's key
//! (`keys.rs`) and the client did not ask for the blocks sealed
//! (`sealed=1`, which a client given `--key` asks), the server opens each block
//! and sends it in clear, over TLS: that client needs no key file.
//!
//! `GET /api/sets/restore?set=NAME[&at=TIME][&path=P...]`: a set's point-in-time
//! restore, read as a local `restore --set` reads it (every job its tree needs,
//! each cartridge once) and streamed the same way, each job's blocks after a
//! note naming it. An encrypted job whose key the server holds has its blocks
//! opened as a single job's are (unless `sealed=1`), each with that job's data
//! key; any other encrypted job's key record is among the notes before the
//! blocks.

use crate::bridge::Conn;
use crate::http::{Answer, Request};
use crate::keys::Keys;
use crate::site::Site;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use tapeloom_engine::{
    BlockSink, Error, Expect, Home, JobError, RestoreOptions, RestoreReport, SetBlockSink,
    SetSelection,
};
use tapeloom_format::DataKey;
use tapeloom_ops::clients::{self, Stream};
use tapeloom_ops::tokens::Token;
use tapeloom_proto::frame::Frame;
use tapeloom_proto::restore::{JobNote, Notice, Trailer};

/// What the route did: a refusal not yet written, or the answer streamed.
pub enum Served {
    /// Nothing written yet: this answer is to be.
    Refused(Answer),
    /// The answer was streamed.
    Streamed,
}

/// Serves the restore of job `id` to `token`, read in the home at `home` with the
/// key files `keys` the server holds, when its `site` does not send it on.
pub fn serve(
    (home, keys, site): (&Path, &Keys, Option<&Site>),
    (tls, peer): (&mut Conn, std::net::SocketAddr),
    req: &Request,
    (cat, token): (&tapeloom_ops::Conn, &Token),
    id: &str,
) -> Served {
    let Some((id, key)) = visible(cat, token, id) else {
        return Served::Refused(Answer::error(404, &format!("no job {id}")));
    };
    let opts = asked_paths(req);
    if let Some(a) = crate::reads::route_read(site, cat, id, &opts.volumes) {
        return Served::Refused(a);
    }
    let mut home = match Home::open(home) {
        Ok(h) => h,
        Err(e) => return Served::Refused(Answer::error(409, &e.to_string())),
    };
    let sealed = asks_sealed(req);
    let open = (key.as_ref())
        .filter(|_| !sealed)
        .and_then(|record| keys.data_key(id, record));
    if open.is_some() {
        // The reader checks each block with the key too, and names the entries of
        // one that does not open as a local restore does.
        home.keys = keys.all().to_vec();
    }
    let mut out = FrameOut {
        tls,
        head: false,
        key: key.filter(|_| open.is_none()),
        open,
        scratch: Vec::new(),
    };
    let read = tapeloom_engine::read_blocks(&home, id, &opts, &mut out);
    if !out.head {
        // Refused before the selection: nothing was streamed yet.
        let e = match read {
            Ok(_) => return Served::Refused(Answer::error(500, "nothing was read")),
            Err(e) => e,
        };
        return Served::Refused(match e {
            Error::Job(JobError::NoJob(_) | JobError::NoPath { .. }) => {
                Answer::error(404, &e.to_string())
            }
            e => Answer::error(409, &e.to_string()),
        });
    }
    let streams = clients::streams(cat, id).unwrap_or_default();
    if let Err(e) = out.end(read, &streams) {
        tracing::warn!(peer = %peer, job = id, "restore: {e}");
    }
    Served::Streamed
}

/// The options of a restore of the paths the request names (`path=`, each
/// again; none: the whole tree), read from the cartridges it names (`volume=`,
/// a part of a job read in parts; none: all of the job's).
fn asked_paths(req: &Request) -> RestoreOptions {
    RestoreOptions {
        paths: (req.query.iter())
            .filter(|(k, _)| k == "path")
            .map(|(_, v)| v.clone())
            .collect(),
        volumes: crate::reads::asked_volumes(&req.query),
        ..RestoreOptions::default()
    }
}

/// Whether the client asks encrypted blocks sent sealed (`sealed=1`): given a
/// key file, it opens them itself, whatever keys the server holds.
fn asks_sealed(req: &Request) -> bool {
    req.query.iter().any(|(k, v)| k == "sealed" && v == b"1")
}

/// The job `id` and, when it is encrypted, its `JobKey` record's body, when
/// `token` may see it.
fn visible(cat: &tapeloom_ops::Conn, token: &Token, id: &str) -> Option<(i64, Option<Vec<u8>>)> {
    let id = id.parse::<i64>().ok()?;
    let job = clients::job(cat, token, id).ok()??;
    Some((id, job.key.map(|(_, record)| record)))
}

/// The answer's body, written as the blocks come.
struct FrameOut<'a> {
    tls: &'a mut Conn,
    /// The answer's head was written.
    head: bool,
    /// The job's `JobKey` record's body, when it is encrypted: the body's first note.
    key: Option<Vec<u8>>,
    /// The job's data key, when the server opens its blocks.
    open: Option<tapeloom_format::DataKey>,
    /// Where a block is opened.
    scratch: Vec<u8>,
}

fn io(e: std::io::Error) -> Error {
    Error::Io {
        what: "send a block to the client".into(),
        source: e,
    }
}

impl FrameOut<'_> {
    fn frame(&mut self, f: Frame) -> std::io::Result<()> {
        match f {
            Frame::Block(b) => self.raw(0, &b),
            Frame::Note(n) => self.raw(tapeloom_proto::frame::NOTE_FLAG, &n),
        }
    }

    fn raw(&mut self, flag: u32, b: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(b.len())
            .ok()
            .filter(|l| l & tapeloom_proto::frame::NOTE_FLAG == 0)
            .ok_or_else(|| std::io::Error::other("a frame of 2 GiB or more"))?;
        self.tls.write_all(&(len | flag).to_le_bytes())?;
        self.tls.write_all(b)
    }

    /// The closing frame and the trailer: the figures, or why the reading failed.
    fn end(
        &mut self,
        read: Result<RestoreReport, Error>,
        streams: &[Stream],
    ) -> std::io::Result<()> {
        let trailer = match read {
            Ok(r) => trailer(&r, streams),
            Err(e) => Trailer {
                error: Some(e.to_string()),
                ..Trailer::default()
            },
        };
        self.close(&trailer)
    }

    /// The closing frame and `trailer`.
    fn close(&mut self, trailer: &Trailer) -> std::io::Result<()> {
        let doc = serde_json::to_vec(trailer).map_err(std::io::Error::other)?;
        self.tls.write_all(&0u32.to_le_bytes())?;
        self.raw(0, &doc)?;
        self.tls.flush()
    }
}

/// The figures of `r`, with the job's `streams` it read.
fn trailer(r: &RestoreReport, streams: &[Stream]) -> Trailer {
    let source = |name: &str| {
        let s = r.stream_sources.iter().find(|(n, _)| n == name);
        s.map(|(_, s)| s.as_str().to_string())
    };
    Trailer {
        streams: (streams.iter())
            .filter_map(|s| Some((s.stream, s.name.clone(), source(&s.name)?)))
            .collect(),
        blocks_read: r.blocks_read,
        bytes_read_from_tape: r.bytes_read_from_tape,
        locates: r.locates,
        mounts: r.mounts,
        read_through: r.read_through,
        chains: r.chains,
        drives: r.drives.len(),
        source: r.source.as_str().to_string(),
        blocks_read_from_stage: r.blocks_read_from_stage,
        bytes_read_from_stage: r.bytes_read_from_stage,
        seconds: r.seconds,
        error: None,
        blocks_planned: r.blocks_planned,
    }
}

impl FrameOut<'_> {
    /// The answer's head: the frames follow.
    fn head(&mut self) -> tapeloom_engine::Result<()> {
        (self.tls)
            .start(200, "application/vnd.tapeloom.frames")
            .map_err(io)?;
        self.head = true;
        Ok(())
    }

    fn note(&mut self, n: Notice) -> tapeloom_engine::Result<()> {
        self.frame(n.frame()).map_err(io)
    }
}

impl BlockSink for FrameOut<'_> {
    fn selection(
        &mut self,
        want: Option<&HashSet<Vec<u8>>>,
        left_out: &HashSet<Vec<u8>>,
        expected: &HashMap<Vec<u8>, Expect>,
    ) -> tapeloom_engine::Result<()> {
        self.head()?;
        if let Some(k) = self.key.take() {
            self.frame(Notice::JobKey(k).frame()).map_err(io)?;
        }
        for p in want.into_iter().flatten() {
            self.frame(Notice::Want(p.clone()).frame()).map_err(io)?;
        }
        for p in left_out {
            self.frame(Notice::LeftOut(p.clone()).frame()).map_err(io)?;
        }
        for (p, x) in expected {
            self.note(Notice::Row(p.clone(), wire_expect(x)))?;
        }
        Ok(())
    }

    fn block(&mut self, block: &[u8]) -> tapeloom_engine::Result<()> {
        let opened =
            (self.open.as_ref()).and_then(|k| crate::keys::opened(k, block, &mut self.scratch));
        self.raw(0, opened.as_deref().unwrap_or(block)).map_err(io)
    }

    fn bad(&mut self, paths: &[Vec<u8>], why: &str) -> tapeloom_engine::Result<()> {
        for p in paths {
            self.frame(Notice::Bad(p.clone(), why.to_string()).frame())
                .map_err(io)?;
        }
        Ok(())
    }
}

/// Serves `GET /api/sets/restore?set=NAME[&at=TIME][&path=P...]`: the blocks of a
/// set's point-in-time restore. A token may restore a set when it may see every
/// job the restore reads (else 404, as for a set that does not exist, and
/// nothing is read). It is read as [`serve`] reads a job.
pub fn serve_set(
    (home, keys, site): (&Path, &Keys, Option<&Site>),
    (tls, peer): (&mut Conn, std::net::SocketAddr),
    req: &Request,
    (cat, token): (&tapeloom_ops::Conn, &Token),
) -> Served {
    let text = |k| (req.param(k)).map(|v| String::from_utf8_lossy(v).into_owned());
    let Some(set) = text("set").filter(|s| !s.is_empty()) else {
        return Served::Refused(Answer::error(400, "a set's restore needs set=NAME"));
    };
    let allowed = match visible_jobs(cat, token, &set) {
        Ok(a) => a,
        Err(a) => return Served::Refused(a),
    };
    let opts = asked_paths(req);
    let when = text("at");
    if let Some(a) = crate::reads::route_set(site, cat, (&set, when.as_deref()), &opts) {
        return Served::Refused(a);
    }
    let home = match Home::open(home) {
        Ok(h) => h,
        Err(e) => return Served::Refused(Answer::error(409, &e.to_string())),
    };
    let out = FrameOut {
        tls,
        head: false,
        key: None,
        open: None,
        scratch: Vec::new(),
    };
    let mut out = SetFrameOut {
        out,
        set: set.clone(),
        allowed,
        last: None,
        keys: (!asks_sealed(req)).then_some(keys),
        open: HashMap::new(),
    };
    let read = tapeloom_engine::read_set_blocks(&home, &set, when.as_deref(), &opts, &mut out);
    if !out.out.head {
        return Served::Refused(refused_set(read));
    }
    let trailer = match read {
        Ok(r) => trailer(&r, &[]),
        Err(e) => Trailer {
            error: Some(e.to_string()),
            ..Trailer::default()
        },
    };
    if let Err(e) = out.out.close(&trailer) {
        tracing::warn!(peer = %peer, set = %set, "restore: {e}");
    }
    Served::Streamed
}

/// The jobs of set `set` that `token` may see; a 404 when it may see none (the
/// set is another client's, or not there).
fn visible_jobs(
    cat: &tapeloom_ops::Conn,
    token: &Token,
    set: &str,
) -> Result<HashSet<i64>, Answer> {
    let allowed =
        (clients::set_jobs(cat, token, set)).map_err(|e| Answer::error(503, &e.to_string()))?;
    if allowed.is_empty() {
        let e = JobError::NoSet { set: set.into() };
        return Err(Answer::error(404, &e.to_string()));
    }
    Ok(allowed)
}

/// The refusal of a set's restore that ended before its selection.
fn refused_set(read: Result<RestoreReport, Error>) -> Answer {
    let e = match read {
        Ok(_) => return Answer::error(500, "nothing was read"),
        Err(e) => e,
    };
    match e {
        Error::Job(JobError::BadAt { .. }) => Answer::error(400, &e.to_string()),
        Error::Job(
            JobError::NoSet { .. }
            | JobError::NoJobAt { .. }
            | JobError::NoJob(_)
            | JobError::NoPath { .. },
        ) => Answer::error(404, &e.to_string()),
        e => Answer::error(409, &e.to_string()),
    }
}

/// The answer's body of a set's restore, written as the blocks come.
struct SetFrameOut<'a> {
    out: FrameOut<'a>,
    set: String,
    /// The jobs of the set the token may see.
    allowed: HashSet<i64>,
    /// The job of the last block or bad entry sent.
    last: Option<i64>,
    /// The server's keys, when the client did not ask the blocks sealed.
    keys: Option<&'a crate::keys::Keys>,
    /// The data key of each encrypted job whose blocks the server opens.
    open: HashMap<i64, DataKey>,
}

impl SetFrameOut<'_> {
    /// Says, when it changes, whose the blocks and bad entries that follow are.
    fn of(&mut self, job: i64) -> tapeloom_engine::Result<()> {
        if self.last != Some(job) {
            self.out.note(Notice::Of(job))?;
            self.last = Some(job);
        }
        Ok(())
    }
}

impl SetBlockSink for SetFrameOut<'_> {
    fn selection(&mut self, sel: &SetSelection) -> tapeloom_engine::Result<()> {
        let seen = |id: &i64| self.allowed.contains(id);
        if !seen(&sel.at) || !sel.jobs.iter().all(|j| seen(&j.id)) {
            return Err(JobError::NoSet {
                set: self.set.clone(),
            }
            .into());
        }
        self.out.head()?;
        self.out.note(Notice::SetAt(sel.at))?;
        for j in &sel.jobs {
            let (id, tag, block_size) = (j.id, j.tag, j.block_size);
            self.out.note(Notice::Job(JobNote {
                id,
                tag,
                block_size,
            }))?;
            if let Some(k) = &j.key {
                // Opened here when the server holds its key, else sent sealed
                // after its key record, for the client's key file.
                match self.keys.and_then(|keys| keys.data_key(id, k)) {
                    Some(key) => {
                        self.open.insert(id, key);
                    }
                    None => self.out.note(Notice::JobKey(k.clone()))?,
                }
            }
            for p in &j.data {
                self.out.note(Notice::Want(p.clone()))?;
            }
            for p in &j.meta {
                self.out.note(Notice::Meta(p.clone()))?;
            }
            for (p, x) in &j.rows {
                self.out.note(Notice::Row(p.clone(), wire_expect(x)))?;
            }
        }
        for p in &sel.missing {
            self.out.note(Notice::Missing(p.clone()))?;
        }
        Ok(())
    }

    fn block(&mut self, job: i64, block: &[u8]) -> tapeloom_engine::Result<()> {
        self.of(job)?;
        let out = &mut self.out;
        let opened =
            (self.open.get(&job)).and_then(|k| crate::keys::opened(k, block, &mut out.scratch));
        out.raw(0, opened.as_deref().unwrap_or(block)).map_err(io)
    }

    fn bad(&mut self, job: i64, paths: &[Vec<u8>], why: &str) -> tapeloom_engine::Result<()> {
        self.of(job)?;
        for p in paths {
            self.out.note(Notice::Bad(p.clone(), why.to_string()))?;
        }
        Ok(())
    }
}

/// What the catalog lists of an entry, as a note of the answer gives it.
fn wire_expect(x: &Expect) -> tapeloom_proto::restore::Expect {
    tapeloom_proto::restore::Expect {
        stream: x.stream,
        kind: x.kind,
        size: x.size,
    }
}

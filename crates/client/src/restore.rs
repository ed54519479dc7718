//! A restore through a server: the server reads the blocks on its drives, and
//! this machine checks, decodes and places them as a local restore does. An
//! encrypted job's blocks are opened here when the keys are given here.

use crate::{Server, ServerError};
use anyhow::Result;
use std::collections::HashMap;
use tapeloom_tree::restore::{
    BlockRestore, RestoreOptions, SetBlockRestore, SetJob, SetSelection, Source,
};

/// What a restore through a server did: the reading's figures are the server's,
/// and it names no drive of this machine.
pub type RestoreReport = tapeloom_tree::restore::RestoreReport<()>;
use tapeloom_format::{DataKey, MasterKey, MAX_BLOCK_SIZE};
use tapeloom_proto::frame::{percent_encode, Frame};
use tapeloom_proto::restore::{JobNotice, Notice, Trailer};

/// Restores job `job` from `server`: the server reads the blocks, this machine
/// checks, decodes and places them under `opts.to` as a local restore does; an
/// encrypted job's blocks are opened here with the job's data key, which `keys`
/// unwrap. The restore folder is made only once the server has agreed to serve
/// the job and its key was opened.
pub fn job(
    server: &Server,
    (job, keys): (i64, Vec<MasterKey>),
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let mut query: Vec<String> = (opts.paths.iter())
        .map(|p| format!("path={}", tapeloom_proto::frame::percent_encode(p)))
        .collect();
    // Given a key file, the blocks are opened here, whatever keys the server holds.
    if !keys.is_empty() {
        query.push("sealed=1".into());
    }
    let mut placing = Placing {
        job,
        keys,
        key: None,
        br: None,
    };
    let t = job_frames(server, job, &query, |first, f| {
        placing.frame(f, opts, first)
    })?;
    let br = placing.take(opts)?;
    let names = (t.streams.iter())
        .map(|(id, n, _)| (*id, n.clone()))
        .collect();
    // What was placed is finished (files closed, directories' metadata set) even
    // when the server's reading failed midway.
    let mut r = br.finish(&names)?;
    if let Some(e) = t.error {
        return Err(ServerError::Failed(e).into());
    }
    r.stream_sources = (t.streams.iter())
        .map(|(_, n, s)| (n.clone(), source(s)))
        .collect();
    r.blocks_read = t.blocks_read;
    r.bytes_read_from_tape = t.bytes_read_from_tape;
    r.locates = t.locates;
    r.mounts = t.mounts;
    r.read_through = t.read_through;
    r.chains = t.chains;
    r.blocks_read_from_stage = t.blocks_read_from_stage;
    r.bytes_read_from_stage = t.bytes_read_from_stage;
    r.source = source(&t.source);
    (r.job, r.jobs) = (job, vec![job]);
    Ok(r)
}

/// GETs job `job`'s restore with `query` and hands each frame to `each`, with
/// whether it is of the answer's first part; returns the trailer. A job whose
/// cartridges sit in several libraries of a site
/// ([`tapeloom_proto::site::SplitRead`]) is asked part
/// after part, each of its server with the part's cartridges (`volume=`): the
/// parts come in the job's volume order, so their blocks are those of one
/// reading. The trailer then sums the parts' figures, and holds the first
/// part's error.
pub(crate) fn job_frames(
    server: &Server,
    job: i64,
    query: &[String],
    mut each: impl FnMut(bool, Frame) -> Result<()>,
) -> Result<Trailer> {
    let path = |q: &[String]| match q.is_empty() {
        true => format!("/api/jobs/{job}/restore"),
        false => format!("/api/jobs/{job}/restore?{}", q.join("&")),
    };
    let asked = server.get_frames::<anyhow::Error>(&path(query), MAX_BLOCK_SIZE, |f| each(true, f));
    let split = match asked.map_err(|e| e.downcast::<ServerError>()) {
        Ok(t) => return trailer(&t),
        Err(Ok(ServerError::Split(split))) => split,
        Err(Ok(e)) => return Err(e.into()),
        Err(Err(e)) => return Err(e),
    };
    eprintln!(
        "tapeloom: {}",
        tapeloom_tree::escape_controls(&split.reason)
    );
    let mut sum: Option<Trailer> = None;
    for (i, part) in split.parts.iter().enumerate() {
        server.follow(&part.server)?;
        let mut q = query.to_vec();
        q.extend((part.volumes.iter()).map(|v| format!("volume={}", percent_encode(v.as_bytes()))));
        let got =
            server.get_frames::<anyhow::Error>(&path(&q), MAX_BLOCK_SIZE, |f| each(i == 0, f))?;
        let mut t = trailer(&got)?;
        if let Some(e) = t.error.take() {
            t.error = Some(format!("server {}: {e}", part.server.name));
        }
        let failed = t.error.is_some();
        sum = Some(match sum {
            None => t,
            Some(s) => add(s, t),
        });
        if failed {
            break;
        }
    }
    sum.ok_or_else(|| ServerError::BadAnswer(format!("job {job} read in no part")).into())
}

/// A trailer as the server sent it.
fn trailer(bytes: &[u8]) -> Result<Trailer> {
    Ok(serde_json::from_slice(bytes)
        .map_err(|e| ServerError::BadAnswer(format!("the trailer: {e}")))?)
}

/// The figures of two parts of one reading: counts summed, the job's chains and
/// streams as the first gave them, the first error.
fn add(a: Trailer, b: Trailer) -> Trailer {
    Trailer {
        blocks_read: a.blocks_read + b.blocks_read,
        bytes_read_from_tape: a.bytes_read_from_tape + b.bytes_read_from_tape,
        locates: a.locates + b.locates,
        mounts: a.mounts + b.mounts,
        read_through: a.read_through + b.read_through,
        chains: a.chains.max(b.chains),
        drives: a.drives + b.drives,
        blocks_read_from_stage: a.blocks_read_from_stage + b.blocks_read_from_stage,
        bytes_read_from_stage: a.bytes_read_from_stage + b.bytes_read_from_stage,
        seconds: a.seconds + b.seconds,
        blocks_planned: a.blocks_planned + b.blocks_planned,
        error: a.error.or(b.error),
        source: a.source,
        streams: a.streams,
    }
}

/// A restore through the server as its frames come: the job's key opened from
/// its note, then the restore started at the first other frame.
struct Placing {
    job: i64,
    /// The master keys given (`--key`).
    keys: Vec<MasterKey>,
    /// An encrypted job's tag and data key, once its note came.
    key: Option<(u64, DataKey)>,
    br: Option<BlockRestore>,
}

impl Placing {
    /// Takes one frame of the answer; `first`: of its first part (the notes of
    /// the selection, which every part repeats, are taken from the first only).
    fn frame(&mut self, f: Frame, opts: &RestoreOptions, first: bool) -> Result<()> {
        let block = match f {
            Frame::Block(b) => b,
            Frame::Note(n) => {
                let note = Notice::parse(&n)
                    .ok_or_else(|| ServerError::BadAnswer("a note of no kind".into()))?;
                if !first && !matches!(note, Notice::Bad(..)) {
                    return Ok(());
                }
                return self.note(note, opts);
            }
        };
        Ok(self.started(opts)?.block(&block)?)
    }

    /// Takes one note: the job's key, which must come first, or one of the
    /// restore's.
    fn note(&mut self, note: Notice, opts: &RestoreOptions) -> Result<()> {
        if let Notice::JobKey(record) = note {
            if self.br.is_some() || self.key.is_some() {
                let e = "the job's key after its first frame";
                return Err(ServerError::BadAnswer(e.into()).into());
            }
            self.key = Some(tapeloom_tree::job_data_key(&self.keys, self.job, &record)?);
            return Ok(());
        }
        let br = self.started(opts)?;
        match note.of_job()? {
            JobNotice::Want(p) => br.want(p),
            JobNotice::LeftOut(p) => br.left_out(p),
            JobNotice::Bad(p, why) => br.bad(&p, &why),
            JobNotice::Row(p, x) => br.expect(p, crate::wire::expect(x)),
            JobNotice::JobKey(_) => {}
        }
        Ok(())
    }

    /// The restore, started (its folder made) at the first frame that is not the
    /// job's key.
    fn started(&mut self, opts: &RestoreOptions) -> Result<&mut BlockRestore> {
        let br = self.br.take().map_or_else(|| self.fresh(opts), Ok)?;
        Ok(self.br.insert(br))
    }

    /// The restore, started when no frame came.
    fn take(mut self, opts: &RestoreOptions) -> Result<BlockRestore> {
        self.br.take().map_or_else(|| self.fresh(opts), Ok)
    }

    /// A new restore, given the job's data key when it is encrypted.
    fn fresh(&mut self, opts: &RestoreOptions) -> Result<BlockRestore> {
        let br = BlockRestore::new(opts)?;
        Ok(match self.key.take() {
            Some((tag, key)) => br.with_key(tag, key),
            None => br,
        })
    }
}

/// Restores set `set` as it was at `at` from `server`: the server reads the
/// blocks of every job the set's tree needs, this machine checks each against its
/// job and places them as a local `restore --set` does; encrypted jobs' blocks
/// are opened here with their data keys, which `keys` unwrap (without `keys`, the
/// server opens those whose key it holds). The restore folder
/// is made only once the server has agreed to serve the set and every job's key
/// was opened.
pub fn set(
    server: &Server,
    (set, at): (&str, Option<&str>),
    keys: Vec<MasterKey>,
    opts: &RestoreOptions,
) -> Result<RestoreReport> {
    let enc = tapeloom_proto::frame::percent_encode;
    let mut query = vec![format!("set={}", enc(set.as_bytes()))];
    query.extend(at.map(|t| format!("at={}", enc(t.as_bytes()))));
    query.extend((opts.paths.iter()).map(|p| format!("path={}", enc(p))));
    // Given a key file, the blocks are opened here, whatever keys the server holds.
    if !keys.is_empty() {
        query.push("sealed=1".into());
    }
    let path = format!("/api/sets/restore?{}", query.join("&"));
    let mut placing = SetPlacing {
        keys,
        sel: SetSelection::default(),
        opened: HashMap::new(),
        br: None,
    };
    let trailer =
        server.get_frames::<anyhow::Error>(&path, MAX_BLOCK_SIZE, |f| placing.frame(f, opts))?;
    let t: Trailer = serde_json::from_slice(&trailer)
        .map_err(|e| ServerError::BadAnswer(format!("the trailer: {e}")))?;
    let sel = placing.sel.clone();
    // What was placed is finished even when the server's reading failed midway.
    let mut r = placing.take(opts)?.finish()?;
    if let Some(e) = t.error {
        return Err(ServerError::Failed(e).into());
    }
    r.blocks_read = t.blocks_read;
    r.bytes_read_from_tape = t.bytes_read_from_tape;
    r.locates = t.locates;
    r.mounts = t.mounts;
    r.read_through = t.read_through;
    r.chains = t.chains;
    r.blocks_planned = t.blocks_planned;
    r.source = source(&t.source);
    (r.job, r.jobs) = (sel.at, sel.jobs.iter().map(|j| j.id).collect());
    Ok(r)
}

/// A set's restore through the server as its frames come: the selection and the
/// jobs' keys gathered from the notes before the first block, then the restore
/// started.
struct SetPlacing {
    /// The master keys given (`--key`).
    keys: Vec<MasterKey>,
    /// What the restore takes from each job, as the notes said.
    sel: SetSelection,
    /// Each encrypted job's tag and data key, by job id.
    opened: HashMap<i64, (u64, DataKey)>,
    br: Option<SetBlockRestore>,
}

impl SetPlacing {
    /// Takes one frame of the answer.
    fn frame(&mut self, f: Frame, opts: &RestoreOptions) -> Result<()> {
        let note = match f {
            Frame::Block(b) => return Ok(self.started(opts)?.block(&b)?),
            Frame::Note(n) => Notice::parse(&n)
                .ok_or_else(|| ServerError::BadAnswer("a note of no kind".into()))?,
        };
        match note {
            Notice::Of(job) => self.started(opts)?.job(job),
            Notice::Bad(p, why) => self.started(opts)?.bad(&p, &why),
            n if self.br.is_some() => {
                let e = format!("a note of the selection after the first block: {n:?}");
                return Err(ServerError::BadAnswer(e).into());
            }
            n => self.select(n)?,
        }
        Ok(())
    }

    /// Takes one note of the selection.
    fn select(&mut self, note: Notice) -> Result<()> {
        let bad = |e: &str| ServerError::BadAnswer(e.to_string());
        if let Notice::SetAt(at) = note {
            self.sel.at = at;
            return Ok(());
        }
        if let Notice::Missing(p) = note {
            self.sel.missing.push(p);
            return Ok(());
        }
        if let Notice::Job(j) = note {
            let (id, tag, block_size) = (j.id, j.tag, j.block_size);
            let job = SetJob {
                id,
                tag,
                block_size,
                ..SetJob::default()
            };
            self.sel.jobs.push(job);
            return Ok(());
        }
        let job =
            (self.sel.jobs.last_mut()).ok_or_else(|| bad("an entry's note before any job"))?;
        match note {
            Notice::Want(p) => job.data.push(p),
            Notice::Meta(p) => job.meta.push(p),
            Notice::Row(p, x) => job.rows.push((p, crate::wire::expect(x))),
            Notice::JobKey(record) => {
                let key = tapeloom_tree::job_data_key(&self.keys, job.id, &record)?;
                self.opened.insert(job.id, key);
            }
            _ => return Err(bad("a job's note in a set's restore").into()),
        }
        Ok(())
    }

    /// The restore, started (its folder made) at the first block or note of the
    /// blocks.
    fn started(&mut self, opts: &RestoreOptions) -> Result<&mut SetBlockRestore> {
        let br = self.br.take().map_or_else(|| self.fresh(opts), Ok)?;
        Ok(self.br.insert(br))
    }

    /// The restore, started when no block came.
    fn take(mut self, opts: &RestoreOptions) -> Result<SetBlockRestore> {
        self.br.take().map_or_else(|| self.fresh(opts), Ok)
    }

    fn fresh(&mut self, opts: &RestoreOptions) -> Result<SetBlockRestore> {
        let keys = std::mem::take(&mut self.opened);
        Ok(SetBlockRestore::new(opts, &self.sel, keys)?)
    }
}

/// The source a server names (`Source::as_str`).
pub fn source(s: &str) -> Source {
    match s {
        "stage" => Source::Stage,
        "stage+tape" => Source::StageAndTape,
        _ => Source::Tape,
    }
}

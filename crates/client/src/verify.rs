//! A verify through a server: read on the server's drives ([`remote`]), or, with
//! the job's keys given here, read there as for a restore and checked here with
//! the keys, which never leave this machine ([`keyed`]).

use crate::{Server, ServerError};
use anyhow::Result;
use serde::Deserialize;
use tapeloom_format::{DataKey, MasterKey};
use tapeloom_proto::frame::Frame;
use tapeloom_proto::restore::{JobNotice, Notice};
use tapeloom_proto::verify::{Ask, Pending, Verified};
use tapeloom_tree::verify::{BlockVerify, Listed};

/// Verifies job `job` on `server`'s drives: the server answers at once or, for a
/// long reading, with the number of its verify, asked again until it is over.
/// A job whose cartridges sit in several libraries of a site is read in parts,
/// each by its library's server, and checked here as [`keyed`] checks it (the
/// drive asked is then left to each server).
pub fn remote(server: &Server, job: i64, drive: Option<usize>) -> Result<Verified> {
    let path = format!("/api/jobs/{job}/verify");
    let (mut status, mut body) = server.post_raw(&path, &Ask { drive })?;
    if status == tapeloom_proto::site::SENT_ON {
        // The server whose library holds the job's cartridges verifies it.
        server.follow_sent_on(&body)?;
        (status, body) = server.post_raw(&path, &Ask { drive })?;
    }
    if status == tapeloom_proto::site::SPLIT {
        return keyed(server, job, Vec::new());
    }
    let (status, body) = match status {
        202 => {
            let w: Pending =
                serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))?;
            crate::backup::until_over(server, &format!("/api/verifies/{}", w.verify), |s, p| {
                s.get(p)
            })?
        }
        _ => (status, body),
    };
    if status != 200 {
        return Err(crate::refusal(status, &body).into());
    }
    Ok(serde_json::from_slice(&body).map_err(|e| ServerError::BadAnswer(e.to_string()))?)
}

/// Verifies job `job` through `server` with the master keys `keys`: the job's
/// listing (`GET /api/jobs/ID/files`) gives the entries expected and where they
/// start, then its whole restore's blocks are checked here as they come. The
/// blocks and bytes checked are those the server read for it.
pub fn keyed(server: &Server, job: i64, keys: Vec<MasterKey>) -> Result<Verified> {
    let listing: Listing = server.get_json(&format!("/api/jobs/{job}/files"))?;
    let mut checking = Checking {
        job,
        keys,
        listing: Some(listing.entries),
        bv: None,
    };
    let t = crate::restore::job_frames(server, job, &[], |first, f| checking.frame(f, first))?;
    if let Some(e) = t.error {
        return Err(ServerError::Failed(e).into());
    }
    let mut r = checking.done().finish();
    r.bytes_read_from_tape = t.bytes_read_from_tape;
    Ok(crate::wire::verified(job, r))
}

/// The part of a job's listing a verify through the server needs.
#[derive(Deserialize)]
struct Listing {
    entries: Vec<ListedEntry>,
}

#[derive(Deserialize)]
struct ListedEntry {
    path: String,
    volume: String,
    block: u64,
}

/// A verify through the server as its frames come: the job's key opened from
/// its note, then the checking started at the first other frame.
struct Checking {
    job: i64,
    /// The master keys given (`--key`).
    keys: Vec<MasterKey>,
    /// The job's entries, until the checking starts.
    listing: Option<Vec<ListedEntry>>,
    bv: Option<BlockVerify>,
}

impl Checking {
    /// Takes one frame of the answer; `first`: of its first part (the notes of
    /// the selection, which every part of a job read in parts repeats, are
    /// taken from the first only).
    fn frame(&mut self, f: Frame, first: bool) -> Result<()> {
        let note = match f {
            Frame::Block(b) => return Ok(self.started(None).block(&b)?),
            Frame::Note(n) => Notice::parse(&n)
                .ok_or_else(|| ServerError::BadAnswer("a note of no kind".into()))?,
        };
        if !first && !matches!(note, Notice::Bad(..)) {
            return Ok(());
        }
        match note.of_job()? {
            JobNotice::JobKey(record) if self.bv.is_none() => {
                let key = tapeloom_tree::job_data_key(&self.keys, self.job, &record)?;
                self.started(Some(key));
            }
            JobNotice::JobKey(_) => {
                let e = "the job's key after its first frame";
                return Err(ServerError::BadAnswer(e.into()).into());
            }
            JobNotice::LeftOut(p) => self.started(None).left_out(p),
            JobNotice::Bad(p, why) => self.started(None).bad(&p, &why),
            JobNotice::Row(p, x) => self.started(None).expect(p, crate::wire::expect(x)),
            JobNotice::Want(_) => {}
        }
        Ok(())
    }

    /// The checking, started at the first frame (given the job's tag and data
    /// key when that frame is its key).
    fn started(&mut self, key: Option<(u64, DataKey)>) -> &mut BlockVerify {
        let bv = match self.bv.take() {
            Some(bv) => bv,
            None => self.fresh(key),
        };
        self.bv.insert(bv)
    }

    /// The checking, once every frame came (started when none did).
    fn done(mut self) -> BlockVerify {
        match self.bv.take() {
            Some(bv) => bv,
            None => self.fresh(None),
        }
    }

    /// A new checking of the listed entries, given the job's data key when it is
    /// encrypted.
    fn fresh(&mut self, key: Option<(u64, DataKey)>) -> BlockVerify {
        let listed = (self.listing.take().unwrap_or_default().into_iter())
            .map(|e| Listed {
                path: e.path,
                volume: e.volume,
                block: e.block,
            })
            .collect();
        let bv = BlockVerify::new(listed);
        match key {
            Some((tag, key)) => bv.with_key(tag, key),
            None => bv,
        }
    }
}

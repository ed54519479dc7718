//! The jobs of a catalog as the document `tapeloom jobs` prints and `GET /api/jobs`
//! answers ([`tapeloom_proto::jobs::Jobs`]).

use crate::Catalogued;
use tapeloom_catalog::{Catalog, JobState};
use tapeloom_proto::fmt::time;
use tapeloom_proto::jobs::{Copy, Job, Jobs, Verified};

/// The jobs `visible` lets through.
pub fn list(
    at: &impl Catalogued,
    visible: impl Fn(&tapeloom_catalog::Job) -> bool,
) -> tapeloom_catalog::Result<Jobs> {
    let cat = at.ops_catalog();
    let mut jobs = Vec::new();
    for j in cat.jobs()?.into_iter().filter(|j| visible(j)) {
        let moved_to = cat.moved_to(j.id)?;
        let mut copies = copies(cat, j.id)?;
        let volumes = match copies.iter().position(|c| Some(c.copy_no) == moved_to) {
            Some(i) => copies.remove(i).volumes,
            None => (cat.job_volumes(j.id)?.into_iter())
                .map(|v| v.volume.barcode)
                .collect(),
        };
        let why = match j.status {
            JobState::Failed | JobState::Queued | JobState::Salvaged => {
                Some(cat.job_reasons(j.id)?.join("; "))
            }
            _ => None,
        }
        .filter(|w| !w.is_empty());
        jobs.push(Job {
            job_id: j.id,
            name: j.name,
            set: j.set,
            level: j.level.name().to_string(),
            base_job: j.base,
            status: j.status.as_str().to_string(),
            started: time(j.started_ns),
            ended: j.ended_ns.map(time),
            files: j.files,
            bytes: j.bytes,
            seconds: j.seconds,
            block_size: j.block_size,
            volumes,
            key: j.key.map(|(f, _)| f.chars().take(16).collect()),
            client: j.client,
            last_verified: cat.last_verify(j.id)?.map(|v| Verified {
                at: time(v.at_ns),
                ok: v.ok,
                bad_blocks: v.bad_blocks,
                how: v.how,
            }),
            copies,
            moved_to,
            why,
        });
    }
    Ok(Jobs { jobs })
}

/// The further copies of job `id`.
fn copies(cat: &Catalog, id: i64) -> tapeloom_catalog::Result<Vec<Copy>> {
    let mut out = Vec::new();
    let copies = cat.copies(id)?;
    if copies.is_empty() {
        return Ok(out);
    }
    let barcodes: std::collections::HashMap<i64, String> = (cat.volumes()?.into_iter())
        .map(|v| (v.id, v.barcode))
        .collect();
    for c in copies {
        let mut volumes: Vec<String> = Vec::new();
        for s in cat.copy_segments(id, c.copy_no)? {
            let b = barcodes.get(&s.volume_id).cloned().unwrap_or_default();
            if !volumes.contains(&b) {
                volumes.push(b);
            }
        }
        out.push(Copy {
            copy_no: c.copy_no,
            pool: c.pool,
            state: c.state.as_str().to_string(),
            created: time(c.created_ns),
            volumes,
        });
    }
    Ok(out)
}

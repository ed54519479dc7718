//! The jobs a server writes for its clients: who sees them, the sets and keys a
//! client's job may have, and the record of each job for its client, those that
//! failed before a drive included.
//!
//! A client's token sees the jobs it ran; another client's job is one that does
//! not exist. An admin's token sees all.

use crate::access::Catalogued;
use crate::keys::KeySource;
use crate::tokens::Token;
use crate::{OpsError, Result};
use std::collections::HashSet;
use tapeloom_catalog::JobState;
pub use tapeloom_catalog::{Job, Stream};
use tapeloom_format::MasterKey;
use tapeloom_proto::backup::Begin;

/// Whether `token` may see a job `client` ran (none: a job run on the server's
/// own machine).
pub fn may_see(token: &Token, client: Option<&str>) -> bool {
    token.admin || client == Some(token.name.as_str())
}

/// Job `id`, when `token` may see it; none when there is no such job or it is
/// another client's.
pub fn job(at: &impl Catalogued, token: &Token, id: i64) -> Result<Option<Job>> {
    let job = at.ops_catalog().job(id)?;
    Ok(job.filter(|j| may_see(token, j.client.as_deref())))
}

/// The streams of job `job`, in their order.
pub fn streams(at: &impl Catalogued, job: i64) -> Result<Vec<Stream>> {
    Ok(at.ops_catalog().streams(job)?)
}

/// The jobs of set `set` that `token` may see.
pub fn set_jobs(at: &impl Catalogued, token: &Token, set: &str) -> Result<HashSet<i64>> {
    let jobs = at.ops_catalog().set_jobs(set)?;
    Ok((jobs.into_iter())
        .filter(|j| may_see(token, j.client.as_deref()))
        .map(|j| j.id)
        .collect())
}

/// Refuses a backup of `client` into set `set` and pool `pool` when the pool does
/// not exist, or when the set holds another client's jobs: a client's sets are
/// its own, so that no client is sent another's tree or chained to its jobs.
pub fn check_set(at: &impl Catalogued, client: &str, set: &str, pool: Option<&str>) -> Result<()> {
    let cat = at.ops_catalog();
    if let Some(pool) = pool {
        if cat.pool(pool)?.is_none() {
            return Err(OpsError::UnknownPool {
                pool: pool.to_string(),
            });
        }
    }
    let jobs = cat.set_jobs(set)?;
    if jobs.iter().any(|j| j.client.as_deref() != Some(client)) {
        return Err(OpsError::OthersSet {
            set: set.to_string(),
        });
    }
    Ok(())
}

/// The key a job into `pool` is encrypted with, as the pool's rules say
/// ([`crate::pool_key`]): none for a pool without a key, else the pool's key
/// from `keys`.
pub fn pool_key(
    at: &impl Catalogued,
    pool: Option<&str>,
    keys: &dyn KeySource,
) -> Result<Option<MasterKey>> {
    crate::pool_key(at.ops_catalog(), pool, keys)
}

/// The fingerprint of the key of pool `pool`, when it has one.
pub fn pool_fingerprint(at: &impl Catalogued, pool: &str) -> Result<Option<String>> {
    Ok(at.ops_catalog().pool_key(pool)?.map(|k| k.fingerprint))
}

/// The pool job `job` must now be copied to, as its pool's rules say
/// ([`crate::backup::copy_due`]).
pub fn copy_due(at: &impl Catalogued, job: i64) -> Result<Option<String>> {
    crate::backup::copy_due(at.ops_catalog(), job)
}

/// Records job `job` as `client`'s: the client sees and restores it.
pub fn record_for(at: &impl Catalogued, job: i64, client: &str) -> Result<()> {
    Ok(at.ops_catalog().set_job_client(job, client)?)
}

/// The job of tag `tag`, once it is recorded, recorded as `client`'s; none while
/// it is not recorded yet.
pub fn record_by_tag(at: &impl Catalogued, tag: u64, client: &str) -> Result<Option<i64>> {
    let cat = at.ops_catalog();
    let Some(j) = cat.job_by_tag(tag)? else {
        return Ok(None);
    };
    cat.set_job_client(j.id, client)?;
    Ok(Some(j.id))
}

/// The client and the name of job `id`; none when there is no such job (the
/// client is empty for a job run on the server's own machine).
pub fn owner(at: &impl Catalogued, id: i64) -> Result<Option<(String, String)>> {
    let job = at.ops_catalog().job(id)?;
    Ok(job.map(|j| (j.client.unwrap_or_default(), j.name)))
}

/// Records job `job`, asked for at `asked_ns` and begun in the catalog, as
/// failed for `why`.
pub fn fail_begun(at: &impl Catalogued, (job, asked_ns): (i64, i64), why: &str) -> Result<()> {
    let cat = at.ops_catalog();
    let ended = tapeloom_engine::clock::now()?.as_nanos();
    cat.add_error(job, b"", why)?;
    let secs = (ended - asked_ns).max(0) as f64 / 1e9;
    cat.finish_job(job, JobState::Failed, 0, 0, secs, ended)?;
    Ok(())
}

/// Records `client`'s job `doc` of tag `tag`, asked for at `asked_ns`, which
/// never reached a drive, as failed for `why`, so that its client and the admin
/// see it among the jobs; its id. A job begun already keeps what the engine
/// recorded of its end: none then.
pub fn record_failed(
    at: &impl Catalogued,
    (client, tag, asked_ns): (&str, u64, i64),
    doc: &Begin,
    why: &str,
) -> Result<Option<i64>> {
    let cat = at.ops_catalog();
    if cat.job_by_tag(tag)?.is_some() {
        return Ok(None);
    }
    let streams: Vec<Stream> = (doc.streams.iter().enumerate())
        .map(|(i, s)| Stream {
            stream: i as u16 + 1,
            name: s.name.clone(),
            source: s.source.clone().into_bytes(),
        })
        .collect();
    let id = cat.begin_job(tag, &doc.name, asked_ns, doc.block_size as u32, &streams)?;
    cat.set_job_client(id, client)?;
    cat.add_error(id, b"", why)?;
    let now = tapeloom_engine::clock::now()?.as_nanos();
    let secs = (now - asked_ns).max(0) as f64 / 1e9;
    cat.finish_job(id, JobState::Failed, 0, 0, secs, now)?;
    Ok(Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_engine::Home;
    use tapeloom_proto::backup::BeginStream;

    fn token(name: &str, admin: bool) -> Token {
        Token {
            name: name.into(),
            admin,
            created_ns: 0,
            revoked_ns: None,
        }
    }

    fn doc(name: &str) -> Begin {
        Begin {
            name: name.into(),
            set: None,
            pool: None,
            block_size: 65536,
            streams: vec![BeginStream {
                name: "s".into(),
                source: "/src".into(),
                root: "/".into(),
            }],
            level: "full".into(),
            encrypt: None,
        }
    }

    #[test]
    fn a_failed_job_is_recorded_once_for_its_client_who_alone_sees_it() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        let why = "the client went away";
        let id = record_failed(&home, ("alice", 7, 1), &doc("nightly"), why)
            .unwrap()
            .expect("recorded");
        // Recorded already: it is left as it is.
        assert_eq!(
            record_failed(&home, ("alice", 7, 1), &doc("nightly"), why).unwrap(),
            None
        );
        let j = job(&home, &token("alice", false), id)
            .unwrap()
            .expect("hers");
        assert_eq!(j.status, JobState::Failed);
        assert_eq!(streams(&home, id).unwrap().len(), 1);
        assert!(job(&home, &token("bob", false), id).unwrap().is_none());
        assert!(job(&home, &token("root", true), id).unwrap().is_some());
        assert_eq!(
            owner(&home, id).unwrap(),
            Some(("alice".into(), "nightly".into()))
        );
        assert_eq!(
            set_jobs(&home, &token("alice", false), "nightly")
                .unwrap()
                .len(),
            1
        );
        assert!(set_jobs(&home, &token("bob", false), "nightly")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_set_holding_another_clients_jobs_and_a_pool_not_there_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        record_failed(&home, ("alice", 7, 1), &doc("nightly"), "failed").unwrap();
        assert!(check_set(&home, "alice", "nightly", None).is_ok());
        assert!(check_set(&home, "bob", "other", None).is_ok());
        let e = check_set(&home, "bob", "nightly", None).unwrap_err();
        assert!(matches!(e, OpsError::OthersSet { .. }), "{e}");
        let e = check_set(&home, "bob", "other", Some("nowhere")).unwrap_err();
        assert_eq!(e.to_string(), "no pool nowhere");
    }
}

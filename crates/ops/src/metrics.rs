//! The catalog's figures a server's metrics show, read at each scrape since
//! local commands change the catalog too: jobs and volumes by state, each
//! stage's use and limit, the site's queue and servers by state (on a site's
//! catalog), and the managed folders' files and bytes by state (when the home
//! manages folders). Every state has its figure, zero or not, so that a series
//! exists before its first event.

use crate::access::Catalogued;
use crate::Result;
use std::collections::BTreeMap;
use tapeloom_catalog::{JobState, TicketState, VolumeState};

/// Counts by state, by the state's name.
pub type ByState = BTreeMap<&'static str, u64>;

/// The catalog's figures as it holds them now.
pub struct Figures {
    /// Jobs by state.
    pub jobs: ByState,
    /// Volumes by state.
    pub volumes: ByState,
    /// Each stage, in the order they were added.
    pub stages: Vec<StageFigures>,
    /// The site's figures, on a catalog servers registered in.
    pub site: Option<SiteFigures>,
    /// The managed folders' figures, when the home manages folders.
    pub hsm: Option<HsmFigures>,
}

/// A stage's bytes.
pub struct StageFigures {
    /// Its folder.
    pub path: String,
    /// The bytes its limit counts: chunks not yet on tape, and kept ones.
    pub used: u64,
    /// Its limit, in bytes.
    pub limit: u64,
}

/// The site's queue and servers.
pub struct SiteFigures {
    /// Backups of the site's queue not ended, by state (queued, claimed, begun).
    pub queue: ByState,
    /// Servers by what the catalog says of them: up, dead, stopped.
    pub servers: ByState,
}

/// The managed folders' recorded files (resident files are not recorded).
pub struct HsmFigures {
    /// Files by state (premigrated, released, dirty).
    pub files: ByState,
    /// Their bytes by state.
    pub bytes: ByState,
}

/// The S3 front end's figures: what waits for tape and for a restore, and the
/// restore cache's use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct S3Figures {
    /// Live objects not yet on tape.
    pub objects_waiting: u64,
    /// Their bytes.
    pub bytes_waiting: u64,
    /// Restores asked and not yet ended (waiting, or being read).
    pub restores: u64,
    /// Bytes of the restore cache in use: the restored copies kept and the
    /// restores asked, as the cache counts them against its limit.
    pub cache_bytes: u64,
}

/// The S3 front end's figures now.
pub fn s3_figures(at: &impl Catalogued) -> Result<S3Figures> {
    let cat = at.ops_catalog();
    let w = cat.s3_waiting()?;
    let (kept, asked) = cat.restore_cache_bytes()?;
    Ok(S3Figures {
        objects_waiting: w.objects,
        bytes_waiting: w.bytes,
        restores: w.restores,
        cache_bytes: kept.saturating_add(asked),
    })
}

/// The catalog's figures now.
pub fn figures(at: &impl Catalogued) -> Result<Figures> {
    let cat = at.ops_catalog();
    let mut jobs: ByState = [
        JobState::Running,
        JobState::Ok,
        JobState::Partial,
        JobState::Failed,
        JobState::Queued,
        JobState::Salvaged,
    ]
    .iter()
    .map(|s| (s.as_str(), 0))
    .collect();
    for j in cat.jobs()? {
        *jobs.entry(j.status.as_str()).or_default() += 1;
    }
    let mut volumes: ByState = [
        VolumeState::Append,
        VolumeState::Full,
        VolumeState::Suspect,
        VolumeState::Expired,
    ]
    .iter()
    .map(|s| (s.as_str(), 0))
    .collect();
    for v in cat.volumes()? {
        *volumes.entry(v.status.as_str()).or_default() += 1;
    }
    let usage: BTreeMap<i64, u64> = (cat.stage_use()?.into_iter())
        .map(|(id, u)| (id, u.used()))
        .collect();
    let stages = (cat.stages()?.into_iter())
        .map(|st| StageFigures {
            path: st.path.to_string_lossy().into_owned(),
            used: usage.get(&st.id).copied().unwrap_or(0),
            limit: st.size_limit,
        })
        .collect();
    Ok(Figures {
        jobs,
        volumes,
        stages,
        site: site_figures(at)?,
        hsm: hsm_figures(at)?,
    })
}

fn site_figures(at: &impl Catalogued) -> Result<Option<SiteFigures>> {
    let cat = at.ops_catalog();
    let registered = cat.servers()?;
    if registered.is_empty() {
        return Ok(None);
    }
    let mut queue: ByState = [
        TicketState::Queued,
        TicketState::Claimed,
        TicketState::Begun,
    ]
    .iter()
    .map(|s| (s.name(), 0))
    .collect();
    for (s, n) in cat.queue_counts()? {
        queue.insert(s.name(), n);
    }
    let mut servers: ByState = ["up", "dead", "stopped"].map(|s| (s, 0)).into();
    for s in &registered {
        let state = match s.state.as_str() {
            "up" => "up",
            "dead" => "dead",
            _ => "stopped",
        };
        *servers.entry(state).or_default() += 1;
    }
    Ok(Some(SiteFigures { queue, servers }))
}

fn hsm_figures(at: &impl Catalogued) -> Result<Option<HsmFigures>> {
    let cat = at.ops_catalog();
    if cat.hsm_roots()?.is_empty() {
        return Ok(None);
    }
    let states = ["premigrated", "released", "dirty"];
    let mut files: ByState = states.map(|s| (s, 0)).into();
    let mut bytes: ByState = states.map(|s| (s, 0)).into();
    for f in cat.hsm_files(b"")? {
        if let Some(state) = states.iter().find(|s| **s == f.state) {
            *files.entry(state).or_default() += 1;
            *bytes.entry(state).or_default() += f.size;
        }
    }
    Ok(Some(HsmFigures { files, bytes }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapeloom_engine::Home;

    #[test]
    fn every_state_has_a_figure_and_a_site_or_managed_folders_only_when_there() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::open(d.path()).unwrap();
        home.catalog
            .add_stage(&d.path().join("st"), 1 << 20, 0)
            .unwrap();
        let f = figures(&home).unwrap();
        assert_eq!(f.jobs.get("failed"), Some(&0));
        assert_eq!(f.jobs.len(), 6);
        assert_eq!(f.volumes.get("expired"), Some(&0));
        assert_eq!(f.stages.len(), 1);
        assert_eq!((f.stages[0].used, f.stages[0].limit), (0, 1 << 20));
        assert!(f.site.is_none() && f.hsm.is_none());
        home.catalog
            .register_server("a", "https://a:1", "f", "{}")
            .unwrap();
        let site = figures(&home).unwrap().site.expect("a site now");
        assert_eq!(site.servers.get("up"), Some(&1));
        assert_eq!(site.queue.get("queued"), Some(&0));
    }
}

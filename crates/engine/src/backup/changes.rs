//! The level and base a job runs with, and the base's tree read from the
//! catalog: what an incremental or differential compares its sources with
//! (`tapeloom_tree::pack::scan` compares them).

use crate::error::{Error, Result};
use crate::home::Home;
use std::collections::HashMap;
use tapeloom_catalog::{Catalog, FileFacts, Job};
use tapeloom_format::Level;
use tapeloom_tree::pack::scan::{BaseRange, Prev};
pub use tapeloom_tree::pack::scan::{Scan, ScanFigures};
pub use tapeloom_tree::{BaseRow, BaseTree};

/// The set, level and base a job runs with.
#[derive(Debug, Clone)]
pub struct SetChoice {
    /// The set.
    pub set: String,
    /// The level it runs at.
    pub level: Level,
    /// The job its changes are relative to (none for a full).
    pub base: Option<Job>,
    /// Why it runs at a level other than the one asked for.
    pub promoted: Option<String>,
}

/// Chooses the level and base of a job of set `set` that asked for `asked`, and
/// reads the base's tree: an incremental is relative to the set's last job that
/// ended, a differential to its last full; without one, or when the base's chain
/// is no longer whole in the catalog, the job is a full and says why.
pub(crate) fn choose(home: &Home, set: &str, asked: Level) -> Result<(SetChoice, Scan)> {
    choose_in(&home.catalog, &|| home.connect(), set, asked)
}

/// [`choose`] with the catalog `cat`, `connect` making another connection to it.
fn choose_in(
    cat: &Catalog,
    connect: &dyn Fn() -> Result<Catalog>,
    set: &str,
    asked: Level,
) -> Result<(SetChoice, Scan)> {
    let full = |why: String| SetChoice {
        set: set.to_string(),
        level: Level::Full,
        base: None,
        promoted: Some(why),
    };
    if asked == Level::Full {
        let c = SetChoice {
            promoted: None,
            ..full(String::new())
        };
        return Ok((c, Scan::default()));
    }
    let base = cat.last_in_set(set, asked == Level::Differential)?;
    let Some(base) = base else {
        let why = format!(
            "set {set} has no full backup that ended, so this {} runs as a full",
            asked.name()
        );
        return Ok((full(why), Scan::default()));
    };
    match against_in(cat, connect, base.id) {
        Ok(scan) => {
            let c = SetChoice {
                set: set.to_string(),
                level: asked,
                base: Some(base),
                promoted: None,
            };
            Ok((c, scan))
        }
        Err(crate::error::Error::Catalog(tapeloom_catalog::CatalogError::BrokenChain {
            job,
            base: gone,
        })) => {
            let why = format!(
                "set {set}'s job {job} is relative to job {gone}, which is no longer in the catalog, so this {} runs as a full",
                asked.name()
            );
            Ok((full(why), Scan::default()))
        }
        Err(e) => Err(e),
    }
}

/// The base's paths in `range`: the chain `ids` merged in order, each job's
/// deletions taken away before its rows are laid on.
fn shard(
    cat: &Catalog,
    ids: &[i64],
    range: (Option<&[u8]>, Option<&[u8]>),
    rows: u64,
) -> Result<BaseRange> {
    let mut map = HashMap::with_capacity(usize::try_from(rows).unwrap_or(0).min(1 << 26));
    let within = |p: &[u8]| range.0.is_none_or(|f| p >= f) && range.1.is_none_or(|t| p < t);
    for &id in ids {
        for (p, _) in cat.deletions(id)? {
            if within(&p) {
                map.remove(&p);
            }
        }
        cat.for_each_facts(id, range, |path, facts| {
            map.insert(path, prev(facts));
        })?;
    }
    Ok(map)
}

/// What comparing with a base needs of a catalog's file facts.
fn prev(f: FileFacts) -> Prev {
    Prev {
        kind: f.kind,
        size: f.size,
        mtime_ns: f.mtime_ns,
        ctime_ns: f.ctime_ns,
        ino: f.ino,
        mode: f.mode,
        uid: f.uid,
        gid: f.gid,
        link: f.link,
    }
}

/// Rows of a base below this many are read by one thread; above, by two, each a
/// half of the paths.
const SPLIT_ROWS: u64 = 20_000;

/// Chooses the level and base of a job of set `set` that asked for `level`, in the
/// catalog of home `dir` (read without the home's lock), and reads the base's tree
/// (empty for a full): see [`choose`].
pub fn choose_set(dir: &std::path::Path, set: &str, level: Level) -> Result<(SetChoice, BaseTree)> {
    let cat = Home::open_catalog_unlocked(dir)?;
    let (choice, scan) = choose_in(&cat, &|| Home::open_catalog_unlocked(dir), set, level)?;
    Ok((choice, scan.tree()))
}

/// A scan that compares with the set's tree at job `base`: its chain's rows
/// laid on in order, each job's deletions taken away first (as
/// `Catalog::tree_at` merges them, keeping only what comparing needs). A large
/// base is read by two threads at once, each half of the paths on a
/// connection of its own.
fn against_in(cat: &Catalog, connect: &dyn Fn() -> Result<Catalog>, base: i64) -> Result<Scan> {
    let chain = cat.chain(base)?;
    let ids: Vec<i64> = chain.iter().map(|j| j.id).collect();
    let rows: u64 = chain.iter().map(|j| j.files).sum();
    let biggest = chain.iter().max_by_key(|j| j.files).map_or(base, |j| j.id);
    let mid = match rows >= SPLIT_ROWS {
        true => cat.nth_path(
            biggest,
            chain.iter().map(|j| j.files).max().unwrap_or(0) / 2,
        )?,
        false => None,
    };
    let Some(mid) = mid else {
        let all = shard(cat, &ids, (None, None), rows)?;
        return Ok(Scan::from_ranges(vec![(None, all)]));
    };
    let other = connect()?;
    let (lo, hi) = std::thread::scope(|s| {
        let (ids, mid) = (&ids, &mid);
        let hi = s.spawn(move || shard(&other, ids, (Some(mid), None), rows / 2));
        let lo = shard(cat, ids, (None, Some(mid)), rows / 2);
        let hi = hi.join().unwrap_or(Err(Error::Panicked {
            what: "a reader of the base",
        }));
        (lo, hi)
    });
    Ok(Scan::from_ranges(vec![(None, lo?), (Some(mid), hi?)]))
}

//! Restores of archived objects, as S3's RestoreObject asks them: recorded in
//! the catalog at once (so a restart loses none), gathered per tier
//! ([`due`]), read from tape by the server in readings that run at once on
//! free drives, gathered per cartridge ([`readings`]), each cartridge in the
//! order its drive's model says is fastest, and kept in the restore cache until
//! an expiry ([`finished`]).
//!
//! The state of an object's restore is S3's ([`state`]): none, ongoing, or
//! restored until an expiry, which is the end of the restore plus the days
//! asked, rounded up to the next midnight UTC ([`expiry`]), as AWS sets it. A
//! restore asked again while a restored copy is kept sets that expiry again
//! from now.
//!
//! The restore cache has a size limit. Once it would be passed, the restored
//! copies that have expired go first, the least recently used first; a cache
//! full of copies that have not expired refuses new restores (S3's 503
//! SlowDown) rather than evict one.

use super::{now_ns, objects, Refused, Result, S3Object, Store};
use crate::access::Catalogued;
use std::time::Duration;
use tapeloom_catalog::RestoreEnd;

const DAY_NS: i64 = 86_400 * 1_000_000_000;

/// How urgently a restore is wanted: how long it may wait to be read with
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Read on the next free drive.
    Expedited,
    /// Gathered for a short window.
    Standard,
    /// Gathered for a long window, for the largest batch.
    Bulk,
}

impl Tier {
    /// The tier S3 names `name` (Standard when none is named).
    pub fn named(name: Option<&str>) -> std::result::Result<Tier, Refused> {
        match name.unwrap_or("Standard") {
            "Expedited" => Ok(Tier::Expedited),
            "Standard" => Ok(Tier::Standard),
            "Bulk" => Ok(Tier::Bulk),
            other => Err(Refused::BadTier {
                tier: tapeloom_engine::escape_controls(other).into_owned(),
            }),
        }
    }

    /// S3's name of it.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Expedited => "Expedited",
            Tier::Standard => "Standard",
            Tier::Bulk => "Bulk",
        }
    }
}

/// In what order a batch of restores is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// One reading of the whole batch, each cartridge mounted once and its
    /// objects read in the order the drive's model says is fastest (else the
    /// drive's own recommended order, else block order).
    #[default]
    Planned,
    /// One reading of the whole batch, each cartridge's objects in block order.
    Block,
    /// One object after another in the order they were asked, each read on its
    /// own: how a server that serves each request alone would go, kept for
    /// comparison.
    Asked,
}

impl Order {
    /// The order named `name` (`planned`, `block` or `asked`).
    pub fn named(name: &str) -> Option<Order> {
        match name {
            "planned" => Some(Order::Planned),
            "block" => Some(Order::Block),
            "asked" => Some(Order::Asked),
            _ => None,
        }
    }
}

/// How long restores of each tier gather before they are read, how large the
/// restore cache may grow, and in what order restores are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Standard's window.
    pub standard: Duration,
    /// Bulk's window.
    pub bulk: Duration,
    /// The restore cache's limit in bytes.
    pub cache_bytes: u64,
    /// The order a batch is read in.
    pub order: Order,
}

impl Default for Settings {
    /// A minute for Standard and ten for Bulk: long enough that a client's
    /// burst of requests (rclone, `s3cmd restore --recursive`) is one batch,
    /// short against the hours AWS's Glacier takes. A cache of 64 GiB.
    fn default() -> Settings {
        Settings {
            standard: Duration::from_secs(60),
            bulk: Duration::from_secs(600),
            cache_bytes: 64 << 30,
            order: Order::Planned,
        }
    }
}

impl Settings {
    fn window(&self, tier: Tier) -> Duration {
        match tier {
            Tier::Expedited => Duration::ZERO,
            Tier::Standard => self.standard,
            Tier::Bulk => self.bulk,
        }
    }
}

/// An object's restore as S3 shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No restore runs and no restored copy is kept.
    None,
    /// A restore runs.
    Ongoing,
    /// A restored copy is kept until this time (nanoseconds since the epoch).
    Restored(i64),
}

/// Whether an object of class `class` is on tape only once archived, and so
/// must be restored before it is read.
pub fn archived_class(class: &str) -> bool {
    class != "STANDARD"
}

/// The state of object `o`'s restore at `now_ns`.
pub fn state(o: &S3Object, now_ns: i64) -> State {
    if o.restore.asked_ns.is_some() {
        return State::Ongoing;
    }
    match (&o.restore.file, o.restore.until_ns) {
        (Some(_), Some(until)) if until > now_ns => State::Restored(until),
        _ => State::None,
    }
}

/// The state of object `o`'s restore now.
pub fn state_now(o: &S3Object) -> Result<State> {
    Ok(state(o, now_ns()?))
}

/// The data file object `o` is read from now: its own for a STANDARD object,
/// its restored copy for an archived one that is restored; none when it must
/// be restored first. [`Refused::Elsewhere`] when that file is on another
/// server's disk (a site's), which serves it.
pub fn readable(at: &impl Catalogued, o: &S3Object) -> Result<Option<String>> {
    let elsewhere = || -> Result<()> {
        if o.host != at.ops_catalog().host() {
            let server = o.host.clone();
            return Err(Refused::Elsewhere { server }.into());
        }
        Ok(())
    };
    if !archived_class(&o.class) {
        elsewhere()?;
        return Ok(Some(o.file.clone()));
    }
    let now = now_ns()?;
    match (state(o, now), &o.restore.file) {
        (State::Restored(_), Some(file)) => {
            elsewhere()?;
            at.ops_catalog().restored_used(o.id, now)?;
            Ok(Some(file.clone()))
        }
        _ => Ok(None),
    }
}

/// When a restored copy kept for `days` days from `from_ns` expires: `days`
/// days later, rounded up to the next midnight UTC.
pub fn expiry(from_ns: i64, days: i64) -> i64 {
    let t = from_ns.saturating_add(days.saturating_mul(DAY_NS));
    t.div_euclid(DAY_NS)
        .saturating_add(1)
        .saturating_mul(DAY_NS)
}

/// What a RestoreObject did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// A restore started (S3's 202 Accepted).
    Started,
    /// One runs already (S3's 409 RestoreAlreadyInProgress).
    Running,
    /// The object is restored: its copy is now kept until this time (S3's 200).
    Kept(i64),
}

/// Asks a restore of the object of `bucket` and `key` for `days` days in
/// `tier`. A STANDARD object is refused (S3's InvalidObjectState), and so is a
/// restore the cache has no room for (S3's SlowDown).
pub fn ask(
    at: &impl Catalogued,
    store: &Store,
    (bucket, key): (&str, &[u8]),
    (days, tier): (i64, Tier),
    settings: &Settings,
) -> Result<Asked> {
    if !(1..=36_500).contains(&days) {
        return Err(Refused::BadDays { days }.into());
    }
    let o = objects::get(at, bucket, key)?;
    if !archived_class(&o.class) {
        return Err(Refused::NotArchived { class: o.class }.into());
    }
    let cat = at.ops_catalog();
    let now = now_ns()?;
    match state(&o, now) {
        State::Ongoing => return Ok(Asked::Running),
        State::Restored(_) => {
            let until = expiry(now, days);
            if cat.keep_restored(o.id, days, until)? {
                return Ok(Asked::Kept(until));
            }
        }
        State::None => {}
    }
    make_room(at, store, o.size, settings.cache_bytes)?;
    match cat.ask_restore(o.id, days, tier.name(), now)? {
        true => Ok(Asked::Started),
        false => Ok(Asked::Running),
    }
}

/// Makes room for `need` more bytes in the restore cache, evicting expired
/// copies the least recently used first; [`Refused::SlowDown`] when the copies
/// that have not expired and the restores that run leave no room.
fn make_room(at: &impl Catalogued, store: &Store, need: u64, limit: u64) -> Result<()> {
    let cat = at.ops_catalog();
    let (kept, asked) = cat.restore_cache_bytes()?;
    let mut used = kept + asked;
    if used.saturating_add(need) <= limit {
        return Ok(());
    }
    let now = now_ns()?;
    for o in cat.restored_copies()? {
        if used.saturating_add(need) <= limit {
            break;
        }
        let expired = o.restore.until_ns.is_none_or(|u| u <= now);
        if !expired || o.restore.asked_ns.is_some() {
            continue;
        }
        if let Some(file) = &o.restore.file {
            if cat.drop_restored(o.id, file)? {
                store.remove(file)?;
                used = used.saturating_sub(o.size);
            }
        }
    }
    if used.saturating_add(need) <= limit {
        return Ok(());
    }
    Err(Refused::SlowDown { used, limit }.into())
}

/// The restores to read now: every restore asked and not `reading` already,
/// once one of them has waited its tier's window (so that a batch gathers
/// every request there is); none while none has.
pub fn due(
    at: &impl Catalogued,
    settings: &Settings,
    reading: impl Fn(&S3Object) -> bool,
) -> Result<Vec<S3Object>> {
    let mut asked = at.ops_catalog().restores_asked()?;
    asked.retain(|o| !reading(o));
    let now = now_ns()?;
    let ripe = asked.iter().any(|o| {
        let tier = Tier::named(o.restore.tier.as_deref()).unwrap_or(Tier::Standard);
        let waited = now.saturating_sub(o.restore.asked_ns.unwrap_or(now));
        waited >= settings.window(tier).as_nanos().min(i64::MAX as u128) as i64
    });
    Ok(if ripe { asked } else { Vec::new() })
}

/// Ends the restore of `o` with its data, read back to the file at `path` (on
/// the file system of the S3 stage): checked against the object's size, then
/// kept in the restore cache until its expiry. False when the object is gone
/// or the data is not whole (its restore is given up, so it may be asked
/// again).
pub fn finished(
    at: &impl Catalogued,
    store: &Store,
    o: &S3Object,
    path: &std::path::Path,
) -> Result<bool> {
    let size = std::fs::metadata(path).map(|m| m.len()).ok();
    if size != Some(o.size) {
        at.ops_catalog().fail_restore(o.id)?;
        return Ok(false);
    }
    let name = store.adopt(path)?;
    keep(at, store, o, name)
}

/// Ends the restore of `o`, whose data file is still on disk (it was not
/// released yet): its restored copy is a second name of that file.
pub fn from_disk(at: &impl Catalogued, store: &Store, o: &S3Object) -> Result<bool> {
    let name = store.link(&o.file)?;
    keep(at, store, o, name)
}

fn keep(at: &impl Catalogued, store: &Store, o: &S3Object, name: String) -> Result<bool> {
    let now = now_ns()?;
    let until = expiry(now, o.restore.days.unwrap_or(1));
    match at.ops_catalog().end_restore(o.id, &name, until, now)? {
        RestoreEnd::Kept { replaced } => {
            if let Some(old) = replaced {
                store.remove(&old)?;
            }
            Ok(true)
        }
        RestoreEnd::Gone => {
            store.remove(&name)?;
            Ok(false)
        }
    }
}

/// The cartridges (barcodes) that hold job `job`, in the job's order.
pub fn cartridges(at: &impl Catalogued, job: i64) -> Result<Vec<String>> {
    let vols = at.ops_catalog().job_volumes(job)?;
    Ok(vols.into_iter().map(|v| v.volume.barcode).collect())
}

/// An archived object to read from tape, and where it lies there.
#[derive(Debug, Clone)]
pub struct OnTape {
    /// The object.
    pub object: S3Object,
    /// The path of its entry in its job (`S3Object::job_id`).
    pub path: Vec<u8>,
    /// The cartridges (barcodes) its data lies on, from its first block to its
    /// last.
    pub cartridges: Vec<String>,
}

/// Where archived object `o` lies on tape; none when it has no job or its job
/// has no entry of it.
pub fn on_tape(at: &impl Catalogued, o: S3Object) -> Result<Option<OnTape>> {
    let Some(job) = o.job_id else {
        return Ok(None);
    };
    let Some((path, row)) = super::tape::entry(at, job, &o.file)? else {
        return Ok(None);
    };
    let vols = at.ops_catalog().job_volumes(job)?;
    let cartridges = (vols.into_iter())
        .filter(|v| (row.start_seq..=row.end_seq).contains(&v.seq))
        .map(|v| v.volume.barcode)
        .collect();
    Ok(Some(OnTape {
        object: o,
        path,
        cartridges,
    }))
}

/// The objects of `asked` dealt to at most `drives` readings that may run at
/// once, each on a drive of its own: objects that share a cartridge go to one
/// reading (so that no two readings want one cartridge), and the groups so
/// made go, the largest first, to the reading with the fewest bytes. A
/// reading's objects keep the order they were asked in.
pub fn readings(asked: Vec<OnTape>, drives: usize) -> Vec<Vec<OnTape>> {
    // Each object starts in a group of its own; groups that share a cartridge
    // are joined.
    let mut group: Vec<usize> = (0..asked.len()).collect();
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    let mut first_on: std::collections::HashMap<&str, usize> = Default::default();
    for (i, o) in asked.iter().enumerate() {
        for c in &o.cartridges {
            match first_on.get(c.as_str()) {
                Some(&j) => {
                    let (a, b) = (root(&mut group, i), root(&mut group, j));
                    group[a.max(b)] = a.min(b);
                }
                None => {
                    first_on.insert(c, i);
                }
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, (u64, Vec<usize>)> = Default::default();
    for (i, o) in asked.iter().enumerate() {
        let r = root(&mut group, i);
        let g = groups.entry(r).or_default();
        g.0 += o.object.size;
        g.1.push(i);
    }
    let mut groups: Vec<(u64, Vec<usize>)> = groups.into_values().collect();
    groups.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let n = drives.max(1).min(groups.len());
    let mut out: Vec<(u64, Vec<usize>)> = vec![(0, Vec::new()); n];
    for (bytes, members) in groups {
        if let Some(least) = out.iter_mut().min_by_key(|r| r.0) {
            least.0 += bytes;
            least.1.extend(members);
        }
    }
    let mut slots: Vec<Option<OnTape>> = asked.into_iter().map(Some).collect();
    (out.into_iter())
        .map(|(_, mut members)| {
            members.sort_unstable();
            members.iter().filter_map(|&i| slots[i].take()).collect()
        })
        .collect()
}

/// Gives up the restore of `o` (its data could not be read): it may be asked
/// again.
pub fn failed(at: &impl Catalogued, o: &S3Object) -> Result<()> {
    Ok(at.ops_catalog().fail_restore(o.id)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_copy_expires_at_the_midnight_after_its_days() {
        // 2026-11-29 10:30:00 UTC.
        let t = 1_795_948_200 * 1_000_000_000;
        // One day later is 2026-11-30 10:30; rounded up to 2026-12-01 00:00.
        assert_eq!(expiry(t, 1), 1_796_083_200 * 1_000_000_000);
        // From midnight exactly, the next midnight after the day.
        let midnight = 1_795_910_400 * 1_000_000_000;
        assert_eq!(expiry(midnight, 1), midnight + 2 * DAY_NS);
    }

    fn placed(id: i64, size: u64, cartridges: &[&str]) -> OnTape {
        OnTape {
            object: S3Object {
                id,
                size,
                ..S3Object::default()
            },
            path: Vec::new(),
            cartridges: cartridges.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn readings_keep_a_cartridge_in_one_and_share_the_bytes() {
        let ids = |rs: &[Vec<OnTape>]| -> Vec<Vec<i64>> {
            rs.iter()
                .map(|r| r.iter().map(|o| o.object.id).collect())
                .collect()
        };
        // A on A1 and A2 (one object spans both), B on B1, C on C1.
        let asked = || {
            vec![
                placed(1, 10, &["A1"]),
                placed(2, 10, &["B1"]),
                placed(3, 10, &["A1", "A2"]),
                placed(4, 10, &["A2"]),
                placed(5, 15, &["C1"]),
            ]
        };
        // One drive: one reading of everything, in the order asked.
        assert_eq!(ids(&readings(asked(), 1)), vec![vec![1, 2, 3, 4, 5]]);
        // Two drives: A's 30 bytes on one, B's and C's 25 on the other.
        assert_eq!(ids(&readings(asked(), 2)), vec![vec![1, 3, 4], vec![2, 5]]);
        // More drives than cartridge groups: one reading per group.
        assert_eq!(
            ids(&readings(asked(), 8)),
            vec![vec![1, 3, 4], vec![5], vec![2]]
        );
        assert!(readings(Vec::new(), 2).is_empty());
    }

    #[test]
    fn a_restore_is_ongoing_then_restored_until_its_expiry() {
        let mut o = S3Object {
            class: "GLACIER".into(),
            ..S3Object::default()
        };
        assert_eq!(state(&o, 5), State::None);
        o.restore.asked_ns = Some(1);
        assert_eq!(state(&o, 5), State::Ongoing);
        o.restore.asked_ns = None;
        o.restore.file = Some("f".into());
        o.restore.until_ns = Some(10);
        assert_eq!(state(&o, 5), State::Restored(10));
        assert_eq!(state(&o, 10), State::None);
    }
}

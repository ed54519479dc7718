//! The order in which a restore reads what it wants of one cartridge.
//!
//! On serpentine tape the block order is not the fastest order: two blocks far
//! apart in the block order may lie side by side on neighbouring wraps, and
//! blocks close in the block order may lie a tape length apart once the tape
//! turns. Once a cartridge is mounted, the drive's timing model says what every
//! move costs (a locate, or reading through when the target lies ahead), so the
//! reads are planned as CERN CTA's Recommended Access Order plans them for LTO:
//! shortest locate time first (SLTF), a greedy walk that always goes next to the
//! piece it reaches soonest from where the head stands. The block order is kept
//! when the model says it is no slower (dense reads, where reading through wins).
//! The greedy walk is then improved by Or-opt, the local search of the
//! travelling-salesman literature that suits tape's one-way costs: a run of one
//! to three units is moved to another place in the order whenever that shortens
//! the reading, until no such move is left or the time given to planning ends
//! ([`IMPROVE_FOR`]). The greedy walk leaves the units it passed over early to
//! be fetched from far away at the end; moving each back beside its neighbours
//! on the tape is most of what a better order gains.
//! A drive without a timing model may give its own order (a SCSI drive's
//! Recommended Access Order, [`follow`]); without either, the block order is kept.
//!
//! What is ordered are *units*: pieces a restore must read whole and in block
//! order, because decoding carries on from one run of blocks to the next (an
//! entry that spans two runs). Among the units of one job, the one that carries
//! on what the job's previous cartridge began must come first, and the one the
//! job's next cartridge carries on must come last.

use tapeloom_device::Travel;

/// More free units than this on one cartridge are read in block order: the
/// greedy walk looks at every unit left at each step.
pub(crate) const MAX_PLANNED: usize = 4096;

/// How long the order of one cartridge is improved after the greedy walk, at
/// most.
const IMPROVE_FOR: std::time::Duration = std::time::Duration::from_millis(150);

/// The most places before and after its own a run of units is tried at, in
/// one step of the improvement: enough for every place of a small reading,
/// and bounded so that a large one still improves within [`IMPROVE_FOR`].
const IMPROVE_WINDOW: usize = 200;

/// The longest run of units moved in one step of the improvement.
const MAX_RUN: usize = 8;

/// A piece of one cartridge's reading, read whole in block order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unit {
    /// The job it belongs to.
    pub job: i64,
    /// Its first block.
    pub first: u64,
    /// The block after its last one: where the head stands once it is read.
    pub end: u64,
    /// Modeled seconds of reading it, from its first block to its end.
    pub cost: f64,
    /// It carries on what the job read on its previous cartridge: it comes
    /// before the job's other units here.
    pub carried: bool,
    /// The job's next cartridge carries it on: it comes after the job's other
    /// units here.
    pub carries: bool,
}

/// The order planned for one cartridge.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    /// The units' indices, in reading order.
    pub order: Vec<usize>,
    /// Modeled seconds of the reading in that order, moves included.
    pub seconds: f64,
    /// Whether the order differs from the block order.
    pub reordered: bool,
}

/// Modeled seconds to get from block `a` to block `b`: a locate, or reading
/// through when `b` lies ahead and that is cheaper.
fn hop(travel: &dyn Fn(u64, u64) -> Option<Travel>, a: u64, b: u64) -> Option<f64> {
    if a == b {
        return Some(0.0);
    }
    let t = travel(a, b)?;
    Some(match b > a {
        true => t.locate.min(t.read),
        false => t.locate,
    })
}

/// Modeled seconds of reading `units` in `order` from block `at`.
fn cost_of(
    at: u64,
    units: &[Unit],
    order: &[usize],
    travel: &dyn Fn(u64, u64) -> Option<Travel>,
) -> Option<f64> {
    let mut pos = at;
    let mut total = 0.0;
    for &i in order {
        let u = &units[i];
        total += hop(travel, pos, u.first)? + u.cost;
        pos = u.end;
    }
    Some(total)
}

/// Plans the reading of `units` (given in block order) from block `at`: the
/// shortest-locate-time-first walk, or the block order when the model says that
/// is no slower. `None` when the drive has no timing model.
pub(crate) fn plan(
    at: u64,
    units: &[Unit],
    travel: &dyn Fn(u64, u64) -> Option<Travel>,
) -> Option<Planned> {
    let block: Vec<usize> = (0..units.len()).collect();
    let block_cost = cost_of(at, units, &block, travel)?;
    let kept = Planned {
        order: block.clone(),
        seconds: block_cost,
        reordered: false,
    };
    if units.len() < 2 || units.len() > MAX_PLANNED {
        return Some(kept);
    }
    let mut walk = sltf(at, units, travel)?;
    improve(at, units, &mut walk, travel, Search::PLANNER)?;
    let walk_cost = cost_of(at, units, &walk, travel)?;
    Some(match walk_cost < block_cost && walk != block {
        true => Planned {
            order: walk,
            seconds: walk_cost,
            reordered: true,
        },
        false => kept,
    })
}

/// The greedy walk: from where the head stands, always the unit reached soonest
/// among those its job's order allows next.
fn sltf(
    at: u64,
    units: &[Unit],
    travel: &dyn Fn(u64, u64) -> Option<Travel>,
) -> Option<Vec<usize>> {
    walk(at, units, |pos, i| hop(travel, pos, units[i].first))
}

/// Whether `order` keeps each job's rules: its carried unit before its others,
/// its carrying one after them.
fn keeps_rules(units: &[Unit], order: &[usize]) -> bool {
    use std::collections::HashMap;
    let mut seen: HashMap<i64, (usize, bool)> = HashMap::new();
    let mut total: HashMap<i64, usize> = HashMap::new();
    for u in units {
        *total.entry(u.job).or_default() += 1;
    }
    for &i in order {
        let u = &units[i];
        let (n, carried_read) = seen.entry(u.job).or_default();
        let has_carried = units.iter().any(|v| v.job == u.job && v.carried);
        if (has_carried && !*carried_read && !u.carried)
            || (u.carries && *n + 1 != total.get(&u.job).copied().unwrap_or(0))
        {
            return false;
        }
        *n += 1;
        *carried_read |= u.carried;
    }
    true
}

/// How far the Or-opt search looks: the places tried before and after a run,
/// the longest run moved, and how long it may take.
#[derive(Debug, Clone, Copy)]
struct Search {
    window: usize,
    max_run: usize,
    time: std::time::Duration,
}

impl Search {
    /// The planner's: bounded so that it ends within [`IMPROVE_FOR`].
    const PLANNER: Search = Search {
        window: IMPROVE_WINDOW,
        max_run: MAX_RUN,
        time: IMPROVE_FOR,
    };
}

/// Improves `order` (of `units`, read from block `at`) by Or-opt: a run of one
/// to `search.max_run` units moved to another place when the reading gets
/// shorter, the runs and places tried in turn until no move helps or
/// `search.time` has passed. The job rules hold after every move.
fn improve(
    at: u64,
    units: &[Unit],
    order: &mut Vec<usize>,
    travel: &dyn Fn(u64, u64) -> Option<Travel>,
    search: Search,
) -> Option<()> {
    let Search {
        window,
        max_run,
        time,
    } = search;
    let started = std::time::Instant::now();
    let ruled = units.iter().any(|u| u.carried || u.carries);
    let n = order.len();
    let edge = |from: u64, to: Option<usize>| -> Option<f64> {
        match to {
            Some(u) => hop(travel, from, units[u].first),
            None => Some(0.0),
        }
    };
    let mut better = true;
    while better && started.elapsed() < time {
        better = false;
        for len in 1..=max_run.min(n.saturating_sub(1)) {
            let mut i = 0;
            while i + len <= n {
                if started.elapsed() >= time {
                    return Some(());
                }
                let end_of = |k: usize| -> u64 {
                    match k {
                        0 => at,
                        k => units[order[k - 1]].end,
                    }
                };
                let (first, last_end) = (order[i], units[order[i + len - 1]].end);
                let next = order.get(i + len).copied();
                let p = end_of(i);
                let out_gain =
                    hop(travel, p, units[first].first)? + edge(last_end, next)? - edge(p, next)?;
                let lo = i.saturating_sub(window);
                let hi = (i + len + window).min(n);
                let mut best: Option<(f64, usize)> = None;
                for j in (lo..i).chain(i + len + 1..=hi) {
                    let from = end_of(j);
                    let target = order.get(j).copied();
                    let cost = hop(travel, from, units[first].first)? + edge(last_end, target)?
                        - edge(from, target)?;
                    let delta = cost - out_gain;
                    if delta < -1e-9 && best.is_none_or(|(d, _)| delta < d) {
                        best = Some((delta, j));
                    }
                }
                if let Some((_, j)) = best {
                    let run: Vec<usize> = order[i..i + len].to_vec();
                    let mut moved: Vec<usize> = Vec::with_capacity(n);
                    for (k, &u) in order.iter().enumerate() {
                        if k == j {
                            moved.extend_from_slice(&run);
                        }
                        if !(i..i + len).contains(&k) {
                            moved.push(u);
                        }
                    }
                    if j == n {
                        moved.extend_from_slice(&run);
                    }
                    if !ruled || keeps_rules(units, &moved) {
                        *order = moved;
                        better = true;
                        continue;
                    }
                }
                i += 1;
            }
        }
    }
    Some(())
}

/// How the planner's order of one cartridge's reading compares with the
/// block order, the greedy walk alone, and the best order an offline search
/// finds (Or-opt over every place and runs of up to 16, from the planner's
/// order, for as long as it is given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OrderStudy {
    /// Pieces read.
    pub pieces: usize,
    /// Modeled seconds in block order.
    pub block_seconds: f64,
    /// Modeled seconds in the greedy walk's order (SLTF).
    pub sltf_seconds: f64,
    /// Modeled seconds in the planner's order.
    pub planned_seconds: f64,
    /// Wall-clock seconds the planner took.
    pub planning_seconds: f64,
    /// Modeled seconds in the best order the offline search found.
    pub offline_seconds: f64,
    /// Wall-clock seconds the offline search took.
    pub search_seconds: f64,
    /// Whether the offline search ended because no move helped (else its
    /// time ran out).
    pub converged: bool,
}

impl OrderStudy {
    /// Adds the study of another cartridge's reading to this one: seconds
    /// and pieces summed, converged when both did.
    pub fn add(&mut self, o: &OrderStudy) {
        self.pieces += o.pieces;
        self.block_seconds += o.block_seconds;
        self.sltf_seconds += o.sltf_seconds;
        self.planned_seconds += o.planned_seconds;
        self.planning_seconds += o.planning_seconds;
        self.offline_seconds += o.offline_seconds;
        self.search_seconds += o.search_seconds;
        self.converged &= o.converged;
    }
}

/// Studies the reading of `pieces` (each its first block, the block after its
/// last, and the modeled seconds of reading it; in block order, of one job)
/// from block `at`, with the drive's model `travel`; the offline search runs
/// for at most `search_for`. `None` when the model gives no time.
pub fn study_order(
    at: u64,
    pieces: &[(u64, u64, f64)],
    travel: &dyn Fn(u64, u64) -> Option<Travel>,
    search_for: std::time::Duration,
) -> Option<OrderStudy> {
    let units: Vec<Unit> = (pieces.iter())
        .map(|&(first, end, cost)| Unit {
            job: 1,
            first,
            end,
            cost,
            carried: false,
            carries: false,
        })
        .collect();
    let block: Vec<usize> = (0..units.len()).collect();
    let greedy = sltf(at, &units, travel)?;
    let t = std::time::Instant::now();
    let planned = plan(at, &units, travel)?;
    let planning_seconds = t.elapsed().as_secs_f64();
    let mut best = planned.order.clone();
    let t = std::time::Instant::now();
    let offline = Search {
        window: units.len(),
        max_run: 16,
        time: search_for,
    };
    improve(at, &units, &mut best, travel, offline)?;
    let search_seconds = t.elapsed().as_secs_f64();
    Some(OrderStudy {
        pieces: units.len(),
        block_seconds: cost_of(at, &units, &block, travel)?,
        sltf_seconds: cost_of(at, &units, &greedy, travel)?,
        planned_seconds: planned.seconds,
        planning_seconds,
        offline_seconds: cost_of(at, &units, &best, travel)?,
        search_seconds,
        converged: search_seconds < search_for.as_secs_f64(),
    })
}

/// The drive's own order of `units` (`drive`: their indices as the drive sent
/// them, each once), kept but for each job's rules: the unit that carries on
/// from the job's previous cartridge is moved first among the job's units, and
/// the one its next cartridge carries on last. `None` when `drive` does not
/// name each unit once.
pub(crate) fn follow(units: &[Unit], drive: &[usize]) -> Option<Vec<usize>> {
    let mut rank = vec![usize::MAX; units.len()];
    for (r, &i) in drive.iter().enumerate() {
        match rank.get_mut(i) {
            Some(slot) if *slot == usize::MAX => *slot = r,
            _ => return None,
        }
    }
    if drive.len() != units.len() {
        return None;
    }
    walk(0, units, |_, i| Some(rank[i] as f64))
}

/// Walks `units`, always to the one of least `cost` (from where the head
/// stands, to the unit of that index) among those its job's order allows next.
fn walk(
    at: u64,
    units: &[Unit],
    mut cost: impl FnMut(u64, usize) -> Option<f64>,
) -> Option<Vec<usize>> {
    use std::collections::HashMap;
    // Units of each job still to read, and whether its carried one is read.
    let mut left: HashMap<i64, usize> = HashMap::new();
    let mut carried_left: HashMap<i64, usize> = HashMap::new();
    for u in units {
        *left.entry(u.job).or_default() += 1;
        if u.carried {
            *carried_left.entry(u.job).or_default() += 1;
        }
    }
    let allowed = |u: &Unit, left: &HashMap<i64, usize>, carried_left: &HashMap<i64, usize>| {
        let first_done = u.carried || carried_left.get(&u.job).copied().unwrap_or(0) == 0;
        let last_ok = !u.carries || left.get(&u.job).copied().unwrap_or(0) == 1;
        first_done && last_ok
    };
    // Without a carried or carrying unit every unit is allowed at every step,
    // and the maps are not asked.
    let ruled = units.iter().any(|u| u.carried || u.carries);
    let mut done = vec![false; units.len()];
    let mut order = Vec::with_capacity(units.len());
    let mut pos = at;
    while order.len() < units.len() {
        let mut best: Option<(f64, usize)> = None;
        for (i, u) in units.iter().enumerate() {
            if done[i] || (ruled && !allowed(u, &left, &carried_left)) {
                continue;
            }
            let c = cost(pos, i)?;
            if best.is_none_or(|(b, _)| c < b) {
                best = Some((c, i));
            }
        }
        // The job rules always leave one unit allowed; the block order is kept
        // if they did not.
        let (_, i) = best?;
        done[i] = true;
        order.push(i);
        pos = units[i].end;
        let u = &units[i];
        if let Some(n) = left.get_mut(&u.job) {
            *n -= 1;
        }
        if u.carried {
            if let Some(n) = carried_left.get_mut(&u.job) {
                *n -= 1;
            }
        }
    }
    Some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tape of 4 wraps of 100 blocks each, serpentine: block b lies at
    /// metre `b % 100` on even wraps and `99 - b % 100` on odd ones; a locate
    /// costs 1 s plus 0.1 s a metre, reading 1 s a block.
    fn travel(a: u64, b: u64) -> Option<Travel> {
        let x = |b: u64| match (b / 100) % 2 {
            0 => (b % 100) as f64,
            _ => 99.0 - (b % 100) as f64,
        };
        let read = match b >= a {
            true => (b - a) as f64,
            false => f64::INFINITY,
        };
        Some(Travel {
            locate: 1.0 + (x(a) - x(b)).abs() * 0.1,
            read,
        })
    }

    fn unit(job: i64, first: u64) -> Unit {
        Unit {
            job,
            first,
            end: first + 1,
            cost: 1.0,
            carried: false,
            carries: false,
        }
    }

    #[test]
    fn blocks_side_by_side_on_neighbouring_wraps_are_read_one_after_the_other() {
        // Block 10 (metre 10 of wrap 0), 90 (metre 90 of wrap 0), 110 (metre 89
        // of wrap 1), 189 (metre 10 of wrap 1): in block order the head crosses
        // the tape twice; planned, once, each pair side by side.
        let units = [unit(1, 10), unit(1, 90), unit(1, 110), unit(1, 189)];
        let p = plan(0, &units, &travel).unwrap();
        assert!(p.reordered);
        // Each pair side by side, in one order or the other (0, 3, 2, 1 as
        // the greedy walk goes; 3, 0, 2, 1 saves the read from metre 10 to
        // 11 once more).
        let at = |i: usize| p.order.iter().position(|&o| o == i).unwrap();
        assert_eq!(at(0).abs_diff(at(3)), 1, "{:?}", p.order);
        assert_eq!(at(1).abs_diff(at(2)), 1, "{:?}", p.order);
        let block = cost_of(0, &units, &[0, 1, 2, 3], &travel).unwrap();
        assert!(p.seconds < block * 0.7, "{} vs {block}", p.seconds);
    }

    #[test]
    fn or_opt_fetches_a_unit_the_greedy_walk_passed_over_where_it_lies() {
        // Greedy from block 0: 5 (metre 5), then 188 (metre 11 of wrap 1) is
        // nearer than 40 (metre 40), and so on; the improved order is never
        // longer than the greedy one, and here shorter.
        let units = [
            unit(1, 5),
            unit(1, 40),
            unit(1, 60),
            unit(1, 120),
            unit(1, 188),
            unit(1, 250),
        ];
        let greedy = sltf(0, &units, &travel).unwrap();
        let mut better = greedy.clone();
        improve(0, &units, &mut better, &travel, Search::PLANNER).unwrap();
        let (g, b) = (
            cost_of(0, &units, &greedy, &travel).unwrap(),
            cost_of(0, &units, &better, &travel).unwrap(),
        );
        assert!(b <= g, "{b} vs {g}");
        let mut sorted = better.clone();
        sorted.sort();
        assert_eq!(sorted, (0..units.len()).collect::<Vec<_>>());
    }

    #[test]
    fn dense_reads_keep_the_block_order() {
        let units: Vec<Unit> = (0..20).map(|i| unit(1, 10 + 2 * i)).collect();
        let p = plan(0, &units, &travel).unwrap();
        assert!(!p.reordered);
        assert_eq!(p.order, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_job_carried_from_its_last_cartridge_starts_and_one_carried_on_ends() {
        let mut units = [unit(1, 2), unit(1, 150), unit(2, 190), unit(1, 195)];
        units[0].carried = true;
        units[1].carries = true;
        let p = plan(199, &units, &travel).unwrap();
        let at = |i: usize| p.order.iter().position(|&o| o == i).unwrap();
        assert!(at(0) < at(3) && at(3) < at(1), "{:?}", p.order);
    }

    #[test]
    fn the_drives_order_is_kept_but_for_each_jobs_first_and_last_unit() {
        let mut units = [unit(1, 2), unit(1, 150), unit(2, 190), unit(1, 195)];
        assert_eq!(follow(&units, &[3, 1, 2, 0]), Some(vec![3, 1, 2, 0]));
        units[0].carried = true;
        units[1].carries = true;
        // The drive would read job 1's carried unit last and its carrying one
        // second: job 2's unit keeps its place, job 1's are put in its order.
        let o = follow(&units, &[3, 1, 2, 0]).unwrap();
        let at = |i: usize| o.iter().position(|&x| x == i).unwrap();
        assert!(at(0) < at(3) && at(3) < at(1), "{o:?}");
        // An order that does not name each unit once is not followed.
        assert_eq!(follow(&units, &[3, 1, 2]), None);
        assert_eq!(follow(&units, &[3, 1, 1, 0]), None);
        assert_eq!(follow(&units, &[3, 1, 2, 9]), None);
    }

    #[test]
    fn without_a_model_there_is_no_plan() {
        let units = [unit(1, 10), unit(1, 20)];
        assert_eq!(plan(0, &units, &|_, _| None), None);
    }
}

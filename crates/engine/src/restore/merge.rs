//! The read plan of a set's point-in-time restore: the runs every job it needs
//! planned as for a one-job restore, cut at volume boundaries into steps, and the
//! steps of all jobs merged by cartridge. A cartridge is in one group only, so one
//! drive mounts it once and reads it forward in block order, whichever jobs its
//! blocks belong to (a set's jobs appended to a cartridge lie on it in order).
//! Two cartridges are in one group when a wanted entry goes on from one to the
//! other, so that the drive that reads its first part carries its decoder on to
//! the next; cartridges with nothing in common go to drives of their own, read
//! at once.

use crate::restore::chains::Chain;
use crate::restore::plan::Run;
use std::collections::{BTreeMap, HashMap};
use tapeloom_catalog::JobVolume;

/// A run of one job on one of its volumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The job.
    pub job: i64,
    /// The job's sequence number of the volume.
    pub seq: u32,
    /// The blocks, on that volume only.
    pub run: Run,
    /// A wanted entry goes on into it from the job's step before, on the same
    /// cartridge: the two are read one after the other.
    pub joined: bool,
    /// A wanted entry goes on into it from the job's step before, on another
    /// cartridge: it is the first of the job's steps read on its own.
    pub carried: bool,
    /// A wanted entry goes on from it into the job's step after, on another
    /// cartridge: it is the last of the job's steps read on its own.
    pub carries: bool,
}

/// One cartridge of the plan and what to read on it, in block order.
#[derive(Debug, Clone)]
pub(crate) struct Cartridge {
    /// The cartridge as the first job read on it knows it.
    pub vol: JobVolume,
    /// Its steps, in block order.
    pub steps: Vec<Step>,
    /// Where it comes in the order of use: the first (job, sequence number) on it.
    first: (i64, u32),
}

/// Cartridges one drive reads, in order.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Its number, for the report.
    pub id: u32,
    /// Its cartridges, in order of use.
    pub carts: Vec<Cartridge>,
}

impl Group {
    /// The group as a chain of the cartridges' blocks to read, for [`super::chains::assign`].
    pub fn chain(&self) -> Chain {
        let vols = self.carts.iter().map(|c| {
            let first = c.steps.iter().map(|s| s.run.start.1).min();
            let last = c.steps.iter().map(|s| s.run.end.1).max();
            JobVolume {
                first_lbn: first.unwrap_or(c.vol.first_lbn),
                last_lbn: last.or(c.vol.last_lbn),
                ..c.vol.clone()
            }
        });
        Chain {
            id: self.id,
            vols: vols.collect(),
        }
    }

    /// Blocks its steps cover.
    pub fn blocks(&self) -> u64 {
        let steps = self.carts.iter().flat_map(|c| c.steps.iter());
        steps
            .map(|s| s.run.end.1.saturating_sub(s.run.start.1) + 1)
            .sum()
    }
}

/// A job's step with the chain it is in and the volume it is on.
pub(crate) type Placed = (u32, JobVolume, Step);

/// Cuts job `job`'s planned runs (by chain) at volume boundaries.
pub(crate) fn split(job: i64, work: &[(Chain, Vec<Run>)]) -> Vec<Placed> {
    let mut out: Vec<Placed> = Vec::new();
    for (chain, runs) in work {
        let at = |seq: u32| chain.vols.iter().position(|v| v.seq == seq);
        let chain_from = out.len();
        for run in runs {
            let Some(from) = at(run.start.0) else {
                continue;
            };
            let to = at(run.end.0).unwrap_or(chain.vols.len() - 1).max(from);
            for v in &chain.vols[from..=to] {
                let start = match v.seq == run.start.0 {
                    true => run.start.1,
                    false => v.first_lbn,
                };
                let end = match v.seq == run.end.0 {
                    true => run.end.1,
                    false => v.last_lbn.unwrap_or(u64::MAX),
                };
                let goes_on = match v.seq == run.start.0 {
                    true => run.joined && out.len() > chain_from,
                    false => true,
                };
                let run = Run {
                    start: (v.seq, start),
                    end: (v.seq, end),
                    joined: false,
                };
                let step = Step {
                    job,
                    seq: v.seq,
                    run,
                    joined: false,
                    carried: false,
                    carries: false,
                };
                if goes_on {
                    join_last(&mut out, step.seq);
                }
                let step = Step {
                    joined: goes_on && out.last().is_some_and(|p| p.2.seq == v.seq),
                    carried: goes_on && out.last().is_some_and(|p| p.2.seq != v.seq),
                    ..step
                };
                out.push((chain.id, v.clone(), step));
            }
        }
    }
    out
}

/// The step before one that an entry goes on into, on volume `seq`: carried on
/// to another cartridge when it is on another.
fn join_last(out: &mut [Placed], seq: u32) {
    if let Some(last) = out.last_mut() {
        if last.2.seq != seq {
            last.2.carries = true;
        }
    }
}

/// Merges the steps of all jobs (`(job, placed)`) by cartridge into groups: two
/// cartridges go together when a wanted entry goes on from one to the other,
/// each cartridge once; within a group in the order they were first used, within
/// a cartridge in block order.
pub(crate) fn group(placed: Vec<Placed>) -> Vec<Group> {
    let mut carts: BTreeMap<i64, Cartridge> = BTreeMap::new();
    // The cartridge of each chain's last step so far, and the pairs an entry
    // goes on across.
    let mut last: HashMap<(i64, u32), i64> = HashMap::new();
    let mut links: Vec<(i64, i64)> = Vec::new();
    for (chain, vol, step) in placed {
        let id = vol.volume.id;
        if let Some(prev) = last.insert((step.job, chain), id) {
            if step.carried && prev != id {
                links.push((prev, id));
            }
        }
        let first = (step.job, step.seq);
        let c = carts.entry(id).or_insert_with(|| Cartridge {
            vol: vol.clone(),
            steps: Vec::new(),
            first,
        });
        if first < c.first {
            (c.first, c.vol) = (first, vol);
        }
        c.steps.push(step);
    }
    let mut parent: HashMap<i64, i64> = carts.keys().map(|&k| (k, k)).collect();
    for (x, y) in links {
        let (a, b) = (root(&parent, x), root(&parent, y));
        parent.insert(a.max(b), a.min(b));
    }
    let mut groups: BTreeMap<i64, Vec<Cartridge>> = BTreeMap::new();
    for (id, mut c) in carts {
        c.steps.sort_by_key(|s| (s.run.start.1, s.job));
        groups.entry(root(&parent, id)).or_default().push(c);
    }
    let mut out: Vec<Vec<Cartridge>> = groups.into_values().collect();
    for g in &mut out {
        g.sort_by_key(|c| c.first);
    }
    out.sort_by_key(|g| g.first().map(|c| c.first));
    (out.into_iter().enumerate())
        .map(|(i, carts)| Group {
            id: i as u32,
            carts,
        })
        .collect()
}

/// The root of `id` in a union-find of cartridges.
fn root(parent: &HashMap<i64, i64>, mut id: i64) -> i64 {
    while let Some(&p) = parent.get(&id) {
        if p == id {
            break;
        }
        id = p;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restore::chains::tests::vol;

    fn run(seq: u32, a: u64, b: u64) -> Run {
        Run {
            start: (seq, a),
            end: (seq, b),
            joined: false,
        }
    }

    #[test]
    fn cartridges_no_entry_spans_go_to_drives_of_their_own() {
        let (a, b) = (vol(0, Some(0), 100), vol(1, Some(0), 100));
        let job = Chain {
            id: 0,
            vols: vec![a, b],
        };
        // A file on each cartridge of one chain: two groups, read at once.
        let apart = split(1, &[(job.clone(), vec![run(0, 10, 12), run(1, 5, 6)])]);
        assert_eq!(group(apart).len(), 2);
        // A file that goes on from the first to the second: one group.
        let across = Run {
            start: (0, 95),
            end: (1, 3),
            joined: false,
        };
        let spans = split(1, &[(job, vec![run(0, 10, 12), across])]);
        assert_eq!(group(spans).len(), 1);
    }

    #[test]
    fn jobs_on_shared_cartridges_are_read_in_one_pass_each() {
        // Job 1 spans cartridges 1 and 2; job 2 was appended to cartridge 2 and
        // went on to cartridge 3 (its volumes 0 and 1).
        let (a, b, c) = (
            vol(0, Some(0), 100),
            vol(1, Some(0), 50),
            vol(2, Some(0), 80),
        );
        let mut b2 = b.clone();
        (b2.seq, b2.first_lbn, b2.last_lbn) = (0, 60, Some(90));
        let mut c2 = c.clone();
        c2.seq = 1;
        let job1 = Chain {
            id: 0,
            vols: vec![a.clone(), b.clone()],
        };
        let job2 = Chain {
            id: 0,
            vols: vec![b2.clone(), c2.clone()],
        };
        let one = split(
            1,
            &[(
                job1,
                vec![Run {
                    start: (0, 90),
                    end: (1, 10),
                    joined: false,
                }],
            )],
        );
        let two = split(
            2,
            &[(
                job2,
                vec![
                    run(0, 70, 75),
                    Run {
                        start: (0, 88),
                        end: (1, 5),
                        joined: false,
                    },
                ],
            )],
        );
        let mut all = two;
        all.extend(one);
        let g = group(all);
        assert_eq!(g.len(), 1);
        let got: Vec<(i64, Vec<(i64, Run)>)> = g[0]
            .carts
            .iter()
            .map(|c| {
                (
                    c.vol.volume.id,
                    c.steps.iter().map(|s| (s.job, s.run)).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1, vec![(1, run(0, 90, 101))]),
                (
                    2,
                    vec![(1, run(1, 2, 10)), (2, run(0, 70, 75)), (2, run(0, 88, 90))]
                ),
                (3, vec![(2, run(1, 2, 5))]),
            ]
        );
        assert_eq!(g[0].blocks(), 12 + 9 + 6 + 3 + 4);
        // What goes on from one cartridge to the next is read last on the first
        // and first on the next.
        let pins: Vec<Vec<(bool, bool)>> = (g[0].carts.iter())
            .map(|c| c.steps.iter().map(|s| (s.carried, s.carries)).collect())
            .collect();
        assert_eq!(
            pins,
            vec![
                vec![(false, true)],
                vec![(true, false), (false, false), (false, true)],
                vec![(true, false)],
            ]
        );
    }
}

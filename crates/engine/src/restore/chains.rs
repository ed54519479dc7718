//! Chains: the cartridges each drive of a backup wrote one after another. A stream
//! is written by one drive only (`backup::weave`), so each chain holds whole streams
//! and chains can be read at once, on as many drives; within a chain the volumes
//! are read in sequence order. This module finds a job's chains and decides which
//! drive reads which.

use std::collections::{BTreeMap, HashMap};
use tapeloom_catalog::{Extent, JobVolume};

/// One chain of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    /// The sequence number of its first volume.
    pub id: u32,
    /// Its volumes, in sequence order.
    pub vols: Vec<JobVolume>,
}

impl Chain {
    /// The volumes' sequence numbers, in reading order.
    pub fn order(&self) -> Vec<u32> {
        self.vols.iter().map(|v| v.seq).collect()
    }

    /// Blocks the chain holds as far as the catalog knows: what balancing weighs.
    fn blocks(&self) -> u64 {
        self.vols
            .iter()
            .map(|v| {
                v.last_lbn
                    .unwrap_or(v.first_lbn)
                    .saturating_sub(v.first_lbn)
                    + 1
            })
            .sum()
    }
}

/// Groups volumes that hold a common stream: `seqs` are the volumes, `held` says
/// which stream has blocks on which volume. Returns each volume's group, named by
/// its smallest sequence number. Groups are never wider than a drive's chain (a
/// stream stays on one drive), but a chain whose volumes share no stream is split,
/// which costs nothing: each part still holds whole streams.
pub(crate) fn group(
    seqs: impl IntoIterator<Item = u32>,
    held: impl IntoIterator<Item = (u32, u16)>,
) -> BTreeMap<u32, u32> {
    let mut parent: BTreeMap<u32, u32> = seqs.into_iter().map(|s| (s, s)).collect();
    fn root(parent: &mut BTreeMap<u32, u32>, mut s: u32) -> u32 {
        while let Some(&p) = parent.get(&s) {
            if p == s {
                break;
            }
            let up = parent.get(&p).copied().unwrap_or(p);
            parent.insert(s, up);
            s = p;
        }
        s
    }
    let mut first_of: HashMap<u16, u32> = HashMap::new();
    for (seq, stream) in held {
        parent.entry(seq).or_insert(seq);
        let other = *first_of.entry(stream).or_insert(seq);
        let (a, b) = (root(&mut parent, seq), root(&mut parent, other));
        if a != b {
            // The smaller sequence number names the group.
            parent.insert(a.max(b), a.min(b));
        }
    }
    let seqs: Vec<u32> = parent.keys().copied().collect();
    seqs.into_iter()
        .map(|s| (s, root(&mut parent, s)))
        .collect()
}

/// The job's chains. Volumes the catalog records a chain for are grouped by it. A
/// catalog written before chains were recorded has none: then the chains are
/// inferred from the extents when every volume has some (volumes that share a
/// stream are one chain), else all volumes are read in sequence as one chain.
pub(crate) fn chains(vols: &[JobVolume], extents: &[Extent]) -> Vec<Chain> {
    let by_seq: BTreeMap<u32, u32> = if vols.iter().all(|v| v.chain.is_some()) {
        vols.iter()
            .map(|v| (v.seq, v.chain.unwrap_or_default()))
            .collect()
    } else if vols.iter().all(|v| extents.iter().any(|e| e.seq == v.seq)) {
        group(
            vols.iter().map(|v| v.seq),
            extents.iter().map(|e| (e.seq, e.stream)),
        )
    } else {
        let first = vols.iter().map(|v| v.seq).min().unwrap_or_default();
        vols.iter().map(|v| (v.seq, first)).collect()
    };
    let mut out: BTreeMap<u32, Vec<JobVolume>> = BTreeMap::new();
    let mut sorted = vols.to_vec();
    sorted.sort_by_key(|v| v.seq);
    for v in sorted {
        let c = by_seq.get(&v.seq).copied().unwrap_or(v.seq);
        out.entry(c).or_default().push(v);
    }
    out.into_iter()
        .map(|(id, vols)| Chain { id, vols })
        .collect()
}

/// Which drive reads which chains, and in what order: `(drive, chain indexes)` for
/// each drive given work. The heaviest chain goes first, to the drive with the least
/// work so far; among those, to one that holds a cartridge of the chain already
/// (`held`: drive to barcode), then to the first listed. Each drive reads its chains
/// in the order of their first volume.
pub(crate) fn assign(
    chains: &[Chain],
    drives: &[usize],
    held: &HashMap<usize, String>,
) -> Vec<(usize, Vec<usize>)> {
    if drives.is_empty() {
        return Vec::new();
    }
    let mut load = vec![0u64; drives.len()];
    let mut lists: Vec<Vec<usize>> = vec![Vec::new(); drives.len()];
    let mut heaviest: Vec<usize> = (0..chains.len()).collect();
    heaviest.sort_by_key(|&i| (std::cmp::Reverse(chains[i].blocks()), chains[i].id));
    for i in heaviest {
        let holds = |k: usize| {
            held.get(&drives[k])
                .is_some_and(|b| chains[i].vols.iter().any(|v| &v.volume.barcode == b))
        };
        let pick = (0..drives.len())
            .min_by_key(|&k| (load[k], !holds(k), k))
            .unwrap_or(0);
        load[pick] += chains[i].blocks();
        lists[pick].push(i);
    }
    drives
        .iter()
        .zip(lists)
        .filter(|(_, l)| !l.is_empty())
        .map(|(d, mut l)| {
            l.sort_by_key(|&i| chains[i].id);
            (*d, l)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tapeloom_catalog::{Volume, VolumeState};

    /// A full volume of sequence `seq` holding `blocks` blocks from block 2, in
    /// `chain`; the restore's own tests use it too.
    pub(crate) fn vol(seq: u32, chain: Option<u32>, blocks: u64) -> JobVolume {
        JobVolume {
            seq,
            volume: Volume {
                id: seq as i64 + 1,
                barcode: format!("TL{:04}L3", seq + 1),
                uuid: [seq as u8; 16],
                pool: "default".into(),
                block_size: 262144,
                status: VolumeState::Full,
                generation: 0,
            },
            first_lbn: 2,
            last_lbn: Some(1 + blocks),
            chain,
        }
    }

    fn ext(seq: u32, stream: u16) -> Extent {
        Extent {
            stream,
            seq,
            first_lbn: 2,
            blocks: 1,
            stream_offset: 0,
        }
    }

    fn ids(chains: &[Chain]) -> Vec<(u32, Vec<u32>)> {
        chains.iter().map(|c| (c.id, c.order())).collect()
    }

    #[test]
    fn recorded_chains_group_the_volumes_of_each_drive() {
        // Two drives: the first spanned from volume 0 to 2 and 3, the second from 1 to 4.
        let vols = [
            vol(3, Some(0), 10),
            vol(0, Some(0), 10),
            vol(1, Some(1), 10),
            vol(2, Some(0), 10),
            vol(4, Some(1), 10),
        ];
        let c = chains(&vols, &[]);
        assert_eq!(ids(&c), vec![(0, vec![0, 2, 3]), (1, vec![1, 4])]);
    }

    #[test]
    fn without_recorded_chains_streams_tie_volumes_together() {
        let vols = [vol(0, None, 9), vol(1, None, 9), vol(2, None, 9)];
        // Stream 1 on volumes 0 and 2, stream 2 on volume 1 only.
        let extents = [ext(0, 1), ext(1, 2), ext(2, 1), ext(0, 3)];
        assert_eq!(
            ids(&chains(&vols, &extents)),
            vec![(0, vec![0, 2]), (1, vec![1])]
        );
        // A volume no extent names (old jobs, or only the index): read in sequence.
        let some = [ext(0, 1), ext(2, 1)];
        assert_eq!(ids(&chains(&vols, &some)), vec![(0, vec![0, 1, 2])]);
        // A mix of rows with and without a chain is not trusted either.
        let mixed = [vol(0, Some(0), 9), vol(1, None, 9)];
        assert_eq!(ids(&chains(&mixed, &[])), vec![(0, vec![0, 1])]);
    }

    #[test]
    fn grouping_follows_streams_through_several_volumes() {
        // Stream 5 ties 0 to 3, stream 6 ties 3 to 4; 1 and 2 are tied by stream 7.
        let g = group(0..5, [(0, 5), (1, 7), (3, 5), (4, 6), (3, 6), (2, 7)]);
        let got: Vec<(u32, u32)> = g.into_iter().collect();
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 1), (3, 0), (4, 0)]);
    }

    #[test]
    fn chains_go_to_drives_by_weight_and_to_the_drive_holding_them() {
        let c = chains(
            &[
                vol(0, Some(0), 100),
                vol(1, Some(1), 100),
                vol(2, Some(2), 10),
            ],
            &[],
        );
        // Drive 1 holds chain 0's cartridge, drive 0 chain 1's (left from the backup).
        let held: HashMap<usize, String> =
            [(1, "TL0001L3".to_string()), (0, "TL0002L3".to_string())].into();
        assert_eq!(
            assign(&c, &[0, 1], &held),
            vec![(0, vec![1, 2]), (1, vec![0])]
        );
        // One drive reads every chain, one after another.
        assert_eq!(assign(&c, &[1], &held), vec![(1, vec![0, 1, 2])]);
        // More drives than chains: the spare drive gets nothing.
        let four = assign(&c, &[0, 1, 2, 3], &HashMap::new());
        assert_eq!(four, vec![(0, vec![0]), (1, vec![1]), (2, vec![2])]);
        assert!(assign(&c, &[], &held).is_empty());
    }
}

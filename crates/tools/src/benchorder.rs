//! The recall order benchmark: how close the recall planner's order comes to
//! the best order an offline search finds, on a drive's timing model.
//!
//! Files of one size lie at random places (block boundaries) of full
//! cartridges of the model; the reading of each cartridge starts at the
//! beginning of the tape, as after a load. For each cartridge the planner's
//! order, the greedy walk alone (SLTF), the block order and the offline
//! search's best order are timed on the model
//! ([`tapeloom_engine::study_order`]); the figures are summed over the
//! cartridges.

use crate::benchdrive::model_params;
use crate::error::Result;
use crate::pattern::Noise;
use tapeloom_device::lto::TapeModel;
use tapeloom_device::Travel;
use tapeloom_engine::OrderStudy;

/// What the benchmark reads.
#[derive(Debug, Clone)]
pub struct OrderBenchOptions {
    /// The LTO generation modeled.
    pub model: String,
    /// Files in all.
    pub files: usize,
    /// Cartridges they are dealt over.
    pub cartridges: usize,
    /// Each file's size in bytes.
    pub file_bytes: u64,
    /// The block size in bytes.
    pub block_bytes: u64,
    /// The seed of the files' places.
    pub seed: u64,
    /// How long the offline search may take for each cartridge.
    pub search_for: std::time::Duration,
}

/// The figures of the benchmark, summed over the cartridges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OrderBench {
    /// Files read.
    pub files: usize,
    /// Cartridges.
    pub cartridges: usize,
    /// The cartridges' studies, summed ([`OrderStudy::add`]).
    pub sum: OrderStudy,
}

/// Runs the benchmark of `opts`.
pub fn bench_order(opts: &OrderBenchOptions) -> Result<OrderBench> {
    let params = model_params(&opts.model, 1.0)?;
    let model = TapeModel::new(params.clone());
    let native = params.native();
    let bs = opts.block_bytes.max(1);
    let blocks_per_file = opts.file_bytes.div_ceil(bs).max(1);
    let blocks = (params.capacity_bytes / bs as f64) as u64;
    let travel = |a: u64, b: u64| -> Option<Travel> {
        let (x, y) = ((a * bs) as f64, (b * bs) as f64);
        Some(Travel {
            locate: model.locate_seconds(x, y),
            read: match b >= a {
                true => (y - x) / native,
                false => f64::INFINITY,
            },
        })
    };
    let mut noise = Noise::new(opts.seed);
    let carts = opts.cartridges.max(1);
    let mut out = OrderBench {
        files: opts.files,
        cartridges: carts,
        sum: OrderStudy {
            converged: true,
            ..OrderStudy::default()
        },
    };
    for c in 0..carts {
        let n = opts.files / carts + usize::from(c < opts.files % carts);
        // Distinct places, each a whole file inside the cartridge.
        let slots = blocks / blocks_per_file;
        let mut firsts: Vec<u64> = (0..n)
            .map(|_| noise.next_u64() % slots.max(1) * blocks_per_file)
            .collect();
        firsts.sort_unstable();
        firsts.dedup();
        let read = (blocks_per_file * bs) as f64 / native;
        let pieces: Vec<(u64, u64, f64)> = (firsts.iter())
            .map(|&f| (f, f + blocks_per_file, read))
            .collect();
        let Some(s) = tapeloom_engine::study_order(0, &pieces, &travel, opts.search_for) else {
            continue;
        };
        out.sum.add(&s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offline_order_is_never_slower_than_the_planners() {
        let opts = OrderBenchOptions {
            model: "lto9".into(),
            files: 60,
            cartridges: 2,
            file_bytes: 1 << 20,
            block_bytes: 256 << 10,
            seed: 3,
            search_for: std::time::Duration::from_secs(10),
        };
        let r = bench_order(&opts).unwrap();
        assert_eq!((r.files, r.cartridges, r.sum.pieces), (60, 2, 60));
        let b = r.sum;
        assert!(b.converged, "{b:?}");
        assert!(b.offline_seconds <= b.planned_seconds + 1e-6, "{b:?}");
        assert!(b.planned_seconds <= b.sltf_seconds + 1e-6, "{b:?}");
        assert!(b.planned_seconds < b.block_seconds, "{b:?}");
    }
}

//! Orders that give each rank its own part of the data (the block pool's
//! regions of a store, a mixture's regions of each child), planned rank by
//! rank rather than cut from one global order, and how a resume with
//! another number of ranks hands the old ranks' parts to the new ones.
//!
//! ## The resume rule
//!
//! An epoch's order for `W` ranks is `W` rank orders, `O_0 .. O_{W-1}`.
//! After every rank took `s` steps (batches), each has consumed the first
//! `s * unit` items of its own order (`unit`: the batch size for samples,
//! 1 for a batch sampler's batches), and the global position is
//! `s * W * unit`. A state saved there and loaded on `W'` ranks continues
//! with the rest of each old order, `O_r[s * unit ..]`, laid end to end in
//! old-rank order and cut into `W'` contiguous parts of equal length (the
//! remainder spread one each over the first parts): new rank `r'` reads
//! part `r'` in order. Each new rank thus takes over whole stretches of a
//! few old ranks' orders, read as they were drawn (each old rank's from
//! its own region and pool), so it decodes only the chunks of the regions
//! it takes over, about once each, and no sample is read twice or skipped.
//! A later resume in the same epoch cuts the current parts the same way
//! (the cuts are kept in [`LoaderState`](crate::LoaderState)); the next
//! epoch is planned for the new number of ranks.
//!
//! An order may resume by a rule of its own with the same part lengths
//! ([`RankedSamples::resumed_iter`]): the default shuffle's block pool cuts
//! the samples each old rank had left in storage order and draws each part
//! through a fresh pool (`sampler/regroup.rs`).

use crate::sampler::{FittedMix, MultiDatasetBatchSampler, MultiDatasetSampler};

/// A lazily drawn sequence of plan items (samples or batches).
pub(crate) type Items<T> = Box<dyn Iterator<Item = T> + Send>;

/// A sample order drawn per rank ([`Order::Samples`](super::order::Order)
/// with one): `None` while the order is one global order (a full
/// permutation), cut in rounds.
pub(crate) trait RankedSamples: Send + Sync {
    /// Whether the order is planned rank by rank now (a shuffle that chose
    /// a full permutation is one global order; a saved state may switch it).
    fn is_ranked(&self) -> bool;
    /// Rank `rank` of `world`'s samples in `epoch`, drawn as they are
    /// taken; `None` for a global order.
    fn rank_iter(&self, epoch: u64, rank: usize, world: usize) -> Option<Items<usize>>;
    /// The length of that order, `None` for a global order.
    fn rank_len(&self, rank: usize, world: usize) -> Option<usize>;
    /// Rank `rank` of `world`'s samples of `epoch` from global position
    /// `pos` (`unit` samples a step) after `resume`'s cuts, for an order
    /// that resumes on other numbers of ranks by a rule of its own (the
    /// parts' lengths as [`rest_lens`] gives them); `None`: the old ranks'
    /// orders laid end to end (the module's rule).
    fn resumed_iter(&self, epoch: u64, resume: &Resume, at: ResumeAt) -> Option<Items<usize>> {
        let _ = (epoch, resume, at);
        None
    }
}

/// Where a resumed rank's order starts: rank `rank` of `world`, from the
/// epoch's global position `pos`, `unit` samples a step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResumeAt {
    pub(crate) rank: usize,
    pub(crate) world: usize,
    pub(crate) pos: usize,
    pub(crate) unit: usize,
}

/// A batch order planned per rank.
pub(crate) trait RankedBatches: Send + Sync {
    /// Rank `rank` of `world`'s batches in `epoch`, drawn as they are taken.
    fn rank_iter(&self, epoch: u64, rank: usize, world: usize) -> Items<Vec<usize>>;
    /// How many batches that is.
    fn rank_len(&self, rank: usize, world: usize) -> usize;
}

/// Resumes within one epoch with other numbers of ranks: the epoch, the
/// ranks its order was planned for, and each resume's `(global position,
/// new number of ranks)`, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Resume {
    pub epoch: u64,
    pub base_world: usize,
    pub cuts: Vec<(usize, usize)>,
}

/// A stretch `start..end` of base rank `rank`'s order.
type Run = (usize, usize, usize);

/// Where each current rank's items come from: runs of the base orders,
/// from global position `at` on.
#[derive(Debug, Clone)]
struct Parts {
    at: usize,
    parts: Vec<Vec<Run>>,
}

/// The runs left of `runs` after its first `skip` items.
fn skip_runs(runs: &[Run], mut skip: usize) -> Vec<Run> {
    let mut out = Vec::new();
    for &(r, s, e) in runs {
        let take = skip.min(e - s);
        skip -= take;
        if s + take < e {
            out.push((r, s + take, e));
        }
    }
    out
}

fn runs_len(runs: &[Run]) -> usize {
    runs.iter().map(|&(_, s, e)| e - s).sum()
}

impl Parts {
    /// Every base rank its whole order.
    fn base(lens: &[usize]) -> Parts {
        Parts { at: 0, parts: lens.iter().enumerate().map(|(r, &l)| vec![(r, 0, l)]).collect() }
    }

    /// The items rank `r` consumed between `at` and global position `pos`:
    /// whole steps of every rank.
    fn consumed(&self, pos: usize, unit: usize) -> usize {
        let w = self.parts.len().max(1);
        (pos.saturating_sub(self.at) / (w * unit.max(1))) * unit.max(1)
    }

    /// Rank `r`'s runs from global position `pos`.
    fn remaining(&self, r: usize, pos: usize, unit: usize) -> Vec<Run> {
        self.parts.get(r).map(|p| skip_runs(p, self.consumed(pos, unit))).unwrap_or_default()
    }

    /// The parts of `world` ranks resuming at global position `pos` (see
    /// the module docs).
    fn cut(&self, pos: usize, unit: usize, world: usize) -> Parts {
        let rest: Vec<Run> = (0..self.parts.len()).flat_map(|r| self.remaining(r, pos, unit)).collect();
        let total = runs_len(&rest);
        let w = world.max(1);
        let mut parts = Vec::with_capacity(w);
        let mut left = rest;
        let mut given = 0;
        for r in 0..w {
            let size = total * (r + 1) / w - total * r / w;
            // The first `size` items of what is left.
            let mut mine = Vec::new();
            let mut need = size;
            let mut k = 0;
            while need > 0 && k < left.len() {
                let (b, s, e) = left[k];
                let take = need.min(e - s);
                mine.push((b, s, s + take));
                need -= take;
                k += 1;
            }
            given += size;
            left = skip_runs(&left, size);
            parts.push(mine);
        }
        debug_assert_eq!(given, total);
        Parts { at: pos, parts }
    }
}

/// Plans rank `rank` of `world` from global position `pos` of an order
/// whose base rank orders `iter_of(r, base_world)` have lengths
/// `len_of(r, base_world)`, under `resume`: the rank's items in order,
/// drawn as they are taken, and the lengths of every rank's rest (for equal
/// batch counts).
pub(crate) fn schedule_iter<T: 'static>(
    resume: Option<&Resume>,
    (rank, world, pos, unit): (usize, usize, usize, usize),
    len_of: impl Fn(usize, usize) -> usize,
    iter_of: impl Fn(usize, usize) -> Items<T> + Send + 'static,
) -> (Items<T>, Vec<usize>) {
    let (parts, base_world) = parts_for(resume, world, unit, &len_of);
    let lens: Vec<usize> = (0..parts.parts.len()).map(|r| runs_len(&parts.remaining(r, pos, unit))).collect();
    let runs = parts.remaining(rank, pos, unit);
    // Each run a stretch of one base rank's order, opened when reached.
    let items = runs.into_iter().flat_map(move |(b, s, e)| iter_of(b, base_world).skip(s).take(e - s));
    (Box::new(items), lens)
}

/// The lengths of every rank's rest from `pos`, without planning anything.
pub(crate) fn rest_lens(
    resume: Option<&Resume>,
    (world, pos, unit): (usize, usize, usize),
    len_of: impl Fn(usize, usize) -> usize,
) -> Vec<usize> {
    let (parts, _) = parts_for(resume, world, unit, &len_of);
    (0..parts.parts.len()).map(|r| runs_len(&parts.remaining(r, pos, unit))).collect()
}

/// The parts of `world` ranks after `resume`'s cuts (the base orders'
/// when there is none), and the base number of ranks.
fn parts_for(
    resume: Option<&Resume>,
    world: usize,
    unit: usize,
    len_of: &impl Fn(usize, usize) -> usize,
) -> (Parts, usize) {
    let base_world = resume.map_or(world, |r| r.base_world).max(1);
    let lens: Vec<usize> = (0..base_world).map(|r| len_of(r, base_world)).collect();
    let mut parts = Parts::base(&lens);
    for &(p, w) in resume.map_or(&[][..], |r| &r.cuts[..]) {
        parts = parts.cut(p, unit, w);
    }
    (parts, base_world)
}

// A fitted mixture reads each rank its own region of each child.
impl RankedSamples for FittedMix<MultiDatasetSampler> {
    fn is_ranked(&self) -> bool {
        true
    }
    fn rank_iter(&self, epoch: u64, rank: usize, world: usize) -> Option<Items<usize>> {
        Some(Box::new(self.mix().rank_draws(epoch, rank, world, self.orders())))
    }
    fn rank_len(&self, rank: usize, world: usize) -> Option<usize> {
        Some(self.mix().rank_len(rank, world))
    }
}

impl RankedBatches for FittedMix<MultiDatasetBatchSampler> {
    fn rank_iter(&self, epoch: u64, rank: usize, world: usize) -> Items<Vec<usize>> {
        Box::new(self.mix().rank_batch_draws(epoch, rank, world, self.orders()))
    }
    fn rank_len(&self, rank: usize, world: usize) -> usize {
        self.mix().rank_len(rank, world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base orders: rank r of w holds r*1000 + 0..len.
    fn orders(lens: &[usize]) -> impl Fn(usize, usize) -> Vec<usize> + '_ {
        move |r, _| (0..lens[r]).map(|i| r * 1000 + i).collect()
    }

    /// `schedule_iter` over those orders, collected.
    fn plan_items(
        resume: Option<&Resume>,
        at: (usize, usize, usize, usize),
        len_of: impl Fn(usize, usize) -> usize,
        lens: &[usize],
    ) -> (Vec<usize>, Vec<usize>) {
        let lens = lens.to_vec();
        let (items, rest) = schedule_iter(resume, at, len_of, move |r, _| {
            Box::new((0..lens[r]).map(move |i| r * 1000 + i)) as Items<usize>
        });
        (items.collect(), rest)
    }

    #[test]
    fn resumes_onto_other_world_sizes_read_the_rest_once() {
        let lens = vec![25, 25, 24, 24, 25, 24, 25, 24];
        let unit = 3;
        for new_world in [1, 3, 5, 8, 11] {
            for steps in [0, 1, 4, 8] {
                let pos = steps * 8 * unit;
                let resume = Resume { epoch: 0, base_world: 8, cuts: vec![(pos, new_world)] };
                let mut got: Vec<usize> = Vec::new();
                let mut sizes = Vec::new();
                for r in 0..new_world {
                    let (items, lens_now) = plan_items(Some(&resume), (r, new_world, pos, unit), |r, _| lens[r], &lens);
                    assert_eq!(lens_now.len(), new_world);
                    sizes.push(items.len());
                    got.extend(items);
                }
                // The rest of every old rank's order, once.
                let mut want: Vec<usize> =
                    (0..8).flat_map(|r| orders(&lens)(r, 8).into_iter().skip(steps * unit)).collect();
                want.sort_unstable();
                got.sort_unstable();
                assert_eq!(got, want, "8 -> {new_world} after {steps} steps");
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn a_new_rank_reads_whole_stretches_of_few_old_ranks() {
        let lens = vec![100; 8];
        let resume = Resume { epoch: 0, base_world: 8, cuts: vec![(8 * 10, 3)] };
        let (items, _) = plan_items(Some(&resume), (0, 3, 8 * 10, 10), |r, _| lens[r], &lens);
        // 720 left, 240 a rank: old rank 0's last 90, rank 1's 90, 60 of rank 2's.
        let old: Vec<usize> = items.iter().map(|i| i / 1000).collect();
        assert_eq!(old.iter().filter(|&&o| o == 0).count(), 90);
        assert_eq!(old.iter().filter(|&&o| o == 2).count(), 60);
        assert!(old.windows(2).all(|w| w[0] <= w[1]), "old ranks in order, each read as drawn");
    }

    #[test]
    fn two_resumes_in_one_epoch_still_read_everything_once() {
        let lens = vec![40, 40, 39];
        let unit = 2;
        // 3 ranks take 4 steps (24 items), then 5 ranks take 2 steps (20), then 2 ranks finish.
        let first = Resume { epoch: 0, base_world: 3, cuts: vec![(24, 5)] };
        let second = Resume { epoch: 0, base_world: 3, cuts: vec![(24, 5), (44, 2)] };
        let mut got: Vec<usize> = Vec::new();
        for r in 0..3 {
            got.extend(plan_items(None, (r, 3, 0, unit), |r, _| lens[r], &lens).0.into_iter().take(4 * unit));
        }
        for r in 0..5 {
            got.extend(plan_items(Some(&first), (r, 5, 24, unit), |r, _| lens[r], &lens).0.into_iter().take(2 * unit));
        }
        for r in 0..2 {
            got.extend(plan_items(Some(&second), (r, 2, 44, unit), |r, _| lens[r], &lens).0);
        }
        let mut want: Vec<usize> = (0..3).flat_map(|r| orders(&lens)(r, 3)).collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(rest_lens(Some(&second), (2, 44, unit), |r, _| lens[r]).iter().sum::<usize>(), 119 - 44);
    }
}

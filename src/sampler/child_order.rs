//! How a mixing sampler draws one child's samples: [`ChildOrder`], and the
//! per-rank draw streams of the mixing samplers.
//!
//! A shuffled mixture walks each child pass after pass. A child whose
//! decoded store fits its share of the cache is walked in a permutation; a
//! larger one through a block pool ([`ChunkShuffleSampler`]), as a single
//! store larger than its cache is: each pass permutes the child's chunk
//! blocks and draws from `pool_blocks` resident blocks, so each chunk is decoded about
//! once per pass. With ranks, each rank draws from its own region of each
//! child (see [`regions`]).

use std::sync::Arc;

use super::block_pool::PoolDraws;
use super::{ChunkShuffleSampler, EpochRng, epoch_rng};

/// How a mixing sampler walks one child.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChildOrder {
    /// A permutation of the child's samples (of the rank's region), a new
    /// one for every pass; the identity without shuffle.
    #[default]
    Permutation,
    /// The block pool over the child's chunk blocks (local indices): every
    /// pass permutes the blocks and draws through `pool_blocks()` of
    /// them, the pool growing from [`POOL_RAMP_BLOCKS`](super::POOL_RAMP_BLOCKS)
    /// by one block per `batch_size()` draws of this child.
    Pool(ChunkShuffleSampler),
}

impl ChildOrder {
    /// Blocks in the pool (`None` for a permutation).
    pub fn pool_blocks(&self) -> Option<usize> {
        match self {
            ChildOrder::Permutation => None,
            ChildOrder::Pool(s) => Some(s.pool_blocks()),
        }
    }
}

/// Rank `rank`'s share of `n` items dealt one at a time to `world` ranks
/// starting at item `start` (item `g` goes to rank `g % world`): how the
/// mixing samplers split a child's draws among ranks. Every rank's share is
/// `floor` or `ceil` of `n / world`, and over the ranks they sum to `n`.
pub(crate) fn dealt(start: usize, n: usize, rank: usize, world: usize) -> usize {
    // Items below `x` that go to `rank`.
    let below = |x: usize| if x > rank { (x - rank - 1) / world + 1 } else { 0 };
    below(start + n) - below(start)
}

/// The regions of a child of `len` samples that `world` ranks draw from,
/// given each rank's draws (`draws[r]`): contiguous, in rank order, sized
/// in proportion to the draws (`len * S_r / T` cut points, `S_r` the draws
/// of the ranks before `r`, `T` all draws), so that a rank that draws no
/// more than the child holds never draws more than its region holds
/// (a region is at least `floor(len * draws[r] / T)`). With no draws the
/// child is cut into equal regions.
pub(crate) fn regions(len: usize, draws: &[usize]) -> Vec<(usize, usize)> {
    let w = draws.len().max(1);
    let total: usize = draws.iter().sum();
    let cut = |k: usize| -> usize {
        let s: usize = draws[..k].iter().sum();
        // u128: len * s fits whatever the sizes.
        if total == 0 {
            (len as u128 * k as u128 / w as u128) as usize
        } else {
            (len as u128 * s as u128 / total as u128) as usize
        }
    };
    (0..draws.len()).map(|k| (cut(k), cut(k + 1))).collect()
}

/// One child's local indices for one rank in an epoch: region `lo..hi` of
/// the child, walked pass after pass as its [`ChildOrder`] says. A pass of
/// a pool is drawn as it is taken (the pool's state is held, not the
/// pass); a permutation's pass is held whole.
pub(crate) struct Stream {
    lo: usize,
    hi: usize,
    children: Arc<Vec<ChildOrder>>,
    d: usize,
    shuffle: bool,
    epoch: u64,
    rank: usize,
    pass: Pass,
    passes: u64,
}

enum Pass {
    Permutation { order: Vec<usize>, cursor: usize },
    Pool(PoolDraws),
}

impl Stream {
    /// Child `d`'s stream over `lo..hi`, walked as `children[d]` says (a
    /// permutation past its end). A permutation draws from `rng` (the
    /// rank's stream); a pool from its own seed.
    pub(crate) fn new(
        (lo, hi): (usize, usize),
        (children, d): (Arc<Vec<ChildOrder>>, usize),
        shuffle: bool,
        (epoch, rank): (u64, usize),
        rng: &mut EpochRng,
    ) -> Stream {
        let pass = Pass::Permutation { order: Vec::new(), cursor: 0 };
        let mut s = Stream { lo, hi, children, d, shuffle, epoch, rank, pass, passes: 0 };
        s.refill(rng);
        s
    }

    fn refill(&mut self, rng: &mut EpochRng) {
        match self.children.get(self.d) {
            Some(ChildOrder::Pool(p)) => {
                // A pass is an epoch of the child's pool, keyed by (epoch,
                // pass) so that passes differ.
                let key = self.epoch ^ self.passes.wrapping_mul(0xD6E8_FEB8_6659_FD93);
                self.pass = Pass::Pool(p.draws(key, self.rank, self.lo, self.hi));
            }
            _ => {
                let mut order =
                    match std::mem::replace(&mut self.pass, Pass::Permutation { order: Vec::new(), cursor: 0 }) {
                        Pass::Permutation { order, .. } if !order.is_empty() => order,
                        _ => (self.lo..self.hi).collect(),
                    };
                if self.shuffle {
                    super::shuffle(&mut order, rng);
                }
                self.pass = Pass::Permutation { order, cursor: 0 };
            }
        }
        self.passes += 1;
    }

    fn take(&mut self) -> Option<usize> {
        match &mut self.pass {
            Pass::Permutation { order, cursor } => {
                let i = order.get(*cursor).copied();
                *cursor += 1;
                i
            }
            Pass::Pool(p) => p.next(),
        }
    }

    /// The next local index; a rank draws from a child only with a region
    /// to draw from (see [`region_of`]).
    pub(crate) fn next(&mut self, rng: &mut EpochRng) -> usize {
        if let Some(i) = self.take() {
            return i;
        }
        self.refill(rng);
        self.take().unwrap_or(self.lo)
    }
}

/// Rank `rank`'s region of a child of `len` samples whose draws the ranks
/// take as `draws` says; the whole child where that region would be empty
/// but the rank draws from it (a child smaller than the ranks drawing it).
pub(crate) fn region_of(len: usize, draws: &[usize], rank: usize) -> (usize, usize) {
    let (lo, hi) = regions(len, draws).get(rank).copied().unwrap_or((0, len));
    if hi == lo && draws.get(rank).is_some_and(|&d| d > 0) { (0, len) } else { (lo, hi) }
}

/// What a rank's draws need of a mixture: dataset lengths, global
/// offsets, how each dataset is walked, and the shuffle.
#[derive(Clone)]
pub(crate) struct MixSpec {
    pub lengths: Vec<usize>,
    pub offsets: Vec<usize>,
    pub children: Arc<Vec<ChildOrder>>,
    pub shuffle: bool,
}

impl MixSpec {
    /// Each dataset's stream for rank `rank` of `world`, whose draws of
    /// dataset `d` over the ranks are `draws(d, r)`.
    fn streams(
        &self,
        (epoch, rank, world): (u64, usize, usize),
        draws: impl Fn(usize, usize) -> usize,
        rng: &mut EpochRng,
    ) -> Vec<Stream> {
        (0..self.lengths.len())
            .map(|d| {
                let all: Vec<usize> = (0..world).map(|r| draws(d, r)).collect();
                let region = region_of(self.lengths[d], &all, rank);
                Stream::new(region, (self.children.clone(), d), self.shuffle, (epoch, rank), rng)
            })
            .collect()
    }
}

/// One rank's samples of a [`MultiDatasetSampler`](super::MultiDatasetSampler)
/// epoch, drawn one at a time: which dataset each draw comes from is a
/// uniformly random arrangement of the rank's counts (drawn without
/// replacement from what is left of each), or dataset after dataset
/// without shuffle; each dataset's samples come from its stream.
pub(crate) struct MixDraws {
    spec: MixSpec,
    left: Vec<usize>,
    left_total: usize,
    streams: Vec<Stream>,
    rng: EpochRng,
}

impl MixDraws {
    /// Rank `rank` of `world`'s draws in `epoch`: `mine[d]` of dataset `d`,
    /// dataset `d`'s draws over the ranks being `draws(d, r)`.
    pub(crate) fn new(
        spec: MixSpec,
        (seed, epoch, rank, world): (u64, u64, usize, usize),
        mine: Vec<usize>,
        draws: impl Fn(usize, usize) -> usize,
    ) -> MixDraws {
        let mut rng = rank_rng(seed, epoch, rank, world);
        let streams = spec.streams((epoch, rank, world), draws, &mut rng);
        MixDraws { left_total: mine.iter().sum(), left: mine, spec, streams, rng }
    }
}

impl Iterator for MixDraws {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left_total == 0 {
            return None;
        }
        let d = if self.spec.shuffle {
            let mut r = super::below(&mut self.rng, self.left_total as u64) as usize;
            let mut d = 0;
            while r >= self.left[d] {
                r -= self.left[d];
                d += 1;
            }
            d
        } else {
            self.left.iter().position(|&c| c > 0)?
        };
        self.left[d] -= 1;
        self.left_total -= 1;
        Some(self.spec.offsets[d] + self.streams[d].next(&mut self.rng))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left_total, Some(self.left_total))
    }
}

/// One rank's batches of a [`MultiDatasetBatchSampler`](super::MultiDatasetBatchSampler)
/// epoch, drawn one batch at a time: `counts[d]` samples of dataset `d`
/// each, shuffled inside the batch with shuffle on.
pub(crate) struct MixBatches {
    spec: MixSpec,
    counts: Vec<usize>,
    left: usize,
    streams: Vec<Stream>,
    rng: EpochRng,
}

impl MixBatches {
    /// Rank `rank` of `world`'s `batches` batches in `epoch`; dataset `d`'s
    /// draws over the ranks are `draws(d, r)`.
    pub(crate) fn new(
        spec: MixSpec,
        (seed, epoch, rank, world): (u64, u64, usize, usize),
        (counts, batches): (Vec<usize>, usize),
        draws: impl Fn(usize, usize) -> usize,
    ) -> MixBatches {
        let mut rng = rank_rng(seed, epoch, rank, world);
        let streams = spec.streams((epoch, rank, world), draws, &mut rng);
        MixBatches { spec, counts, left: batches, streams, rng }
    }
}

impl Iterator for MixBatches {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut b = Vec::with_capacity(self.counts.iter().sum());
        for (d, &c) in self.counts.iter().enumerate() {
            for _ in 0..c {
                b.push(self.spec.offsets[d] + self.streams[d].next(&mut self.rng));
            }
        }
        if self.spec.shuffle {
            super::shuffle(&mut b, &mut self.rng);
        }
        Some(b)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// The stream of draws of rank `rank` (of `world`) in `epoch` for a
/// mixture seeded `seed`: the mixture's own stream for one rank, one per
/// rank else.
pub(crate) fn rank_rng(seed: u64, epoch: u64, rank: usize, world: usize) -> EpochRng {
    if world <= 1 {
        epoch_rng(seed, epoch)
    } else {
        epoch_rng(seed ^ (rank as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407), epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dealt_shares_sum_and_differ_by_at_most_one() {
        for start in [0, 1, 5, 17] {
            for n in [0, 1, 3, 10, 101] {
                for w in 1..6 {
                    let s: Vec<usize> = (0..w).map(|r| dealt(start, n, r, w)).collect();
                    assert_eq!(s.iter().sum::<usize>(), n);
                    assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1);
                    // Against counting by hand.
                    for (r, &c) in s.iter().enumerate() {
                        assert_eq!(c, (start..start + n).filter(|g| g % w == r).count());
                    }
                }
            }
        }
    }

    #[test]
    fn regions_cover_the_child_and_hold_each_ranks_draws() {
        for len in [0, 1, 7, 100, 1001] {
            for draws in [vec![3, 3, 2], vec![0, 5], vec![0, 0], vec![10], vec![1, 0, 1, 0]] {
                let r = regions(len, &draws);
                assert_eq!(r.first().map(|x| x.0), Some(0));
                assert_eq!(r.last().map(|x| x.1), Some(len));
                assert!(r.windows(2).all(|w| w[0].1 == w[1].0));
                let total: usize = draws.iter().sum();
                if total <= len {
                    assert!(r.iter().zip(&draws).all(|(&(lo, hi), &d)| hi - lo >= d), "{len} {draws:?} {r:?}");
                }
            }
        }
    }
}

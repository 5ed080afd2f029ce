//! How a mixing sampler draws one child's samples: [`ChildOrder`], and the
//! per-rank draw streams of the mixing samplers.
//!
//! A shuffled mixture walks each child pass after pass. A child whose
//! decoded store fits its share of the cache is walked in a permutation; a
//! larger one through a block pool ([`ChunkShuffleSampler`]), as a single
//! store larger than its cache is: each pass permutes the child's chunk
//! blocks and draws from `K` resident blocks, so each chunk is decoded about
//! once per pass. With ranks, each rank draws from its own region of each
//! child (see [`regions`]).

use super::{ChunkShuffleSampler, EpochRng, epoch_rng};

/// How a mixing sampler walks one child.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChildOrder {
    /// A permutation of the child's samples (of the rank's region), a new
    /// one for every pass; the identity without shuffle.
    #[default]
    Permutation,
    /// The block pool over the child's chunk blocks (local indices): every
    /// pass permutes the blocks and draws through `buffer_blocks()` of
    /// them, the pool growing from [`POOL_RAMP_BLOCKS`](super::POOL_RAMP_BLOCKS)
    /// by one block per `batch_size()` draws of this child.
    Pool(ChunkShuffleSampler),
}

impl ChildOrder {
    /// Blocks in the pool (`None` for a permutation).
    pub fn pool_blocks(&self) -> Option<usize> {
        match self {
            ChildOrder::Permutation => None,
            ChildOrder::Pool(s) => Some(s.buffer_blocks()),
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
/// the child, walked pass after pass as its [`ChildOrder`] says.
pub(crate) struct Stream<'a> {
    lo: usize,
    hi: usize,
    order: &'a ChildOrder,
    shuffle: bool,
    epoch: u64,
    rank: usize,
    /// The current pass's local indices and how far they were taken.
    pass: Vec<usize>,
    cursor: usize,
    passes: u64,
}

impl<'a> Stream<'a> {
    /// A stream over `lo..hi`. A permutation draws from `rng` (the
    /// mixture's stream, as it always has); a pool from its own seed.
    pub(crate) fn new(
        (lo, hi): (usize, usize),
        order: &'a ChildOrder,
        shuffle: bool,
        (epoch, rank): (u64, usize),
        rng: &mut EpochRng,
    ) -> Stream<'a> {
        let mut s = Stream { lo, hi, order, shuffle, epoch, rank, pass: Vec::new(), cursor: 0, passes: 0 };
        s.refill(rng);
        s
    }

    fn refill(&mut self, rng: &mut EpochRng) {
        match self.order {
            ChildOrder::Permutation => {
                if self.passes == 0 {
                    self.pass = (self.lo..self.hi).collect();
                }
                if self.shuffle {
                    super::shuffle(&mut self.pass, rng);
                }
            }
            // A pass is an epoch of the child's pool sampler, keyed by
            // (epoch, pass) so that passes differ.
            ChildOrder::Pool(p) => {
                let key = self.epoch ^ self.passes.wrapping_mul(0xD6E8_FEB8_6659_FD93);
                self.pass = p.drawn(key, self.rank, self.lo, self.hi);
            }
        }
        self.cursor = 0;
        self.passes += 1;
    }

    /// The next local index; callers never ask an empty region (the draws
    /// of a rank are dealt in proportion to its region).
    pub(crate) fn next(&mut self, rng: &mut EpochRng) -> usize {
        if self.cursor == self.pass.len() {
            self.refill(rng);
        }
        let i = self.pass.get(self.cursor).copied().unwrap_or(self.lo);
        self.cursor += 1;
        i
    }
}

/// The stream of draws of rank `rank` (of `world`) in `epoch` for a
/// mixture seeded `seed`: the mixture's own stream for one rank (the order
/// of one rank is the whole epoch's, as it always was), one per rank else.
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

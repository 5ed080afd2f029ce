//! The block pool's size ([`pool_blocks`]) and its draws, one sample at a
//! time ([`PoolDraws`]), behind [`ChunkShuffleSampler`](super::ChunkShuffleSampler) and the mixtures'
//! per-dataset pools.

use crate::source::CacheFit;

use std::sync::Arc;

use super::{EpochRng, below, shuffle};

/// Default pool size `pool_blocks`, in blocks, of a sampler built by hand. The
/// [`DataLoader`](crate::DataLoader)'s default shuffle sizes its pool from
/// the reader's cache instead (see
/// [`DataLoaderBuilder::with_shuffle`](crate::DataLoaderBuilder::with_shuffle)).
pub const DEFAULT_POOL_BLOCKS: usize = 16;

/// Blocks in the pool at the start of an epoch; it then grows by one block
/// per batch drawn until it holds `pool_blocks`. The first read window then decodes
/// a few blocks rather than the whole pool.
pub const POOL_RAMP_BLOCKS: usize = 4;

/// The fewest blocks a pool chosen from the cache holds: about 40 distinct
/// blocks in a batch of 64 once the pool is full. A cache too small for
/// that many blocks' chunks still gets this many (it then decodes some
/// chunks twice) rather than batches drawn from a handful of blocks.
pub const MIN_POOL_BLOCKS: usize = 64;

/// How the pool size is found: the pool may take half of the cache that
/// the resident arrays leave, so that the chunks of the blocks that replace
/// used-up ones, and the pool's chunks straddling a block's ends, fit too.
const POOL_SHARE_OF_CACHE: u64 = 2;

/// Pool blocks for a store of `blocks` blocks whose decoded sizes are
/// `fit`: `None` (a full permutation) when the store fits the cache or the
/// pool would hold every block. The rule `with_shuffle(true)` and
/// [`SizeAwareSampler::from_reader`](crate::sampler::SizeAwareSampler::from_reader) follow.
///
/// ```
/// use atomzarr::sampler::{MIN_POOL_BLOCKS, pool_blocks};
/// use atomzarr::source::CacheFit;
/// let mib = 1u64 << 20;
/// let fit = CacheFit { decoded_bytes: 3200 * mib, resident_bytes: 200 * mib, cache_bytes: 1280 * mib };
/// // (1280 - 200) / 2 MiB of pool over 3 MiB bulky blocks.
/// assert_eq!(pool_blocks(fit, 1000), Some(180));
/// assert_eq!(pool_blocks(CacheFit { cache_bytes: 0, ..fit }, 1000), Some(MIN_POOL_BLOCKS));
/// assert_eq!(pool_blocks(CacheFit { cache_bytes: 4000 * mib, ..fit }, 1000), None);
/// ```
pub fn pool_blocks(fit: CacheFit, blocks: usize) -> Option<usize> {
    pool_blocks_at_least(fit, blocks, MIN_POOL_BLOCKS)
}

/// [`pool_blocks`] with another floor than [`MIN_POOL_BLOCKS`]: what a
/// shuffled mixture sizes each dataset's pool by, with the samples a batch
/// draws from that dataset as the floor (a batch of 64 drawing 32 of them
/// from a pool of 32 blocks draws from about 20 blocks). A dataset's share
/// of the mixture's cache is smaller than a whole cache, and its pool is
/// drawn from more slowly, so a pool of the single-store floor would not
/// fit its share and would decode chunks more than once per pass.
///
/// ```
/// use atomzarr::sampler::pool_blocks_at_least;
/// use atomzarr::source::CacheFit;
/// let mib = 1u64 << 20;
/// let fit = CacheFit { decoded_bytes: 4700 * mib, resident_bytes: 460 * mib, cache_bytes: 720 * mib };
/// // (720 - 460) / 2 MiB over 630 blocks of 6.7 MiB: 19 blocks, raised to 32.
/// assert_eq!(pool_blocks_at_least(fit, 630, 32), Some(32));
/// assert_eq!(pool_blocks_at_least(fit, 630, 8), Some(19));
/// ```
pub fn pool_blocks_at_least(fit: CacheFit, blocks: usize, min: usize) -> Option<usize> {
    if fit.fits() || blocks == 0 {
        return None;
    }
    let free = fit.cache_bytes.saturating_sub(fit.resident_bytes) / POOL_SHARE_OF_CACHE;
    // u128: `free * blocks` cannot overflow.
    let k = (u128::from(free) * blocks as u128 / u128::from(fit.bulky_bytes().max(1))) as usize;
    let k = k.max(min.max(1));
    (k < blocks).then_some(k)
}

/// The draws of a block pool over a stretch of the store, one at a time
/// ([`ChunkShuffleSampler::draws`]).
pub(crate) struct PoolDraws {
    /// The items the runs' positions stand for (`None`: the positions).
    items: Option<Arc<[usize]>>,
    /// The positions of the runs drawn (`None`: all of them).
    members: Option<Arc<super::piece_set::PieceSet>>,
    /// `pool_blocks`, and the draws per block the pool grows by.
    pool_blocks: usize,
    batch_size: usize,
    /// The stretch's runs of blocks, permuted.
    runs: Vec<(usize, usize)>,
    rng: EpochRng,
    /// The samples (item positions) left in each resident block.
    pool: Vec<Vec<usize>>,
    /// The next run to enter the pool.
    next: usize,
    /// Draws made, and to make.
    t: usize,
    total: usize,
}

impl PoolDraws {
    /// The draws of a pool of `pool_blocks` blocks (growing by one per
    /// `batch_size` draws) over `runs` (permuted runs of blocks, positions
    /// of `items`) from `rng`.
    pub(crate) fn new(
        items: Option<Arc<[usize]>>,
        (pool_blocks, batch_size): (usize, usize),
        runs: Vec<(usize, usize)>,
        rng: EpochRng,
    ) -> PoolDraws {
        let total = runs.iter().map(|&(s, e)| e - s).sum();
        let batch_size = batch_size.max(1);
        PoolDraws { items, members: None, pool_blocks, batch_size, runs, rng, pool: Vec::new(), next: 0, t: 0, total }
    }

    /// Draws only the positions of `members` (every run holds at least
    /// one of them).
    pub(crate) fn only(mut self, members: Arc<super::piece_set::PieceSet>) -> PoolDraws {
        self.total = self.runs.iter().map(|&(a, b)| members.count_in(a, b)).sum();
        self.members = Some(members);
        self
    }

    /// Yields the positions drawn rather than the items they stand for.
    pub(crate) fn positions(mut self) -> PoolDraws {
        self.items = None;
        self
    }
}

impl Iterator for PoolDraws {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.t < self.total {
            let cap = self.pool_blocks.min(POOL_RAMP_BLOCKS.max(1) + self.t / self.batch_size);
            while self.pool.len() < cap && self.next < self.runs.len() {
                let (a, b) = self.runs[self.next];
                // Shuffled on entry, then taken from the end: the same as
                // drawing a uniformly random sample left in the block, with
                // the random accesses inside one block at a time (popping
                // from 64 blocks' lists at random places was bound by cache
                // misses).
                let mut block: Vec<usize> = match &self.members {
                    Some(m) => m.members(a, b),
                    None => (a..b).collect(),
                };
                shuffle(&mut block, &mut self.rng);
                self.pool.push(block);
                self.next += 1;
            }
            self.t += 1;
            if self.pool.is_empty() {
                continue;
            }
            // A block uniformly, then its next sample: every resident block
            // is drawn from at the same rate, whatever is left of it.
            let k = below(&mut self.rng, self.pool.len() as u64) as usize;
            let drawn = self.pool[k].pop();
            // A resident block is never empty: emptied ones leave here.
            if self.pool[k].is_empty() {
                self.pool.swap_remove(k);
            }
            if let Some(p) = drawn {
                return Some(self.items.as_ref().map_or(p, |it| it[p]));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.total - self.t;
        (left, Some(left))
    }
}

#[cfg(test)]
mod pool_blocks_tests {
    use super::*;

    #[test]
    fn the_pool_takes_half_the_cache_the_resident_arrays_leave() {
        let mib = 1u64 << 20;
        let fit = |decoded: u64, resident: u64, cache: u64| CacheFit {
            decoded_bytes: decoded * mib,
            resident_bytes: resident * mib,
            cache_bytes: cache * mib,
        };
        assert_eq!(pool_blocks(fit(1000, 100, 1280), 1000), None); // fits
        // 3,200 MiB in 1,000 blocks (3.1 MiB bulky each); (1280 - 200) / 2 = 540 MiB.
        assert_eq!(pool_blocks(fit(3200, 200, 1280), 1000), Some(180));
        // Never fewer than MIN_POOL_BLOCKS, never all blocks.
        assert_eq!(pool_blocks(fit(100_000, 0, 1280), 1000), Some(MIN_POOL_BLOCKS));
        assert_eq!(pool_blocks(fit(100_000, 0, 0), 1000), Some(MIN_POOL_BLOCKS));
        assert_eq!(pool_blocks(fit(2000, 0, 1280), 50), None); // 64 blocks would be all of them
    }
}

//! Rank sharding for data-parallel training, as PyTorch's
//! `DistributedSampler` does it: every rank computes the same global epoch
//! (same seed, same epoch), pads it by repeating items from the start (or
//! drops the tail with `drop_last`) to a multiple of `world_size`, and keeps
//! every `world_size`-th item starting at `rank`. The shards are disjoint and
//! together cover the epoch; every rank gets the same number of items, so
//! collective ops stay in step.

use crate::error::{Error, Result};

use super::{BatchSampler, Sampler};

/// Which shard of an epoch this process takes: `rank` of `world_size`,
/// padding (default) or dropping the tail that does not divide evenly.
///
/// ```
/// use atomzarr::sampler::Shard;
/// let s = Shard::new(1, 3).unwrap();
/// assert_eq!(s.apply((0..7).collect()), vec![1, 4, 0]); // padded with item 0
/// assert_eq!(s.with_drop_last(true).apply((0..7).collect::<Vec<_>>()), vec![1, 4]);
/// assert!(Shard::new(2, 2).is_err());
/// assert!(Shard::new(0, 0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    world_size: usize,
    rank: usize,
    drop_last: bool,
}

impl Default for Shard {
    /// One replica: the whole epoch.
    fn default() -> Self {
        Shard { world_size: 1, rank: 0, drop_last: false }
    }
}

impl Shard {
    /// Rank `rank` of `world_size`, padding the tail.
    ///
    /// # Errors
    /// [`Error::Config`] for `world_size == 0` or `rank >= world_size`.
    pub fn new(rank: usize, world_size: usize) -> Result<Shard> {
        Error::check_at_least_one("world_size", world_size)?;
        Error::check_rank(rank, world_size)?;
        Ok(Shard { world_size, rank, drop_last: false })
    }

    /// Drop the tail that does not divide evenly (instead of padding it by
    /// repeating items from the start of the epoch).
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.drop_last = yes;
        self
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Whether the uneven tail is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// Items this shard gets out of an epoch of `n`.
    pub fn len_of(&self, n: usize) -> usize {
        if self.drop_last { n / self.world_size } else { n.div_ceil(self.world_size) }
    }

    /// This rank's items of a global epoch.
    pub fn apply<T: Clone>(&self, mut items: Vec<T>) -> Vec<T> {
        if self.world_size == 1 {
            return items;
        }
        let n = items.len();
        let total = self.len_of(n) * self.world_size;
        if total <= n {
            items.truncate(total);
        } else if n > 0 {
            // Pad by cycling from the start (the epoch may be shorter than the
            // padding when n < world_size).
            let pad: Vec<T> = items.iter().cycle().take(total - n).cloned().collect();
            items.extend(pad);
        }
        items.into_iter().skip(self.rank).step_by(self.world_size).collect()
    }
}

/// Any [`Sampler`], sharded across ranks: each rank yields its share of the
/// inner sampler's epoch. All ranks must use the same inner sampler (same
/// seed) so they shard the same permutation.
///
/// ```
/// use atomzarr::sampler::{DistributedSampler, RandomSampler, Sampler};
/// let shards: Vec<Vec<usize>> = (0..3)
///     .map(|r| DistributedSampler::new(RandomSampler::new(9, 7), r, 3).unwrap().indices(4))
///     .collect();
/// let mut all: Vec<usize> = shards.concat();
/// all.sort();
/// assert_eq!(all, (0..9).collect::<Vec<_>>()); // disjoint and covering
/// assert!(DistributedSampler::new(RandomSampler::new(9, 7), 3, 3).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct DistributedSampler<S> {
    inner: S,
    shard: Shard,
}

impl<S: Sampler> DistributedSampler<S> {
    /// Rank `rank` of `world_size` of `inner`'s epochs, padding the tail.
    ///
    /// # Errors
    /// As [`Shard::new`].
    pub fn new(inner: S, rank: usize, world_size: usize) -> Result<Self> {
        Ok(DistributedSampler { inner, shard: Shard::new(rank, world_size)? })
    }

    /// As [`DistributedSampler::new`] with a prepared [`Shard`].
    pub fn with_shard(inner: S, shard: Shard) -> Self {
        DistributedSampler { inner, shard }
    }

    /// Drop the uneven tail instead of padding it.
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.shard = self.shard.with_drop_last(yes);
        self
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }
}

impl<S: Sampler> Sampler for DistributedSampler<S> {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        self.shard.apply(self.inner.indices(epoch))
    }
    fn len(&self) -> usize {
        self.shard.len_of(self.inner.len())
    }
}

/// Any [`BatchSampler`], sharded across ranks by whole batches: rank `r`
/// gets batches `r, r + R, r + 2R, ...` of the global epoch (padded by
/// repeating batches from the start, or the tail dropped). Batch membership
/// is the inner sampler's; only which rank reads a batch is decided here.
///
/// ```
/// use atomzarr::sampler::{BatchSampler, DistributedBatchSampler, ListBatchSampler};
/// let inner = ListBatchSampler::new(vec![vec![0, 1], vec![2], vec![3, 4], vec![5]]);
/// let r1 = DistributedBatchSampler::new(inner, 1, 3).unwrap();
/// assert_eq!(r1.batches(0), vec![vec![2], vec![0, 1]]); // batch 1, then batch 0 again as padding
/// assert_eq!(r1.len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct DistributedBatchSampler<S> {
    inner: S,
    shard: Shard,
}

impl<S: BatchSampler> DistributedBatchSampler<S> {
    /// Rank `rank` of `world_size` of `inner`'s batches, padding the tail.
    ///
    /// # Errors
    /// As [`Shard::new`].
    pub fn new(inner: S, rank: usize, world_size: usize) -> Result<Self> {
        Ok(DistributedBatchSampler { inner, shard: Shard::new(rank, world_size)? })
    }

    /// As [`DistributedBatchSampler::new`] with a prepared [`Shard`].
    pub fn with_shard(inner: S, shard: Shard) -> Self {
        DistributedBatchSampler { inner, shard }
    }

    /// Drop the uneven tail of batches instead of padding it.
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.shard = self.shard.with_drop_last(yes);
        self
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }
}

impl<S: BatchSampler> BatchSampler for DistributedBatchSampler<S> {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.shard.apply(self.inner.batches(epoch))
    }
    /// Per-rank batches for an epoch of `inner.len()` batches (exact when the
    /// inner count does not vary by epoch; see [`super::SizeAwareSampler`]).
    fn len(&self) -> usize {
        self.shard.len_of(self.inner.len())
    }
}

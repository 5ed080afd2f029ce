//! Samplers decide sample order and batch membership, nothing else.
//!
//! A [`Sampler`] yields the logical indices of one epoch in order; a
//! [`BatchSampler`] yields the batches of one epoch. Both are stateless in the
//! epoch: the [`DataLoader`](crate::DataLoader) passes the epoch number, so a
//! seeded shuffle is reproducible per `(seed, epoch)` and differs across epochs.
//!
//! ## Epochs (`set_epoch`)
//!
//! PyTorch samplers carry a mutable epoch (`sampler.set_epoch(e)`). Here the
//! epoch is the argument of [`Sampler::indices`] / [`BatchSampler::batches`]:
//! an implementation must return the same result for the same `(options,
//! epoch)` on every call, on every rank and in every process, and should draw
//! its randomness from [`epoch_rng`]`(seed, epoch)`. `DataLoader::set_epoch(e)`
//! is therefore all a training loop (or a resume) needs; samplers hold no
//! state to restore.
//!
//! | sampler | kind | decides |
//! |---|---|---|
//! | [`SequentialSampler`], [`RandomSampler`], [`ListSampler`] | [`Sampler`] | order of `0..len` or of a list |
//! | [`SamplerBatches`], [`ListBatchSampler`] | [`BatchSampler`] | fixed-size or fixed batches |
//! | [`SizeAwareSampler`] | [`BatchSampler`] | batches bounded by atoms / edges / graphs |
//! | [`DistributedSampler`], [`DistributedBatchSampler`] ([`Shard`]) | both | this rank's share of any sampler |
//! | [`MultiDatasetSampler`] | [`Sampler`] | per-sample mixing of [`MultiReader`](crate::MultiReader) children by rates |
//! | [`MultiDatasetBatchSampler`] | [`BatchSampler`] | exact per-dataset counts in every batch |
//! | [`ChunkShuffleSampler`] | both | block-pool shuffle: chunk blocks permuted, batches drawn from `pool_blocks` resident blocks, a region of the store per rank (the default shuffle of stores larger than the cache) |
//!
//! ```
//! use atomzarr::sampler::{BatchSampler, RandomSampler, Sampler, SamplerBatches};
//! let s = RandomSampler::new(10, 7);
//! assert_eq!(s.indices(0), s.indices(0));
//! assert_ne!(s.indices(0), s.indices(1));
//! let b = SamplerBatches::new(s, 4, true);
//! assert_eq!(b.len(), 2);
//! assert!(b.batches(3).iter().all(|x| x.len() == 4));
//! ```

use rand::Rng;

mod block_pool;
mod child_order;
mod chunk_shuffle;
mod distributed;
mod fit;
mod mixing;
mod piece_set;
mod rates;
mod regroup;
mod size_aware;

pub use block_pool::{DEFAULT_POOL_BLOCKS, MIN_POOL_BLOCKS, POOL_RAMP_BLOCKS, pool_blocks, pool_blocks_at_least};
pub use child_order::ChildOrder;
pub use chunk_shuffle::ChunkShuffleSampler;
pub use distributed::{DistributedBatchSampler, DistributedSampler, Shard};
pub(crate) use fit::{ChildPools, FittedMix, runs_as_chunk_blocks};
pub use mixing::{
    EpochPolicy, MultiDatasetBatchSampler, MultiDatasetBatchSamplerBuilder, MultiDatasetSampler,
    MultiDatasetSamplerBuilder, SamplesPerDataset,
};
pub use rates::mixture_rates;
pub use size_aware::{SizeAwareOptions, SizeAwareSampler};

/// Yields the logical indices of one epoch.
pub trait Sampler: Send + Sync {
    /// The indices of epoch `epoch`, in order.
    fn indices(&self, epoch: u64) -> Vec<usize>;
    /// How many indices an epoch yields.
    fn len(&self) -> usize;
    /// True when an epoch yields nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether every epoch is `0..len()` in order: the
    /// [`DataLoader`](crate::DataLoader) then cuts batches from the range as
    /// they are taken instead of holding the epoch's indices. Default: false.
    fn in_order(&self) -> bool {
        false
    }
}

/// Yields the batches of one epoch.
pub trait BatchSampler: Send + Sync {
    /// The batches of epoch `epoch`, in order.
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>>;
    /// Batches per epoch.
    fn len(&self) -> usize;
    /// True when an epoch yields no batch.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `Sampler` for a pointer to one: every method forwarded.
macro_rules! forward_sampler {
    ($($ptr:ty),*) => {$(
        #[deny(clippy::missing_trait_methods)]
        impl<S: Sampler + ?Sized> Sampler for $ptr {
            fn indices(&self, epoch: u64) -> Vec<usize> {
                (**self).indices(epoch)
            }
            fn len(&self) -> usize {
                (**self).len()
            }
            fn is_empty(&self) -> bool {
                (**self).is_empty()
            }
            fn in_order(&self) -> bool {
                (**self).in_order()
            }
        }
    )*};
}
forward_sampler!(Box<S>, std::sync::Arc<S>);

impl<S: BatchSampler + ?Sized> BatchSampler for std::sync::Arc<S> {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        (**self).batches(epoch)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

impl<S: BatchSampler + ?Sized> BatchSampler for Box<S> {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        (**self).batches(epoch)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

/// The generator behind every shuffle: PCG-64 with a 128-bit
/// multiplicative state (`rand_pcg::Pcg64Mcg`), whose output stream the
/// rand_pcg crate documents as reproducible across versions and platforms.
/// (rand's `StdRng` is explicitly not: its algorithm may change between
/// releases, which would silently change every epoch's order.)
pub type EpochRng = rand_pcg::Pcg64Mcg;

/// SplitMix64: expands a 64-bit seed into well-mixed words (written out so
/// the seeding does not depend on any crate's helper either).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator for `(seed, epoch)`; the same pair gives the same stream on
/// every machine and with every release of atomzarr's dependencies.
pub fn epoch_rng(seed: u64, epoch: u64) -> EpochRng {
    // Mix so that (seed, epoch) and (seed + 1, epoch - 1) differ.
    let s = seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let hi = splitmix64(s);
    let lo = splitmix64(hi ^ 0xD1B5_4A32_D192_ED03);
    EpochRng::new((u128::from(hi) << 64) | u128::from(lo))
}

/// A uniform integer in `0..n` (`n > 0`) by Lemire's multiply-and-reject
/// method: unbiased, and defined by this code alone.
fn below(rng: &mut impl Rng, n: u64) -> u64 {
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// Shuffles `v` in place (Fisher-Yates, from the last element down).
/// Written out rather than rand's `SliceRandom::shuffle`, whose draws are
/// not promised to stay the same across rand releases: with this and
/// [`EpochRng`], an epoch's order is pinned (`tests/samplers.rs` checks one).
///
/// ```
/// use atomzarr::sampler::{epoch_rng, shuffle};
/// let mut a: Vec<u32> = (0..8).collect();
/// let mut b = a.clone();
/// shuffle(&mut a, &mut epoch_rng(7, 0));
/// shuffle(&mut b, &mut epoch_rng(7, 0));
/// assert_eq!(a, b);
/// let mut sorted = a.clone();
/// sorted.sort();
/// assert_eq!(sorted, (0..8).collect::<Vec<_>>());
/// ```
pub fn shuffle<T>(v: &mut [T], rng: &mut impl Rng) {
    for i in (1..v.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// `0..len` in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequentialSampler {
    len: usize,
}

impl SequentialSampler {
    /// A sampler over `0..len`.
    pub fn new(len: usize) -> Self {
        SequentialSampler { len }
    }
}

impl Sampler for SequentialSampler {
    fn indices(&self, _epoch: u64) -> Vec<usize> {
        (0..self.len).collect()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn in_order(&self) -> bool {
        true
    }
}

/// A permutation of `0..len`, seeded, reshuffled per epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomSampler {
    len: usize,
    seed: u64,
}

impl RandomSampler {
    /// A shuffled sampler over `0..len`.
    pub fn new(len: usize, seed: u64) -> Self {
        RandomSampler { len, seed }
    }
}

impl Sampler for RandomSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.len).collect();
        shuffle(&mut v, &mut epoch_rng(self.seed, epoch));
        v
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A fixed list of indices (a subset, a split, a benchmark order), optionally
/// shuffled per epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSampler {
    indices: Vec<usize>,
    shuffle: Option<u64>,
}

impl ListSampler {
    /// Yields `indices` in the given order every epoch.
    pub fn new(indices: Vec<usize>) -> Self {
        ListSampler { indices, shuffle: None }
    }

    /// Yields a per-epoch permutation of `indices`, seeded.
    pub fn shuffled(indices: Vec<usize>, seed: u64) -> Self {
        ListSampler { indices, shuffle: Some(seed) }
    }

    /// The underlying list.
    pub fn list(&self) -> &[usize] {
        &self.indices
    }
}

impl Sampler for ListSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut v = self.indices.clone();
        if let Some(seed) = self.shuffle {
            shuffle(&mut v, &mut epoch_rng(seed, epoch));
        }
        v
    }
    fn len(&self) -> usize {
        self.indices.len()
    }
}

/// Groups a [`Sampler`]'s indices into batches of `batch_size`.
#[derive(Debug, Clone)]
pub struct SamplerBatches<S> {
    sampler: S,
    batch_size: usize,
    drop_last: bool,
}

impl<S: Sampler> SamplerBatches<S> {
    /// Batches of `batch_size` (> 0); the last short batch is dropped when
    /// `drop_last`.
    pub fn new(sampler: S, batch_size: usize, drop_last: bool) -> Self {
        SamplerBatches { sampler, batch_size: batch_size.max(1), drop_last }
    }
}

impl<S: Sampler> BatchSampler for SamplerBatches<S> {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let idx = self.sampler.indices(epoch);
        let mut out: Vec<Vec<usize>> = idx.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && out.last().is_some_and(|b| b.len() < self.batch_size) {
            out.pop();
        }
        out
    }
    fn len(&self) -> usize {
        let n = self.sampler.len();
        if self.drop_last { n / self.batch_size } else { n.div_ceil(self.batch_size) }
    }
}

/// A fixed list of batches, yielded as given every epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListBatchSampler {
    batches: Vec<Vec<usize>>,
}

impl ListBatchSampler {
    /// Yields `batches` every epoch.
    pub fn new(batches: Vec<Vec<usize>>) -> Self {
        ListBatchSampler { batches }
    }
}

impl BatchSampler for ListBatchSampler {
    fn batches(&self, _epoch: u64) -> Vec<Vec<usize>> {
        self.batches.clone()
    }
    fn len(&self) -> usize {
        self.batches.len()
    }
}

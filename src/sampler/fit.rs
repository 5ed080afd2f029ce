//! The mixing samplers fitted to the reader a [`DataLoader`](crate::DataLoader)
//! reads (the loader fits them when it is built): [`MultiDatasetSampler`] or [`MultiDatasetBatchSampler`] over a
//! [`MultiReader`](crate::MultiReader) whose children are stores.
//!
//! A shuffled mixture walks each child pass after pass. Walked in a
//! permutation, a child larger than its share of the cache makes every
//! read window decode nearly the whole child again; so, as
//! `with_shuffle(true)` does for one store, the loader draws each such
//! child through a block pool ([`ChildOrder::Pool`]) sized from the child's
//! share of the mixture's cache ([`pool_blocks_at_least`], the floor the
//! samples a batch draws from the child), and keeps the
//! permutation for a child that fits. With ranks, each rank reads its own
//! region of each child (the samplers' `rank_order` / `rank_batches`), so a
//! rank decodes about its share of each child. The choice is logged per
//! child, and the pool sizes are recorded in
//! [`LoaderState`](crate::LoaderState) so that a resume reads the same
//! order whatever its own cache.

use std::sync::{Arc, Mutex};

use super::{
    BatchSampler, ChildOrder, ChunkShuffleSampler, MultiDatasetBatchSampler, MultiDatasetSampler, POOL_RAMP_BLOCKS,
    Sampler, pool_blocks_at_least,
};
use crate::source::{Reader, ReaderExt};

// The children's orders are swapped whole: valid whatever a panicking thread did.
use crate::threads::lock;

/// Chunk blocks per block of a dataset's sampler: its pool draws runs of
/// this many adjacent chunk blocks, and counts its size in chunk blocks
/// like every block pool. A block's rows of the
/// arrays whose chunks are finer than the blocks' (the edge arrays, say)
/// start and end inside chunks it shares with the neighbouring blocks,
/// which the pool draws at other times: each such chunk is decoded once per
/// block that needs it (1.45x the 1M reference store's bytes in a 50/50
/// mixture). Four adjacent blocks drawn as one decode the chunks they share
/// once (1.09x); the pool holds a quarter as many of these blocks for the
/// same memory, and a batch's draws from one spread over four times the
/// samples (a batch still draws its samples of a store from 0.76-0.85 as
/// many distinct windows of 0.1% of the store).
const BLOCKS_PER_POOL_BLOCK: usize = 4;

/// Samples per batch the pools of a fitted [`MultiDatasetSampler`] ramp
/// up by (each child's pool grows a block per its share of this many
/// draws), whatever the loader's batch size: so the order a fitted sampler
/// gives depends on the reader alone, and the sampler can say what a loader
/// will read ([`MultiDatasetSampler::loader_indices`]). A batch sampler's
/// pools ramp by its own batches.
const FIT_BATCH: usize = 64;

/// Pool sizes counted in runs of [`BLOCKS_PER_POOL_BLOCK`] chunk blocks,
/// in chunk blocks.
pub(crate) fn runs_as_chunk_blocks(runs: &[Option<usize>]) -> Vec<Option<usize>> {
    runs.iter().map(|p| p.map(|r| r * BLOCKS_PER_POOL_BLOCK)).collect()
}

/// What the two mixing samplers share for fitting.
pub(crate) trait Mixing: Send + Sync {
    fn lengths(&self) -> &[usize];
    fn shuffles(&self) -> bool;
    fn seed(&self) -> u64;
    /// Ranks the sampler shards itself for (its own `with_rank`).
    fn own_world(&self) -> usize;
    /// About how many samples of child `d` a batch of `batch_size` draws.
    fn draws_per_batch(&self, d: usize, batch_size: usize) -> usize;
    /// Samples of each child an epoch draws (all ranks together).
    fn epoch_counts(&self) -> Vec<usize>;
}

/// The `Mixing` methods both samplers answer with their own (inherent)
/// getters of the same names.
macro_rules! forward_mixing {
    () => {
        fn lengths(&self) -> &[usize] {
            Self::lengths(self)
        }
        fn shuffles(&self) -> bool {
            Self::shuffles(self)
        }
        fn seed(&self) -> u64 {
            Self::seed(self)
        }
        fn own_world(&self) -> usize {
            self.shard().world_size()
        }
    };
}

impl Mixing for MultiDatasetSampler {
    forward_mixing!();
    fn draws_per_batch(&self, d: usize, batch_size: usize) -> usize {
        let total: usize = self.counts().iter().sum();
        (batch_size * self.counts()[d]).checked_div(total).unwrap_or(0).max(1)
    }
    fn epoch_counts(&self) -> Vec<usize> {
        self.counts().to_vec()
    }
}

impl Mixing for MultiDatasetBatchSampler {
    forward_mixing!();
    fn draws_per_batch(&self, d: usize, _batch_size: usize) -> usize {
        self.samples_per_dataset()[d].max(1)
    }
    fn epoch_counts(&self) -> Vec<usize> {
        self.samples_per_dataset().iter().map(|&k| k * self.num_batches()).collect()
    }
}

/// A mixing sampler with each child's order chosen for the reader.
pub(crate) struct FittedMix<M> {
    mix: M,
    /// Each child's runs of [`BLOCKS_PER_POOL_BLOCK`] chunk blocks (local
    /// starts; empty without chunks): the blocks its sampler draws.
    blocks: Vec<Arc<[usize]>>,
    /// Each child's draws per batch (its pool grows a block per this many).
    ramp: Vec<usize>,
    /// The children's orders; switched whole by a loaded state.
    children: Mutex<Arc<Vec<ChildOrder>>>,
}

impl<M: Mixing> FittedMix<M> {
    /// Fits `mix` to `reader`; `Err` says why it is read as it stands
    /// instead.
    pub(crate) fn fit<R: Reader + ?Sized>(reader: &R, mix: M) -> Result<FittedMix<M>, String> {
        if mix.own_world() > 1 {
            return Err("the sampler takes its own rank's share (its with_rank); give the ranks to the loader's \
                        with_rank instead for a region of each store per rank"
                .into());
        }
        let lengths = mix.lengths().to_vec();
        if lengths.iter().sum::<usize>() != reader.len() {
            return Err(format!(
                "the sampler's datasets {lengths:?} do not add up to the reader's {} samples",
                reader.len()
            ));
        }
        let (fits, starts) = match reader.chunked() {
            Some(c) => {
                // A child drawn several times over may be cached whole
                // (decoded once, not once per pass) before the pools are
                // sized from the shares.
                let passes: Vec<f64> =
                    mix.epoch_counts().iter().zip(&lengths).map(|(&k, &n)| k as f64 / n.max(1) as f64).collect();
                c.share_cache_by_passes(&passes);
                (c.part_fits(), c.chunk_blocks())
            }
            None => (vec![Default::default(); lengths.len()], Vec::new()),
        };
        if fits.len() != lengths.len() {
            return Err(format!("the reader has {} parts for the sampler's {} datasets", fits.len(), lengths.len()));
        }
        let mut blocks = Vec::with_capacity(lengths.len());
        let mut chunk_blocks = Vec::with_capacity(lengths.len());
        let mut lo = 0;
        for &len in &lengths {
            let local: Vec<usize> = starts.iter().filter(|&&g| g >= lo && g < lo + len).map(|&g| g - lo).collect();
            // Runs of adjacent chunk blocks: see `BLOCKS_PER_POOL_BLOCK`.
            let runs: Vec<usize> = local.iter().copied().step_by(BLOCKS_PER_POOL_BLOCK).collect();
            blocks.push(Arc::from(runs));
            chunk_blocks.push(local.len());
            lo += len;
        }
        let ramp = (0..lengths.len()).map(|d| mix.draws_per_batch(d, FIT_BATCH)).collect();
        let fitted = FittedMix { mix, blocks, ramp, children: Mutex::new(Arc::new(Vec::new())) };
        let pools: Vec<Option<usize>> = (0..lengths.len())
            .map(|d| {
                let fit = fits[d];
                let floor = fitted.ramp[d].div_ceil(BLOCKS_PER_POOL_BLOCK).max(POOL_RAMP_BLOCKS);
                // Sized in runs (the sampler's blocks), counted in chunk blocks.
                let runs = pool_blocks_at_least(fit, fitted.blocks[d].len(), floor).filter(|_| fitted.mix.shuffles());
                let k = runs.map(|r| r * BLOCKS_PER_POOL_BLOCK);
                let mib = |b: u64| b as f64 / f64::from(1 << 20);
                let name = format!("mixture dataset {d} ({} samples)", lengths[d]);
                match k {
                    _ if !fitted.mix.shuffles() => log::info!("{name}: in order (shuffle off)"),
                    Some(k) => log::info!(
                        "{name}: block pool of {k} of {} chunk blocks (decodes to {:.0} MiB, more than its {:.0} MiB share \
                         of the cache; a permutation would decode nearly all of it in every read window)",
                        chunk_blocks[d],
                        mib(fit.decoded_bytes),
                        mib(fit.cache_bytes)
                    ),
                    None if fitted.blocks[d].is_empty() => {
                        log::info!("{name}: full permutation (no chunk cache)")
                    }
                    None => log::info!(
                        "{name}: full permutation (decodes to {:.0} MiB, its share of the cache holds {:.0} MiB)",
                        mib(fit.decoded_bytes),
                        mib(fit.cache_bytes)
                    ),
                }
                k
            })
            .collect();
        if !fitted.adopt(&pools) {
            return Err("a dataset's chunk blocks do not start at its first sample".into());
        }
        Ok(fitted)
    }

    /// Each child's pool size in chunk blocks (`None`: a permutation), as
    /// [`LoaderState`](crate::LoaderState) records them.
    pub(crate) fn pools(&self) -> Vec<Option<usize>> {
        let runs: Vec<Option<usize>> = lock(&self.children).iter().map(ChildOrder::pool_blocks).collect();
        runs_as_chunk_blocks(&runs)
    }

    /// Follows saved pool sizes (chunk blocks) from now on; `false` when they do not fit
    /// these children (another count, or a pool over a child without
    /// chunks).
    pub(crate) fn adopt(&self, pools: &[Option<usize>]) -> bool {
        if pools.len() != self.blocks.len() {
            return false;
        }
        let mut orders = Vec::with_capacity(pools.len());
        for (d, pool) in pools.iter().enumerate() {
            orders.push(match pool {
                None => ChildOrder::Permutation,
                Some(k) => {
                    let len = self.mix.lengths()[d];
                    let Ok(s) = ChunkShuffleSampler::from_block_starts(self.blocks[d].to_vec(), len, self.ramp[d])
                    else {
                        return false;
                    };
                    if self.blocks[d].is_empty() {
                        return false;
                    }
                    let seed = self.mix.seed() ^ (d as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
                    let runs = k.div_ceil(BLOCKS_PER_POOL_BLOCK).max(1);
                    ChildOrder::Pool(s.with_pool_blocks(runs).with_seed(seed))
                }
            });
        }
        *lock(&self.children) = Arc::new(orders);
        true
    }

    /// The mixing sampler as given.
    pub(crate) fn mix(&self) -> &M {
        &self.mix
    }

    /// The children's orders now.
    pub(crate) fn orders(&self) -> Arc<Vec<ChildOrder>> {
        lock(&self.children).clone()
    }
}

/// The pool sizes of a fitted mixture, whichever sampler it is.
pub(crate) trait ChildPools: Send + Sync {
    /// As [`FittedMix::pools`].
    fn pools(&self) -> Vec<Option<usize>>;
    /// As [`FittedMix::adopt`].
    fn adopt(&self, pools: &[Option<usize>]) -> bool;
}

impl<M: Mixing> ChildPools for FittedMix<M> {
    fn pools(&self) -> Vec<Option<usize>> {
        FittedMix::pools(self)
    }
    fn adopt(&self, pools: &[Option<usize>]) -> bool {
        FittedMix::adopt(self, pools)
    }
}

impl MultiDatasetSampler {
    /// The indices a [`DataLoader`](crate::DataLoader) over `reader` built
    /// with this sampler and `with_rank(rank, world_size)` reads in `epoch`:
    /// its batches laid end to end (before `drop_last` drops a short
    /// one). The loader fits the sampler to the reader (a block pool for a
    /// child larger than its share of the cache, a region of each child per
    /// rank), so its order differs from [`indices`](Sampler::indices) on
    /// ranks or with pools; this is the order to log, inspect or replay.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use burn::tensor::Device;
    /// use std::sync::Arc;
    /// use atomzarr::sampler::MultiDatasetSampler;
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, MultiReader, Reader, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let mut children: Vec<Arc<dyn Reader>> = Vec::new();
    /// for (k, n) in [(0, 30), (1, 12)] {
    ///     let path = dir.path().join(format!("{k}.zarr"));
    ///     AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&atomzarr::data::synth::generate(n, 2, 4, k)?)?;
    ///     children.push(Arc::new(AtomicDataZarrReader::open(&path)?));
    /// }
    /// let multi = Arc::new(MultiReader::new(children)?);
    /// let s = MultiDatasetSampler::builder(&multi).with_num_samples(20).with_seed(3).build()?;
    /// let said = s.loader_indices(&*multi, 0, 1, 2)?;
    /// let l = DataLoader::builder(Dataset::from_arc(multi)).with_batch_size(4).with_sampler(s).with_rank(1, 2).build(&Device::flex())?;
    /// let read: Vec<usize> = l.iter().map(|b| b.map(|b| b.indices)).collect::<atomzarr::Result<Vec<_>>>()?.concat();
    /// assert_eq!(read, said);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when the loader would read
    /// the sampler as it stands (its own `with_rank`, or datasets that are
    /// not `reader`'s), naming why; [`Error::Config`](crate::Error::Config)
    /// for `rank >= world_size`.
    pub fn loader_indices<R: Reader + ?Sized>(
        &self,
        reader: &R,
        epoch: u64,
        rank: usize,
        world_size: usize,
    ) -> crate::Result<Vec<usize>> {
        crate::Error::check_rank(rank, world_size)?;
        let fitted = FittedMix::fit(reader, self.clone()).map_err(crate::Error::Config)?;
        Ok(fitted.mix.rank_draws(epoch, rank, world_size, fitted.orders()).collect())
    }
}

impl MultiDatasetBatchSampler {
    /// The batches a [`DataLoader`](crate::DataLoader) over `reader` built
    /// with this batch sampler and `with_rank(rank, world_size)` reads in
    /// `epoch`, as [`MultiDatasetSampler::loader_indices`] says of samples.
    ///
    /// # Errors
    /// As [`MultiDatasetSampler::loader_indices`].
    pub fn loader_batches<R: Reader + ?Sized>(
        &self,
        reader: &R,
        epoch: u64,
        rank: usize,
        world_size: usize,
    ) -> crate::Result<Vec<Vec<usize>>> {
        crate::Error::check_rank(rank, world_size)?;
        let fitted = FittedMix::fit(reader, self.clone()).map_err(crate::Error::Config)?;
        Ok(fitted.mix.rank_batch_draws(epoch, rank, world_size, fitted.orders()).collect())
    }
}

impl Sampler for FittedMix<MultiDatasetSampler> {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        self.mix.rank_draws(epoch, 0, 1, self.orders()).collect()
    }
    fn len(&self) -> usize {
        Sampler::len(&self.mix)
    }
}

impl BatchSampler for FittedMix<MultiDatasetBatchSampler> {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.mix().rank_batch_draws(epoch, 0, 1, self.orders()).collect()
    }
    fn len(&self) -> usize {
        BatchSampler::len(&self.mix)
    }
}

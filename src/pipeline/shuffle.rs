//! The order a [`DataLoader`](crate::DataLoader) reads with
//! `with_shuffle(true)` and no batch sampler: a full permutation when the
//! store fits its reader's chunk cache, the block pool
//! ([`ChunkShuffleSampler`]) sized from the cache when it does not.
//!
//! A full permutation of a store larger than the cache makes every read
//! window decode nearly every chunk again (on a 10M-structure store, about
//! 1,500 times the bytes it delivers). The block pool decodes each chunk
//! about once per epoch and still draws each batch from a large part of the
//! store.

use std::sync::{Arc, Mutex};

use crate::sampler::{ChunkShuffleSampler, RandomSampler, Sampler, epoch_rng, pool_blocks, shuffle};
use crate::source::{Reader, ReaderExt};

use super::ranked::{Items, RankedSamples, Resume, ResumeAt};
use crate::threads::lock;

/// What `with_shuffle(true)` reads: a full permutation (`pool_blocks == None`) or
/// the block pool, switchable by [`DataLoader::load_state`](crate::DataLoader::load_state)
/// so that a resumed epoch follows the saved state alone.
pub(crate) struct DefaultShuffle {
    /// A sampler whose indices are shuffled (a split's list); `None`: every
    /// sample of the dataset.
    inner: Option<Arc<dyn Sampler>>,
    len: usize,
    /// The reader's chunk blocks (empty for a reader without chunks).
    block_starts: Arc<[usize]>,
    /// The pool over the whole dataset, built once.
    whole: Option<ChunkShuffleSampler>,
    batch_size: usize,
    seed: u64,
    world_size: usize,
    cfg: Mutex<Cfg>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cfg {
    /// Chunk blocks in the block pool; `None`: a full permutation.
    pool_blocks: Option<usize>,
}

impl DefaultShuffle {
    /// The default shuffle of `reader`'s samples (or of `inner`'s), read by
    /// `world_size` ranks in batches of `batch_size`; logs its choice.
    pub(crate) fn new<R: Reader + ?Sized>(
        reader: &R,
        inner: Option<Arc<dyn Sampler>>,
        batch_size: usize,
        seed: u64,
        world_size: usize,
    ) -> DefaultShuffle {
        let len = inner.as_ref().map_or(reader.len(), |s| s.len());
        let chunked = reader.chunked();
        let block_starts: Arc<[usize]> = chunked.map(|c| c.chunk_blocks()).unwrap_or_default().into();
        let pool_blocks = match chunked {
            None => {
                log::info!("shuffle: full permutation of {len} samples ({} has no chunk cache)", reader.name());
                None
            }
            Some(c) => {
                let fit = c.cache_fit();
                let chosen = pool_blocks(fit, block_starts.len());
                let mib = |b: u64| b as f64 / f64::from(1 << 20);
                match chosen {
                    None => log::info!(
                        "shuffle: full permutation of {len} samples ({} decodes to {:.0} MiB, the cache holds {:.0} MiB)",
                        reader.name(),
                        mib(fit.decoded_bytes),
                        mib(fit.cache_bytes)
                    ),
                    Some(k) => log::info!(
                        "shuffle: block pool of {k} of {} blocks ({} decodes to {:.0} MiB, more than the {:.0} MiB cache; \
                         a full permutation would decode nearly every chunk in every read window)",
                        block_starts.len(),
                        reader.name(),
                        mib(fit.decoded_bytes),
                        mib(fit.cache_bytes)
                    ),
                }
                chosen
            }
        };
        let whole = (inner.is_none() && !block_starts.is_empty())
            .then(|| ChunkShuffleSampler::from_block_starts(block_starts.to_vec(), len, batch_size).ok())
            .flatten()
            .map(|s| s.with_seed(seed));
        DefaultShuffle {
            inner,
            len,
            block_starts,
            whole,
            batch_size,
            seed,
            world_size: world_size.max(1),
            cfg: Mutex::new(Cfg { pool_blocks }),
        }
    }

    /// The name [`LoaderState`](crate::LoaderState) records.
    pub(crate) fn kind(&self) -> ShuffleKind {
        match (lock(&self.cfg).pool_blocks, &self.inner) {
            (Some(_), _) => ShuffleKind::BlockPool,
            (None, Some(_)) => ShuffleKind::SamplerPermutation,
            (None, None) => ShuffleKind::Permutation,
        }
    }

    /// Chunk blocks in the block pool, `None` for a full permutation.
    pub(crate) fn pool_blocks(&self) -> Option<usize> {
        lock(&self.cfg).pool_blocks
    }

    /// Follows a saved state: its kind and pool size from now on. `false`
    /// when the saved kind is not one this shuffle can read (a block pool
    /// over a reader without chunks).
    pub(crate) fn adopt(&self, kind: ShuffleKind, pool_blocks: Option<usize>) -> bool {
        let full = if self.inner.is_some() { ShuffleKind::SamplerPermutation } else { ShuffleKind::Permutation };
        let pool_blocks = match (kind, pool_blocks) {
            (k, _) if k == full => None,
            (ShuffleKind::BlockPool, Some(n)) if !self.block_starts.is_empty() => Some(n.max(1)),
            _ => return false,
        };
        lock(&self.cfg).pool_blocks = pool_blocks;
        true
    }

    /// The block pool of `epoch` with `pool_blocks` chunk blocks (over the
    /// shuffled list, or the whole dataset).
    fn pool_sampler(&self, epoch: u64, pool_blocks: usize) -> Option<ChunkShuffleSampler> {
        match (&self.inner, &self.whole) {
            (Some(s), _) => Some(
                ChunkShuffleSampler::grouped(&self.block_starts, &s.indices(epoch), self.batch_size)
                    .with_seed(self.seed)
                    .with_pool_blocks(pool_blocks),
            ),
            (None, Some(w)) => Some(w.clone().with_pool_blocks(pool_blocks)),
            // A pool is only chosen (or adopted) with blocks to draw from.
            (None, None) => None,
        }
    }
}

/// What the default shuffle reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShuffleKind {
    /// A full permutation of the dataset.
    Permutation,
    /// A full permutation of the list the user's sampler gives.
    SamplerPermutation,
    /// The block pool (a region of the store per rank).
    BlockPool,
}

impl ShuffleKind {
    /// The name a saved state gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ShuffleKind::Permutation => "random",
            ShuffleKind::SamplerPermutation => "sampler",
            ShuffleKind::BlockPool => "block-pool",
        }
    }

    /// The kind a saved state names.
    pub(crate) fn from_name(name: &str) -> Option<ShuffleKind> {
        [ShuffleKind::Permutation, ShuffleKind::SamplerPermutation, ShuffleKind::BlockPool]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// Under the block pool, each rank reads its own region (see
/// [`ranked`](super::ranked)); a full permutation is one global order.
impl RankedSamples for DefaultShuffle {
    fn is_ranked(&self) -> bool {
        self.pool_blocks().is_some()
    }
    fn rank_iter(&self, epoch: u64, rank: usize, world: usize) -> Option<Items<usize>> {
        let pool_blocks = self.pool_blocks()?;
        self.pool_sampler(epoch, pool_blocks).map(|s| Box::new(s.rank_draws(epoch, rank, world)) as Items<usize>)
    }

    /// The block pool resumes in storage order
    /// ([`ChunkShuffleSampler::resumed_draws`]): each new rank takes the
    /// samples the old ranks had left of a few regions, read through a pool
    /// of its own.
    fn resumed_iter(&self, epoch: u64, resume: &Resume, at: ResumeAt) -> Option<Items<usize>> {
        let pool_blocks = self.pool_blocks()?;
        debug_assert_eq!(resume.cuts.last().map(|c| c.1), Some(at.world));
        let s = self.pool_sampler(epoch, pool_blocks)?;
        Some(s.resumed_draws(epoch, (resume.base_world, &resume.cuts), at.unit, (at.rank, at.pos)))
    }

    fn rank_len(&self, rank: usize, world: usize) -> Option<usize> {
        self.pool_blocks()?;
        let w = world.max(1) as u128;
        let bound = |q: usize| (self.len as u128 * q as u128 / w) as usize;
        Some(bound(rank + 1) - bound(rank))
    }
}

impl Sampler for DefaultShuffle {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let Some(pool_blocks) = self.pool_blocks() else {
            return match &self.inner {
                Some(s) => {
                    let mut v = s.indices(epoch);
                    shuffle(&mut v, &mut epoch_rng(self.seed, epoch));
                    v
                }
                None => RandomSampler::new(self.len, self.seed).indices(epoch),
            };
        };
        // The order every rank agrees on, cut in rounds as the loader cuts
        // it (what the benchmark reads one rank of).
        match self.pool_sampler(epoch, pool_blocks) {
            Some(s) => s.global_order(epoch, self.world_size),
            None => RandomSampler::new(self.len, self.seed).indices(epoch),
        }
    }

    fn len(&self) -> usize {
        self.len
    }
}

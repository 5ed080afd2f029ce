//! [`ChunkShuffleSampler`]: the block-pool shuffle for stores far larger
//! than memory.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::source::{Reader, ReaderExt};

use super::block_pool::{DEFAULT_POOL_BLOCKS, PoolDraws};
use super::{BatchSampler, Sampler, Shard, epoch_rng, shuffle};

/// Block-pool shuffle: reads a store larger than its chunk cache in random
/// order while decoding each chunk about once per epoch.
///
/// A plain random permutation makes every read window touch nearly every
/// chunk of the store; once the decoded store outgrows the chunk cache, each
/// window decodes nearly the whole store again. This sampler shuffles as
/// MosaicML streaming (`py1e`) and LitData do:
///
/// 1. the blocks (runs of samples that share a storage chunk, see
///    [`ChunkedReader::chunk_blocks`](crate::source::ChunkedReader::chunk_blocks))
///    are permuted, seeded per `(seed, epoch)`;
/// 2. a pool of `pool_blocks` blocks is resident: each draw picks one of the pool's
///    blocks uniformly at random, then one of the samples left in it, and a
///    block that is used up is replaced by the next block of the
///    permutation. The pool starts an
///    epoch with [`POOL_RAMP_BLOCKS`](super::POOL_RAMP_BLOCKS) blocks and grows by one block per batch
///    until it holds `pool_blocks`, so the first batch waits for a few blocks only.
///
/// A read window then needs the chunks of the `pool_blocks` pool blocks, which stay in
/// the cache while the pool draws from them, so each chunk is decoded about
/// once per epoch. `pool_blocks` trades randomness for memory: the pool holds `pool_blocks`
/// blocks' decoded chunks, and a batch of `b` draws from about
/// `pool_blocks * (1 - exp(-b / pool_blocks))` distinct blocks once the pool is full (every
/// resident block is drawn at the same rate, so blocks enter and leave the
/// pool one at a time, staggered by the ramp).
///
/// Ranks ([`with_shard`](Self::with_shard), or the loader's
/// [`with_rank`](crate::DataLoaderBuilder::with_rank)) own blocks:
/// the store is cut into one contiguous region per rank (in storage order;
/// the cuts may split a block in two), the regions are dealt to the ranks
/// anew every epoch, and each rank permutes and draws its region's blocks
/// through its own pool. A rank then decodes only its region's chunks, of
/// every array (per-system arrays too), about `1 / world_size` of the store.
///
/// Why not a sampler from a crate: none of the Rust shuffle-buffer crates is
/// seeded per epoch, shards by rank, or reads its blocks from a Zarr store's
/// chunk grid.
///
/// ```
/// use atomzarr::sampler::{BatchSampler, ChunkShuffleSampler, Sampler};
/// // 10 000 samples in blocks of 100, batches of 64, 32 blocks in the pool.
/// let s = ChunkShuffleSampler::new(10_000, 100, 64).with_pool_blocks(32).with_seed(3);
/// let batches = s.batches(0);
/// assert_eq!(batches.len(), 157); // 156 full batches and one of 16
/// // Once the pool is full, a batch draws from many blocks.
/// let mut blocks: Vec<usize> = batches[100].iter().map(|i| i / 100).collect();
/// blocks.sort();
/// blocks.dedup();
/// assert!(blocks.len() >= 16);
/// let mut all = s.indices(0);
/// all.sort();
/// assert_eq!(all, (0..10_000).collect::<Vec<_>>());
/// assert_ne!(s.indices(0), s.indices(1)); // reshuffled per epoch
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkShuffleSampler {
    /// Block starts followed by the item count: `[0, s1, ..., len]`, in
    /// positions of `items`.
    pub(super) bounds: Arc<[usize]>,
    /// The items, block after block; `None` for the identity (`0..len`).
    pub(super) items: Option<Arc<[usize]>>,
    batch_size: usize,
    pub(super) pool_blocks: usize,
    pub(super) seed: u64,
    shard: Shard,
    drop_last: bool,
}

impl ChunkShuffleSampler {
    /// `len` samples in blocks of `block_size` consecutive samples (a
    /// `block_size` of 0 counts as 1), batches of `batch_size` (0 counts as 1).
    pub fn new(len: usize, block_size: usize, batch_size: usize) -> Self {
        let step = block_size.max(1);
        let mut bounds: Vec<usize> = (0..len).step_by(step).collect();
        bounds.push(len);
        Self::from_bounds(bounds, None, batch_size)
    }

    /// Blocks starting at `starts` (strictly increasing, the first 0, all
    /// below `len`; an empty list for `len == 0`): block `k` is
    /// `starts[k]..starts[k + 1]`, the last one ends at `len`.
    ///
    /// ```
    /// use atomzarr::sampler::{ChunkShuffleSampler, Sampler};
    /// let s = ChunkShuffleSampler::from_block_starts(vec![0, 3, 4, 9], 12, 4).unwrap();
    /// assert_eq!(s.num_blocks(), 4);
    /// assert_eq!(s.block_of(8), Some(2));
    /// assert!(ChunkShuffleSampler::from_block_starts(vec![0, 4, 4], 6, 4).is_err());
    /// assert!(ChunkShuffleSampler::from_block_starts(vec![1], 6, 4).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when `starts` does not rise strictly from 0 and stay
    /// below `len` (or is not empty for `len == 0`).
    pub fn from_block_starts(starts: Vec<usize>, len: usize, batch_size: usize) -> Result<Self> {
        check_starts(&starts, len)?;
        let mut bounds = starts;
        bounds.push(len);
        Ok(Self::from_bounds(bounds, None, batch_size))
    }

    /// Blocks as `reader` lays its samples out in chunks
    /// ([`ChunkedReader::chunk_blocks`](crate::source::ChunkedReader::chunk_blocks)); one sample per block for a reader without
    /// chunks.
    ///
    /// In a [`DataLoader`](crate::DataLoader), as its batch sampler (or as
    /// its `sampler` with the same batch size). A loader with
    /// `with_shuffle(true)` builds one itself when the store is larger than
    /// the reader's cache.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use burn::tensor::Device;
    /// use atomzarr::sampler::{ChunkShuffleSampler, Shard};
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("c.zarr");
    /// let samples = atomzarr::data::synth::generate(300, 2, 6, 0)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let sampler = ChunkShuffleSampler::for_reader(&reader, 16)?
    ///     .with_pool_blocks(8)
    ///     .with_seed(1)
    ///     .with_shard(Shard::new(0, 2)?); // rank 0 of 2
    /// let loader = DataLoader::builder(Dataset::new(reader))
    ///     .with_batch_sampler(sampler)
    ///     .with_prefetch_factor(4)
    ///     .build(&Device::flex())?;
    /// loader.set_epoch(3);
    /// let mut it = loader.iter();
    /// let n: usize = it.by_ref().map(|b| b.map(|b| b.num_graphs)).sum::<atomzarr::Result<usize>>()?;
    /// assert_eq!(n, 150);
    /// let amp = it.decode_counters().and_then(|c| c.amplification()).unwrap();
    /// assert!(amp >= 1.0); // this epoch's bytes decoded per byte read
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the reader's
    /// [`chunk_blocks`](crate::source::ChunkedReader::chunk_blocks) are not valid
    /// block starts (as [`ChunkShuffleSampler::from_block_starts`]).
    pub fn for_reader<R: Reader + ?Sized>(reader: &R, batch_size: usize) -> Result<Self> {
        let len = reader.len();
        match reader.chunked() {
            Some(c) => Self::from_block_starts(c.chunk_blocks(), len, batch_size),
            None => Ok(Self::new(len, 1, batch_size)),
        }
    }

    /// The samples `indices` (logical indices, each below the reader's
    /// length; a training split, say), shuffled in blocks of the reader's
    /// chunks: each block holds the listed samples of one block of
    /// [`for_reader`](Self::for_reader), in list order. A sample listed
    /// twice is drawn twice.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::sampler::{ChunkShuffleSampler, Sampler};
    /// let reader = atomzarr::InMemoryReader::from_samples(&atomzarr::data::synth::generate(40, 2, 4, 0)?, "m")?;
    /// let split: Vec<usize> = (0..40).filter(|i| i % 3 != 0).collect();
    /// let s = ChunkShuffleSampler::for_reader_indices(&reader, &split, 8)?.with_seed(2);
    /// let mut got = s.indices(0);
    /// got.sort();
    /// assert_eq!(got, split);
    /// assert!(ChunkShuffleSampler::for_reader_indices(&reader, &[40], 8).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for an index at or past the reader's
    /// length; as [`for_reader`](Self::for_reader) otherwise.
    pub fn for_reader_indices<R: Reader + ?Sized>(reader: &R, indices: &[usize], batch_size: usize) -> Result<Self> {
        let len = reader.len();
        let starts = match reader.chunked() {
            Some(c) => c.chunk_blocks(),
            None => (0..len).collect(),
        };
        check_starts(&starts, len)?;
        Error::check_indices(|| reader.name().to_string(), indices, len)?;
        Ok(Self::grouped(&starts, indices, batch_size))
    }

    /// `indices` grouped by the block of `starts` (valid block starts, the
    /// indices checked against their sample count) each falls in, list
    /// order kept inside a block.
    pub(crate) fn grouped(starts: &[usize], indices: &[usize], batch_size: usize) -> Self {
        let mut keyed: Vec<(usize, usize)> =
            indices.iter().map(|&i| (starts.partition_point(|&s| s <= i).saturating_sub(1), i)).collect();
        // Stable: list order stays inside a block.
        keyed.sort_by_key(|&(b, _)| b);
        let mut bounds = Vec::new();
        let mut last = None;
        for (pos, &(b, _)) in keyed.iter().enumerate() {
            if last != Some(b) {
                bounds.push(pos);
                last = Some(b);
            }
        }
        bounds.push(keyed.len());
        let items: Arc<[usize]> = keyed.into_iter().map(|(_, i)| i).collect();
        Self::from_bounds(bounds, Some(items), batch_size)
    }

    fn from_bounds(bounds: Vec<usize>, items: Option<Arc<[usize]>>, batch_size: usize) -> Self {
        ChunkShuffleSampler {
            bounds: bounds.into(),
            items,
            batch_size: batch_size.max(1),
            pool_blocks: DEFAULT_POOL_BLOCKS,
            seed: 0,
            shard: Shard::default(),
            drop_last: false,
        }
    }

    /// Blocks in the pool (default [`DEFAULT_POOL_BLOCKS`]; 0 counts
    /// as 1). A read window needs the decoded chunks of about `pool_blocks` blocks,
    /// and a batch of `b` draws from about `pool_blocks * (1 - exp(-b / pool_blocks))` distinct
    /// blocks once the pool is full. `pool_blocks = 1` reads block after block, each
    /// one's samples shuffled; a `pool_blocks` as large as the block count is a full
    /// shuffle.
    pub fn with_pool_blocks(mut self, k: usize) -> Self {
        self.pool_blocks = k.max(1);
        self
    }

    /// Seed of the block permutation and the pool's draws (default 0); the
    /// epoch reseeds them.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This rank's share (default: the whole epoch), as a batch sampler or
    /// sampler of one rank. Every rank must use the same blocks, seed and
    /// `pool_blocks`: the store is cut into one region of `ceil(n / world_size)`
    /// samples per rank (the last one padded with samples from the start, or
    /// cut with `drop_last`), regions are dealt to the ranks per epoch, and
    /// each rank draws its region through its own pool. As with
    /// [`Shard::apply`], shares are disjoint and cover the epoch, all of one
    /// length.
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Drop the last short batch (default off).
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.drop_last = yes;
        self
    }

    /// Samples per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// `pool_blocks`, the blocks in the pool.
    pub fn pool_blocks(&self) -> usize {
        self.pool_blocks
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The shard.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Whether the last short batch is dropped.
    pub fn drops_last(&self) -> bool {
        self.drop_last
    }

    /// Samples of the whole epoch (all ranks, before padding).
    pub fn num_samples(&self) -> usize {
        self.bounds.last().copied().unwrap_or(0)
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The block holding sample `i`, if the sampler draws it (for a sampler
    /// over a list, the first block listing it).
    pub fn block_of(&self, i: usize) -> Option<usize> {
        match &self.items {
            None => (i < self.num_samples()).then(|| self.bounds.partition_point(|&s| s <= i) - 1),
            Some(items) => items.iter().position(|&x| x == i).map(|p| self.bounds.partition_point(|&s| s <= p) - 1),
        }
    }

    /// The sample order rank `rank` of `world_size` reads in `epoch`, with
    /// no padding: one of the regions `[n * q / world_size, n * (q + 1) /
    /// world_size)` of the store (dealt to the ranks per epoch, each rank's
    /// of the length of region `rank`), its blocks permuted and drawn
    /// through the pool. The ranks' orders are disjoint and together hold
    /// every sample once. (The shard set by [`with_shard`](Self::with_shard)
    /// plays no part.)
    ///
    /// ```
    /// use atomzarr::sampler::ChunkShuffleSampler;
    /// let s = ChunkShuffleSampler::new(1000, 50, 16).with_seed(1);
    /// let mut all: Vec<usize> = (0..3).flat_map(|r| s.rank_order(0, r, 3)).collect();
    /// all.sort();
    /// assert_eq!(all, (0..1000).collect::<Vec<_>>());
    /// ```
    pub fn rank_order(&self, epoch: u64, rank: usize, world_size: usize) -> Vec<usize> {
        self.rank_draws(epoch, rank, world_size).collect()
    }

    /// The region (of `w` equal stretches of the store, in storage order)
    /// rank `r` reads in `epoch`: the regions are dealt to the ranks anew
    /// every epoch, among regions of one size (`size(q)`), so that every
    /// rank's share keeps the length the loader's rounds give it.
    fn region_of(&self, epoch: u64, r: usize, w: usize, size: impl Fn(usize) -> usize) -> usize {
        if w == 1 {
            return 0;
        }
        let same: Vec<usize> = (0..w).filter(|&q| size(q) == size(r)).collect();
        let mut dealt = same.clone();
        shuffle(&mut dealt, &mut epoch_rng(self.seed ^ 0x5851_F42D_4C95_7F2D, epoch));
        same.iter().position(|&q| q == r).map_or(r, |at| dealt[at])
    }

    /// The order a [`DataLoader`](crate::DataLoader) with `world_size`
    /// ranks reads in `epoch`, as one global order: in rounds of
    /// `world_size * batch_size` samples, round `k` holds batch `k` of every
    /// rank's [`rank_order`](Self::rank_order), rank after rank; the last
    /// round holds the ranks' short tails. Cutting it in rounds, rank `r`
    /// taking the `r`-th part of each, gives every rank its own order back.
    /// With one rank this is the rank's order.
    ///
    /// ```
    /// use atomzarr::sampler::ChunkShuffleSampler;
    /// let s = ChunkShuffleSampler::new(100, 10, 4).with_seed(1);
    /// let g = s.global_order(2, 2);
    /// assert_eq!(g[..4], s.rank_order(2, 0, 2)[..4]);
    /// assert_eq!(g[4..8], s.rank_order(2, 1, 2)[..4]);
    /// assert_eq!(s.global_order(2, 1), s.rank_order(2, 0, 1));
    /// ```
    pub fn global_order(&self, epoch: u64, world_size: usize) -> Vec<usize> {
        let w = world_size.max(1);
        if w == 1 {
            return self.rank_order(epoch, 0, 1);
        }
        let ranks: Vec<Vec<usize>> = (0..w).map(|r| self.rank_order(epoch, r, w)).collect();
        let mut out = Vec::with_capacity(self.num_samples());
        let b = self.batch_size;
        let rounds = ranks.iter().map(|o| o.len().div_ceil(b)).max().unwrap_or(0);
        for k in 0..rounds {
            for o in &ranks {
                out.extend_from_slice(&o[(k * b).min(o.len())..((k + 1) * b).min(o.len())]);
            }
        }
        out
    }

    /// The runs of blocks between storage positions `lo` and `hi` (cycling
    /// past the end for padding), in an order permuted per epoch:
    /// `(start, end)` ranges of `items` positions, each inside one block.
    pub(super) fn runs(&self, epoch: u64, lo: usize, hi: usize) -> Vec<(usize, usize)> {
        let n = self.num_samples();
        let mut runs = Vec::new();
        if n == 0 || lo >= hi {
            return runs;
        }
        let mut pos = lo;
        while pos < hi {
            let at = pos % n;
            // The block holding `at`, and how much of it lies before `hi`.
            let b = self.bounds.partition_point(|&s| s <= at) - 1;
            let end = (self.bounds[b + 1] - at).min(hi - pos);
            runs.push((at, at + end));
            pos += end;
        }
        // Seeded by the region too: regions permute their blocks apart.
        shuffle(&mut runs, &mut epoch_rng(self.seed ^ (lo as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), epoch));
        runs
    }

    /// The samples of positions `lo..hi` of the permuted blocks, in the
    /// order the pool draws them (see the type's docs).
    pub(crate) fn drawn(&self, epoch: u64, rank: usize, lo: usize, hi: usize) -> Vec<usize> {
        self.draws(epoch, rank, lo, hi).collect()
    }

    /// [`drawn`](Self::drawn) one sample at a time: the pool's state, not
    /// the pass's order, is what is held.
    pub(crate) fn draws(&self, epoch: u64, rank: usize, lo: usize, hi: usize) -> PoolDraws {
        let runs = self.runs(epoch, lo, hi);
        // A rank-specific stream for the draws: ranks hold different blocks
        // and need not draw them alike.
        let rank_seed = self.seed ^ (rank as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
        PoolDraws::new(self.items.clone(), (self.pool_blocks, self.batch_size), runs, epoch_rng(rank_seed, epoch))
    }

    /// Rank `rank` of `world_size`'s order in `epoch`, as
    /// [`rank_order`](Self::rank_order) gives it, one sample at a time.
    pub(crate) fn rank_draws(&self, epoch: u64, rank: usize, world_size: usize) -> PoolDraws {
        let (lo, hi) = self.rank_region(epoch, rank, world_size);
        self.draws(epoch, rank, lo, hi)
    }

    /// The positions `lo..hi` of the region rank `rank` of `world_size`
    /// reads in `epoch`.
    pub(super) fn rank_region(&self, epoch: u64, rank: usize, world_size: usize) -> (usize, usize) {
        let w = world_size.max(1);
        let n = self.num_samples();
        // u128: n * w fits whatever the sizes.
        let bound = |q: usize| (n as u128 * q as u128 / w as u128) as usize;
        let size = |q: usize| bound(q + 1) - bound(q);
        let q = self.region_of(epoch, rank.min(w - 1), w, size);
        (bound(q), bound(q + 1))
    }
}

/// Block starts rise strictly from 0 and stay below `len` (empty for 0).
fn check_starts(starts: &[usize], len: usize) -> Result<()> {
    let ok_start = if len == 0 { starts.is_empty() } else { starts.first() == Some(&0) };
    if !ok_start || starts.windows(2).any(|w| w[0] >= w[1]) || starts.last().is_some_and(|&s| s >= len) {
        return Err(Error::Config(format!(
            "block starts must rise strictly from 0 and stay below the sample count {len}"
        )));
    }
    Ok(())
}

impl BatchSampler for ChunkShuffleSampler {
    /// This rank's share of the permuted blocks (padded or cut as
    /// [`with_shard`](ChunkShuffleSampler::with_shard) says), drawn through
    /// the pool and cut into batches.
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let per_rank = self.shard.len_of(self.num_samples());
        let (r, w) = (self.shard.rank(), self.shard.world_size());
        let lo = self.region_of(epoch, r, w, |_| per_rank) * per_rank;
        let order = self.drawn(epoch, r, lo, lo + per_rank);
        let mut out: Vec<Vec<usize>> = order.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && out.last().is_some_and(|b| b.len() < self.batch_size) {
            out.pop();
        }
        out
    }

    fn len(&self) -> usize {
        let m = self.shard.len_of(self.num_samples());
        if self.drop_last { m / self.batch_size } else { m.div_ceil(self.batch_size) }
    }
}

impl Sampler for ChunkShuffleSampler {
    /// The batches of the epoch, concatenated: batching them again by the
    /// same batch size gives the same batches.
    fn indices(&self, epoch: u64) -> Vec<usize> {
        BatchSampler::batches(self, epoch).concat()
    }
    fn len(&self) -> usize {
        let m = self.shard.len_of(self.num_samples());
        if self.drop_last { m / self.batch_size * self.batch_size } else { m }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct blocks of a batch, counted from the block starts alone.
    fn blocks_in(b: &[usize], starts: &[usize]) -> usize {
        let mut ids: Vec<usize> = b.iter().map(|&i| starts.partition_point(|&s| s <= i)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    fn irregular() -> (Vec<usize>, usize) {
        let mut starts = vec![0];
        let mut x = 0;
        for k in 0..300 {
            x += 5 + (k * 7919) % 23;
            starts.push(x);
        }
        (starts, x + 3)
    }

    #[test]
    fn every_epoch_holds_every_sample_once() {
        let (starts, len) = irregular();
        for (k, bs) in [(8, 64), (16, 64), (4, 8), (32, 64), (1, 16), (300, 32)] {
            let s = ChunkShuffleSampler::from_block_starts(starts.clone(), len, bs).unwrap().with_pool_blocks(k);
            for epoch in 0..3 {
                let batches = BatchSampler::batches(&s, epoch);
                assert_eq!(batches.len(), BatchSampler::len(&s));
                assert!(batches[..batches.len() - 1].iter().all(|b| b.len() == bs));
                let mut all = batches.concat();
                all.sort_unstable();
                assert_eq!(all, (0..len).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_full_pool_mixes_and_a_window_stays_in_it() {
        // 96 blocks of 100, 32 in the pool, batches of 64.
        let s = ChunkShuffleSampler::new(9_600, 100, 64).with_pool_blocks(32).with_seed(5);
        let starts: Vec<usize> = (0..96).map(|b| b * 100).collect();
        let batches = BatchSampler::batches(&s, 0);
        // The ramp: the first batch draws from the first few blocks only.
        assert!(blocks_in(&batches[0], &starts) <= crate::sampler::POOL_RAMP_BLOCKS);
        // A full pool: ~32 * (1 - exp(-2)) = 27.7 distinct blocks a batch.
        let full = &batches[40..100];
        let mean = full.iter().map(|b| blocks_in(b, &starts)).sum::<usize>() as f64 / full.len() as f64;
        assert!(mean > 24.0, "mean {mean}");
        // A window of 16 batches reads the pool plus the blocks that
        // replace the used-up ones; a plain shuffle reads nearly all blocks.
        for w in batches.chunks(16) {
            assert!(blocks_in(&w.concat(), &starts) <= 32 + 16, "{}", blocks_in(&w.concat(), &starts));
        }
        let plain = crate::sampler::RandomSampler::new(9_600, 5).indices(0);
        assert!(blocks_in(&plain[..1024], &starts) > 90);
    }

    #[test]
    fn rank_orders_split_the_epoch_and_the_global_order_interleaves_them() {
        let (starts, len) = irregular();
        let s = ChunkShuffleSampler::from_block_starts(starts, len, 16).unwrap().with_seed(4).with_pool_blocks(8);
        for w in [1, 2, 3, 8] {
            let ranks: Vec<Vec<usize>> = (0..w).map(|r| s.rank_order(1, r, w)).collect();
            let mut all = ranks.concat();
            all.sort_unstable();
            assert_eq!(all, (0..len).collect::<Vec<_>>());
            let lens: Vec<usize> = ranks.iter().map(Vec::len).collect();
            assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
            // Rounds of w * 16 cut back into the ranks' orders, as the
            // loader cuts them (part r of each round: len * r / w ..).
            let g = s.global_order(1, w);
            let mut back = vec![Vec::new(); w];
            for round in g.chunks(w * 16) {
                for (r, part) in back.iter_mut().enumerate() {
                    part.extend_from_slice(&round[round.len() * r / w..round.len() * (r + 1) / w]);
                }
            }
            assert_eq!(back, ranks, "world {w}");
        }
    }

    #[test]
    fn shards_are_disjoint_equal_and_cover() {
        for (n, r, drop) in [(1000, 3, false), (1000, 3, true), (10, 4, false), (7, 8, false)] {
            let base = ChunkShuffleSampler::new(n, 13, 16).with_seed(9).with_pool_blocks(4);
            let per: Vec<Vec<usize>> = (0..r)
                .map(|k| Sampler::indices(&base.clone().with_shard(Shard::new(k, r).unwrap().with_drop_last(drop)), 2))
                .collect();
            let want = Shard::new(0, r).unwrap().with_drop_last(drop).len_of(n);
            assert!(per.iter().all(|p| p.len() == want));
            let mut all = per.concat();
            all.sort_unstable();
            if drop {
                let total = all.len();
                all.dedup();
                assert_eq!(all.len(), total); // disjoint
            } else {
                all.dedup();
                assert_eq!(all, (0..n).collect::<Vec<_>>()); // covering
            }
        }
    }

    #[test]
    fn a_list_is_drawn_in_the_blocks_of_its_samples() {
        let starts: Vec<usize> = (0..50).map(|b| b * 20).collect();
        let list: Vec<usize> = (0..1000).rev().filter(|i| i % 7 != 0).collect();
        let s = ChunkShuffleSampler::grouped(&starts, &list, 32).with_pool_blocks(4);
        assert_eq!(s.num_blocks(), 50);
        let order = Sampler::indices(&s, 0);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        let mut want = list.clone();
        want.sort_unstable();
        assert_eq!(sorted, want);
        // A pool of 4: any 32 consecutive draws touch few blocks.
        for w in order.chunks(32) {
            assert!(blocks_in(w, &starts) <= 4 + 4);
        }
    }

    #[test]
    fn epochs_and_seeds_reshuffle_deterministically() {
        let s = ChunkShuffleSampler::new(500, 10, 32).with_seed(1);
        assert_eq!(Sampler::indices(&s, 4), Sampler::indices(&s.clone(), 4));
        assert_ne!(Sampler::indices(&s, 4), Sampler::indices(&s, 5));
        assert_ne!(Sampler::indices(&s, 4), Sampler::indices(&s.clone().with_seed(2), 4));
        let drop = s.clone().with_drop_last(true);
        assert_eq!(Sampler::len(&drop), 480);
        assert_eq!(BatchSampler::batches(&drop, 0).len(), 15);
    }
}

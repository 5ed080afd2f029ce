//! What a read benchmark does: the read order, the read paths and their
//! options, and one timed epoch's result.

use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// The logical order samples are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOrder {
    /// 0, 1, 2, ...
    Sequential,
    /// A seeded permutation of every index.
    Shuffle,
    /// Contiguous blocks of indices, shuffled; order kept inside each block.
    BlockShuffle,
    /// [`ChunkShuffleSampler`](crate::sampler::ChunkShuffleSampler): the
    /// store's chunk-aligned blocks permuted, their samples
    /// drawn through a pool of `buffer_blocks`.
    ChunkShuffle,
    /// What a [`DataLoader`](crate::DataLoader) with `with_shuffle(true)`
    /// reads: a full permutation when the store fits the cache, else the
    /// block pool sized from the cache.
    DefaultShuffle,
}

impl ReadOrder {
    /// The CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadOrder::Sequential => "sequential",
            ReadOrder::Shuffle => "shuffle",
            ReadOrder::BlockShuffle => "block-shuffle",
            ReadOrder::ChunkShuffle => "chunk-shuffle",
            ReadOrder::DefaultShuffle => "default-shuffle",
        }
    }
}

impl std::fmt::Display for ReadOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How samples are read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadPath {
    /// The public DataLoader (validation skipped, CPU device).
    Batch,
    /// `Reader::read` once per sample.
    Single,
    /// `Reader::read_collated` in read windows, without the DataLoader.
    Raw,
}

impl ReadPath {
    /// The CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadPath::Batch => "batch",
            ReadPath::Single => "single",
            ReadPath::Raw => "raw",
        }
    }
}

impl std::fmt::Display for ReadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Builds the logical read order over `n` samples (`chunk-shuffle` needs the
/// store's blocks: see [`chunk_shuffle_order`]; here it is built over blocks of
/// `block_size` samples, batches of `block_size` and the default pool;
/// `default-shuffle` needs the reader: here it is a full permutation).
///
/// # Errors
/// [`Error::Config`] when `block_size` is 0.
pub fn read_order(n: usize, order: ReadOrder, seed: u64, block_size: usize) -> Result<Vec<usize>> {
    if block_size == 0 {
        return Err(Error::Config("read_order_block_size must be >= 1, got 0".into()));
    }
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = crate::sampler::epoch_rng(seed, 0);
    match order {
        ReadOrder::Sequential => {}
        ReadOrder::Shuffle | ReadOrder::DefaultShuffle => crate::sampler::shuffle(&mut idx, &mut rng),
        ReadOrder::BlockShuffle => {
            let mut blocks: Vec<&[usize]> = idx.chunks(block_size).collect();
            crate::sampler::shuffle(&mut blocks, &mut rng);
            idx = blocks.concat();
        }
        ReadOrder::ChunkShuffle => {
            use crate::sampler::{ChunkShuffleSampler, Sampler};
            idx = ChunkShuffleSampler::new(n, block_size, block_size).with_seed(seed).indices(0);
        }
    }
    Ok(idx)
}

/// The `chunk-shuffle` order of epoch 0 over `reader`'s chunk blocks, as
/// batches of `opts.batch_size` concatenated.
///
/// # Errors
/// As [`ChunkShuffleSampler::for_reader`](crate::sampler::ChunkShuffleSampler::for_reader).
pub fn chunk_shuffle_order(reader: &dyn crate::source::Reader, opts: &ReadOptions) -> Result<Vec<usize>> {
    use crate::sampler::{ChunkShuffleSampler, Sampler};
    Ok(ChunkShuffleSampler::for_reader(reader, opts.batch_size)?
        .with_buffer_blocks(opts.buffer_blocks)
        .with_seed(opts.seed)
        .indices(0))
}

/// The `default-shuffle` order of epoch 0 over `reader`, batches of
/// `opts.batch_size`, one rank, and the block pool's size (`None` for a full
/// permutation): what a loader with `with_shuffle(true)` reads.
pub fn default_shuffle_order(reader: &dyn crate::source::Reader, opts: &ReadOptions) -> (Vec<usize>, Option<usize>) {
    use crate::sampler::Sampler;
    let s = crate::pipeline::shuffle::DefaultShuffle::new(reader, None, opts.batch_size, opts.seed, opts.world_size);
    (s.indices(0), s.pool())
}

/// Rank `opts.rank`'s part of the global `order`: the loader's own plan of
/// it with `with_rank(rank, world_size)` (rounds of `world_size *
/// batch_size` samples, the rank taking the `rank`-th part of each).
pub fn rank_part(order: &[usize], opts: &ReadOptions) -> Vec<usize> {
    use crate::pipeline::plan::{Batching, View};
    if opts.world_size <= 1 {
        return order.to_vec();
    }
    let batching = Batching::Fixed {
        sampler: std::sync::Arc::new(crate::sampler::ListSampler::new(order.to_vec())),
        batch_size: opts.batch_size.max(1),
        drop_last: false,
        ranked: None,
    };
    batching.plan(View { world_size: opts.world_size, rank: opts.rank, slice: None }, 0, 0, None).concat()
}

/// The read side of a benchmark run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOptions {
    /// Paths to time, in this order.
    pub paths: Vec<ReadPath>,
    /// Sample order.
    pub order: ReadOrder,
    /// Seed of the shuffled orders.
    pub seed: u64,
    /// Block size of `block-shuffle`.
    pub block_size: usize,
    /// Blocks in the pool of `chunk-shuffle` (its `K`).
    pub buffer_blocks: usize,
    /// Read only the first this many samples of the order (a timed prefix
    /// of the epoch, for orders too slow to run whole); `None`: all.
    pub max_samples: Option<usize>,
    /// This rank (of `world_size`): its part of the epoch is read, as a
    /// loader built `with_rank(rank, world_size)` reads it.
    pub rank: usize,
    /// Ranks the epoch is split over.
    pub world_size: usize,
    /// Also time the decode floor: every inner chunk decoded once, on all
    /// cores (see [`AtomicDataZarrReader::decode_every_chunk`](crate::AtomicDataZarrReader::decode_every_chunk)).
    pub decode_floor: bool,
    /// Samples per emitted batch (batch and raw paths).
    pub batch_size: usize,
    /// Batches fused into one backend read; 0 reads one batch at a time.
    /// Signed so a negative value from a user gets a clear error.
    pub prefetch_factor: i64,
    /// Ask the loader for pinned host staging.
    pub pin_memory: bool,
    /// Decoded-chunk cache budget of the reader (0 disables it).
    pub cache_bytes: u64,
    /// Passes over the data with one reader (epochs after the first show the
    /// cache at work).
    pub epochs: usize,
    /// Progress bars on stderr.
    pub progress: bool,
    /// Compute the content checksum of what each pass delivers (hashing
    /// every byte: it is part of the timed pass, so off by default).
    pub checksum: bool,
    /// How a store at a URL is reached and fetched (concurrency, merging,
    /// disk cache); unused for local stores.
    pub remote: crate::store::remote::RemoteOptions,
    /// Build neighbor lists at this cutoff (Å) while reading, replacing any
    /// stored edges (see [`Dataset::with_cutoff`](crate::Dataset::with_cutoff)).
    pub cutoff: Option<f64>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            paths: vec![ReadPath::Batch],
            order: ReadOrder::Sequential,
            seed: 0,
            block_size: 8192,
            buffer_blocks: crate::sampler::DEFAULT_BUFFER_BLOCKS,
            decode_floor: false,
            max_samples: None,
            rank: 0,
            world_size: 1,
            batch_size: 64,
            prefetch_factor: 16,
            pin_memory: false,
            cache_bytes: crate::DEFAULT_CACHE_BYTES,
            epochs: 1,
            progress: false,
            checksum: false,
            remote: Default::default(),
            cutoff: None,
        }
    }
}

impl ReadOptions {
    /// Checks the options (the CLI's error messages come from here).
    ///
    /// # Errors
    /// [`Error::Config`] naming the option when `batch_size`, `block_size`,
    /// `buffer_blocks` or `epochs` is 0, `prefetch_factor` is negative, or no
    /// read path is given.
    pub fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(Error::Config("batch_size must be >= 1, got 0".into()));
        }
        if self.prefetch_factor < 0 {
            return Err(Error::Config(format!("prefetch_factor must be >= 0, got {}", self.prefetch_factor)));
        }
        if self.block_size == 0 {
            return Err(Error::Config("read_order_block_size must be >= 1, got 0".into()));
        }
        if self.buffer_blocks == 0 {
            return Err(Error::Config("buffer_blocks must be >= 1, got 0".into()));
        }
        if self.epochs == 0 {
            return Err(Error::Config("epochs must be >= 1, got 0".into()));
        }
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(Error::Config(format!("rank {} out of range for world_size {}", self.rank, self.world_size)));
        }
        if self.paths.is_empty() {
            return Err(Error::Config("at least one read mode is needed".into()));
        }
        if let Some(c) = self.cutoff {
            crate::data::neighbors::check_cutoff(c)?;
        }
        Ok(())
    }

    /// Samples per backend read on the batch and raw paths:
    /// `batch_size * max(prefetch_factor, 1)` (the reference's definition).
    pub fn read_window(&self) -> usize {
        self.batch_size * (self.prefetch_factor.max(1) as usize)
    }

    pub(super) fn prefetch(&self) -> usize {
        self.prefetch_factor.max(0) as usize
    }
}

/// What one timed pass delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadResult {
    /// Wall time of the pass (the first includes opening the reader).
    pub read_time: Duration,
    /// Samples delivered (duplicates counted).
    pub samples_read: usize,
    /// Distinct logical indices delivered.
    pub unique_samples: usize,
    /// Delivered indices equal the requested order.
    pub order_ok: bool,
    /// Bytes of field data delivered.
    pub read_bytes: u64,
    /// Cache hits during the pass.
    pub cache_hits: u64,
    /// Cache misses (chunk decodes) during the pass.
    pub cache_misses: u64,
    /// Wrapping sum of [`sample_hash`](super::sample_hash) over the delivered samples, when
    /// [`ReadOptions::checksum`] is set.
    pub content_checksum: Option<u64>,
    /// The reader's decode counters for the pass.
    pub decode: crate::source::DecodeCounters,
    /// Peak resident memory of the process during the pass (Linux: VmHWM,
    /// reset at the start of the pass where the kernel allows it).
    pub peak_rss: Option<u64>,
    /// Requests made to the store during the pass (the first includes opening).
    pub requests: u64,
    /// Minor page faults of the process during the pass (the first
    /// includes opening); `None` where they cannot be counted.
    pub minor_faults: Option<u64>,
    /// From the start of the pass (of opening the store, for the first) to
    /// the first batch delivered.
    pub first_batch_time: Option<Duration>,
    /// Blocks in the pool of a block-pool order (`default-shuffle` on a store
    /// larger than the cache, `chunk-shuffle`).
    pub pool_blocks: Option<usize>,
    /// Bytes received from the store during the pass.
    pub fetched_bytes: u64,
}

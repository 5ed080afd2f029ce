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
    /// drawn through a pool of `pool_blocks`.
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

/// `Display` as the CLI name (`as_str`).
macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(ReadOrder, ReadPath);

/// Builds the logical read order over `n` samples (`chunk-shuffle` needs the
/// store's blocks: see [`chunk_shuffle_order`]; here it is built over blocks of
/// `block_size` samples, batches of `block_size` and the default pool;
/// `default-shuffle` needs the reader: here it is a full permutation).
///
/// # Errors
/// [`Error::Config`] when `block_size` is 0.
pub fn read_order(n: usize, order: ReadOrder, seed: u64, block_size: usize) -> Result<Vec<usize>> {
    Error::check_at_least_one("read_order_block_size", block_size)?;
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
        .with_pool_blocks(opts.pool_blocks)
        .with_seed(opts.seed)
        .indices(0))
}

/// The `default-shuffle` order of epoch 0 over `reader`, batches of
/// `opts.batch_size`, one rank, and the block pool's size (`None` for a full
/// permutation): what a loader with `with_shuffle(true)` reads.
pub fn default_shuffle_order(reader: &dyn crate::source::Reader, opts: &ReadOptions) -> (Vec<usize>, Option<usize>) {
    use crate::sampler::Sampler;
    let s = crate::pipeline::shuffle::DefaultShuffle::new(reader, None, opts.batch_size, opts.seed, opts.world_size);
    (s.indices(0), s.pool_blocks())
}

/// Rank `opts.rank`'s part of the global `order`: the loader's own plan of
/// it with `with_rank(rank, world_size)` (rounds of `world_size *
/// batch_size` samples, the rank taking the `rank`-th part of each).
pub fn rank_part(order: &[usize], opts: &ReadOptions) -> Vec<usize> {
    use crate::pipeline::order::{Order, SampleOrder};
    use crate::pipeline::schedule::View;
    if opts.world_size <= 1 {
        return order.to_vec();
    }
    let list = crate::sampler::ListSampler::new(order.to_vec());
    let order = Order::Samples {
        samples: SampleOrder::Sampler(std::sync::Arc::new(list)),
        batch_size: opts.batch_size.max(1),
        drop_last: false,
    };
    order.schedule(View { world_size: opts.world_size, rank: opts.rank, slice: None }, 0, 0, None).concat()
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
    /// Blocks in the pool of `chunk-shuffle` (its `pool_blocks`).
    pub pool_blocks: usize,
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
    /// How several stores are mixed (see [`MixOptions`]); unused, and
    /// refused when set, with one store.
    pub mix: MixOptions,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            paths: vec![ReadPath::Batch],
            order: ReadOrder::Sequential,
            seed: 0,
            block_size: 8192,
            pool_blocks: crate::sampler::DEFAULT_POOL_BLOCKS,
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
            mix: MixOptions::default(),
        }
    }
}

impl ReadOptions {
    /// Checks the options (the CLI's error messages come from here).
    ///
    /// # Errors
    /// [`Error::Config`] naming the option when `batch_size`, `block_size`,
    /// `pool_blocks` or `epochs` is 0, `prefetch_factor` is negative, or no
    /// read path is given.
    pub fn validate(&self) -> Result<()> {
        Error::check_at_least_one("batch_size", self.batch_size)?;
        if self.prefetch_factor < 0 {
            return Err(Error::Config(format!("prefetch_factor must be >= 0, got {}", self.prefetch_factor)));
        }
        Error::check_at_least_one("read_order_block_size", self.block_size)?;
        Error::check_at_least_one("pool_blocks", self.pool_blocks)?;
        Error::check_at_least_one("epochs", self.epochs)?;
        Error::check_rank(self.rank, self.world_size)?;
        if self.paths.is_empty() {
            return Err(Error::Config("at least one read mode is needed".into()));
        }
        if let Some(c) = self.cutoff {
            crate::data::neighbors::check_cutoff(c)?;
        }
        Ok(())
    }

    /// Checks the options for a run over `stores` stores: as
    /// [`validate`](Self::validate), and the mixture's options (see
    /// [`MixOptions`]) against the number of stores.
    ///
    /// # Errors
    /// [`Error::Config`] as [`validate`](Self::validate); when no store is
    /// given; with one store, when a mixture option is set; with several,
    /// when `weights` and `samples_per_dataset` are both set, either has
    /// not one value per store, `batch_size` is not the sum of
    /// `samples_per_dataset`, an option of one sampler is given to the
    /// other (`num_samples` with `samples_per_dataset`, `epoch_policy` or
    /// `num_batches` without it), a count is 0, or the order, a read mode
    /// or `decode_floor` reads only one store.
    pub fn validate_for(&self, stores: usize) -> Result<()> {
        self.validate()?;
        let m = &self.mix;
        if stores == 0 {
            return Err(Error::Config("at least one store is needed".into()));
        }
        if stores == 1 {
            if let Some(name) = m.set_options().first() {
                return Err(Error::Config(format!("{name} is an option of a mixture: give two or more stores")));
            }
            return Ok(());
        }
        let per_store = |name: &str, given: usize| {
            if given == stores {
                Ok(())
            } else {
                Err(Error::Config(format!("{name} has {given} values for {stores} stores (one per store, in order)")))
            }
        };
        match (&m.weights, &m.samples_per_dataset) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "weights and samples_per_dataset are exclusive: weights mix sample by sample \
                     (MultiDatasetSampler), samples_per_dataset fixes every batch (MultiDatasetBatchSampler)"
                        .into(),
                ));
            }
            (Some(w), None) => per_store("weights", w.len())?,
            (None, Some(c)) => {
                per_store("samples_per_dataset", c.len())?;
                let sum: usize = c.iter().sum();
                if sum != self.batch_size {
                    return Err(Error::Config(format!(
                        "batch_size {} disagrees with samples_per_dataset {} (their sum, {sum}, is the batch size)",
                        self.batch_size,
                        c.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
                    )));
                }
            }
            (None, None) => {}
        }
        let batches = m.samples_per_dataset.is_some();
        if batches && m.temperature.is_some() {
            return Err(Error::Config(
                "temperature tempers a weighted mixture's rates; samples_per_dataset fixes exact counts".into(),
            ));
        }
        if batches && m.num_samples.is_some() {
            return Err(Error::Config(
                "num_samples sizes a weighted mixture's epoch; with samples_per_dataset use num_batches".into(),
            ));
        }
        if !batches
            && let Some(name) = [("epoch_policy", m.epoch_policy.is_some()), ("num_batches", m.num_batches.is_some())]
                .iter()
                .find_map(|&(name, set)| set.then_some(name))
        {
            return Err(Error::Config(format!("{name} sizes a samples_per_dataset epoch; give samples_per_dataset")));
        }
        Error::check_at_least_one("num_samples", m.num_samples.unwrap_or(1))?;
        Error::check_at_least_one("num_batches", m.num_batches.unwrap_or(1))?;
        if !matches!(self.order, ReadOrder::Sequential | ReadOrder::Shuffle | ReadOrder::DefaultShuffle) {
            return Err(Error::Config(format!(
                "read order {} reads one store; a mixture reads sequential (its sampler with shuffle off), \
                 shuffle or default-shuffle (shuffle on)",
                self.order
            )));
        }
        if let Some(p) = self.paths.iter().find(|p| **p != ReadPath::Batch) {
            return Err(Error::Config(format!(
                "read mode {p} reads one store; a mixture is read through the DataLoader (read mode batch)"
            )));
        }
        if self.decode_floor {
            return Err(Error::Config("decode_floor times one store; give one store".into()));
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

/// How the stores of a mixture are read (two or more stores behind one
/// [`MultiReader`](crate::MultiReader), read through the loader): a
/// [`MultiDatasetSampler`](crate::sampler::MultiDatasetSampler) by default,
/// a [`MultiDatasetBatchSampler`](crate::sampler::MultiDatasetBatchSampler)
/// with `samples_per_dataset`. The read order turns the sampler's shuffle
/// on (`shuffle`, `default-shuffle`) or off (`sequential`).
#[derive(Debug, Clone, PartialEq)]
pub struct MixOptions {
    /// Per-store rates of the sample-by-sample mixture; `None`:
    /// proportional to each store's length.
    pub weights: Option<Vec<f64>>,
    /// Tempers the sample-by-sample mixture's rates (weights, or the
    /// stores' lengths): `p_i ∝ w_i^(1/T)`.
    pub temperature: Option<f64>,
    /// Samples per epoch of the sample-by-sample mixture; `None`: every
    /// store's samples, summed.
    pub num_samples: Option<usize>,
    /// Samples of each store in every batch (selects the batch sampler;
    /// their sum is the batch size).
    pub samples_per_dataset: Option<Vec<usize>>,
    /// How the batch sampler sizes the epoch when `num_batches` is not
    /// given; `None`: its default.
    pub epoch_policy: Option<crate::sampler::EpochPolicy>,
    /// Batches per epoch of the batch sampler.
    pub num_batches: Option<usize>,
    /// Draw with replacement (a store used up starts a fresh pass): on by
    /// default, for either sampler.
    pub replacement: bool,
}

impl Default for MixOptions {
    fn default() -> Self {
        MixOptions {
            weights: None,
            temperature: None,
            num_samples: None,
            samples_per_dataset: None,
            epoch_policy: None,
            num_batches: None,
            replacement: true,
        }
    }
}

impl MixOptions {
    /// The names of the options set away from their defaults.
    pub fn set_options(&self) -> Vec<&'static str> {
        [
            ("weights", self.weights.is_some()),
            ("temperature", self.temperature.is_some()),
            ("num_samples", self.num_samples.is_some()),
            ("samples_per_dataset", self.samples_per_dataset.is_some()),
            ("epoch_policy", self.epoch_policy.is_some()),
            ("num_batches", self.num_batches.is_some()),
            ("replacement=false", !self.replacement),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mixed(f: impl FnOnce(&mut MixOptions)) -> ReadOptions {
        let mut o = ReadOptions::default();
        f(&mut o.mix);
        o
    }

    fn message(o: &ReadOptions, stores: usize) -> String {
        match o.validate_for(stores) {
            Err(Error::Config(m)) => m,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn mixture_options_are_checked_against_the_stores() {
        let plain = ReadOptions::default();
        assert!(plain.validate_for(1).is_ok() && plain.validate_for(3).is_ok());
        assert!(message(&plain, 0).contains("at least one store"));
        let w = mixed(|m| m.weights = Some(vec![1.0, 1.0]));
        assert!(w.validate_for(2).is_ok());
        assert!(message(&w, 1).starts_with("weights is an option of a mixture"));
        assert!(message(&w, 3).contains("weights has 2 values for 3 stores"));
        let no_rep = mixed(|m| m.replacement = false);
        assert!(message(&no_rep, 1).starts_with("replacement=false"));
        let both = mixed(|m| {
            m.weights = Some(vec![1.0, 1.0]);
            m.samples_per_dataset = Some(vec![32, 32]);
        });
        assert!(message(&both, 2).contains("exclusive"));
        let spd = mixed(|m| m.samples_per_dataset = Some(vec![32, 32]));
        assert!(spd.validate_for(2).is_ok(), "64 is the default batch size");
        let spd_small = ReadOptions { batch_size: 16, ..spd.clone() };
        assert!(message(&spd_small, 2).contains("batch_size 16 disagrees with samples_per_dataset 32,32"));
        let policy = mixed(|m| m.epoch_policy = Some(crate::sampler::EpochPolicy::MaxSize));
        assert!(message(&policy, 2).starts_with("epoch_policy sizes"));
        let sized = mixed(|m| {
            m.samples_per_dataset = Some(vec![32, 32]);
            m.num_samples = Some(5);
        });
        assert!(message(&sized, 2).starts_with("num_samples sizes"));
        let block = ReadOptions { order: ReadOrder::BlockShuffle, ..ReadOptions::default() };
        assert!(block.validate_for(1).is_ok());
        assert!(message(&block, 2).contains("read order block-shuffle reads one store"));
        let raw = ReadOptions { paths: vec![ReadPath::Batch, ReadPath::Raw], ..ReadOptions::default() };
        assert!(message(&raw, 2).contains("read mode raw reads one store"));
    }
}

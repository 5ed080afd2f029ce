//! [`DataLoaderBuilder`]: the loader's knobs, checked once in
//! [`DataLoaderBuilder::build`] (options that would do nothing are errors).

use std::any::Any;
use std::sync::{Arc, Mutex};

use burn::tensor::Device;

use crate::data::CollateOptions;
use crate::error::{Error, Result};
use crate::pipeline::in_order::{InOrder, RankSplit};
use crate::pipeline::order::{BatchOrder, Order, SampleOrder};
use crate::pipeline::schedule::{Clock, Cursor, View};
use crate::pipeline::shuffle::DefaultShuffle;
use crate::pipeline::{AtomicBatch, BatchTransform, DataLoader, Dataset};
use crate::sampler::FittedMix;
use crate::sampler::{BatchSampler, MultiDatasetBatchSampler, MultiDatasetSampler, Sampler};
use crate::source::Reader;

impl<R: Reader + 'static> DataLoader<R> {
    /// Starts a builder over `dataset`.
    pub fn builder(dataset: Dataset<R>) -> DataLoaderBuilder<R> {
        DataLoaderBuilder {
            dataset,
            batch_size: None,
            shuffle: false,
            seed: 0,
            drop_last: false,
            sampler: None,
            batch_sampler: None,
            mixture: None,
            prefetch_factor: 2,
            num_workers: None,
            pin_memory: false,
            use_streams: false,
            num_streams: None,
            batch_transforms: Vec::new(),
            world: (0, 1),
            rank_split: None,
            int64: false,
        }
    }
}

/// Builder of a [`DataLoader`]; see the field docs of each method.
pub struct DataLoaderBuilder<R: Reader> {
    pub(super) dataset: Dataset<R>,
    pub(super) batch_size: Option<usize>,
    pub(super) shuffle: bool,
    pub(super) seed: u64,
    pub(super) drop_last: bool,
    pub(super) sampler: Option<Arc<dyn Sampler>>,
    pub(super) batch_sampler: Option<Arc<dyn BatchSampler>>,
    /// The sampler or batch sampler when it is a mixing one (fitted to
    /// the reader at build).
    pub(super) mixture: Option<Mix>,
    pub(super) prefetch_factor: usize,
    pub(super) num_workers: Option<usize>,
    pub(super) pin_memory: bool,
    pub(super) use_streams: bool,
    pub(super) num_streams: Option<usize>,
    pub(super) batch_transforms: Vec<BatchTransform>,
    pub(super) world: (usize, usize),
    pub(super) rank_split: Option<RankSplit>,
    pub(super) int64: bool,
}

impl<R: Reader + 'static> DataLoaderBuilder<R> {
    /// Samples per batch (default 1). Not allowed with `batch_sampler`.
    pub fn with_batch_size(mut self, n: usize) -> Self {
        self.batch_size = Some(n);
        self
    }

    /// Shuffle every epoch, seeded by `seed` and the epoch (default off).
    /// With a `sampler`, shuffles that sampler's indices (a split's list).
    ///
    /// How, depends on the store and the reader's chunk cache
    /// ([`ReaderOptions::with_cache_bytes`](crate::ReaderOptions::with_cache_bytes)),
    /// and is logged once at `build`:
    /// - the decoded store fits the cache (or the reader has no chunks): a
    ///   full permutation, every epoch;
    /// - it does not: the block pool of [`ChunkShuffleSampler`](crate::sampler::ChunkShuffleSampler).
    ///   The epoch permutes the store's chunk blocks, a pool of `pool_blocks` blocks
    ///   is resident, and each draw picks one of them uniformly, then one of
    ///   the samples left in it; a used-up block is replaced by the next. `pool_blocks` is
    ///   the number of blocks whose decoded chunks fill half of the cache the
    ///   resident (per-system) arrays leave, at least
    ///   [`MIN_POOL_BLOCKS`](crate::sampler::MIN_POOL_BLOCKS); a cache of 0
    ///   bytes gets that minimum. Each chunk is then decoded about once per
    ///   epoch. With ranks, each rank draws only from its own region of the
    ///   store (see [`with_rank`](Self::with_rank)).
    ///
    /// Either way every sample is read once per epoch, the order is
    /// reproducible per `(seed, epoch)`, and a [`LoaderState`](crate::LoaderState)
    /// records what the order depends on (the kind, `pool_blocks`, the ranks the epoch
    /// was cut for): [`DataLoader::load_state`] makes the loader follow it,
    /// whatever its own cache. Every rank must use the same cache size.
    /// For a full permutation on any store, pass
    /// [`RandomSampler`](crate::sampler::RandomSampler) as the sampler.
    pub fn with_shuffle(mut self, yes: bool) -> Self {
        self.shuffle = yes;
        self
    }

    /// Seed of the shuffle (default 0).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Drop the last short batch (default off).
    pub fn with_drop_last(mut self, yes: bool) -> Self {
        self.drop_last = yes;
        self
    }

    /// Sample order (default: sequential, or random with `shuffle`).
    ///
    /// A [`MultiDatasetSampler`] is fitted to the reader (a
    /// [`MultiReader`](crate::MultiReader) of stores) at [`build`](Self::build),
    /// and the choice is logged per dataset: shuffled, each dataset whose
    /// decoded store does not fit its share of the mixture's cache
    /// ([`MultiReaderOptions::with_cache_bytes`](crate::MultiReaderOptions::with_cache_bytes))
    /// is drawn through a block pool sized from that share, as
    /// [`with_shuffle`](Self::with_shuffle) reads one store, so each of its
    /// chunks is decoded about once per pass; a dataset that fits keeps a
    /// permutation. With [`with_rank`](Self::with_rank), each rank reads
    /// its own region of each dataset
    /// ([`MultiDatasetSampler::rank_order`]). Counts per dataset stay
    /// exact; the pool sizes are recorded in [`LoaderState`](crate::LoaderState).
    /// A mixing sampler given its own `with_rank` is read as it stands.
    /// What a fitted sampler makes the loader read, rank by rank, is
    /// [`MultiDatasetSampler::loader_indices`].
    pub fn with_sampler(mut self, s: impl Sampler + 'static) -> Self {
        self.mixture = (&s as &dyn Any).downcast_ref::<MultiDatasetSampler>().cloned().map(Mix::Samples);
        self.sampler = Some(Arc::new(s));
        self
    }

    /// Batch membership and order; exclusive with `sampler`, `shuffle`,
    /// `batch_size` and `drop_last`. A [`MultiDatasetBatchSampler`] is
    /// fitted to the reader as a [`MultiDatasetSampler`] is (see
    /// [`with_sampler`](Self::with_sampler)): every batch still holds
    /// exactly its samples of each dataset.
    pub fn with_batch_sampler(mut self, s: impl BatchSampler + 'static) -> Self {
        self.mixture = (&s as &dyn Any).downcast_ref::<MultiDatasetBatchSampler>().cloned().map(Mix::Batches);
        self.batch_sampler = Some(Arc::new(s));
        self
    }

    /// Batches fused into one backend read (default 2; 0 = one synchronous
    /// read per batch). Starting points: sequential 2-4, shuffled 16-64,
    /// block-shuffled 2-8.
    pub fn with_prefetch_factor(mut self, k: usize) -> Self {
        self.prefetch_factor = k;
        self
    }

    /// Background read threads (default 1: the read itself is parallel over chunks).
    pub fn with_num_workers(mut self, n: usize) -> Self {
        self.num_workers = Some(n);
        self
    }

    /// Stage host buffers in pinned (page-locked) memory so the copy to the
    /// device is a DMA (CUDA; Burn's CPU backends and wgpu have no staging,
    /// so there it changes nothing). Each field is converted to the
    /// device's dtype while it is copied into the pinned buffer.
    pub fn with_pin_memory(mut self, yes: bool) -> Self {
        self.pin_memory = yes;
        self
    }

    /// Build device batches in the background, on upload threads the loader
    /// owns, so uploads overlap the training step (default off). Each
    /// upload thread keeps one device stream (CubeCL backends give every
    /// thread its own) for the loader's life, so its copies run beside the
    /// training thread's compute and its pinned buffers are reused. Turn it
    /// on for GPU backends; on a CPU backend the conversion competes with
    /// the reads for the same cores and a shuffled epoch measured ~35%
    /// slower with it on.
    pub fn with_use_streams(mut self, yes: bool) -> Self {
        self.use_streams = yes;
        self
    }

    /// Upload threads (device streams) when `use_streams` (default 1);
    /// batches go to them in turn and come out in the sampler's order. Only
    /// meaningful with `with_use_streams(true)`: [`build`](Self::build)
    /// refuses it otherwise, and refuses 0, rather than ignore it.
    pub fn with_num_streams(mut self, n: usize) -> Self {
        self.num_streams = Some(n);
        self
    }

    /// Reads rank `rank` of `world_size` ranks' share of every epoch (default
    /// `0, 1`: all of it). Every rank builds the same loader (same sampler,
    /// seed and batch size) and computes the same epoch; each rank's share
    /// is the part of the data it decodes alone where the order allows:
    /// - in index order (no sampler, no shuffle), a contiguous range of the
    ///   dataset ([`RankSplit::Ranges`], `len * rank / world_size ..`), so
    ///   the ranks together decode each chunk once; the toolkit's
    ///   interleaved rounds are [`with_rank_split`](Self::with_rank_split)`(RankSplit::Interleaved)`;
    /// - under the block-pool shuffle (see [`with_shuffle`](Self::with_shuffle))
    ///   and a fitted mixing sampler, rank `r` draws from its own region of
    ///   each store, about `1 / world_size` of it;
    /// - any other sampler's order (and a full permutation) is read in
    ///   rounds of `world_size * batch_size` samples, rank `r` taking the
    ///   `r`-th part of each.
    ///
    /// Every rank gets the same number of batches (collectives stay in
    /// step) and no sample is repeated to pad them: a rank with fewer
    /// samples left gets shorter (at the very end, empty) batches;
    /// `drop_last` keeps only the full batches every rank has. A
    /// [`LoaderState`](crate::LoaderState) saved on one world size resumes
    /// on another: rounds go on with the rest of the same global order, cut
    /// for the new number of ranks; where each rank reads its own part, the
    /// new ranks take over the old ranks' parts in contiguous stretches (the
    /// rest of the old ranks' orders, laid end to end in rank order, cut
    /// into equal parts; see [`DataLoader::load_state`](crate::DataLoader::load_state));
    /// the next epoch is planned for the new number. With a `batch_sampler`,
    /// whole batches go round-robin to the ranks (ranks may then get one
    /// batch more than others). `build` refuses `rank >= world_size`.
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.world = (rank, world_size);
        self
    }

    /// How ranks split an epoch read in index order (default
    /// [`RankSplit::Ranges`]: a contiguous range each). Only for a loader
    /// with no sampler, batch sampler or shuffle: [`build`](Self::build)
    /// refuses it with one, rather than ignore it.
    pub fn with_rank_split(mut self, split: RankSplit) -> Self {
        self.rank_split = Some(split);
        self
    }

    /// Adds a per-batch transform.
    pub fn with_batch_transform(
        mut self,
        f: impl Fn(AtomicBatch) -> Result<AtomicBatch> + Send + Sync + 'static,
    ) -> Self {
        self.batch_transforms.push(Arc::new(f));
        self
    }

    /// Keeps int64 fields (atomic numbers, neighbor lists, ...) int64 in the
    /// host batches [`DataLoader::iter_host`] yields. By default they are
    /// narrowed to int32 when the device's int tensors are int32 (Flex,
    /// CUDA), so that building device batches converts nothing; host
    /// consumers that index with int64 (PyTorch) keep them wide. Device
    /// batches are the same either way.
    pub fn with_int64(mut self, yes: bool) -> Self {
        self.int64 = yes;
        self
    }

    /// Subtracts per-element reference energies from every energy
    /// ([`SubtractE0s`](crate::prep::transforms::SubtractE0s), on the
    /// collated batch; see [`Dataset::with_collated_transform`]).
    pub fn with_subtract_e0s(mut self, e0s: crate::prep::transforms::SubtractE0s) -> Self {
        self.dataset = self.dataset.with_collated_transform(e0s);
        self
    }

    /// Scales and shifts energies and forces
    /// ([`ScaleShift`](crate::prep::transforms::ScaleShift)).
    pub fn with_scale_shift(mut self, s: crate::prep::transforms::ScaleShift) -> Self {
        self.dataset = self.dataset.with_collated_transform(s);
        self
    }

    /// Rotates every sample by a uniformly random rotation, drawn from
    /// `(seed, epoch, index)` ([`RandomRotation`](crate::prep::transforms::RandomRotation)
    /// with its default fields; pass a configured one to
    /// [`Dataset::with_collated_transform`] for others).
    pub fn with_random_rotation(mut self, seed: u64) -> Self {
        self.dataset = self.dataset.with_collated_transform(crate::prep::transforms::RandomRotation::new(seed));
        self
    }

    /// Adds the per-sample field `weight` from a label
    /// ([`SampleWeights`](crate::prep::transforms::SampleWeights)).
    pub fn with_sample_weights(mut self, w: crate::prep::transforms::SampleWeights) -> Self {
        self.dataset = self.dataset.with_collated_transform(w);
        self
    }

    /// Checks the options and builds the loader for `device`. Options that
    /// would do nothing are errors.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use burn::tensor::Device;
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, Error, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("b.zarr");
    /// let s = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap();
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[s])?;
    /// let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
    /// let no_streams = DataLoader::builder(ds.clone()).with_num_streams(2).build(&Device::flex());
    /// assert!(matches!(no_streams, Err(Error::Config(_))));
    /// DataLoader::builder(ds).with_use_streams(true).with_num_streams(2).build(&Device::flex())?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for `with_num_streams` without `with_use_streams`,
    /// `with_num_streams(0)`, `with_num_workers(0)`, `with_batch_size(0)`,
    /// `rank >= world_size`, a batch sampler with a sampler, `shuffle`,
    /// `batch_size` or `drop_last`, or `with_rank_split` with any of them.
    pub fn build(mut self, device: &Device) -> Result<DataLoader<R>> {
        Error::check_at_least_one("num_streams", self.num_streams.unwrap_or(1))?;
        let num_streams = match (self.num_streams, self.use_streams) {
            (Some(n), false) => {
                return Err(Error::Config(format!(
                    "with_num_streams({n}) needs with_use_streams(true): without it device batches are built on the consumer thread"
                )));
            }
            (n, true) => n.unwrap_or(1),
            (None, false) => 0,
        };
        // Int tensors on an int32 device: the reader narrows int64 fields
        // while it copies rows, so building the device batch converts nothing.
        let int32 = !self.int64 && crate::pipeline::device_int_dtype(device) == burn::tensor::DType::I32;
        let dataset =
            self.dataset.with_collate_options(CollateOptions::default().with_narrow_int64(int32)).with_own_skip_count();
        Error::check_at_least_one("num_workers", self.num_workers.unwrap_or(1))?;
        let prefetch = crate::pipeline::Prefetcher::new(self.num_workers.unwrap_or(1));
        let (rank, world_size) = self.world;
        Error::check_rank(rank, world_size)?;
        let reader = &**dataset.reader();
        let order = match self.batch_sampler {
            Some(bs) => {
                if self.sampler.is_some() || self.shuffle || self.batch_size.is_some() || self.drop_last {
                    return Err(Error::Config(
                        "batch_sampler is exclusive with sampler, shuffle, batch_size and drop_last".into(),
                    ));
                }
                Order::Batches(match self.mixture.and_then(|m| m.fit_batches(reader)) {
                    Some(f) => BatchOrder::Mixture(f),
                    None => BatchOrder::Sampler(bs),
                })
            }
            None => {
                let bsz = self.batch_size.unwrap_or(1);
                Error::check_at_least_one("batch_size", bsz)?;
                let samples = match (self.sampler, self.shuffle) {
                    (Some(s), false) => match self.mixture.and_then(|m| m.fit_samples(reader)) {
                        Some(f) => SampleOrder::Mixture(f),
                        None => SampleOrder::Sampler(s),
                    },
                    (inner, true) => {
                        SampleOrder::Shuffle(Arc::new(DefaultShuffle::new(reader, inner, bsz, self.seed, world_size)))
                    }
                    (None, false) => SampleOrder::Sequential(Arc::new(InOrder::new(
                        dataset.len(),
                        self.rank_split.take().unwrap_or_default(),
                    ))),
                };
                Order::Samples { samples, batch_size: bsz, drop_last: self.drop_last }
            }
        };
        if let Some(split) = self.rank_split {
            return Err(Error::Config(format!(
                "with_rank_split({split:?}) splits an epoch read in index order: this loader has a sampler, batch sampler or shuffle"
            )));
        }
        Ok(DataLoader {
            dataset,
            prefetch,
            order,
            view: View { world_size, rank, slice: None },
            seed: self.shuffle.then_some(self.seed),
            resume: Arc::new(Mutex::new(None)),
            prefetch_factor: self.prefetch_factor,
            pin_memory: self.pin_memory,
            num_streams,
            batch_transforms: self.batch_transforms,
            device: device.clone(),
            clock: Arc::new(Mutex::new(Clock::default())),
            cursor: Arc::new(Mutex::new(Cursor::default())),
            schedule_cache: Arc::new(Mutex::new(None)),
            uploader: Arc::new(std::sync::OnceLock::new()),
        })
    }
}

/// A mixing sampler given to the builder, fitted to the reader at build.
#[derive(Clone)]
pub(super) enum Mix {
    Samples(MultiDatasetSampler),
    Batches(MultiDatasetBatchSampler),
}

impl Mix {
    /// The sampler fitted to `reader`, `None` (logged why) when it is read
    /// as it stands.
    fn fit_samples<R: Reader + ?Sized>(self, reader: &R) -> Option<Arc<FittedMix<MultiDatasetSampler>>> {
        let Mix::Samples(m) = self else { return None };
        FittedMix::fit(reader, m)
            .map(Arc::new)
            .map_err(|why| log::info!("MultiDatasetSampler read as given: {why}"))
            .ok()
    }

    /// As [`fit_samples`](Self::fit_samples) for the batch sampler.
    fn fit_batches<R: Reader + ?Sized>(self, reader: &R) -> Option<Arc<FittedMix<MultiDatasetBatchSampler>>> {
        let Mix::Batches(m) = self else { return None };
        FittedMix::fit(reader, m)
            .map(Arc::new)
            .map_err(|why| log::info!("MultiDatasetBatchSampler read as given: {why}"))
            .ok()
    }
}

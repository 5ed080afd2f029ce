//! [`DataLoader`]: sampler iteration, fused prefetch windows, double
//! buffering, pinned staging and background uploads.
//!
//! With `prefetch_factor = k > 0`, consecutive batches are grouped `k` at a
//! time into one fused read (`batch_size * k` indices in one planned read,
//! [`ReaderExt::plan`](crate::ReaderExt::plan) then `read_plan`), and
//! two fused reads are kept in flight: one being consumed while the next is
//! read in the background. With `prefetch_factor = 0` each batch is one
//! synchronous read. Either way the batches are exactly the sampler's, in its
//! order. For a device whose int tensors are int32 (Flex, CUDA) the reads ask
//! for int64 fields narrowed to int32
//! ([`CollateOptions::narrow_int64`](crate::data::CollateOptions::narrow_int64)),
//! so building a device batch converts nothing. With `use_streams`, device
//! batches are built in the background on the loader's own upload threads
//! (`num_streams` of them, one device stream each, see
//! [`Uploader`](super::upload)): each window's batches are handed to them as
//! soon as it is read, so uploads overlap the training step.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use burn::tensor::Device;
//! use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, ZarrWriteConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("l.zarr");
//! let samples: Vec<AtomicData> = (1..=10)
//!     .map(|n| AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap().with_energy(n as f32))
//!     .collect();
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
//! let ds = Dataset::new(AtomicDataZarrReader::open(&path)?).with_skip_validation(true);
//! let loader = DataLoader::builder(ds).with_batch_size(4).with_shuffle(true).with_seed(1).with_prefetch_factor(2).build(&Device::flex())?;
//! assert_eq!(loader.len(), 3);
//! let mut seen = vec![];
//! for batch in loader.iter() {
//!     seen.extend(batch?.indices);
//! }
//! seen.sort();
//! assert_eq!(seen, (0..10).collect::<Vec<_>>());
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::tensor::Device;

use crate::data::CollatedBatch;
use crate::error::{Error, Result};
use crate::pipeline::AtomicBatch;
use crate::pipeline::order::Order;
use crate::pipeline::ranked::{Items, Resume};
use crate::pipeline::schedule::{Clock, Cursor, Live, ScheduleCounts, View};
use crate::pipeline::upload::{self, Item, Uploader, items, to_device};
use crate::pipeline::{BatchTransform, Dataset, Pending, Prefetcher};
use crate::source::{Reader, ReaderExt};
use crate::threads::lock;

/// Counters of a [`DataLoader`] (all epochs, all its iterators).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoaderStats {
    /// Samples dropped from their batches under [`ErrorPolicy::Skip`](crate::ErrorPolicy::Skip).
    pub skipped_samples: u64,
    /// The reader's decode counters (all reads of the reader, this loader's
    /// and any other's; zero for a reader that decodes no chunks). For one
    /// epoch's, see [`LoaderIter::decode_counters`].
    pub decode: crate::source::DecodeCounters,
}

impl LoaderStats {
    /// Bytes decoded per byte of samples read (see
    /// [`DecodeCounters`](crate::source::DecodeCounters)).
    pub fn decode_amplification(&self) -> Option<f64> {
        self.decode.amplification()
    }
}

/// Yields [`AtomicBatch`]es on a device, reading ahead in fused windows.
///
/// Clones and the copies Burn makes with `to_device` share the epoch state:
/// [`set_epoch`](Self::set_epoch), [`load_state`](Self::load_state) and
/// [`state`](Self::state) on the user's handle see and steer the loader a
/// burn-train `Learner` iterates.
pub struct DataLoader<R: Reader> {
    pub(super) dataset: Dataset<R>,
    /// The background reads (a pool and queue per device copy and slice).
    pub(super) prefetch: Prefetcher,
    /// What orders the epochs and cuts them into batches: the loader's
    /// sampler (the default shuffle and a fitted mixture, which a loaded
    /// state steers, among them).
    pub(super) order: Order,
    pub(super) view: View,
    /// The shuffle's seed (`with_shuffle(true)`).
    pub(super) seed: Option<u64>,
    /// Resumes with other numbers of ranks in the current epoch (a ranked
    /// order's), shared by clones and copies.
    pub(super) resume: Arc<Mutex<Option<Resume>>>,
    pub(super) prefetch_factor: usize,
    pub(super) pin_memory: bool,
    pub(super) num_streams: usize,
    pub(super) batch_transforms: Vec<BatchTransform>,
    pub(super) device: Device,
    pub(super) clock: Arc<Mutex<Clock>>,
    pub(super) cursor: Arc<Mutex<Cursor>>,
    /// Counts of the last plan of a batch sampler, whose counts need one.
    pub(super) schedule_cache: Arc<Mutex<Option<ScheduleCounts>>>,
    /// The upload threads (with `use_streams`), started by the first
    /// `iter()` and shared by clones on the same device.
    pub(super) uploader: Arc<OnceLock<std::result::Result<Arc<Uploader>, String>>>,
}

impl<R: Reader> Clone for DataLoader<R> {
    fn clone(&self) -> Self {
        DataLoader {
            dataset: self.dataset.clone(),
            prefetch: self.prefetch.clone(),
            order: self.order.clone(),
            view: self.view,
            seed: self.seed,
            resume: self.resume.clone(),
            prefetch_factor: self.prefetch_factor,
            pin_memory: self.pin_memory,
            num_streams: self.num_streams,
            batch_transforms: self.batch_transforms.clone(),
            device: self.device.clone(),
            clock: self.clock.clone(),
            cursor: self.cursor.clone(),
            schedule_cache: self.schedule_cache.clone(),
            uploader: self.uploader.clone(),
        }
    }
}

impl<R: Reader + 'static> DataLoader<R> {
    /// Counters: samples skipped under [`ErrorPolicy::Skip`](crate::ErrorPolicy::Skip) by this loader
    /// (and its clones, which share its dataset).
    pub fn stats(&self) -> LoaderStats {
        LoaderStats {
            skipped_samples: self.dataset.skipped_samples(),
            decode: self.dataset.reader().chunked().map(|c| c.decode_counters()).unwrap_or_default(),
        }
    }

    /// Batches per epoch (of this rank, or this slice), from the next
    /// epoch's start position.
    pub fn len(&self) -> usize {
        self.counts().0
    }

    /// True when an epoch has no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset<R> {
        &self.dataset
    }

    /// The next epoch and its start position, after any new setting.
    fn next_start(&self) -> (u64, usize) {
        let clock = *lock(&self.clock);
        let mut c = lock(&self.cursor);
        c.sync(&clock);
        (c.next_epoch, c.next_position)
    }

    /// (batches, items) of the next epoch: arithmetic for fixed-size
    /// batches, one plan per epoch (cached) for a batch sampler.
    fn counts(&self) -> (usize, usize) {
        let (epoch, pos) = self.next_start();
        let resume = self.resume_of(epoch);
        if let Some(c) = self.order.counts(self.view, pos, resume.as_ref()) {
            return c;
        }
        let mut cache = lock(&self.schedule_cache);
        match *cache {
            Some(c) if (c.epoch, c.position) == (epoch, pos) => (c.batches, c.items),
            _ => {
                let plan = self.order.schedule(self.view, epoch, pos, resume.as_ref());
                let c = ScheduleCounts {
                    epoch,
                    position: pos,
                    batches: plan.len(),
                    items: plan.iter().map(Vec::len).sum(),
                };
                *cache = Some(c);
                (c.batches, c.items)
            }
        }
    }

    /// Sets the epoch the next [`DataLoader::iter`] runs (it reseeds the
    /// shuffle), from its start. Each `iter()` then advances the epoch by
    /// one. Reaches every clone, `to_device` copy and slice of this loader.
    ///
    /// burn-train numbers epochs from 1 and never tells the loader: it calls
    /// `iter()` once per epoch on its copy. Resuming a `Learner` from its
    /// checkpoint `c` (it continues at its epoch `c + 1`), call
    /// `set_epoch(c)` on the train loader first so that the shuffle goes on
    /// from that epoch instead of starting over at 0.
    pub fn set_epoch(&self, epoch: u64) {
        *lock(&self.resume) = None;
        let mut clock = lock(&self.clock);
        *clock = Clock { epoch, position: 0, generation: clock.generation + 1 };
    }

    /// The epoch the next `iter()` runs.
    pub fn epoch(&self) -> u64 {
        self.next_start().0
    }

    /// Makes the next `iter()` skip the first `k` batches of its epoch (of
    /// every rank) without reading them (resume mid-epoch).
    pub fn set_epoch_step(&self, k: usize) {
        let (epoch, _) = self.next_start();
        let position = self.order.advance(self.view, 0, k);
        *lock(&self.resume) = None;
        let mut clock = lock(&self.clock);
        *clock = Clock { epoch, position, generation: clock.generation + 1 };
    }

    /// Waits until the uploads this loader started have reached the device
    /// (with `use_streams`, each upload thread's stream; without, nothing to
    /// wait for: uploads run on the caller's thread, whose stream Burn's
    /// `Device::sync` waits on). Time an epoch of uploads with this and
    /// `Device::sync` on the training thread.
    ///
    /// # Errors
    /// [`Error::Background`] when the upload threads could not start or one
    /// died; [`Error::Device`] when a stream's sync fails.
    pub fn sync_uploads(&self) -> Result<()> {
        match self.uploader.get() {
            Some(Ok(u)) => u.sync(),
            Some(Err(e)) => Err(Error::Background(e.clone())),
            None => Ok(()),
        }
    }

    /// The upload threads, started on first use (`None` without
    /// `use_streams`).
    fn uploader(&self) -> Option<Result<Arc<Uploader>>> {
        if self.num_streams == 0 {
            return None;
        }
        let u = self.uploader.get_or_init(|| {
            Uploader::new(self.num_streams, &self.device, self.pin_memory, &self.batch_transforms)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        });
        Some(u.clone().map_err(Error::Background))
    }

    /// The batches the next `iter()` would yield, without reading anything.
    pub fn planned_batches(&self) -> Vec<Vec<usize>> {
        let (epoch, pos) = self.next_start();
        self.order.schedule(self.view, epoch, pos, self.resume_of(epoch).as_ref())
    }

    /// Iterates one epoch. Items are `Result`s: a read error is yielded as
    /// `Err` once, then the iterator ends. Dropping the iterator cancels the
    /// reads that have not started; a read already running finishes in the
    /// background and its result is dropped.
    pub fn iter(&self) -> LoaderIter<R> {
        self.start(Destination::Device)
    }

    /// Iterates one epoch of host batches: the same batches as
    /// [`iter`](Self::iter) (same plan, fused windows read ahead in the
    /// background, collated transforms and a cutoff's neighbor lists
    /// applied, the same resumable state), left on the host instead of
    /// uploaded, for consumers outside Burn (the Python package). Int64
    /// fields are int32 on an int32 device unless
    /// [`with_int64`](crate::DataLoaderBuilder::with_int64) was set.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use burn::tensor::Device;
    /// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, HostData, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("h.zarr");
    /// let samples: Vec<AtomicData> = (1..=5).map(|n| AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap()).collect();
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
    /// let loader = DataLoader::builder(ds).with_batch_size(2).with_int64(true).build(&Device::flex())?;
    /// let batches: Vec<_> = loader.iter_host().collect::<atomzarr::Result<_>>()?;
    /// assert_eq!(batches.iter().map(|b| b.num_graphs()).collect::<Vec<_>>(), [2, 2, 1]);
    /// assert!(matches!(batches[0].fields["atomic_numbers"].data, HostData::Int64(_)));
    /// # Ok(()) }
    /// ```
    ///
    /// Device-batch transforms ([`with_batch_transform`](crate::DataLoaderBuilder::with_batch_transform))
    /// run on device batches only: with any, the first item is an
    /// [`Error::Config`].
    pub fn iter_host(&self) -> HostIter<R> {
        let mut inner = self.start(Destination::Host);
        if !inner.to_device.transforms.is_empty() {
            inner.failed = Some(Error::Config("device-batch transforms cannot run on host batches".into()));
        }
        HostIter { inner }
    }

    /// One epoch's iterator, its batches bound for `dest`.
    fn start(&self, dest: Destination) -> LoaderIter<R> {
        let clock = *lock(&self.clock);
        let (batches, total, id, epoch) = {
            let mut c = lock(&self.cursor);
            c.sync(&clock);
            let (epoch, start) = (c.next_epoch, c.next_position);
            let (total, batches) = self.order.schedule_lazy(self.view, epoch, start, self.resume_of(epoch).as_ref());
            c.iters += 1;
            c.live = Some(Live { id: c.iters, epoch, start, yielded: 0, total });
            c.next_epoch = epoch + 1;
            c.next_position = 0;
            (batches, total, c.iters, epoch)
        };
        // Device batches go to the upload threads, when the loader has them.
        let (uploader, failed) = match self.uploader().filter(|_| dest == Destination::Device) {
            Some(Ok(u)) => (Some(u), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let mut it = LoaderIter {
            // Collated transforms (random rotation) see this epoch.
            dataset: self.dataset.clone().with_epoch(epoch),
            prefetch: self.prefetch.clone(),
            batches,
            windows_taken: 0,
            inflight: VecDeque::new(),
            ready: VecDeque::new(),
            to_device: ToDevice {
                device: self.device.clone(),
                pin_memory: self.pin_memory,
                transforms: self.batch_transforms.clone(),
                uploader,
            },
            prefetch_factor: self.prefetch_factor,
            failed,
            done: false,
            yielded: 0,
            total,
            decode_start: self.dataset.reader().chunked().map(|c| c.decode_counters()),
            passed: 0,
            cursor: (self.cursor.clone(), id),
        };
        it.fill_reads();
        it
    }
}

/// Which lists of a window asked for samples.
fn asked_for(window: &[Vec<usize>]) -> Vec<bool> {
    window.iter().map(|b| !b.is_empty()).collect()
}

/// The window's batches, `None` for those that asked for samples and got
/// none (all skipped under `ErrorPolicy::Skip`: not yielded, but counted as
/// passed for the loader's state); a batch the sampler made empty stays.
fn mark_emptied(batches: Vec<CollatedBatch>, asked: &[bool]) -> Vec<Option<CollatedBatch>> {
    batches
        .into_iter()
        .enumerate()
        .map(|(k, b)| (b.num_graphs() > 0 || !asked.get(k).copied().unwrap_or(false)).then_some(b))
        .collect()
}

/// Where an epoch's batches go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Destination {
    /// To the device ([`DataLoader::iter`]): through the upload threads
    /// when the loader has them.
    Device,
    /// Left on the host ([`DataLoader::iter_host`]).
    Host,
}

/// How an epoch's host batches become device batches.
struct ToDevice {
    device: Device,
    pin_memory: bool,
    transforms: Vec<BatchTransform>,
    /// The loader's upload threads (`None`: device batches are built on
    /// the consumer thread, or the epoch stays on the host).
    uploader: Option<Arc<Uploader>>,
}

/// One epoch of a [`DataLoader`]; yields `Result<AtomicBatch>`.
pub struct LoaderIter<R: Reader> {
    dataset: Dataset<R>,
    prefetch: Prefetcher,
    /// The epoch's batches, drawn as windows are handed to the reads.
    batches: Items<Vec<usize>>,
    /// Windows handed out so far.
    windows_taken: usize,
    inflight: VecDeque<Pending<Vec<Item>>>,
    ready: VecDeque<Item>,
    /// How a host batch becomes a device batch.
    to_device: ToDevice,
    /// Batches fused into one read (0: one synchronous read per batch).
    prefetch_factor: usize,
    /// The upload threads could not start: yielded once as the first item.
    failed: Option<Error>,
    done: bool,
    yielded: usize,
    total: usize,
    /// The reader's decode counters when the epoch started.
    decode_start: Option<crate::source::DecodeCounters>,
    /// Planned batches passed (yielded or emptied by `Skip`).
    passed: usize,
    /// The loader's cursor and this iterator's id in it.
    cursor: (Arc<Mutex<Cursor>>, u64),
}

impl<R: Reader + 'static> LoaderIter<R> {
    /// The next window of batches: one batch first, so that the first batch
    /// waits for its own reads only (the next window is read meanwhile),
    /// then `prefetch_factor` at a time (one without fusing).
    fn next_window(&mut self) -> Option<Vec<Vec<usize>>> {
        let n = if self.windows_taken == 0 { 1 } else { self.prefetch_factor.max(1) };
        let w: Vec<Vec<usize>> = self.batches.by_ref().take(n).collect();
        self.windows_taken += 1;
        (!w.is_empty()).then_some(w)
    }

    /// Keeps two fused reads in flight (double buffering).
    fn fill_reads(&mut self) {
        if self.prefetch_factor == 0 {
            return;
        }
        while self.inflight.len() < 2 {
            let Some(w) = self.next_window() else { break };
            let asked = asked_for(&w);
            // Planned here, while the window before is read: the reader
            // keeps this window's chunks cached until its read.
            let h = match self.dataset.plan(w) {
                Ok(plan) => {
                    // Handed to the upload threads (if any) as soon as the window is read.
                    let up = self.to_device.uploader.clone();
                    self.prefetch.spawn_then(&self.dataset, plan, move |batches| {
                        Ok(items(mark_emptied(batches, &asked), up.as_deref()))
                    })
                }
                Err(e) => Pending::failed(e),
            };
            self.inflight.push_back(h);
        }
    }

    /// The next batch of the current window, reading (or waiting for) the
    /// next window if needed (a window may yield nothing: every batch of it
    /// lost all its samples to `Skip`).
    fn next_item(&mut self) -> Option<Result<Item>> {
        loop {
            if let Some(i) = self.ready.pop_front() {
                self.passed += 1;
                match i {
                    Item::Emptied => continue,
                    i => return Some(Ok(i)),
                }
            }
            let result = if self.prefetch_factor > 0 {
                let h = self.inflight.pop_front()?;
                let r = h.wait();
                self.fill_reads();
                r
            } else {
                let w = self.next_window()?;
                let asked = asked_for(&w);
                let up = self.to_device.uploader.as_deref();
                self.dataset.load_batches(&w).map(|b| items(mark_emptied(b, &asked), up))
            };
            match result {
                Ok(items) => self.ready.extend(items),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    fn stop(&mut self) {
        self.done = true;
        self.batches = Box::new(std::iter::empty());
        self.inflight.clear(); // dropping handles cancels queued reads
        self.ready.clear();
    }

    /// The reader's decode counters since this epoch started (reads of the
    /// windows in flight included); `None` for a reader that decodes no
    /// chunks. Their [`amplification`](crate::source::DecodeCounters::amplification)
    /// is the epoch's decode amplification.
    pub fn decode_counters(&self) -> Option<crate::source::DecodeCounters> {
        Some(self.dataset.reader().chunked()?.decode_counters().since(&self.decode_start?))
    }

    /// Records in the loader's cursor how many planned batches this epoch
    /// passed (capped at the plan), if this iterator still is its live one.
    fn mark_passed(&self, n: usize) {
        let mut c = lock(&self.cursor.0);
        if let Some(live) = c.live.as_mut().filter(|l| l.id == self.cursor.1) {
            live.yielded = n.min(live.total);
        }
    }

    /// Batches yielded so far and in total this epoch.
    pub fn progress(&self) -> (usize, usize) {
        (self.yielded, self.total)
    }
}

impl<R: Reader + 'static> LoaderIter<R> {
    /// The next item turned into what the caller yields, with the epoch's
    /// bookkeeping (progress, the loader's cursor, stopping at an error).
    fn advance_with<T>(&mut self, make: impl FnOnce(&mut Self, Item) -> Result<T>) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.stop();
            return Some(Err(e));
        }
        let item = match self.next_item() {
            Some(Ok(i)) => Some(make(self, i)),
            Some(Err(e)) => Some(Err(e)),
            None => None,
        };
        match item {
            Some(Ok(b)) => {
                self.yielded += 1;
                self.mark_passed(self.passed);
                Some(Ok(b))
            }
            Some(Err(e)) => {
                self.stop();
                Some(Err(e))
            }
            None => {
                self.mark_passed(usize::MAX);
                self.stop();
                None
            }
        }
    }
}

impl<R: Reader + 'static> Iterator for LoaderIter<R> {
    type Item = Result<AtomicBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance_with(|it, i| match i {
            Item::Uploading(rx) => upload::wait(rx),
            Item::Host(c) => {
                let d = &it.to_device;
                to_device(c, &d.device, d.pin_memory, &d.transforms)
            }
            Item::Emptied => Err(Error::Internal("an emptied batch reached the consumer".into())),
        })
    }
}

/// One epoch of a [`DataLoader`]'s host batches
/// ([`DataLoader::iter_host`]); yields `Result<CollatedBatch>`.
pub struct HostIter<R: Reader> {
    inner: LoaderIter<R>,
}

impl<R: Reader + 'static> HostIter<R> {
    /// Batches yielded so far and in total this epoch.
    pub fn progress(&self) -> (usize, usize) {
        self.inner.progress()
    }

    /// As [`LoaderIter::decode_counters`].
    pub fn decode_counters(&self) -> Option<crate::source::DecodeCounters> {
        self.inner.decode_counters()
    }
}

impl<R: Reader + 'static> Iterator for HostIter<R> {
    type Item = Result<CollatedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.advance_with(|_, i| match i {
            Item::Host(c) => Ok(c),
            // Host iterators start no upload threads.
            Item::Uploading(_) | Item::Emptied => Err(Error::Internal("a host epoch met a device item".into())),
        })
    }
}

/// Adapter for Burn's `DataLoader` trait: a read or upload error is an
/// `Err` item (Burn's `DatasetError` wrapping the [`Error`], which names the
/// store, array and sample), for the training loop to handle.
struct BurnIter<R: Reader> {
    inner: LoaderIter<R>,
    items_total: usize,
    items: usize,
}

impl<R: Reader + 'static> Iterator for BurnIter<R> {
    type Item = std::result::Result<AtomicBatch, DatasetError>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.inner.next()? {
            Ok(b) => {
                self.items += b.num_graphs;
                Ok(b)
            }
            Err(e) => Err(DatasetError::new(e)),
        })
    }
}

impl<R: Reader + 'static> DataLoaderIterator<AtomicBatch> for BurnIter<R> {
    fn progress(&self) -> Progress {
        Progress::new(self.items, self.items_total, Some("items".into()))
    }
}

impl<R: Reader + 'static> BurnDataLoader<AtomicBatch> for DataLoader<R> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<AtomicBatch> + 'a> {
        let items_total = self.num_items();
        Box::new(BurnIter { inner: DataLoader::iter(self), items_total, items: 0 })
    }

    /// Items of the next epoch; arithmetic for fixed-size batches, one
    /// (cached) plan per epoch for a batch sampler.
    fn num_items(&self) -> usize {
        self.counts().1
    }

    /// The same stream of epochs (shared state) on `device`, with its own
    /// prefetch pool.
    fn to_device(&self, device: &Device) -> Arc<dyn BurnDataLoader<AtomicBatch>> {
        let mut l = self.clone();
        l.device = device.clone();
        l.prefetch = l.prefetch.fresh();
        l.uploader = Arc::new(OnceLock::new());
        Arc::new(l)
    }

    /// Items `start..end` of each epoch of this loader, as Burn's
    /// `split_dataloader` cuts them per device, with its own prefetch pool
    /// and epoch cursor (the epoch setting stays shared).
    ///
    /// With fixed-size batches the slice's items are batched again at the
    /// batch size, as Burn's own loaders do: every batch is full except the
    /// slice's last, which holds the ragged end. With a batch sampler the
    /// slice takes the whole batches whose first item lies in
    /// `start..end` (a size-aware batch keeps its budgets), so its item
    /// count can differ from `end - start` by part of a batch.
    fn slice(&self, start: usize, end: usize) -> Arc<dyn BurnDataLoader<AtomicBatch>> {
        let mut l = self.clone();
        let (s, e) = match self.view.slice {
            Some((s0, e0)) => ((s0 + start).min(e0), (s0 + end).min(e0)),
            None => (start, end),
        };
        l.view.slice = Some((s, e.max(s)));
        l.cursor = Arc::new(Mutex::new(*lock(&self.cursor)));
        l.schedule_cache = Arc::new(Mutex::new(None));
        l.prefetch = l.prefetch.fresh();
        l.uploader = Arc::new(OnceLock::new());
        Arc::new(l)
    }
}

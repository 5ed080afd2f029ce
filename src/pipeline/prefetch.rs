//! [`Prefetcher`]: background reads of a [`Dataset`]'s batches on a set of
//! worker threads, one fused read of many batch lists at a time.
//!
//! The [`DataLoader`](crate::DataLoader) keeps one per device copy and
//! slice; using one directly suits a training loop that plans its own
//! batches.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, Prefetcher, ZarrWriteConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("p.zarr");
//! let samples = atomzarr::data::synth::generate(8, 2, 6, 0)?;
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
//! let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
//! let prefetch = Prefetcher::new(1);
//! prefetch.push(&ds, vec![vec![3, 1], vec![2]]); // one read, two batches
//! prefetch.push(&ds, vec![vec![7]]);
//! let first = prefetch.pop()?;
//! assert_eq!((first[0].indices.clone(), first[1].indices.clone()), (vec![3, 1], vec![2]));
//! assert_eq!(prefetch.pop()?[0].indices, vec![7]);
//! assert!(!prefetch.has_pending());
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex, OnceLock};

use crate::data::CollatedBatch;
use crate::error::{Error, Result};
use crate::pipeline::Dataset;
use crate::source::{ReadPlan, Reader};
use crate::threads::{Job, Workers};

/// Background work in flight on a [`Prefetcher`]'s threads. Dropping it cancels
/// the work if it has not started; started work finishes and its result is
/// discarded.
pub struct Pending<T> {
    rx: Receiver<Result<T>>,
    cancel: Arc<AtomicBool>,
}

/// A background fused read: its batches, split back into the requested lists.
pub type FusedHandle = Pending<Vec<CollatedBatch>>;

impl<T> Pending<T> {
    /// Waits for the result.
    ///
    /// # Errors
    /// [`Error::Background`] when the work was cancelled or its thread died;
    /// otherwise the work's own error (for a fused read: as
    /// [`Dataset::load_batches`]).
    pub fn wait(self) -> Result<T> {
        self.rx.recv().map_err(|_| Error::Background("prefetch read was cancelled or its thread died".into()))?
    }

    /// Work that failed before it started: `wait` returns `e`.
    pub(crate) fn failed(e: Error) -> Pending<T> {
        let (tx, rx) = channel();
        let _ = tx.send(Err(e));
        Pending { rx, cancel: Arc::new(AtomicBool::new(false)) }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// Background fused reads of a [`Dataset`]'s batches: a set of worker
/// threads (started at the first read) and a queue of reads in flight.
/// Cloning is cheap and shares both.
#[derive(Clone)]
pub struct Prefetcher {
    num_workers: usize,
    workers: Arc<OnceLock<Workers>>,
    queue: Arc<Mutex<VecDeque<FusedHandle>>>,
}

impl Default for Prefetcher {
    /// One worker: the read itself is parallel over chunks.
    fn default() -> Self {
        Prefetcher::new(1)
    }
}

impl std::fmt::Debug for Prefetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetcher")
            .field("num_workers", &self.num_workers)
            .field("pending_reads", &self.pending_reads())
            .finish()
    }
}

impl Prefetcher {
    /// A prefetcher of `num_workers` background threads (0 is taken as 1;
    /// 1 is usually enough, the read itself being parallel over chunks).
    pub fn new(num_workers: usize) -> Self {
        Prefetcher {
            num_workers: num_workers.max(1),
            workers: Arc::new(OnceLock::new()),
            queue: Arc::new(Mutex::new(VecDeque::new())),
        }
    }

    /// The same with `n` threads. Called after the threads started with a
    /// different count, this handle gets `n` new threads, started
    /// at its next read; clones made before keep the old threads (they end with
    /// its last user, once its queued reads are done).
    pub fn with_num_workers(mut self, n: usize) -> Self {
        let n = n.max(1);
        if self.workers.get().is_some_and(|p| p.len() != n) {
            // Resizing running threads would race with their queued jobs; a
            // fresh lazy set for this handle is simpler and just as cheap.
            self.workers = Arc::new(OnceLock::new());
        }
        self.num_workers = n;
        self
    }

    /// Background threads.
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// A prefetcher of as many threads, with threads and a queue of its own:
    /// the DataLoader gives one to each device copy and slice, so devices
    /// do not wait on each other's reads.
    pub(crate) fn fresh(&self) -> Self {
        Prefetcher::new(self.num_workers)
    }

    /// Starts one background read of all `lists` from `dataset`, planned
    /// here ([`Dataset::plan`]); the handle yields them split back into
    /// batches.
    pub fn spawn<R: Reader + 'static>(&self, dataset: &Dataset<R>, lists: Vec<Vec<usize>>) -> FusedHandle {
        match dataset.plan(lists) {
            Ok(plan) => self.spawn_then(dataset, plan, Ok),
            Err(e) => Pending::failed(e),
        }
    }

    /// Starts the background read of `plan` (a plan of `dataset` or a
    /// clone), then `then` runs on the same background thread with the
    /// batches (the DataLoader hands each batch to its upload threads
    /// there, so a window costs one hand-off instead of one per batch).
    pub fn spawn_then<R: Reader + 'static, T: Send + 'static>(
        &self,
        dataset: &Dataset<R>,
        plan: ReadPlan,
        then: impl FnOnce(Vec<CollatedBatch>) -> Result<T> + Send + 'static,
    ) -> Pending<T> {
        let (tx, rx) = channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        // A clone shares the reader and transforms, not these threads: a job
        // never keeps its own threads alive.
        let dataset = dataset.clone();
        let job: Job = Box::new(move || {
            if flag.load(Ordering::Relaxed) {
                return;
            }
            let _ = tx.send(dataset.read_planned(plan).and_then(then));
        });
        let workers = self.workers.get_or_init(|| Workers::new("atomzarr-prefetch", self.num_workers));
        if workers.submit(job).is_err() {
            return Pending::failed(Error::Background("could not start prefetch threads".into()));
        }
        Pending { rx, cancel }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<FusedHandle>> {
        // The queue holds plain handles; a panic elsewhere cannot corrupt it.
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues one background fused read of all `lists` from `dataset`.
    pub fn push<R: Reader + 'static>(&self, dataset: &Dataset<R>, lists: Vec<Vec<usize>>) {
        let h = self.spawn(dataset, lists);
        self.queue().push_back(h);
    }

    /// Waits for the oldest queued read and returns its batches.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when nothing is queued; [`Error::Background`]
    /// when the read was cancelled; otherwise as [`Dataset::load_batches`].
    pub fn pop(&self) -> Result<Vec<CollatedBatch>> {
        let h = self.queue().pop_front().ok_or_else(|| Error::InvalidInput {
            context: "Prefetcher::pop".into(),
            reason: "nothing queued (call push first)".into(),
        })?;
        h.wait()
    }

    /// Queued reads not yet popped.
    pub fn pending_reads(&self) -> usize {
        self.queue().len()
    }

    /// True while queued reads remain.
    pub fn has_pending(&self) -> bool {
        !self.queue().is_empty()
    }

    /// Drops every queued read (reads not yet started never run).
    pub fn cancel(&self) {
        self.queue().clear();
    }
}

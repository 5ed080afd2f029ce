//! [`Uploader`]: the loader's own upload threads, each one device stream.
//!
//! CubeCL backends (CUDA, wgpu) give every OS thread its own stream, with
//! its own memory pools (pinned host memory included). Uploads made on
//! whichever thread happens to run a job land on as many streams as there
//! are such threads, and uploads made on the training thread queue behind
//! its compute. So a loader with `use_streams` owns `num_streams` threads
//! of its own that do nothing but build device batches: each keeps one
//! stream (and its pinned pool) for the loader's life (a [`Stream`] of its
//! own, entered for every upload, so this holds under any CubeCL stream
//! policy), and its copies run
//! while the training thread's stream computes. Batches go round-robin to
//! the threads; each submission returns a receiver for its batch, so the
//! order stays the caller's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};

use burn::tensor::Device;
use burn_std::stream::Stream;

use crate::data::CollatedBatch;
use crate::error::{Error, Result};
use crate::pipeline::{AtomicBatch, BatchTransform};

enum Job {
    /// Build one device batch and send it back.
    Upload(CollatedBatch, Sender<Result<AtomicBatch>>),
    /// Wait until this thread's stream finished its work.
    Sync(Sender<Result<()>>),
}

/// Upload threads owned by a [`DataLoader`](crate::DataLoader).
pub(crate) struct Uploader {
    jobs: Vec<Sender<Job>>,
    next: AtomicUsize,
}

impl Uploader {
    /// Starts `streams` upload threads for `device` (at least one).
    pub(crate) fn new(streams: usize, device: &Device, pin: bool, transforms: &[BatchTransform]) -> Result<Uploader> {
        let mut jobs = Vec::with_capacity(streams.max(1));
        for i in 0..streams.max(1) {
            let (tx, rx) = channel::<Job>();
            let (device, transforms) = (device.clone(), transforms.to_vec());
            // The thread ends when the uploader (its only sender) is dropped;
            // nothing joins it, so dropping a loader never waits on a copy.
            std::thread::Builder::new()
                .name(format!("atomzarr-upload-{i}"))
                .spawn(move || {
                    // One CubeCL stream for the thread's life, whatever
                    // stream policy the process runs (per thread, per task
                    // or a single shared stream): every upload and sync of
                    // this thread runs on it.
                    let stream = Stream::new();
                    for job in rx {
                        match job {
                            Job::Upload(c, reply) => {
                                // A panic (in a transform, say) is this batch's
                                // error; the thread and its stream carry on.
                                let b = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    stream.enter(|| to_device(c, &device, pin, &transforms))
                                }))
                                .unwrap_or_else(|p| {
                                    Err(Error::Background(format!("upload panicked: {}", panic_message(p.as_ref()))))
                                });
                                let _ = reply.send(b);
                            }
                            Job::Sync(reply) => {
                                let r = stream.enter(|| device.sync()).map_err(|e| Error::Device {
                                    field: "(upload stream)".into(),
                                    reason: format!("sync failed: {e:?}"),
                                });
                                let _ = reply.send(r);
                            }
                        }
                    }
                })
                .map_err(|e| Error::Background(format!("could not start upload thread: {e}")))?;
            jobs.push(tx);
        }
        Ok(Uploader { jobs, next: AtomicUsize::new(0) })
    }

    /// Queues `batch` on the next thread; the receiver yields its device
    /// batch (an error if the thread died).
    pub(crate) fn submit(&self, batch: CollatedBatch) -> Receiver<Result<AtomicBatch>> {
        let (tx, rx) = channel();
        let k = self.next.fetch_add(1, Ordering::Relaxed) % self.jobs.len().max(1);
        let sent = match self.jobs.get(k) {
            Some(j) => j.send(Job::Upload(batch, tx)).map_err(|std::sync::mpsc::SendError(job)| job),
            None => Err(Job::Upload(batch, tx)),
        };
        if let Err(Job::Upload(_, tx)) = sent {
            let _ = tx.send(Err(Error::Background("upload thread is gone".into())));
        }
        rx
    }

    /// Waits until every upload thread's stream finished its work (Burn's
    /// `Device::sync` waits on the calling thread's stream only).
    pub(crate) fn sync(&self) -> Result<()> {
        let waits: Vec<Receiver<Result<()>>> = self
            .jobs
            .iter()
            .map(|j| {
                let (tx, rx) = channel();
                let _ = j.send(Job::Sync(tx));
                rx
            })
            .collect();
        for w in waits {
            w.recv().map_err(|_| Error::Background("upload thread died".into()))??;
        }
        Ok(())
    }
}

/// The text of a panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// Waits for a submitted batch.
pub(crate) fn wait(rx: Receiver<Result<AtomicBatch>>) -> Result<AtomicBatch> {
    rx.recv().map_err(|_| Error::Background("upload thread died (a panic in a batch transform?)".into()))?
}

/// A host batch on `device` (pinned staging if `pin`), through the loader's
/// batch transforms.
pub(crate) fn to_device(
    c: CollatedBatch,
    device: &Device,
    pin: bool,
    transforms: &[BatchTransform],
) -> Result<AtomicBatch> {
    let b = AtomicBatch::from_collated(c, device, pin)?;
    transforms.iter().try_fold(b, |b, t| t(b))
}

/// A batch of a window: still on the host, being uploaded by the loader's
/// upload threads, or emptied by `Skip`.
pub(crate) enum Item {
    Host(CollatedBatch),
    Uploading(Receiver<Result<AtomicBatch>>),
    Emptied,
}

/// A window's batches as items: handed to the upload threads when there
/// are some, else left on the host for the consumer to upload.
pub(crate) fn items(batches: Vec<Option<CollatedBatch>>, uploader: Option<&Uploader>) -> Vec<Item> {
    let item = |c: CollatedBatch| match uploader {
        Some(up) => Item::Uploading(up.submit(c)),
        None => Item::Host(c),
    };
    batches.into_iter().map(|b| b.map_or(Item::Emptied, item)).collect()
}

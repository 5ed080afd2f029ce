//! The training-side pipeline: a [`Dataset`] over any
//! [`Reader`](crate::Reader), batches on a Burn device ([`AtomicBatch`],
//! Burn's `Batcher`), and the [`DataLoader`] that drives a
//! [`sampler`](crate::sampler) through them.
//!
//! | module | owns |
//! |---|---|
//! | `dataset` | [`Dataset`]: Burn's `Dataset`; itself a [`Reader`](crate::Reader) |
//! | `reads` | the reads a dataset makes: validation, transforms, neighbor lists at a cutoff, the [`ErrorPolicy`](crate::ErrorPolicy) |
//! | `prefetch` | [`Prefetcher`]: fused reads of a dataset's batches on background threads |
//! | `batch` | [`AtomicBatch`] on a device and [`AtomicBatcher`](crate::AtomicBatcher), Burn's `Batcher` |
//! | `builder` | [`DataLoaderBuilder`](crate::DataLoaderBuilder): the loader's knobs, checked once |
//! | [`loss`] | losses that leave absent (NaN) labels out: [`loss::masked_mse`]; the masked, weighted multi-task loss [`loss::multi_task_loss`] |
//! | `loader` | [`DataLoader`]: fused windows, double buffering, pinned staging, background uploads; Burn's `DataLoader` |
//! | `stage` | host fields in the device's dtypes, converted into the (pinned) buffer the device copies from |
//! | `upload` | the loader's upload threads, one device stream each |
//! | `order` | what orders the epochs (`Order`: the one owner of the sampler, batch sampler, default shuffle or fitted mixture, and how its order is cut into batches) |
//! | `schedule` | epoch schedules: the batches of each rank and device slice |
//! | `ranked` | orders drawn rank by rank (a region of the data per rank), and how a resume on another number of ranks hands the old ranks' parts to the new ones |
//! | `resume` | [`LoaderState`](crate::LoaderState), [`DataLoader::state`] and [`DataLoader::load_state`]: the loader's place saved and followed |
//! | `in_order` | what a loader with no sampler reads: the dataset in index order, split among ranks in contiguous ranges ([`RankSplit`](crate::RankSplit)) |
//! | `shuffle` | what `with_shuffle(true)` reads: a full permutation, or the block pool sized from the cache |

pub(crate) mod batch;
pub(crate) mod builder;
pub(crate) mod dataset;
pub(crate) mod in_order;
pub(crate) mod loader;
pub mod loss;
pub(crate) mod order;
pub(crate) mod prefetch;
pub(crate) mod ranked;
mod reads;
pub(crate) mod resume;
pub(crate) mod schedule;
pub(crate) mod shuffle;
mod stage;
mod upload;

pub use batch::HostFields;
pub(crate) use batch::device_int_dtype;
// The types also at the crate root are public there only.
pub(crate) use batch::AtomicBatch;
pub use batch::BatchTransform;
pub(crate) use dataset::Dataset;
pub use dataset::Transform;
pub use prefetch::{FusedHandle, Pending};
// The types also at the crate root are public there only.
pub(crate) use loader::DataLoader;
pub use loader::{HostIter, LoaderIter};
pub(crate) use prefetch::Prefetcher;

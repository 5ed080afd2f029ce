//! The training-side pipeline: a [`Dataset`] over any
//! [`Reader`](crate::Reader), batches on a Burn device ([`AtomicBatch`],
//! Burn's `Batcher`), and the [`DataLoader`] that drives a
//! [`sampler`](crate::sampler) through them.
//!
//! | module | owns |
//! |---|---|
//! | [`dataset`] | [`Dataset`]: validation, transforms, fused background prefetch; Burn's `Dataset`; itself a [`Reader`](crate::Reader) |
//! | [`batch`] | [`AtomicBatch`] on a device and [`AtomicBatcher`], Burn's `Batcher` |
//! | [`builder`] | [`DataLoaderBuilder`]: the loader's knobs, checked once |
//! | [`labels`] | losses that leave absent (NaN) labels out: [`labels::masked_mse`] |
//! | [`loader`] | [`DataLoader`]: fused windows, double buffering, pinned staging, background uploads; Burn's `DataLoader` |
//! | `stage` | host fields in the device's dtypes, converted into the (pinned) buffer the device copies from |
//! | `upload` | the loader's upload threads, one device stream each |
//! | [`plan`] | epoch plans per rank and device slice, [`LoaderState`] (resume) |
//! | [`transforms`] | transforms of collated batches: E0 subtraction, scale and shift, random rotation, sample weights |

pub mod batch;
pub mod builder;
pub mod dataset;
pub mod labels;
pub mod loader;
pub mod plan;
mod stage;
pub mod transforms;
mod upload;

pub(crate) use batch::device_int_dtype;
pub use batch::{AtomicBatch, AtomicBatcher, BatchData, BatchField, HostFields};
pub use builder::{BatchTransform, DataLoaderBuilder};
pub(crate) use dataset::Pending;
pub use dataset::{Dataset, ErrorPolicy};
pub use loader::{DataLoader, LoaderStats};
pub use plan::LoaderState;

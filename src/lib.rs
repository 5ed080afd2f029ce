//! # atomzarr
//!
//! Atomic-structure data in Zarr v3, fed fast into [Burn](https://burn.dev)
//! training loops. The on-disk layout is the one NVIDIA's `nvalchemi-toolkit`
//! writes and reads, so stores move freely between the Python toolkit and Rust.
//!
//! ## How the pieces fit
//!
//! ```text
//!  AtomicData ──► AtomicDataZarrWriter ──► store.zarr (meta/ core/ custom/)
//!                                              │
//!                   Reader trait ◄── AtomicDataZarrReader  (read, read_many, load_collated:
//!                                              │            planned per chunk, decoded once,
//!                                              │            cached, copied straight out)
//!                                              ▼
//!                 Dataset (validation, transforms, fused background prefetch)
//!                                              │
//!        Sampler / BatchSampler ──► DataLoader (fused windows, double buffering,
//!                                              │ pinned staging, background uploads)
//!                                              ▼
//!                    AtomicBatch<B> (device tensors, disjoint graph) ──► your model
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`data`] | the host data model: [`AtomicData`], [`Field`], [`HostData`], [`Level`], [`DType`] |
//! | [`format`] | the on-disk contract: paths, root attributes, dtype/codec mapping |
//! | [`config`] | the layered write configuration ([`ZarrWriteConfig`]) |
//! | [`durable`] | crash-safe storage below zarrs: atomic, durable file replacement, grouped syncs |
//! | [`writer`] | [`AtomicDataZarrWriter`]: write, append (crash-safe), custom fields, delete, defragment |
//! | [`reader`] | the [`Reader`] backend contract |
//! | [`zarr_reader`] | [`AtomicDataZarrReader`], the Zarr backend |
//! | [`plan`] | read planning: which chunks a request touches |
//! | [`cache`] | the decoded-chunk cache |
//! | [`collate`] | host-side collated batches ([`CollatedBatch`]) and their layout ([`collate::CollateOptions`]: int64 indices narrowed to int32 for int32 devices) |
//! | [`dataset`] | [`Dataset`]: validation, transforms, fused background prefetch; Burn's `Dataset`; itself a [`Reader`] |
//! | [`memory`] | [`InMemoryDataset`]: a whole store resident in host memory, served as a [`Reader`] |
//! | [`multi`] | [`MultiDataset`]: several readers behind one global index space |
//! | [`batch`] | [`AtomicBatch`] on a device and [`AtomicBatcher`], Burn's `Batcher` |
//! | [`loader`] | [`DataLoader`]: fused windows, double buffering, pinned staging, background uploads; Burn's `DataLoader` |
//! | [`sampler`] | [`sampler::Sampler`] and [`sampler::BatchSampler`]; sequential, random, size-aware, multi-dataset and rank-sharded samplers |
//! | [`repair`] | finds neighbor lists that point outside their sample; rewrites those of nvalchemi-toolkit's append bug (`atomzarr repair`) |
//! | [`dump`], [`inspect`], [`synth`] | the CLI's library side |
//! | [`bench`] | the I/O benchmark (`atomzarr roundtrip`, `atomzarr read`): read orders, timed read paths, report rows |
//!
//! ## Example
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ZarrWriteConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("water.zarr");
//! let water = AtomicData::new(vec![8, 1, 1], vec![[0.0, 0.0, 0.0], [0.96, 0.0, 0.0], [-0.24, 0.93, 0.0]])?
//!     .with_energy(-14.2)
//!     .with_neighbor_list(vec![[0, 1], [0, 2], [1, 0], [2, 0]], None)?;
//! AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&[water.clone(), water.clone()])?;
//!
//! let reader = AtomicDataZarrReader::open(&path)?;
//! let batch = &reader.read_many(&[0, 1])?;
//! assert_eq!(batch[1].data, water);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
// zarrs takes array subsets as `&[Range<u64>]`: a one-range array is a 1-d subset, not a mistake.
#![allow(clippy::single_range_in_vec_init)]

mod error;
mod progress;
pub mod data;
pub mod source;
pub mod store;
pub mod sampler;
pub mod pipeline;
#[cfg(feature = "cli")]
pub mod cli;

pub use data::{AtomicData, CollatedBatch, CollatedField, DType, Field, HostData, Level};
pub use error::{AppendStep, Error, Result};
pub use pipeline::{AtomicBatch, AtomicBatcher, BatchData, BatchField, DataLoader, DataLoaderBuilder, Dataset, ErrorPolicy, LoaderStats};
pub use source::{InMemoryDataset, InMemoryOptions, MultiDataset, MultiDatasetOptions, Reader, Sample, SampleMetadata};
pub use store::{AtomicDataZarrReader, AtomicDataZarrWriter, ReaderOptions};
pub use store::{CacheStats, ChunkCache, DEFAULT_CACHE_BYTES};
pub use store::{Codec, Shuffle, ZarrArrayConfig, ZarrWriteConfig};

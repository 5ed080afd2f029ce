//! # atomzarr
//!
//! Atomic-structure data in Zarr v3, fed fast into [Burn](https://burn.dev)
//! training loops. The on-disk layout is the one NVIDIA's `nvalchemi-toolkit`
//! writes and reads, so stores move freely between the Python toolkit and Rust.
//!
//! ## How the pieces fit
//!
//! ```text
//!  files (extxyz, ASE db, .aselmdb, HDF5, npz, MPtrj) ──► formats::import ──┐
//!  AtomicData ──► AtomicDataZarrWriter ──► store.zarr (meta/ core/ custom/) ◄┘
//!                                              │
//!                   Reader trait ◄── AtomicDataZarrReader  (read, read_many, load_collated:
//!                                              │            planned per chunk, decoded once,
//!                                              │            cached, copied straight out)
//!                                              ▼
//!  prep: Split, DatasetStats ──► Dataset (validation, transforms) ◄── Prefetcher (background reads)
//!                                              │
//!        Sampler / BatchSampler ──► DataLoader (fused windows, double buffering,
//!                                              │ pinned staging, background uploads)
//!                                              ▼
//!                    AtomicBatch<B> (device tensors, disjoint graph) ──► your model
//! ```
//!
//! From Python, the `atomzarr` package in `python/` (PyO3) wraps the same
//! reader, [`DataLoader`] (iterated on the host, [`DataLoader::iter_host`]),
//! writer and import, with samples and batches as numpy arrays.
//!
//! ## Words
//!
//! One word per concept, across the API and the docs:
//!
//! | word | means | types |
//! |---|---|---|
//! | sample | one structure (atoms, edges, system values, string labels) | [`AtomicData`], [`Sample`] |
//! | store | a Zarr v3 directory or URL in the toolkit's layout | [`Location`], [`AtomicDataZarrWriter`] |
//! | reader | random access to a collection's samples: a type that implements [`Reader`]; `*Reader` names nothing else | [`AtomicDataZarrReader`], [`InMemoryReader`], [`MultiReader`] |
//! | frames | samples streamed from a file of another format, a batch at a time | [`formats::Frames`], [`formats::Frame`] |
//! | byte source | the bytes of a store, from local files or object storage | [`store::bytes::ByteSource`] |
//! | dataset | a reader with validation and transforms, Burn's `Dataset` | [`Dataset`] |
//! | prefetch | background reads of a dataset's batches | [`Prefetcher`] |
//! | batch | collated samples: on the host ([`CollatedBatch`]) or on a device ([`AtomicBatch`]) | |
//! | window | the batches one fused read brings (`prefetch_factor` of them) | |
//! | read plan | a window's read, planned (indices checked, once; rows and chunks found) before a read thread reads it | [`ReadPlan`] |
//! | capability | what a reader can do beyond loading samples, handed out by [`Reader::capabilities`] | [`source::SampleIndex`], [`source::PlannedReader`], [`source::ChunkedReader`] |
//! | block pool | the shuffle of stores larger than the cache: `pool_blocks` chunk blocks resident, samples drawn from them | [`sampler::ChunkShuffleSampler`] |
//!
//! ## The tree: one folder per layer, bottom first
//!
//! ```text
//! src/
//! ├── location.rs      Location: a store's path or URL, parsed once where it enters
//! ├── error.rs         Error, Result (imports only Location)
//! ├── progress.rs      progress of long calls: a bar (feature `progress`) or log lines
//! ├── threads.rs       Workers: the threads for work that blocks (prefetch, fsync)
//! ├── data/            the host data model
//! │   ├── dtype.rs       DType, Level
//! │   ├── elements.rs    chemical symbols and atomic numbers
//! │   ├── host.rs        HostData: a typed host buffer
//! │   ├── absent.rs      absent values of labels a sample lacks (NaN, an integer's extreme, false)
//! │   ├── indices.rs     neighbor-index rebasing, fused range checks, int32 narrowing
//! │   ├── pointers.rs    CSR pointers: which rows a sample owns on each axis
//! │   ├── host_rows.rs   element access the batch transforms need (rows in f64, in place)
//! │   ├── hash.rs        version-stable hashes: split membership, per-sample rotation seeds
//! │   ├── rotation.rs    uniform random rotations, seeded
//! │   ├── sample.rs      AtomicData, Field
//! │   ├── strings.rs     StringField: string labels of a sample
//! │   ├── collate.rs     CollatedBatch: many samples in one set of buffers, split back by sample(k)
//! │   ├── buffers.rs     BatchBuffers: delivered batches' memory, back for the next ones
//! │   ├── neighbors.rs   periodic neighbor lists (ASE-equal), the edge transform
//! │   ├── cell_list.rs   the cell-list search behind them, into any edge sink
//! │   ├── batch_edges.rs neighbor lists built into a collated batch, in parallel
//! │   └── synth.rs       seeded synthetic samples (tests, examples, benchmarks)
//! ├── source/          readers: random access to samples
//! │   ├── reader.rs      the Reader contract: Reader (core), its capabilities (SampleIndex,
//! │   │                  PlannedReader), ReaderExt (conveniences)
//! │   ├── chunked.rs     ChunkedReader: the chunked-store capability, decode counters, cache fit
//! │   ├── plan.rs        ReadPlan: a window's read, planned before it is read
//! │   ├── in_memory.rs   InMemoryReader: a reader's samples resident in memory
//! │   ├── multi.rs       MultiReader: several readers, one index space
//! │   ├── multi_options.rs MultiReaderOptions; the fields a mixture adds (dataset_index, loss_weight)
//! │   ├── union.rs       a mixture's union of fields: absent values, <name>_present flags
//! │   └── budget.rs      one chunk-cache budget split among a mixture's children
//! ├── store/           the Zarr v3 store
//! │   ├── format.rs      the layout: paths, StoreGroup, root attributes
//! │   ├── config.rs      ZarrWriteConfig, layered per group and field
//! │   ├── codec.rs       an array's codec chain, parsed once (creation, inspect, limits, decode, tail encode)
//! │   ├── chunk_bytes.rs a stored chunk's bytes: crc32c, the shard index, zstd frames
//! │   ├── arrays.rs      opening and creating arrays: dtypes, chunk shapes
//! │   ├── bytes.rs       ByteSource: the reads the reader makes, local or remote
//! │   ├── durable/       crash-safe storage below zarrs: DurableStore and its transactions
//! │   │                  (mod.rs), files (atomic replace, exchange, linked copies of a
//! │   │                  folder, syncs, cleanup)
//! │   ├── limits.rs      size limits, checked before anything is allocated
//! │   ├── lock.rs        the writer lock: one writer per store at a time
//! │   ├── inspect.rs     a store's arrays, codecs, chunks and sizes (atomzarr inspect)
//! │   ├── writer/        AtomicDataZarrWriter: create (mod.rs), recover (open),
//! │   │                  append, edit (add_custom, add_filled, repair's row rewrite),
//! │   │                  delete (masks in one exchange of meta/, then rows), zero
//! │   │                  (rows zeroed, each touched chunk rewritten once), strings
//! │   │                  (string labels), defragment, tail (tail chunks
//! │   │                  small appends extend)
//! │   ├── reader/        AtomicDataZarrReader, composed of three parts: the chunk
//! │   │                  source (chunks/: bytes, field arrays, one chunk decoded;
//! │   │                  direct: shard index, crc32c, zstd; fetch: remote ranges in
//! │   │                  flight) with cache, chunk_memory and compact (cached
//! │   │                  chunks' compact forms); the pointer pages (pointers); the
//! │   │                  row copy (rows: samples, collated batches, string labels).
//! │   │                  Around them: state (the snapshot and its open checks),
//! │   │                  active (the samples a delete left, as a bitmap), plan,
//! │   │                  decode (a request's chunks, each once), neighbors,
//! │   │                  strings (string label arrays), reader_impl (the Reader impl),
//! │   │                  scan (the meta arrays and single chunks a whole-store check reads)
//! │   ├── remote/        feature `remote`: URLs on object storage and HTTP (options,
//! │   │                  bytes: RemoteBytes, disk_cache, copy)
//! │   ├── verify/        a whole store checked (atomzarr verify): report (Fault,
//! │   │                  VerifyReport), layout (dtypes and shapes against the format),
//! │   │                  rows (pointers, masks, neighbor indices, each chunk decoded once)
//! │   └── repair.rs      finds and fixes nvalchemi-toolkit's append bug
//! ├── sampler/         sample order and batch membership: sequential/random (mod.rs),
//! │                    chunk_shuffle, block_pool (the pool's size and draws), regroup
//! │                    (a block-pool epoch resumed on other ranks; piece_set: what each
//! │                    rank had left), distributed
//! │                    (rank shards), size_aware, mixing (rates.rs: weights, temperature,
//! │                    exact counts), child_order (how a mixture walks
//! │                    each dataset, per rank), fit (mixing samplers fitted to a reader:
//! │                    each dataset's block pool from its share of the cache)
//! ├── formats/         files of other formats in and out of a store
//! │   ├── frame.rs       Frame, the Frames trait, FrameOptions, FileInfo
//! │   ├── open.rs        open_frames: a file as the format it holds
//! │   ├── input.rs       format detection, gzip / xz / bzip2 text
//! │   ├── units.rs       eV, Å, eV/Å, eV/Å³; CODATA 2014 as ase.units
//! │   ├── stress.rs      a stress as files give it (Voigt 6, 9, 3×3) to the store's matrix
//! │   ├── extxyz/        extended XYZ (ASE's dialect), streamed in batches: frame (one frame),
//! │   │                  comment (the key=value line); write: back to ASE
//! │   ├── ase_row.rs     an ASE database row as a frame
//! │   ├── asedb.rs       ASE SQLite .db (feature sqlite)
//! │   ├── aselmdb.rs     fairchem .aselmdb (feature lmdb)
//! │   ├── hdf5.rs        SPICE and ANI-1x HDF5 (feature hdf5)
//! │   ├── npz.rs         rMD17 and sGDML npz
//! │   ├── mptrj.rs       the MPtrj JSON, streamed
//! │   ├── import/        files of any format into a store (atomzarr import); fill: labels
//! │   │                  only some frames have
//! │   ├── export.rs      a store as extended XYZ (atomzarr export)
//! │   └── dump.rs        any reader's samples as the toolkit's JSON dump (atomzarr dump)
//! ├── prep/            a training set out of a store
//! │   ├── split.rs       reproducible grouped splits (SplitRule, Split)
//! │   ├── stats.rs       dataset statistics (E0s, energy per atom, force RMS, neighbors)
//! │   ├── saved.rs       splits and statistics saved in the store, staleness
//! │   ├── save.rs        saving them (AtomicDataZarrWriter::save_split, save_stats)
//! │   ├── filter/        the samples to delete (atomzarr filter): scan (one pass over
//! │   │                  collated batches), robust (z-scores, compositions, E0 residuals)
//! │   └── transforms.rs  batch transforms: E0s, scale and shift, rotation, weights
//! ├── pipeline/        dataset.rs (Dataset; reads.rs: validation, transforms, ErrorPolicy)
//! │                    and prefetch.rs (Prefetcher) → builder.rs (order.rs: what orders
//! │                    the epochs; in_order.rs: index order split in ranges per rank;
//! │                    shuffle.rs: what with_shuffle(true) reads) → loader.rs
//! │                    (DataLoader; schedule.rs: epoch schedules; ranked.rs: orders drawn
//! │                    per rank; resume.rs: LoaderState, saved and loaded; upload.rs: upload
//! │                    threads) →
//! │                    batch.rs (AtomicBatch; stage.rs: fields in device dtypes, pinned
//! │                    staging); loss.rs: losses that leave absent labels out
//! ├── bench/           feature `bench`: the I/O benchmark behind `atomzarr roundtrip` and
//! │                    `atomzarr read` (options, write for roundtrip, read loops over
//! │                    indices.rs: a rank's samples as a range or a list,
//! │                    mix: several stores read as one mixture, content checksum,
//! │                    memory peak, report rows)
//! └── testing.rs       feature `testing`: test hooks for the crate's own tests (hidden)
//! ```
//!
//! | module | owns |
//! |---|---|
//! | [`data`] | the host data model: [`AtomicData`], [`Field`], [`HostData`], [`Level`], [`DType`]; collated batches ([`CollatedBatch`], [`data::CollateOptions`]: int64 indices narrowed to int32 for int32 devices); periodic neighbor lists ([`data::neighbors`]); [`data::synth`] |
//! | [`source`] | the [`Reader`] contract ([`ReaderExt`], [`source::ChunkedReader`]); [`InMemoryReader`]; [`MultiReader`] |
//! | [`store`] | the on-disk format ([`store::format`]), write configuration ([`ZarrWriteConfig`]), codec chains, crash-safe storage and size limits (internal: `store::codec`, `store::durable`, `store::limits`), the writer lock ([`store::lock`]), [`AtomicDataZarrWriter`], [`AtomicDataZarrReader`], [`store::repair`], byte sources local or remote ([`store::bytes`], feature `remote`: `store::remote`) |
//! | [`sampler`] | [`sampler::Sampler`] and [`sampler::BatchSampler`]; sequential, random, the block-pool shuffle ([`sampler::ChunkShuffleSampler`], what `with_shuffle(true)` reads on a store larger than its cache), size-aware, multi-dataset and rank-sharded samplers |
//! | [`formats`] | files of other formats: each read as [`formats::Frames`] ([`formats::open_frames`]: extended XYZ, ASE databases, HDF5, npz, MPtrj; units in [`formats::units`]); [`formats::import`] into a store (labels only some frames have, string labels); [`formats::export`] as extended XYZ |
//! | [`prep`] | a training set: splits ([`prep::split`]), statistics ([`prep::stats`]), both saved in the store ([`prep::saved`]), batch transforms ([`prep::transforms`]) |
//! | [`pipeline`] | [`Dataset`] (validation, transforms; Burn's `Dataset`), [`Prefetcher`] (background reads), [`DataLoader`] (Burn's `DataLoader`; [`DataLoaderBuilder`], [`LoaderState`] to resume), [`AtomicBatch`] and [`AtomicBatcher`] (Burn's `Batcher`) |
//! | `bench` | the I/O benchmark's runner (feature `bench`): read orders, the timed read loops, report rows; the `atomzarr` command line (crate `atomzarr-cli`, folder `cli/`) prints them |
//!
//! Imports between these top-level modules point only downward, so the
//! graph has no cycle, and the files of each folder import each other
//! without a cycle (`tests/architecture.rs` fails on either):
//!
//! ```text
//! location ◄─ error, progress, threads ◄─ data ◄─ source ◄─ store, sampler ◄─ formats, prep ◄─ pipeline ◄─ bench
//! ```
//!
//! ## Configuration
//!
//! One convention everywhere, zarrs' own: every knob is set by a consuming
//! `with_<knob>(value)` and read back by `<knob>()`; fields are private and
//! each type has a `Default`. A call that also comes with an options struct
//! ends in `_opt` ([`AtomicDataZarrReader::open_opt`],
//! [`ReaderExt::read_collated_opt`]), and data-parallel ranks are always
//! `(rank, world_size)` in that order. Options structs ([`ReaderOptions`],
//! [`InMemoryOptions`], [`MultiReaderOptions`], [`data::CollateOptions`],
//! [`ZarrArrayConfig`], [`ZarrWriteConfig`], [`sampler::SizeAwareOptions`]),
//! builders ([`DataLoaderBuilder`], the multi-dataset sampler builders) and
//! the [`Dataset`] read the same:
//!
//! ```
//! use atomzarr::{Codec, ReaderOptions, ZarrArrayConfig};
//! let reader = ReaderOptions::default().with_cache_bytes(512 << 20);
//! let core = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 3 }).with_chunk_size(10_000);
//! assert_eq!((reader.cache_bytes(), core.chunk_size()), (512 << 20, Some(10_000)));
//! ```
//!
//! ## Features
//!
//! | feature | default | brings |
//! |---|---|---|
//! | `remote` | off | stores at URLs: s3://, gs://, az://, http(s):// ([`store::remote`]; object_store, tokio) |
//! | `sqlite` | off | ASE's SQLite databases (`.db`): rusqlite with a bundled SQLite |
//! | `lmdb` | off | fairchem's `.aselmdb`: heed over a bundled LMDB |
//! | `hdf5` | off | SPICE and ANI-1x HDF5: the pure-Rust hdf5-reader |
//! | `xz` | off | xz-compressed text inputs (`.extxyz.xz`): liblzma, bundled |
//! | `all-formats` | off | `sqlite`, `lmdb`, `hdf5` and `xz` together |
//! | `progress` | off | progress bars on stderr for `with_progress(true)` (the writer, [`InMemoryOptions`]); without it those calls log (`log::info!`) |
//! | `bench` | off | the I/O benchmark's runner (`atomzarr::bench`; Burn's Flex backend for its `batch` path, tempfile) |
//! | `train` | off | burn-train, for the training example's `--learner` (one device or data parallel) |
//! | `cuda` | off | Burn's CUDA backend |
//! | `wgpu` | off | Burn's wgpu backend (any Vulkan device; Mesa's software lavapipe runs the device tests without a GPU) |
//! | `testing` | off | store internals and test hooks for the crate's own tests (`AtomicDataZarrWriter::fail_after`, `Error::Injected`); not public API |
//!
//! The defaults are the library alone: burn (`std`, `dataset`), zarrs,
//! rayon, serde, thiserror, zstd, the pure-Rust readers of extended XYZ,
//! npz, MPtrj JSON, gzip and bzip2, and a few small crates; nothing for the
//! terminal. The `atomzarr` command line is the crate `atomzarr-cli`
//! (`cargo install --path cli`), which turns on `remote`, `all-formats`,
//! `progress` and `bench`.

//! ## Example
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, ReaderExt, ZarrWriteConfig};
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

#[cfg(feature = "bench")]
pub mod bench;
pub mod data;
mod error;
pub mod formats;
mod location;
pub mod pipeline;
pub mod prep;
mod progress;
pub mod sampler;
pub mod source;
pub mod store;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
mod threads;

// The crate root is the one public path of these types: their own modules
// are private, and the layer modules re-export them to the crate only.
pub use data::collate::{CollatedBatch, CollatedField, FieldLayout};
pub use data::dtype::{DType, Level};
pub use data::host::HostData;
pub use data::sample::{AtomicData, Field};
#[cfg(any(test, feature = "testing"))]
pub use error::AppendStep;
pub use error::{Error, LockHolder, RemoteErrorKind, Result};
pub use location::Location;
pub use pipeline::batch::{AtomicBatch, AtomicBatcher, BatchData, BatchField};
pub use pipeline::builder::DataLoaderBuilder;
pub use pipeline::dataset::{Dataset, ErrorPolicy};
pub use pipeline::in_order::RankSplit;
pub use pipeline::loader::{DataLoader, LoaderStats};
pub use pipeline::prefetch::Prefetcher;
pub use pipeline::resume::LoaderState;
pub use source::ReadPlan;
pub use source::in_memory::{InMemoryOptions, InMemoryReader};
pub use source::multi::{MultiReader, MultiReaderOptions};
pub use source::reader::{Reader, ReaderExt, Sample, SampleMetadata};
pub use store::config::{Codec, Shuffle, ZarrArrayConfig, ZarrWriteConfig};
pub use store::reader::cache::{CacheStats, DEFAULT_CACHE_BYTES};
pub use store::reader::{AtomicDataZarrReader, ReaderOptions};
pub use store::writer::AtomicDataZarrWriter;

//! Sources of samples: the [`Reader`] contract and the readers that are not
//! a store format of their own.
//!
//! | module | owns |
//! |---|---|
//! | `reader` | the [`Reader`] contract every backend implements, its conveniences ([`ReaderExt`]) and the chunked-store capability ([`ChunkedReader`]); [`Sample`](crate::Sample), [`SampleMetadata`] |
//! | `memory` | [`InMemoryDataset`](crate::InMemoryDataset): a whole source resident in host memory |
//! | [`frames`] | [`frames::FrameSource`]: a file read as frames a batch at a time; [`frames::open_frames`] opens any format below |
//! | [`input`] | format detection (magic bytes, extensions), gzip / xz / bzip2 text input |
//! | [`units`] | source units to the store's (eV, Å, eV/Å, eV/Å³), CODATA 2014 as `ase.units` |
//! | [`extxyz`] | extended XYZ in ASE's dialect, streamed in batches of [`AtomicData`](crate::AtomicData) frames |
//! | `ase_row` | an ASE database row as a frame (shared by the two ASE databases) |
//! | `asedb` | ASE's SQLite database (feature `sqlite`) |
//! | `aselmdb` | fairchem's `.aselmdb` (feature `lmdb`) |
//! | `hdf5` | SPICE and ANI-1x HDF5 (feature `hdf5`) |
//! | [`npz`] | rMD17 and sGDML npz |
//! | [`mptrj`] | the MPtrj JSON, streamed |
//! | [`split`] | reproducible splits: [`split::SplitRule`] (group by a label, seed, fractions) and [`split::Split`] |
//! | [`stats`] | dataset statistics (counts, elements, E0s, energy per atom, force RMS, neighbors), streamed and parallel |
//! | `multi` | [`MultiDataset`]: several readers behind one global index space |
//!
//! The Zarr backend ([`AtomicDataZarrReader`](crate::AtomicDataZarrReader))
//! lives with the rest of the on-disk format in [`crate::store`].

#[cfg(any(feature = "sqlite", feature = "lmdb"))]
mod ase_row;
#[cfg(feature = "sqlite")]
pub mod asedb;
#[cfg(feature = "lmdb")]
pub mod aselmdb;
pub mod extxyz;
pub mod frames;
#[cfg(feature = "hdf5")]
pub mod hdf5;
pub mod input;
pub(crate) mod memory;
pub mod mptrj;
pub(crate) mod multi;
pub mod npz;
pub(crate) mod reader;
pub mod split;
pub mod stats;
pub mod units;

pub(crate) use memory::gather;
pub use multi::DATASET_INDEX;
// The types also at the crate root are public there only.
pub(crate) use multi::MultiDataset;
pub(crate) use reader::range_error;
pub use reader::{ChunkedReader, DecodeCounters};
pub(crate) use reader::{Reader, ReaderExt, SampleMetadata};

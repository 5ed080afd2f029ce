//! Sources of samples: the [`Reader`] contract and the readers that are not
//! a store format of their own.
//!
//! | module | owns |
//! |---|---|
//! | [`reader`] | the [`Reader`] contract every backend implements ([`Sample`], [`SampleMetadata`]) |
//! | [`memory`] | [`InMemoryDataset`]: a whole source resident in host memory |
//! | [`extxyz`] | extended XYZ in ASE's dialect, streamed in batches of [`AtomicData`](crate::AtomicData) frames |
//! | [`stats`] | dataset statistics (counts, elements, E0s, energy per atom, force RMS, neighbors), streamed and parallel |
//! | [`multi`] | [`MultiDataset`]: several readers behind one global index space |
//!
//! The Zarr backend ([`AtomicDataZarrReader`](crate::AtomicDataZarrReader))
//! lives with the rest of the on-disk format in [`crate::store`].

pub mod extxyz;
pub mod memory;
pub mod multi;
pub mod reader;
pub mod stats;

pub(crate) use memory::gather;
pub use memory::{InMemoryDataset, InMemoryOptions};
pub use multi::{MultiDataset, MultiDatasetOptions};
pub(crate) use reader::range_error;
pub use reader::{DecodeCounters, Reader, Sample, SampleMetadata};

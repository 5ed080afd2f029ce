//! Readers: the [`Reader`] contract, random access to the samples of a
//! collection, and the readers that are not a store format of their own.
//!
//! | module | owns |
//! |---|---|
//! | `reader` | the [`Reader`] contract every backend implements ([`Schema`], [`Capabilities`]), its capabilities ([`SampleIndex`], [`PlannedReader`]) and conveniences ([`ReaderExt`]); [`Sample`](crate::Sample), [`SampleMetadata`] |
//! | `chunked` | the chunked-store capability ([`ChunkedReader`]): [`DecodeCounters`], [`CacheFit`] |
//! | `plan` | [`ReadPlan`]: a window's collated read, planned before it is read |
//! | `in_memory` | [`InMemoryReader`](crate::InMemoryReader): a whole reader's samples resident in host memory |
//! | `multi` | [`MultiReader`]: several readers behind one global index space |
//! | `multi_options` | [`MultiReaderOptions`](crate::MultiReaderOptions): strict fields or their union, the fields a mixture adds, the shared cache budget |
//! | `union` | the fields of a mixture whose children differ: their union, absent values, `<name>_present` flags |
//! | `budget` | one decoded-chunk budget split among a mixture's children ([`split_cache_budget`], [`split_cache_budget_by_passes`]) |
//!
//! The Zarr reader ([`AtomicDataZarrReader`](crate::AtomicDataZarrReader))
//! lives with the rest of the on-disk format in [`crate::store`]; files of
//! other formats are read as frames, a batch at a time, by [`crate::formats`].

mod budget;
pub(crate) mod chunked;
pub(crate) mod in_memory;
pub(crate) mod multi;
mod multi_options;
pub(crate) mod plan;
pub(crate) mod reader;
mod union;

pub(crate) use in_memory::gather;
pub use multi::{DATASET_INDEX, LOSS_WEIGHT};
pub use union::PRESENT_SUFFIX;
// The types also at the crate root are public there only.
pub use budget::{split_cache_budget, split_cache_budget_by_passes};
pub use chunked::{CacheFit, ChunkedReader, DEFAULT_CACHE_BYTES, DecodeCounters};
pub(crate) use multi::MultiReader;
pub use plan::ReadPlan;
pub(crate) use plan::{Prepared, RowWindow};
pub use reader::Capabilities;
pub use reader::{PlannedReader, SampleIndex, Schema};
pub(crate) use reader::{Reader, ReaderExt, SampleMetadata};
pub(crate) use reader::{neighbor_index_error, reread_neighbor_error};

//! The host data model: a sample ([`AtomicData`]) is a set of named
//! [`Field`]s, each with a [`Level`] (atom / edge / system), a [`DType`], a
//! shape and a typed host buffer ([`HostData`]).
//!
//! Shapes follow the store contract: atom fields are `[n_atoms, ...]`, edge
//! fields `[n_edges, ...]`, and system fields keep a leading dimension of 1
//! (`energy` is `[1, 1]`, `cell` is `[1, 3, 3]`).

//!
//! | module | owns |
//! |---|---|
//! | `dtype` | [`DType`] and [`Level`] |
//! | `elements` | chemical symbols and atomic numbers |
//! | `host` | [`HostData`], the typed host buffer |
//! | [`absent`] | absent values of labels a sample lacks: NaN, an integer's extreme, false |
//! | `indices` | neighbor-index arithmetic: offsets, fused range checks, int32 narrowing |
//! | `sample` | [`AtomicData`] and its [`Field`]s |
//! | `strings` | [`StringField`]: string labels of a sample |
//! | [`neighbors`] | periodic neighbor lists (cell lists, triclinic, mixed pbc), ASE-equal; the on-the-fly edge transform |
//! | `pointers` | [`Pointers`]: the rows a sample owns on each axis |
//! | `buffers` | [`BatchBuffers`]: delivered batches' memory, recycled into later batches |
//! | `collate` | collated batches ([`CollatedBatch`]) and their layout ([`CollateOptions`]) |
//! | [`synth`] | seeded synthetic samples for tests, examples and benchmarks |
//! | [`hash`] | version-stable hashes: split assignment, per-sample random draws |
//! | [`rotation`] | [`rotation::Rotation`]: uniform random rotations of vectors and tensors |
//! | `host_rows` | [`HostData::update_rows_f64`] (in-place arithmetic on a float buffer's rows), [`HostData::get_i64`] |

pub mod absent;
mod batch_edges;
mod buffers;
pub(crate) mod cell_list;
pub(crate) mod collate;
pub(crate) mod dtype;
pub(crate) mod elements;
pub mod hash;
pub(crate) mod host;
mod host_rows;
mod indices;
pub mod neighbors;
mod pointers;
pub mod rotation;
pub(crate) mod sample;
mod strings;
pub mod synth;

pub(crate) use collate::{bad_indices, collate_lists};
// The types also at the crate root are public there only.
pub(crate) use batch_edges::build_edges_all;
pub use buffers::{BatchBuffers, BufferHome, DEFAULT_BATCH_BUFFER_BYTES};
pub use collate::CollateOptions;
pub(crate) use collate::{CollatedBatch, CollatedField, FieldLayout};
pub(crate) use dtype::{DType, Level};
pub(crate) use host::HostData;
pub use indices::NEIGHBOR_LIST;
pub(crate) use indices::{IndexRange, IndexReport, append_shifts, fold_index, narrow_i64};
pub use pointers::Pointers;
pub(crate) use pointers::chunks_of;
pub(crate) use sample::{AtomicData, Field};
pub use strings::StringField;

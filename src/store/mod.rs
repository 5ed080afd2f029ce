//! The Zarr v3 store: the on-disk layout, its write configuration, the
//! crash-safe storage below zarrs, and the writer and reader built on them.
//!
//! | module | owns |
//! |---|---|
//! | [`format`](mod@format) | the on-disk contract: group and array paths ([`StoreGroup`](format::StoreGroup)), root attributes, leftovers of interrupted writes |
//! | `chunk_bytes` | the bytes of a stored chunk: crc32c, the shard index, zstd frames (the direct decode, the tail encode and the size limits share it) |
//! | `codec` | an array's codec chain as a typed description, parsed once: what creation writes, what inspect reports, what the limits, the direct decode and the tail encode can handle |
//! | `config` | the layered write configuration ([`ZarrWriteConfig`]) |
//! | `arrays` | opening and creating zarrs arrays: codec chains, dtypes, chunk shapes |
//! | `durable` | crash-safe storage below zarrs: atomic, durable file replacement, grouped syncs |
//! | `limits` | the size limits every claim of a store's metadata is checked against before allocation |
//! | [`inspect`] | a store's arrays, codecs, chunks and sizes as a report (`atomzarr inspect`) |
//! | [`lock`] | the writer lock: one writer per store at a time (an OS file lock on a file in the store) |
//! | `writer` | [`AtomicDataZarrWriter`]: write, append (crash-safe), custom fields, delete, defragment |
//! | `reader` | [`AtomicDataZarrReader`], the Zarr [`Reader`](crate::Reader): read planning, decoded-chunk cache, direct decode, row copy |
//! | [`bytes`] | [`ByteSource`](bytes::ByteSource): the reads the reader makes, from local files or a remote store |
//! | `remote` | (feature `remote`) stores on object storage and HTTP: URLs, options, the client, disk cache, `copy` |
//! | [`verify`] | a whole store checked, every chunk read once, every fault listed (`atomzarr verify`) |
//! | [`repair`] | finds neighbor lists that point outside their sample; rewrites those of nvalchemi-toolkit's append bug (`atomzarr repair`) |

pub(crate) mod arrays;
pub mod bytes;
pub(crate) mod chunk_bytes;
pub(crate) mod codec;
pub(crate) mod config;
pub(crate) mod durable;
pub mod format;
pub mod inspect;
pub(crate) mod limits;
pub mod lock;
pub(crate) mod reader;
pub mod remote;
pub mod repair;
pub mod verify;
pub(crate) mod writer;

pub use config::ResolvedArrayConfig;
// The types also at the crate root are public there only.
pub(crate) use config::ZarrWriteConfig;
pub use limits::set_bounded_codecs;
pub(crate) use reader::AtomicDataZarrReader;
pub use reader::DEFAULT_WINDOW_DECODE_BYTES;
pub(crate) use writer::AtomicDataZarrWriter;

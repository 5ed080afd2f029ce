//! Stores on object storage and HTTP (the client needs feature `remote`;
//! [`RemoteOptions`] exists without it, and opening a URL then fails with
//! [`RemoteErrorKind::Unsupported`](crate::RemoteErrorKind::Unsupported)): `s3://`, `gs://`,
//! `az://` through the `object_store` crate, `http(s)://` with range
//! requests, read through [`RemoteBytes`], a
//! [`ByteSource`](crate::store::bytes::ByteSource) the reader fetches from
//! with many requests in flight (see the reader's `fetch` module).
//!
//! | module | owns |
//! |---|---|
//! | `options` | [`RemoteOptions`]: endpoint, credentials, concurrency, merging, retries, disk cache |
//! | `bytes` | [`RemoteBytes`]: URL parsing, the `object_store` client, error mapping, request counts |
//! | `disk_cache` | the bounded on-disk cache of fetched encoded chunks |
//! | `copy` | [`copy`]: publishing a store to a URL (and back) |
//!
//! Remote stores are read-only here: the writer refuses URLs with
//! [`Error::RemoteReadOnly`](crate::Error::RemoteReadOnly); write locally,
//! then [`copy`].

#[cfg(feature = "remote")]
mod bytes;
#[cfg(feature = "remote")]
mod copy;
#[cfg(feature = "remote")]
mod disk_cache;
mod options;

#[cfg(feature = "remote")]
pub use bytes::RemoteBytes;
#[cfg(feature = "remote")]
pub use copy::{CopyReport, copy};
pub use options::{DEFAULT_CONCURRENCY, DEFAULT_MERGE_GAP, RemoteOptions};

//! Where a store's bytes come from, for the reader: a [`ByteSource`] gets
//! whole objects, byte ranges, suffixes and sizes by store-relative key
//! (`core/positions/c/0`), from local files ([`LocalBytes`]) or from object
//! storage and HTTP (`store::remote`, feature `remote`). The reader's open
//! checks, its direct shard path and zarrs (through `ByteStorage`) all
//! read through it, so a remote store is checked and read exactly as a local one.
//!
//! ```
//! use atomzarr::store::bytes::{ByteSource, LocalBytes};
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("k"), b"0123456789").unwrap();
//! let src = LocalBytes::new(dir.path());
//! assert_eq!(&src.get_range("k", 2..5).unwrap().unwrap()[..], b"234");
//! assert_eq!(src.get_suffix("k", 3).unwrap().unwrap(), (atomzarr::store::bytes::Bytes::from_static(b"789"), 10));
//! assert_eq!(src.size("missing").unwrap(), None);
//! assert_eq!(src.stats().requests, 3);
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

pub use zarrs::storage::Bytes;

/// Requests a [`ByteSource`] has made and the bytes it received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Requests made (gets, ranged gets, heads, lists; retries not counted).
    pub requests: u64,
    /// Payload bytes received.
    pub bytes: u64,
}

/// Counters behind [`IoStats`], shared by the sources.
#[derive(Debug, Default)]
pub struct IoCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl IoCounters {
    /// Counts one request that brought `bytes` bytes.
    pub fn count(&self, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn get(&self) -> IoStats {
        IoStats { requests: self.requests.load(Ordering::Relaxed), bytes: self.bytes.load(Ordering::Relaxed) }
    }
}

/// One byte range of one object, for [`ByteSource::fetch_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRequest {
    /// Store-relative key.
    pub key: String,
    /// Bytes wanted; `None`: the whole object.
    pub range: Option<Range<u64>>,
}

/// The answer to request `.0` of a [`ByteSource::fetch_many`] call.
pub type Fetched = (usize, Result<Option<Bytes>>);

/// Reads of a store's objects by store-relative key. `Ok(None)`: no such object.
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// The store's location as the user gave it (a path or a URL), for errors.
    fn location(&self) -> &str;
    /// Whether each request costs a round trip (the reader then batches its
    /// fetches, see [`ByteSource::fetch_many`]).
    fn is_remote(&self) -> bool;
    /// The whole object.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file (local sources) or [`Error::Remote`] naming
    /// the URL (remote ones) when the read fails; a missing object is `Ok(None)`.
    fn get(&self, key: &str) -> Result<Option<Bytes>>;
    /// Bytes `range` of the object; an object shorter than the range is an error.
    ///
    /// # Errors
    /// As [`ByteSource::get`]; a short object is [`Error::Io`] (local) or
    /// [`Error::Remote`] of kind `Truncated` (remote).
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Bytes>>;
    /// Bytes `range` of the object read into `buf`, which grows as needed:
    /// the bytes are `buf[..n]` for the returned `n` (the range's length),
    /// what follows is unspecified. For hot paths that read many ranges with
    /// one buffer; the default calls [`ByteSource::get_range`].
    ///
    /// # Errors
    /// As [`ByteSource::get_range`].
    fn read_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<Option<usize>> {
        let Some(got) = self.get_range(key, range)? else { return Ok(None) };
        buf.clear();
        buf.extend_from_slice(&got);
        Ok(Some(got.len()))
    }
    /// The last `n` bytes of the object and its length (one request).
    ///
    /// # Errors
    /// As [`ByteSource::get`].
    fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>>;
    /// The object's length.
    ///
    /// # Errors
    /// As [`ByteSource::get`].
    fn size(&self, key: &str) -> Result<Option<u64>>;
    /// The keys (store-relative) and lengths of the objects under `prefix`;
    /// `Ok(None)` when the source cannot list (plain HTTP).
    ///
    /// # Errors
    /// [`Error::Remote`] when a remote listing fails (a local source skips the
    /// folders it cannot read).
    fn list_sizes(&self, prefix: &str) -> Result<Option<Vec<(String, u64)>>>;
    /// Counters of the requests made so far.
    fn stats(&self) -> IoStats;
    /// Requests to keep in flight in [`ByteSource::fetch_many`].
    fn concurrency(&self) -> usize {
        1
    }
    /// Largest gap (bytes) between two wanted ranges of one object that the
    /// reader fetches along with them, to make one request of two; `None`:
    /// one request per range.
    fn merge_gap(&self) -> Option<u64> {
        None
    }
    /// [`ByteSource::get_suffix`] of each `(key, n)`, up to
    /// [`ByteSource::concurrency`] at a time; answers in request order.
    fn get_suffixes(&self, requests: &[(String, u64)]) -> Vec<Result<Option<(Bytes, u64)>>> {
        requests.iter().map(|(k, n)| self.get_suffix(k, *n)).collect()
    }
    /// Fetches the small whole objects `keys` (metadata documents) all at
    /// once and keeps them, so the one-at-a-time reads of opening a store
    /// cost no round trip each; a no-op for local files.
    fn prefetch(&self, _keys: &[String]) {}
    /// Drops what [`ByteSource::prefetch`] kept (the store may have changed).
    fn forget(&self) {}
    /// The encoded bytes of `range` of `key` (`None`: the whole object)
    /// if a local cache of the source holds them (see [`ByteSource::keep`]).
    fn cached(&self, _key: &str, _range: Option<&Range<u64>>) -> Option<Bytes> {
        None
    }
    /// Offers fetched bytes to the source's local cache, if it has one.
    fn keep(&self, _key: &str, _range: Option<&Range<u64>>, _bytes: &Bytes) {}
    /// Fetches every request, up to [`ByteSource::concurrency`] at a time,
    /// sending each answer on `done` as it arrives (in any order), so the
    /// caller decodes while the rest are in flight. The default reads them
    /// one after the other.
    fn fetch_many(&self, requests: Vec<RangeRequest>, done: std::sync::mpsc::Sender<Fetched>) {
        for (i, r) in requests.into_iter().enumerate() {
            let got = match r.range {
                Some(range) => self.get_range(&r.key, range),
                None => self.get(&r.key),
            };
            if done.send((i, got)).is_err() {
                return;
            }
        }
    }
}

/// A store directory on the local filesystem.
#[derive(Debug)]
pub struct LocalBytes {
    root: PathBuf,
    location: String,
    counters: IoCounters,
    /// Open files by key, so reading a store's chunks opens each shard once
    /// (an open and a close per chunk were ~4 µs on the reference VM).
    /// Dropped by [`ByteSource::forget`] (the reader's refresh), so a store
    /// rewritten since is opened anew; until then the handles keep reading
    /// the files the reader's snapshot (and its cached shard indexes) came from
    /// (and a file deleted since, by a defragment, frees its space then).
    files: std::sync::Mutex<std::collections::HashMap<String, Arc<std::fs::File>>>,
}

/// Open files a [`LocalBytes`] keeps at most (then it closes them all).
const MAX_OPEN_FILES: usize = 256;

impl LocalBytes {
    /// The store at `root`.
    pub fn new(root: impl AsRef<Path>) -> Self {
        let root = root.as_ref().to_path_buf();
        LocalBytes {
            location: root.display().to_string(),
            root,
            counters: IoCounters::default(),
            files: Default::default(),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    fn io(&self, key: &str, e: std::io::Error) -> Error {
        Error::io(&self.path(key), e)
    }

    fn open_files(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<std::fs::File>>> {
        // A map of handles: a panic elsewhere cannot leave it half-updated.
        self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the file (opened once, see `files`); `Ok(None)` when it
    /// does not exist.
    fn with_file<T>(&self, key: &str, f: impl FnOnce(&std::fs::File) -> std::io::Result<T>) -> Result<Option<T>> {
        let held = self.open_files().get(key).cloned();
        let file = match held {
            Some(file) => file,
            None => {
                let file = match std::fs::File::open(self.path(key)) {
                    Ok(file) => Arc::new(file),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(self.io(key, e)),
                };
                let mut files = self.open_files();
                if files.len() >= MAX_OPEN_FILES {
                    files.clear();
                }
                files.insert(key.to_string(), file.clone());
                file
            }
        };
        f(&file).map(Some).map_err(|e| self.io(key, e))
    }
}

/// Reads `len` bytes at `offset` of `file` (an error if it is shorter).
fn read_at(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}

impl ByteSource for LocalBytes {
    fn location(&self) -> &str {
        &self.location
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let got = match std::fs::read(self.path(key)) {
            Ok(b) => Some(Bytes::from(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(self.io(key, e)),
        };
        self.counters.count(got.as_ref().map_or(0, |b| b.len() as u64));
        Ok(got)
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Bytes>> {
        let mut buf = Vec::new();
        Ok(self.read_range_into(key, range, &mut buf)?.map(|n| {
            buf.truncate(n);
            Bytes::from(buf)
        }))
    }

    fn read_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<Option<usize>> {
        use std::os::unix::fs::FileExt;
        let len = usize::try_from(range.end.saturating_sub(range.start))
            .map_err(|e| self.io(key, std::io::Error::other(e)))?;
        if buf.len() < len {
            // Zero-filled once per thread and size, not per read.
            buf.resize(len, 0);
        }
        let got = self.with_file(key, |f| f.read_exact_at(&mut buf[..len], range.start).map(|()| len))?;
        self.counters.count(got.map_or(0, |n| n as u64));
        Ok(got)
    }

    fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>> {
        let got = self.with_file(key, |f| {
            let size = f.metadata()?.len();
            let start = size.saturating_sub(n);
            Ok((read_at(f, start, size - start)?, size))
        })?;
        self.counters.count(got.as_ref().map_or(0, |b| b.0.len() as u64));
        Ok(got)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.counters.count(0);
        match std::fs::metadata(self.path(key)) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(key, e)),
        }
    }

    fn list_sizes(&self, prefix: &str) -> Result<Option<Vec<(String, u64)>>> {
        self.counters.count(0);
        let mut out = Vec::new();
        let mut stack = vec![self.root.join(prefix)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let Ok(m) = e.metadata() else { continue };
                if m.is_dir() {
                    stack.push(e.path());
                } else if let Ok(rel) = e.path().strip_prefix(&self.root) {
                    out.push((rel.to_string_lossy().into_owned(), m.len()));
                }
            }
        }
        Ok(Some(out))
    }

    fn stats(&self) -> IoStats {
        self.counters.get()
    }

    fn forget(&self) {
        self.open_files().clear();
    }
}

/// A [`ByteSource`] as zarrs storage, so zarrs opens arrays and decodes the
/// chunks the reader's direct path leaves to it through the same reads.
///
/// Why not `zarrs_object_store`: that adapter is async (zarrs would need
/// its sync-over-async adapter and an executor per call), and it would open
/// a second path to the objects that bypasses the request counting, the
/// error mapping and the disk cache of [`ByteSource`].
#[derive(Debug, Clone)]
pub(crate) struct ByteStorage(pub(crate) Arc<dyn ByteSource>);

fn storage_error(e: Error) -> zarrs::storage::StorageError {
    zarrs::storage::StorageError::Other(e.to_string())
}

impl zarrs::storage::ReadableStorageTraits for ByteStorage {
    fn get(&self, key: &zarrs::storage::StoreKey) -> std::result::Result<Option<Bytes>, zarrs::storage::StorageError> {
        self.0.get(key.as_str()).map_err(storage_error)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &zarrs::storage::StoreKey,
        byte_ranges: zarrs::storage::byte_range::ByteRangeIterator<'a>,
    ) -> std::result::Result<zarrs::storage::MaybeBytesIterator<'a>, zarrs::storage::StorageError> {
        use zarrs::storage::byte_range::ByteRange;
        let key = key.as_str();
        let mut size: Option<u64> = None;
        let mut out = Vec::new();
        for r in byte_ranges {
            let got = match r {
                ByteRange::FromStart(start, Some(len)) => self.0.get_range(key, start..start.saturating_add(len)),
                ByteRange::Suffix(n) => self.0.get_suffix(key, n).map(|o| o.map(|(b, _)| b)),
                ByteRange::FromStart(start, None) => {
                    let len = match size {
                        Some(s) => Some(s),
                        None => self.0.size(key).map_err(storage_error)?,
                    };
                    size = len;
                    match len {
                        Some(len) => self.0.get_range(key, start..len.max(start)),
                        None => Ok(None),
                    }
                }
            };
            match got.map_err(storage_error)? {
                Some(b) => out.push(Ok(b)),
                None => return Ok(None),
            }
        }
        Ok(Some(Box::new(out.into_iter())))
    }

    fn size_key(
        &self,
        key: &zarrs::storage::StoreKey,
    ) -> std::result::Result<Option<u64>, zarrs::storage::StorageError> {
        self.0.size(key.as_str()).map_err(storage_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_ranges_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/c")).unwrap();
        std::fs::write(dir.path().join("a/c/0"), b"abcdef").unwrap();
        let src = LocalBytes::new(dir.path());
        assert!(src.get_range("a/c/0", 4..10).is_err(), "a range past the end is an error, not short data");
        assert_eq!(src.get_suffix("a/c/0", 100).unwrap().unwrap().1, 6);
        let listed = src.list_sizes("a").unwrap().unwrap();
        assert_eq!(listed, vec![("a/c/0".to_string(), 6)]);
        let (tx, rx) = std::sync::mpsc::channel();
        src.fetch_many(vec![RangeRequest { key: "a/c/0".into(), range: Some(1..3) }], tx);
        let (i, got) = rx.recv().unwrap();
        assert_eq!((i, &got.unwrap().unwrap()[..]), (0, &b"bc"[..]));
    }
}

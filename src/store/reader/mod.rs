//! [`AtomicDataZarrReader`]: the Zarr v3 backend and its batched read path.
//!
//! Opening reads only the root attributes, the last page of each pointer
//! array (the totals) and the sample mask, and checks that every array is
//! long enough for them; the other pointer pages are read as reads need them. A batched read
//! then (1) maps logical to physical indices, (2) plans the inner chunks each
//! array needs (`plan`), (3) decodes each needed chunk once, in
//! parallel over (array, chunk) with rayon, through the shared
//! [`ChunkCache`], and (4) copies rows straight into the output buffers.
//!
//! | module | owns |
//! |---|---|
//! | this one | [`ReaderOptions`], the reader, opening |
//! | `state` | open-time checks; the [`State`] snapshot of pointers, mask and field arrays |
//! | `pointers` | the pointer arrays paged: pages decoded as reads need them, checked, held compact |
//! | `active` | the samples a soft delete left: a bitmap with a select index (logical to physical) |
//! | `plan` | read planning: which inner chunks a request touches |
//! | `cache` | the decoded-chunk cache ([`ChunkCache`]) |
//! | `memory` | memory for decoded chunks: recycled, huge-page-advised blocks |
//! | `decode` | decoding each needed chunk once, through the cache |
//! | `direct` | the direct shard-index, crc32c and zstd decode |
//! | `fetch` | remote stores: a request's chunks fetched many at a time, merged, decoded as they arrive |
//! | `neighbors` | neighbor-index checks per decoded chunk, refused samples |
//! | `rows` | row copy into samples and collated batches |
//! | `strings` | string labels: opened with the state, rows copied into samples and batches |
//! | `reader_impl` | the [`Reader`] implementation |

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use zarrs::array::CodecOptions;

use crate::data::CollateOptions;
use crate::data::{DType, Level};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::source::Reader;
use crate::store::bytes::ByteStorage as Store;
use crate::store::bytes::{ByteSource, ByteStorage, IoStats, LocalBytes};
use crate::store::format;
use cache::{CacheStats, ChunkCache, DEFAULT_CACHE_BYTES};
use direct::{DirectDecode, ShardIndex};
use zarrs::array::{Array, ArrayShardedReadableExtCache};

mod active;
pub(crate) mod cache;
mod chunk_memory;
mod compact;
mod decode;
mod direct;
mod fetch;
mod neighbors;
mod plan;
mod pointers;
mod reader_impl;
mod rows;
mod state;
mod strings;

/// Options of [`AtomicDataZarrReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Byte budget of the decoded-chunk cache; 0 disables it.
    pub(crate) cache_bytes: u64,
    /// Decoded bytes one batched read holds at once.
    pub(crate) window_decode_bytes: u64,
    /// Free batch buffers kept for reuse, bytes.
    pub(crate) batch_buffer_bytes: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            cache_bytes: DEFAULT_CACHE_BYTES,
            window_decode_bytes: DEFAULT_WINDOW_DECODE_BYTES,
            batch_buffer_bytes: crate::data::DEFAULT_BATCH_BUFFER_BYTES as u64,
        }
    }
}

impl ReaderOptions {
    /// Sets the byte budget of the decoded-chunk cache (default 1.28 GiB);
    /// 0 disables it.
    ///
    /// ```
    /// let o = atomzarr::ReaderOptions::default().with_cache_bytes(128 << 20);
    /// assert_eq!(o.cache_bytes(), 128 << 20);
    /// ```
    pub fn with_cache_bytes(mut self, bytes: u64) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// The byte budget of the decoded-chunk cache.
    pub fn cache_bytes(&self) -> u64 {
        self.cache_bytes
    }

    /// Bounds the decoded chunks one batched read (`read_collated`, a
    /// DataLoader window) holds at once (default
    /// [`DEFAULT_WINDOW_DECODE_BYTES`]). A window whose chunks decode to more
    /// (a uniform shuffle of a large store touches a chunk per sample and
    /// array) than this plus the cache's free room is read a group of
    /// batches at a time, each group's chunks released before the next; the
    /// result is the same. Peak memory of a
    /// shuffled epoch is then about the cache budget + this + the windows'
    /// output batches. Decoded chunks live in blocks the reader maps itself
    /// (advised for transparent huge pages, recycled by size rather than
    /// returned to the system); it maps at most the cache budget + twice
    /// this, and the blocks go back to the system when the reader is dropped.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ReaderExt, ReaderOptions, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("g.zarr");
    /// let samples = atomzarr::data::synth::generate(40, 2, 5, 0)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let batches: Vec<Vec<i64>> = (0..40).collect::<Vec<i64>>().chunks(8).map(<[i64]>::to_vec).collect();
    /// let (mut whole, mut grouped) = (Vec::new(), Vec::new());
    /// AtomicDataZarrReader::open(&path)?.read_collated(&batches, &mut whole)?;
    /// // Every batch a group of its own (no cache to keep chunks in):
    /// let options = ReaderOptions::default().with_cache_bytes(0).with_window_decode_bytes(1);
    /// AtomicDataZarrReader::open_opt(&path, options)?.read_collated(&batches, &mut grouped)?;
    /// assert_eq!(whole, grouped);
    /// # Ok(()) }
    /// ```
    pub fn with_window_decode_bytes(mut self, bytes: u64) -> Self {
        self.window_decode_bytes = bytes;
        self
    }

    /// Decoded bytes one batched read holds at once.
    pub fn window_decode_bytes(&self) -> u64 {
        self.window_decode_bytes
    }

    /// Bounds the free batch buffers the reader keeps for reuse (default
    /// [`DEFAULT_BATCH_BUFFER_BYTES`](crate::data::DEFAULT_BATCH_BUFFER_BYTES),
    /// about three read windows of a bulk store; 0 keeps none). A batch's
    /// field buffers come back when the device tensors made from them are
    /// dropped, and later batches are written into them rather than into
    /// fresh memory, which the system would fault in page by page (see
    /// [`BatchBuffers`](crate::data::BatchBuffers)).
    ///
    /// ```
    /// use atomzarr::ReaderOptions;
    /// let o = ReaderOptions::default().with_batch_buffer_bytes(64 << 20);
    /// assert_eq!(o.batch_buffer_bytes(), 64 << 20);
    /// ```
    pub fn with_batch_buffer_bytes(mut self, bytes: u64) -> Self {
        self.batch_buffer_bytes = bytes;
        self
    }

    /// Free batch buffers the reader keeps for reuse, bytes.
    pub fn batch_buffer_bytes(&self) -> u64 {
        self.batch_buffer_bytes
    }
}

/// Reads an atomic-structure Zarr store (ours or the Python toolkit's).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ReaderExt, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("demo.zarr");
/// let samples: Vec<AtomicData> = (0..5)
///     .map(|i| AtomicData::new(vec![1; i + 1], vec![[i as f32; 3]; i + 1]).unwrap().with_energy(i as f32))
///     .collect();
/// let mut w = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
/// w.write(&samples)?;
///
/// let r = AtomicDataZarrReader::open(&path)?;
/// assert_eq!(r.len(), 5);
/// let got = r.read_many(&[4, 0, -1])?;
/// assert_eq!(got[0].data, samples[4]);
/// assert_eq!(got[2].metadata.index, 4);
/// assert_eq!(r.get_metadata(3)?, (4, 0));
/// # Ok(()) }
/// ```
pub struct AtomicDataZarrReader {
    location: Location,
    /// The location as text, what [`Reader::name`] returns.
    name: Arc<str>,
    /// Where the bytes come from (local files or a remote store).
    bytes: Arc<dyn ByteSource>,
    /// The same, as zarrs storage.
    store: Arc<ByteStorage>,
    state: RwLock<Arc<State>>,
    cache: ChunkCache,
    codec_options: CodecOptions,
    next_id: std::sync::atomic::AtomicU32,
    /// Decoded bytes a batched read holds at once
    /// ([`ReaderOptions::with_window_decode_bytes`]).
    window_decode_bytes: u64,
    /// Memory of delivered batches, back for the next ones.
    buffers: Arc<crate::data::BatchBuffers>,
}

/// Default of [`ReaderOptions::with_window_decode_bytes`].
pub const DEFAULT_WINDOW_DECODE_BYTES: u64 = 256 << 20;

impl std::fmt::Debug for AtomicDataZarrReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicDataZarrReader").field("location", &self.location).field("len", &self.len()).finish()
    }
}

impl AtomicDataZarrReader {
    /// Opens a store with default options.
    ///
    /// # Errors
    /// As [`open_opt`](Self::open_opt).
    pub fn open(location: impl Into<Location>) -> Result<Self> {
        Self::open_opt(location, ReaderOptions::default())
    }

    /// Opens a store: a local path, a `file://` URL, or (feature `remote`)
    /// an `s3://`, `gs://`, `az://` or `http(s)://` URL with the default
    /// [`RemoteOptions`](crate::store::remote::RemoteOptions) (credentials
    /// and endpoint from the environment).
    ///
    /// # Errors
    /// [`Error::NotFound`] when a local `path` does not exist; [`Error::Interrupted`]
    /// when a defragment stopped between its renames; [`Error::Format`] when it is
    /// not a store; [`Error::Inconsistent`], [`Error::Zarr`], [`Error::Chunk`] or
    /// [`Error::Checksum`] naming the array when its metadata or pointers are bad;
    /// otherwise as [`open_remote`](Self::open_remote) for a URL.
    pub fn open_opt(location: impl Into<Location>, options: ReaderOptions) -> Result<Self> {
        Self::open_remote(location, options, crate::store::remote::RemoteOptions::default())
    }

    /// Opens a store at a URL with explicit remote options (endpoint,
    /// credentials, request concurrency, range merging, disk cache).
    ///
    /// ```no_run
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::store::remote::RemoteOptions;
    /// use atomzarr::{AtomicDataZarrReader, ReaderOptions, Reader};
    /// let remote = RemoteOptions::default().with_endpoint("http://127.0.0.1:9000").with_concurrency(64);
    /// let r = AtomicDataZarrReader::open_remote("s3://bucket/train.zarr", ReaderOptions::default(), remote)?;
    /// println!("{} samples", r.len());
    /// # Ok(()) }
    /// ```
    ///
    /// A plain path or `file://` URL opens the local store (`remote` then
    /// plays no part). Without the `remote` feature, other URLs fail with
    /// [`RemoteErrorKind::Unsupported`](crate::RemoteErrorKind::Unsupported).
    ///
    /// # Errors
    /// [`Error::Remote`] naming the URL when a request fails, the store is
    /// missing (kind `NotFound`) or the build has no `remote` feature (kind
    /// `Unsupported`); otherwise as [`open_opt`](Self::open_opt).
    pub fn open_remote(
        location: impl Into<Location>,
        options: ReaderOptions,
        remote: crate::store::remote::RemoteOptions,
    ) -> Result<Self> {
        let url = match location.into() {
            Location::Local(path) => return Self::open_local(path, options),
            Location::Url(url) => url,
        };
        #[cfg(feature = "remote")]
        {
            let bytes: Arc<dyn ByteSource> = Arc::new(crate::store::remote::RemoteBytes::open(&url, &remote)?);
            Self::open_source(Location::Url(url), bytes, options)
        }
        #[cfg(not(feature = "remote"))]
        {
            let _ = (options, remote);
            Err(Error::Remote {
                url,
                kind: crate::error::RemoteErrorKind::Unsupported,
                reason: "this build of atomzarr has no `remote` feature".into(),
            })
        }
    }

    fn open_local(path: PathBuf, options: ReaderOptions) -> Result<Self> {
        if let Some(kept) = format::interrupted_defragment(&path) {
            return Err(Error::Interrupted { store: Location::Local(path), operation: "defragment".into(), kept });
        }
        if !path.exists() {
            return Err(Error::NotFound { store: Location::Local(path) });
        }
        let bytes: Arc<dyn ByteSource> = Arc::new(LocalBytes::new(&path));
        Self::open_source(Location::Local(path), bytes, options)
    }

    fn open_source(location: Location, bytes: Arc<dyn ByteSource>, options: ReaderOptions) -> Result<Self> {
        let store = Arc::new(ByteStorage(bytes.clone()));
        // Rayon already parallelises over chunks; codec-internal threads on
        // top would oversubscribe the cores.
        // Checksums are checked whatever zarrs' global config says.
        let codec_options = CodecOptions::default().with_concurrent_target(1).with_validate_checksums(true);
        let reader = AtomicDataZarrReader {
            name: Arc::from(location.to_string()),
            location,
            bytes,
            store,
            state: RwLock::new(Arc::new(State {
                num_samples: 0,
                pointers: pointers::PointerPages::empty(),
                active: None,
                fields: vec![],
                strings: vec![],
            })),
            cache: ChunkCache::with_memory_limit(
                options.cache_bytes,
                options.cache_bytes.saturating_add(options.window_decode_bytes.saturating_mul(2)),
            ),
            codec_options,
            next_id: std::sync::atomic::AtomicU32::new(0),
            window_decode_bytes: options.window_decode_bytes,
            buffers: crate::data::BatchBuffers::new(usize::try_from(options.batch_buffer_bytes).unwrap_or(usize::MAX)),
        };
        reader.refresh()?;
        Ok(reader)
    }

    /// Requests made to the store and bytes received so far (opening
    /// included): for a remote store, the round trips an epoch costs.
    pub fn io_stats(&self) -> IoStats {
        self.bytes.stats()
    }

    /// The store's byte source (for tools that read more than samples:
    /// `inspect`).
    pub fn byte_source(&self) -> Arc<dyn ByteSource> {
        self.bytes.clone()
    }

    /// The store as zarrs storage (over [`Self::byte_source`]).
    pub(crate) fn storage(&self) -> Arc<ByteStorage> {
        self.store.clone()
    }

    /// Whether the store is remote (object storage or HTTP).
    pub fn is_remote(&self) -> bool {
        self.bytes.is_remote()
    }

    /// Where the store is: its path or URL.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Physical sample count (deleted ones included).
    pub fn num_physical(&self) -> usize {
        self.snapshot().num_samples
    }

    /// The free buffers this reader's batches are written into and go back
    /// to (when the device tensors made from them are dropped), bounded by
    /// [`ReaderOptions::with_batch_buffer_bytes`] of free buffers.
    pub fn batch_buffers(&self) -> &Arc<crate::data::BatchBuffers> {
        &self.buffers
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Bytes of pointer-array pages the reader holds now (outside the chunk
    /// cache). Opening reads the last page of each pointer array; a read
    /// decodes the pages of its samples and keeps them compact (1-2 bytes
    /// per sample and array for small structures), at most 32 MiB per array
    /// or an eighth of the chunk cache's budget if more: a reader that reads
    /// a part of the store holds the pointers of that part, not of the whole
    /// store.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("p.zarr");
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&atomzarr::data::synth::generate(50, 2, 5, 0)?)?;
    /// let reader = AtomicDataZarrReader::open(&path)?;
    /// let at_open = reader.pointer_bytes_held();
    /// assert!(at_open > 0 && at_open < 4096);
    /// # Ok(()) }
    /// ```
    pub fn pointer_bytes_held(&self) -> u64 {
        self.snapshot().pointers.bytes_held() as u64
    }

    /// Empties the decoded-chunk cache and zeroes its counters.
    pub fn clear_cache(&self) {
        self.cache.clear();
        self.cache.reset_counters();
    }

    /// Dtype and trailing shape of every field.
    pub fn field_schema(&self) -> BTreeMap<String, (Level, DType, Vec<usize>)> {
        self.snapshot().fields.iter().map(|f| (f.name.clone(), (f.level, f.dtype, f.trailing.clone()))).collect()
    }

    pub(crate) fn snapshot(&self) -> Arc<State> {
        // The lock only guards an Arc swap; a poisoned lock still holds a valid Arc.
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn chunk_error(&self, f: &FieldArray, chunk: u64, reason: impl Into<String>) -> Error {
        Error::Chunk { store: self.location.clone(), array: f.rel.clone(), chunk, reason: reason.into() }
    }
}

/// One field array, opened.
pub(crate) struct FieldArray {
    pub name: String,
    pub rel: String,
    pub level: Level,
    pub dtype: DType,
    pub trailing: Vec<usize>,
    pub row_elems: usize,
    pub row_bytes: usize,
    pub chunk_rows: u64,
    pub array: Array<Store>,
    pub shard_cache: ArrayShardedReadableExtCache,
    /// Cache key of this array; unique within a reader's lifetime.
    pub id: u32,
    /// Set when inner chunks can be decoded without zarrs' codec pipeline.
    pub direct: Option<DirectDecode>,
    /// Shard indexes read by the direct path, by shard number.
    pub shard_indexes: std::sync::Mutex<std::collections::HashMap<u64, ShardIndex>>,
    /// Set once a chunk of this int64 array held a value outside int32: the
    /// array is then never narrowed (see [`CollateOptions::narrow_int64`]).
    pub wide_only: std::sync::atomic::AtomicBool,
    /// `neighbor_list` only: physical samples seen with an index outside
    /// their own atoms. Each chunk is checked once, when it is decoded (see
    /// [`AtomicDataZarrReader::verify_neighbors`]), so batches copied from
    /// cached chunks pay nothing for the check; batch paths refuse these
    /// samples, `read` and `read_many` return them as stored.
    pub bad_samples: RwLock<std::collections::BTreeSet<usize>>,
    /// Whether `bad_samples` is non-empty (read without the lock per batch).
    pub any_bad: std::sync::atomic::AtomicBool,
}

impl FieldArray {
    /// Decoded bytes of one (inner) chunk, in the stored dtype.
    pub(super) fn chunk_bytes(&self) -> u64 {
        self.chunk_rows.saturating_mul(self.row_bytes as u64)
    }

    /// Whether a request with `opts` reads this array at all.
    pub(super) fn wanted(&self, opts: CollateOptions) -> bool {
        !(opts.skip_edges() && self.level == Level::Edge)
    }

    /// Whether this request reads the array's chunks narrowed to int32.
    pub(super) fn narrowed(&self, opts: CollateOptions) -> bool {
        opts.narrow_int64() && self.dtype == DType::Int64 && !self.wide_only.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A consistent snapshot of the store (swapped whole by `refresh`).
pub(crate) struct State {
    pub num_samples: usize,
    /// The pointer arrays, paged (see `pointers`).
    pub pointers: pointers::PointerPages,
    /// The active samples (logical to physical); `None` when nothing is deleted.
    pub active: Option<active::Active>,
    pub fields: Vec<FieldArray>,
    /// The string labels (`strings/`), in name order.
    pub strings: Vec<strings::StringArray>,
}

impl State {
    /// Rows of every physical sample together on `level`'s axis.
    pub(crate) fn rows_of(&self, level: Level) -> u64 {
        match level {
            Level::Atom => self.pointers.atoms.total,
            Level::Edge => self.pointers.edges.total,
            Level::System => self.num_samples as u64,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.active.as_ref().map_or(self.num_samples, active::Active::len)
    }

    pub(super) fn physical(&self, logical: usize) -> usize {
        self.active.as_ref().map_or(logical, |a| a.physical(logical))
    }
}

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
//! The reader composes three parts, each a type of its own:
//!
//! | module | owns |
//! |---|---|
//! | this one | [`ReaderOptions`], the reader (the parts composed), opening |
//! | `chunks` | the chunk source: bytes, field arrays, cache, codec options, one chunk decoded and checked; `direct`: the shard-index, crc32c and zstd decode; `fetch`: a remote request's chunks fetched many at a time, merged, decoded as they arrive |
//! | `decode` | the chunks a request needs, each decoded once through the cache, checked, narrowed, kept compact |
//! | `cache` | the decoded-chunk cache ([`ChunkCache`]) |
//! | `chunk_memory` | memory for decoded chunks: recycled, huge-page-advised blocks |
//! | `compact` | compact forms of decoded chunks (dictionaries, sample-local int16 neighbors) |
//! | `state` | the `State` snapshot (pointer pages, mask, field arrays) and the open code that reads and checks it |
//! | `pointers` | the pointer pages: pages decoded as reads need them, checked, held compact |
//! | `active` | the samples a soft delete left: a bitmap with a select index (logical to physical) |
//! | `plan` | read planning: which rows and inner chunks a request touches |
//! | `rows` | the row copy: functions over decoded chunks into samples and collated batches |
//! | `neighbors` | neighbor-index checks per decoded chunk, refused samples |
//! | `strings` | string labels: opened with the state, rows copied into samples and batches |
//! | `reader_impl` | the [`Reader`] implementation |

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::data::{DType, Level};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::source::Reader;
use crate::store::bytes::{ByteSource, ByteStorage, IoStats, LocalBytes};
use crate::store::format;
use cache::{CacheStats, DEFAULT_CACHE_BYTES};
pub(crate) use chunks::{ChunkSource, FieldArray};
pub(crate) use state::State;

mod active;
pub(crate) mod cache;
mod chunk_memory;
mod chunks;
mod compact;
mod decode;
mod neighbors;
mod plan;
mod pointers;
mod reader_impl;
mod rows;
mod scan;
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
/// assert_eq!(r.sample_sizes(3)?, (4, 0));
/// # Ok(()) }
/// ```
pub struct AtomicDataZarrReader {
    /// The bytes, the cache and the decode.
    chunks: ChunkSource,
    /// The store as last opened or refreshed: pointer pages, mask, field arrays.
    state: RwLock<Arc<State>>,
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
        f.debug_struct("AtomicDataZarrReader")
            .field("location", &self.chunks.location)
            .field("len", &self.len())
            .finish()
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
        // The chunk memory may map the cache's budget and two read windows.
        let memory_limit = options.cache_bytes.saturating_add(options.window_decode_bytes.saturating_mul(2));
        let reader = AtomicDataZarrReader {
            chunks: ChunkSource::new(location, bytes, options.cache_bytes, memory_limit),
            state: RwLock::new(Arc::new(State::empty())),
            window_decode_bytes: options.window_decode_bytes,
            buffers: crate::data::BatchBuffers::new(usize::try_from(options.batch_buffer_bytes).unwrap_or(usize::MAX)),
        };
        reader.refresh()?;
        Ok(reader)
    }

    /// Requests made to the store and bytes received so far (opening
    /// included): for a remote store, the round trips an epoch costs.
    pub fn io_stats(&self) -> IoStats {
        self.chunks.bytes.stats()
    }

    /// The store's byte source (for tools that read more than samples:
    /// `inspect`).
    pub fn byte_source(&self) -> Arc<dyn ByteSource> {
        self.chunks.bytes.clone()
    }

    /// The store as zarrs storage (over [`Self::byte_source`]).
    pub(crate) fn storage(&self) -> Arc<ByteStorage> {
        self.chunks.store.clone()
    }

    /// Whether the store is remote (object storage or HTTP).
    pub fn is_remote(&self) -> bool {
        self.chunks.bytes.is_remote()
    }

    /// Where the store is: its path or URL.
    pub fn location(&self) -> &Location {
        &self.chunks.location
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
        self.chunks.cache.stats()
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
        self.chunks.cache.clear();
        self.chunks.cache.reset_counters();
    }

    /// Dtype and trailing shape of every field.
    pub fn field_schema(&self) -> BTreeMap<String, (Level, DType, Vec<usize>)> {
        self.snapshot().fields.iter().map(|f| (f.name.clone(), (f.level, f.dtype, f.trailing.clone()))).collect()
    }

    pub(crate) fn snapshot(&self) -> Arc<State> {
        // The lock only guards an Arc swap; a poisoned lock still holds a valid Arc.
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Decodes every inner chunk that holds rows of the store's samples,
    /// once each, in parallel over (array, chunk) on rayon's threads, through
    /// the same decode path as reads but without the cache, and drops the
    /// result. This is the decode floor: no epoch can decode less (with a
    /// cold cache) or decode it faster. Returns what it decoded.
    ///
    /// ```
    /// # fn main() -> atomzarr::Result<()> {
    /// use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, ZarrWriteConfig};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("f.zarr");
    /// let samples = atomzarr::data::synth::generate(20, 2, 5, 0)?;
    /// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
    /// let r = AtomicDataZarrReader::open(&path)?;
    /// let c = r.decode_every_chunk()?;
    /// assert!(c.chunks_decoded >= 8 && c.decoded_bytes > 0); // one chunk per field at least
    /// assert_eq!(r.cache_stats().entries, 0); // nothing cached
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Chunk`], [`Error::Checksum`] or [`Error::Zarr`] naming the array
    /// and chunk that fails to decode; [`Error::Io`] or [`Error::Remote`] when its
    /// bytes cannot be read.
    pub fn decode_every_chunk(&self) -> Result<crate::source::DecodeCounters> {
        decode::decode_all(&self.chunks, &self.snapshot())
    }

    /// Every entry of the `level` pointer array of `st` (for whole-store
    /// tools: repair), pages decoded in parallel and not kept.
    pub(crate) fn pointer_values(&self, st: &State, level: Level) -> Result<Vec<i64>> {
        st.pointers.values(&self.chunks, level)
    }
}

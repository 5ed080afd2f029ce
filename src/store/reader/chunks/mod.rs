//! The chunk source: a store's bytes, its field arrays (each with its
//! codec chain), the decoded-chunk cache, and one inner chunk decoded and
//! checked (its size, its checksum). Reading the bytes without zarrs' codec
//! pipeline is `direct`; a request's chunks over a network, `fetch`. What
//! a request decodes, and how it keeps the chunks, is the reader's
//! `decode`.

use std::sync::Arc;

use zarrs::array::{ArrayBytes, ArrayError, ArrayShardedReadableExt};

use super::cache::{ArrayKey, Chunk, ChunkBuf, ChunkBytes, ChunkCache, Width};
use crate::data::{CollateOptions, DType, Level};
use crate::error::{Error, Result};
use crate::location::Location;
use crate::store::bytes::{ByteSource, ByteStorage};
use zarrs::array::{Array, ArrayShardedReadableExtCache, CodecOptions};

mod direct;
mod fetch;

pub(crate) use direct::DirectDecode;
use direct::ShardIndex;
pub(super) use fetch::fetch_and_decode;

/// Where a reader's chunks come from and where they are kept decoded: the
/// store's bytes (local or remote), the zarrs storage over them, the codec
/// options, and the decoded-chunk cache. The field arrays of a snapshot
/// ([`FieldArray`]) are read through it.
pub(crate) struct ChunkSource {
    pub(super) location: Location,
    /// The location as text, what errors and [`Reader::name`](crate::Reader::name) give.
    pub(super) name: Arc<str>,
    /// Where the bytes come from (local files or a remote store).
    pub(super) bytes: Arc<dyn ByteSource>,
    /// The same, as zarrs storage.
    pub(super) store: Arc<ByteStorage>,
    pub(super) cache: ChunkCache,
    pub(super) codec_options: CodecOptions,
    /// The next array id (cache keys stay unique across refreshes).
    next_id: std::sync::atomic::AtomicU32,
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
    pub array: Array<ByteStorage>,
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
    /// `neighbors::verify_neighbors`), so batches
    /// copied from cached chunks pay nothing for the check; batch paths
    /// refuse these samples, `read` and `read_many` return them as stored.
    pub bad_samples: std::sync::RwLock<std::collections::BTreeSet<usize>>,
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

impl ChunkSource {
    /// The source of the store at `location` whose bytes are `bytes`, with
    /// a cache of `cache_bytes` whose chunk memory may map `memory_limit`.
    pub(super) fn new(location: Location, bytes: Arc<dyn ByteSource>, cache_bytes: u64, memory_limit: u64) -> Self {
        // Rayon already parallelises over chunks; codec-internal threads on
        // top would oversubscribe the cores.
        // Checksums are checked whatever zarrs' global config says.
        let codec_options = CodecOptions::default().with_concurrent_target(1).with_validate_checksums(true);
        ChunkSource {
            name: Arc::from(location.to_string()),
            location,
            store: Arc::new(ByteStorage(bytes.clone())),
            bytes,
            cache: ChunkCache::with_memory_limit(cache_bytes, memory_limit),
            codec_options,
            next_id: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// A cache key for a newly opened array.
    pub(super) fn next_array_id(&self) -> u32 {
        self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The error of chunk `chunk` of `f`.
    pub(super) fn chunk_error(&self, f: &FieldArray, chunk: u64, reason: impl Into<String>) -> Error {
        Error::Chunk { store: self.location.clone(), array: f.rel.clone(), chunk, reason: reason.into() }
    }

    /// One inner chunk of `f` from the cache, if held (a zero-width row
    /// needs no chunk at all).
    pub(super) fn cached(&self, f: &FieldArray, chunk: u64, width: Width) -> Option<ChunkBytes> {
        if f.row_bytes == 0 {
            // A zero-width trailing dimension ([n, 0]): rows hold no bytes,
            // though the stored chunk shape is at least 1 wide.
            return Some(Arc::new(Chunk::plain(ChunkBuf::from(Vec::new()))));
        }
        self.cache.get(ArrayKey { array: f.id, width }, chunk)
    }

    /// Decodes one inner chunk of `f`, checking its size.
    pub(super) fn decode_raw(&self, f: &FieldArray, chunk: u64) -> Result<ChunkBuf> {
        let mut idx = vec![0u64; f.array.dimensionality()];
        idx[0] = chunk;
        let expected = f.chunk_bytes();
        let raw = match self.decode_direct(f, chunk, expected as usize)? {
            Some(raw) => raw,
            None => {
                let bytes: ArrayBytes =
                    f.array.retrieve_subchunk_opt(&f.shard_cache, &idx, &self.codec_options).map_err(|e| match e {
                        ArrayError::CodecError(e) => self.codec_error(f, chunk, e),
                        e => self.chunk_error(f, chunk, e.to_string()),
                    })?;
                let raw = bytes.into_fixed().map_err(|e| self.chunk_error(f, chunk, e.to_string()))?;
                ChunkBuf::from(raw.into_owned())
            }
        };
        self.check_len(f, chunk, raw)
    }

    /// `raw`, once it holds exactly the chunk's rows.
    pub(super) fn check_len(&self, f: &FieldArray, chunk: u64, raw: ChunkBuf) -> Result<ChunkBuf> {
        let expected = f.chunk_bytes();
        if raw.len() as u64 != expected {
            return Err(self.chunk_error(f, chunk, format!("decoded {} bytes, expected {expected}", raw.len())));
        }
        Ok(raw)
    }
}

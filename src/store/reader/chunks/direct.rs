//! The direct decode path: an inner chunk's encoded bytes found through the
//! shard index this module reads and checks, its crc32c checked, then
//! decoded by hand (`bytes` + `zstd`) or by zarrs' codec chain (see
//! [`DirectDecode`] for why).

use std::sync::Arc;

use zarrs::array::{Array, ArrayToBytesCodecTraits, CodecChain, CodecError};

use super::{ChunkSource, FieldArray};
use crate::data::DType;
use crate::error::{Error, Result};
use crate::store::bytes::{ByteStorage as Store, Bytes};
use crate::store::chunk_bytes::{self, Fault};
use crate::store::codec::ChainSpec;
use crate::store::reader::cache::ChunkBuf;

/// How the reader decodes an array's (inner) chunks itself: it reads each
/// chunk's encoded bytes (for sharded arrays, through the shard index it
/// reads and checks below), then decodes them whole, by hand or with zarrs'
/// codec chain.
///
/// Why by hand for `bytes` (little endian, on a little-endian host), then
/// optionally `zstd`, then optionally `crc32c` (the chains this crate writes
/// by default): `retrieve_subchunk_opt` creates a zstd context per chunk and
/// copies the decoded bytes three times on the way out (partial-decoder
/// cache, concat, copy into the output view); bypassing that cut the
/// reader's CPU time by 7-17% on the reference configuration. Reading the
/// encoded sub-chunk, checking its crc32c and decompressing it into its final
/// buffer with a per-thread context does neither.
///
/// Why any other chain of a sharded array goes through [`CodecChain::decode`]
/// on the encoded inner chunk rather than `retrieve_subchunk_opt`: zarrs 0.23
/// decodes inner chunks with partial decoders, and its crc32c partial decoder
/// strips the checksum without checking it; a whole-chunk decode checks it.
///
/// Why the shard index is read here rather than through
/// `retrieve_encoded_subchunk`: zarrs 0.23 computes the byte range of a
/// missing inner chunk (offset and size both u64::MAX) with an overflowing
/// add and then panics allocating it. Sharded arrays split along more than
/// dimension 0 or with other index codecs, and missing chunks (fill values),
/// go through zarrs.
#[derive(Debug, Clone)]
pub(crate) struct DirectDecode {
    /// How one encoded (inner) chunk decodes.
    inner: InnerDecode,
    /// Set for sharded arrays.
    shard: Option<ShardLayout>,
}

/// The decoding of one encoded (inner) chunk.
#[derive(Debug, Clone)]
enum InnerDecode {
    /// `bytes` (little endian) [+ `zstd`] [+ `crc32c`], by hand.
    Hand {
        /// The chain has zstd (else the payload is the decoded bytes).
        zstd: bool,
        /// The chain ends in crc32c: the last 4 bytes are the checksum of
        /// the rest, checked before decoding.
        crc32c: bool,
    },
    /// Any other chain: zarrs' whole-chunk decode (which checks checksums).
    Chain {
        /// The (inner) codec chain.
        codecs: Arc<CodecChain>,
        /// The (inner) chunk shape.
        shape: Vec<std::num::NonZeroU64>,
    },
}

/// Where a sharded array keeps its inner chunks' byte ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardLayout {
    /// Inner chunks per shard (all along dimension 0).
    inner_per_shard: u64,
    /// Index at the end of the shard file (else at the start).
    index_at_end: bool,
    /// The index ends in a crc32c checksum.
    crc32c: bool,
}

impl ShardLayout {
    /// Whether the index is at the end of the shard (one suffix request
    /// reads it with the file's length).
    pub(super) fn index_at_end(&self) -> bool {
        self.index_at_end
    }

    /// Inner chunks per shard.
    pub(super) fn inner_per_shard(&self) -> u64 {
        self.inner_per_shard
    }

    pub(super) fn index_len(&self) -> u64 {
        chunk_bytes::shard_index_len(self.inner_per_shard, self.crc32c)
    }
}

/// A shard's index: `(offset, size)` per inner chunk; `None` when the shard
/// file does not exist.
pub(super) type ShardIndex = Option<Arc<Vec<(u64, u64)>>>;

impl DirectDecode {
    /// The plan for `array` (its codec chain `chain`), if the reader can
    /// find its chunks' bytes.
    pub(crate) fn of(array: &Array<Store>, dtype: DType, chain: &ChainSpec) -> Option<DirectDecode> {
        let (shard, shape) = match chain.sharding() {
            Some(s) => {
                let r = chain.row_shards()?;
                let layout = ShardLayout {
                    inner_per_shard: r.inner_per_shard,
                    index_at_end: r.index_at_end,
                    crc32c: r.index_crc32c,
                };
                (Some(layout), s.chunk_shape.clone()?)
            }
            None => (None, chain.chunk_shape.clone()?),
        };
        let inner = match chain.by_hand(dtype.size()) {
            Some(h) => InnerDecode::Hand { zstd: h.zstd.is_some(), crc32c: h.crc32c },
            None => {
                let codecs = match chain.sharding() {
                    None => array.codecs(),
                    Some(s) => {
                        let metas: Vec<zarrs::metadata::v3::MetadataV3> =
                            serde_json::from_value(serde_json::Value::Array(s.codecs_json.clone())).ok()?;
                        Arc::new(CodecChain::from_metadata(&metas).ok()?)
                    }
                };
                let shape = shape.iter().map(|&d| std::num::NonZeroU64::new(d)).collect::<Option<Vec<_>>>()?;
                InnerDecode::Chain { codecs, shape }
            }
        };
        Some(DirectDecode { inner, shard })
    }
}

impl DirectDecode {
    /// The shard that holds inner chunk `chunk` and the shard layout, for
    /// sharded arrays.
    pub(super) fn shard_of(&self, chunk: u64) -> Option<(u64, ShardLayout)> {
        self.shard.map(|l| (chunk / l.inner_per_shard, l))
    }
}

thread_local! {
    /// One buffer per thread for the encoded bytes of the chunk being decoded.
    static ENCODED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Where the encoded bytes of one (inner) chunk are, for the direct path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Located {
    /// Not stored (zarrs supplies the fill value), or not a direct-path array.
    Elsewhere,
    /// `range` of object `key`; `None`: the whole object (unsharded arrays).
    At { key: String, range: Option<std::ops::Range<u64>> },
}

impl ChunkSource {
    /// Where chunk `chunk` of `f` is stored, for the direct path (reading
    /// the shard index first if it is not cached).
    pub(super) fn locate(&self, f: &FieldArray, chunk: u64) -> Result<Located> {
        let Some(plan) = &f.direct else { return Ok(Located::Elsewhere) };
        let mut idx = vec![0u64; f.array.dimensionality()];
        match plan.shard {
            None => {
                idx[0] = chunk;
                Ok(Located::At { key: f.array.chunk_key(&idx).as_str().to_owned(), range: None })
            }
            Some(layout) => {
                let shard = chunk / layout.inner_per_shard;
                let Some(index) = self.shard_index(f, shard, layout)? else { return Ok(Located::Elsewhere) };
                let (offset, size) =
                    index.get((chunk % layout.inner_per_shard) as usize).copied().unwrap_or((u64::MAX, u64::MAX));
                if offset == u64::MAX && size == u64::MAX {
                    return Ok(Located::Elsewhere);
                }
                idx[0] = shard;
                // In the shard's data: `shard_index` checked every entry.
                let range = Some(offset..offset + size);
                Ok(Located::At { key: f.array.chunk_key(&idx).as_str().to_owned(), range })
            }
        }
    }

    /// A read error of chunk `chunk`: remote errors as they are (they name
    /// the object's URL and say what failed), others as a chunk error.
    pub(super) fn read_error(&self, f: &FieldArray, chunk: u64, e: Error) -> Error {
        match e {
            e @ (Error::Remote { .. } | Error::Checksum { .. } | Error::Chunk { .. }) => e,
            e => self.chunk_error(f, chunk, e.to_string()),
        }
    }

    /// The [`DirectDecode`] path: `None` when `f` does not qualify or the
    /// chunk is not stored (zarrs then supplies the fill value).
    pub(super) fn decode_direct(&self, f: &FieldArray, chunk: u64, expected: usize) -> Result<Option<ChunkBuf>> {
        let Located::At { key, range } = self.locate(f, chunk)? else { return Ok(None) };
        let Some(r) = range else {
            let encoded = self.bytes.get(&key).map_err(|e| self.read_error(f, chunk, e))?;
            return encoded.map(|e| self.decode_encoded(f, chunk, &e, expected)).transpose();
        };
        // An inner chunk of a shard: read into this thread's buffer, which
        // the next chunk reuses (no allocation, no zero-fill per chunk).
        ENCODED.with(|cell| {
            let mut buf = cell.borrow_mut();
            let n = self.bytes.read_range_into(&key, r, &mut buf).map_err(|e| self.read_error(f, chunk, e))?;
            n.map(|n| self.decode_encoded(f, chunk, &buf[..n], expected)).transpose()
        })
    }

    /// Decodes the encoded bytes of chunk `chunk` of a direct-path array.
    pub(super) fn decode_encoded(
        &self,
        f: &FieldArray,
        chunk: u64,
        encoded: &[u8],
        expected: usize,
    ) -> Result<ChunkBuf> {
        let Some(plan) = &f.direct else {
            return Err(self.chunk_error(f, chunk, "decode_encoded on an array off the direct path"));
        };
        match &plan.inner {
            &InnerDecode::Hand { zstd, crc32c } => {
                let payload = if crc32c { self.check_crc32c(f, chunk, encoded)? } else { encoded };
                if !zstd {
                    let mut out = self.cache.alloc(payload.len());
                    out.copy_from_slice(payload);
                    return Ok(out);
                }
                // Straight into the chunk's final buffer; a frame of another
                // size is caught here (larger) or by `check_len` (smaller).
                let mut out = self.cache.alloc(expected);
                let n = chunk_bytes::zstd_decode_into(payload, &mut out).map_err(|e| {
                    let reason = format!("zstd: {e}");
                    // A frame written with zstd's own checksum (`checksum:
                    // true`) that does not match: libzstd's error says so.
                    if reason.contains("doesn't match checksum") {
                        self.checksum_error(f, chunk, reason)
                    } else {
                        self.chunk_error(f, chunk, reason)
                    }
                })?;
                out.truncate(n);
                Ok(out)
            }
            InnerDecode::Chain { codecs, shape } => {
                let decoded = codecs
                    .decode(
                        std::borrow::Cow::Borrowed(encoded),
                        shape,
                        f.array.data_type(),
                        f.array.fill_value(),
                        &self.codec_options,
                    )
                    .map_err(|e| self.codec_error(f, chunk, e))?;
                let raw = decoded.into_fixed().map_err(|e| self.chunk_error(f, chunk, e.to_string()))?;
                Ok(ChunkBuf::from(raw.into_owned()))
            }
        }
    }

    /// The payload of an encoded chunk that ends in a crc32c checksum, once
    /// the checksum matches it.
    fn check_crc32c<'a>(&self, f: &FieldArray, chunk: u64, encoded: &'a [u8]) -> Result<&'a [u8]> {
        chunk_bytes::strip_crc32c(encoded).map_err(|fault| match fault {
            Fault::Checksum(reason) => self.checksum_error(f, chunk, reason),
            Fault::Malformed(reason) => self.chunk_error(f, chunk, reason),
        })
    }

    fn checksum_error(&self, f: &FieldArray, chunk: u64, reason: impl Into<String>) -> Error {
        Error::Checksum { store: self.location.clone(), array: f.rel.clone(), chunk, reason: reason.into() }
    }

    /// A zarrs codec error of chunk `chunk`: a typed checksum error when a
    /// checksum codec of the chain (crc32c) failed.
    pub(super) fn codec_error(&self, f: &FieldArray, chunk: u64, e: CodecError) -> Error {
        match e {
            CodecError::InvalidChecksum => {
                self.checksum_error(f, chunk, "the chain's checksum codec (crc32c) does not match the encoded bytes")
            }
            e => self.chunk_error(f, chunk, e.to_string()),
        }
    }

    /// The index of `shard` of `f` (read once, then cached), each entry checked
    /// to lie inside the shard file.
    pub(super) fn shard_index(&self, f: &FieldArray, shard: u64, layout: ShardLayout) -> Result<ShardIndex> {
        let chunk = shard * layout.inner_per_shard;
        if let Some(found) = f.shard_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&shard) {
            return Ok(found.clone());
        }
        let mut shard_idx = vec![0u64; f.array.dimensionality()];
        shard_idx[0] = shard;
        let key = f.array.chunk_key(&shard_idx);
        let key = key.as_str();
        let index_len = layout.index_len();
        // One request for an index at the end (the suffix brings the length).
        let found = if layout.index_at_end {
            self.bytes.get_suffix(key, index_len).map_err(|e| self.read_error(f, chunk, e))?
        } else {
            match self.bytes.size(key).map_err(|e| self.read_error(f, chunk, e))? {
                None => None,
                Some(file_len) if file_len < index_len => Some((Bytes::new(), file_len)),
                Some(file_len) => self
                    .bytes
                    .get_range(key, 0..index_len)
                    .map_err(|e| self.read_error(f, chunk, e))?
                    .map(|raw| (raw, file_len)),
            }
        };
        self.parse_shard_index(f, shard, layout, found)
    }

    /// The key of shard `shard` of `f` (sharded arrays).
    pub(super) fn shard_key(&self, f: &FieldArray, shard: u64) -> String {
        let mut shard_idx = vec![0u64; f.array.dimensionality()];
        shard_idx[0] = shard;
        f.array.chunk_key(&shard_idx).as_str().to_owned()
    }

    /// Checks and caches the index of `shard` from `found`, the shard's
    /// index bytes and file length (`None`: no shard file).
    pub(super) fn parse_shard_index(
        &self,
        f: &FieldArray,
        shard: u64,
        layout: ShardLayout,
        found: Option<(Bytes, u64)>,
    ) -> Result<ShardIndex> {
        let chunk = shard * layout.inner_per_shard;
        let bad = |reason: String| self.chunk_error(f, chunk, format!("shard {shard} index: {reason}"));
        let index_len = layout.index_len();
        let index = match found {
            None => None,
            Some((raw, file_len)) => {
                if file_len < index_len {
                    return Err(bad(format!(
                        "shard file of {file_len} bytes is shorter than its {index_len}-byte index"
                    )));
                }
                let (data_start, data_end) =
                    if layout.index_at_end { (0, file_len - index_len) } else { (index_len, file_len) };
                let pairs =
                    chunk_bytes::parse_shard_index(&raw, layout.inner_per_shard, layout.crc32c, data_start..data_end)
                        .map_err(|fault| match fault {
                        Fault::Checksum(reason) => {
                            let last = chunk + layout.inner_per_shard - 1;
                            let what = format!("index of shard {shard} (inner chunks {chunk}..={last})");
                            self.checksum_error(f, chunk, format!("{what}: {reason}"))
                        }
                        Fault::Malformed(reason) => bad(reason),
                    })?;
                Some(Arc::new(pairs))
            }
        };
        f.shard_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(shard, index.clone());
        Ok(index)
    }
}

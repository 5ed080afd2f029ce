//! [`AtomicDataZarrReader`]: the Zarr v3 backend and its batched read path.
//!
//! Opening reads only the root attributes, the pointer arrays and the sample
//! mask, and checks that every array is long enough for them. A batched read
//! then (1) maps logical to physical indices, (2) plans the inner chunks each
//! array needs (`plan`), (3) decodes each needed chunk once, in
//! parallel over (array, chunk) with rayon, through the shared
//! [`ChunkCache`], and (4) copies rows straight into the output buffers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

pub(crate) mod cache;
mod plan;

use rayon::prelude::*;
use zarrs::array::{Array, ArrayBytes, ArrayShardedReadableExt, ArrayShardedReadableExtCache};
use zarrs::array::{ArrayError, ArrayToBytesCodecTraits, CodecChain, CodecError, CodecOptions};

use cache::{CacheStats, ChunkBytes, ChunkCache, DEFAULT_CACHE_BYTES};
use crate::data::{CollateOptions, CollatedBatch, bad_indices};
use crate::data::{AtomicData, DType, Field, HostData, IndexReport, Level};
use crate::error::{Error, Result};
use crate::store::arrays;
use crate::store::durable::Store;
use crate::store::format;
use crate::store::limits;
use plan::{Pointers, chunks_of, needed_chunks};
use crate::source::{Reader, SampleMetadata};

/// Options of [`AtomicDataZarrReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Byte budget of the decoded-chunk cache; 0 disables it.
    pub cache_bytes: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions { cache_bytes: DEFAULT_CACHE_BYTES }
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

/// Cache keys of an array's chunks narrowed to int32 (the array's own id
/// with this bit set; ids count arrays opened by one reader, far below it).
const NARROWED: u32 = 1 << 31;

impl FieldArray {
    /// Whether this request reads the array's chunks narrowed to int32.
    fn narrowed(&self, opts: CollateOptions) -> bool {
        opts.narrows_int64() && self.dtype == DType::Int64 && !self.wide_only.load(std::sync::atomic::Ordering::Relaxed)
    }
}

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
    fn index_len(&self) -> u64 {
        self.inner_per_shard * 16 + if self.crc32c { 4 } else { 0 }
    }
}

/// A shard's index: `(offset, size)` per inner chunk; `None` when the shard
/// file does not exist.
type ShardIndex = Option<Arc<Vec<(u64, u64)>>>;

impl DirectDecode {
    /// The plan for `array`, if the reader can find its chunks' bytes.
    fn plan(array: &Array<Store>, dtype: DType) -> Option<DirectDecode> {
        use serde_json::Value;
        let meta = serde_json::to_value(array.metadata()).ok()?;
        let codecs = meta.get("codecs")?.as_array()?;
        // A codec without configuration may be the bare string of its name.
        let name = |c: &Value| c.as_str().or_else(|| c.get("name").and_then(|n| n.as_str())).map(str::to_owned);
        let little = |c: &Value, size: usize| {
            name(c).as_deref() == Some("bytes")
                && match c.pointer("/configuration/endian").and_then(|e| e.as_str()) {
                    Some(e) => e == "little",
                    None => size == 1,
                }
        };
        let dims = |v: Option<&Value>| -> Option<Vec<u64>> { v?.as_array()?.iter().map(Value::as_u64).collect() };
        let outer = dims(meta.pointer("/chunk_grid/configuration/chunk_shape"))?;
        let (inner, shard, shape) = match codecs.as_slice() {
            [c] if name(c).as_deref() == Some("sharding_indexed") => {
                let sub = dims(c.pointer("/configuration/chunk_shape"))?;
                // Only dimension 0 may be split into inner chunks.
                if outer.len() != sub.len() || outer.get(1..) != sub.get(1..) || sub.first() == Some(&0) {
                    return None;
                }
                let (o, i) = (*outer.first()?, *sub.first()?);
                if o % i != 0 {
                    return None;
                }
                let index_codecs = c.pointer("/configuration/index_codecs")?.as_array()?;
                let crc32c = match index_codecs.as_slice() {
                    [b] if little(b, 8) => false,
                    [b, k] if little(b, 8) && is_crc32c(k) => true,
                    _ => return None,
                };
                let index_at_end = match c.pointer("/configuration/index_location").and_then(|l| l.as_str()) {
                    None | Some("end") => true,
                    Some("start") => false,
                    Some(_) => return None,
                };
                let layout = ShardLayout { inner_per_shard: o / i, index_at_end, crc32c };
                (c.pointer("/configuration/codecs")?.as_array()?, Some(layout), sub)
            }
            _ => (codecs, None, outer),
        };
        let by_hand = cfg!(target_endian = "little").then(|| match inner.as_slice() {
            [b] if little(b, dtype.size()) => Some((false, false)),
            [b, z] if little(b, dtype.size()) && name(z).as_deref() == Some("zstd") => Some((true, false)),
            [b, k] if little(b, dtype.size()) && is_crc32c(k) => Some((false, true)),
            [b, z, k] if little(b, dtype.size()) && name(z).as_deref() == Some("zstd") && is_crc32c(k) => {
                Some((true, true))
            }
            _ => None,
        });
        let inner = match by_hand.flatten() {
            Some((zstd, crc32c)) => InnerDecode::Hand { zstd, crc32c },
            None => {
                let codecs = match shard {
                    None => array.codecs(),
                    Some(_) => {
                        let metas: Vec<zarrs::metadata::v3::MetadataV3> =
                            serde_json::from_value(Value::Array(inner.clone())).ok()?;
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

/// Whether codec metadata `c` is the Zarr v3 `crc32c` codec (checksum last,
/// the only form it has; `numcodecs.crc32c` with a `location` is not it).
fn is_crc32c(c: &serde_json::Value) -> bool {
    c == "crc32c"
        || (c.get("name").and_then(|n| n.as_str()) == Some("crc32c")
            && c.get("configuration").is_none_or(|conf| conf.as_object().is_some_and(|m| m.is_empty())))
}

thread_local! {
    /// One zstd decompression context per thread, reused across chunks.
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses one zstd frame of `expected` bytes into a new buffer, without
/// zero-filling it first.
fn zstd_decode(encoded: &[u8], expected: usize) -> std::io::Result<Vec<u8>> {
    ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        let mut out = Vec::with_capacity(expected);
        dctx.decompress_to_buffer(encoded, &mut out)?;
        Ok(out)
    })
}

/// A consistent snapshot of the store (swapped whole by `refresh`).
pub(crate) struct State {
    pub num_samples: usize,
    pub atoms_ptr: Vec<i64>,
    pub edges_ptr: Vec<i64>,
    /// Physical index of each logical index; `None` when nothing is deleted.
    pub active: Option<Vec<usize>>,
    pub fields: Vec<FieldArray>,
}

impl State {
    fn len(&self) -> usize {
        self.active.as_ref().map_or(self.num_samples, Vec::len)
    }

    fn physical(&self, logical: usize) -> usize {
        self.active.as_ref().map_or(logical, |a| a[logical])
    }

    fn ptrs(&self) -> Pointers<'_> {
        Pointers { atoms: &self.atoms_ptr, edges: &self.edges_ptr }
    }
}

/// Reads an atomic-structure Zarr store (ours or the Python toolkit's).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Reader, ZarrWriteConfig};
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
    path: PathBuf,
    source: Arc<str>,
    store: Arc<Store>,
    state: RwLock<Arc<State>>,
    cache: ChunkCache,
    codec_options: CodecOptions,
    next_id: std::sync::atomic::AtomicU32,
}

impl std::fmt::Debug for AtomicDataZarrReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicDataZarrReader").field("path", &self.path).field("len", &self.len()).finish()
    }
}

impl AtomicDataZarrReader {
    /// Opens a store with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, ReaderOptions::default())
    }

    /// Opens a store.
    pub fn open_with(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(kept) = format::interrupted_defragment(&path) {
            return Err(Error::Interrupted { store: path, operation: "defragment".into(), kept });
        }
        if !path.exists() {
            return Err(Error::NotFound { store: path });
        }
        let store = arrays::open_store(&path)?;
        // Rayon already parallelises over chunks; codec-internal threads on
        // top would oversubscribe the cores.
        // Checksums are checked whatever zarrs' global config says.
        let codec_options = CodecOptions::default().with_concurrent_target(1).with_validate_checksums(true);
        let reader = AtomicDataZarrReader {
            source: Arc::from(path.display().to_string()),
            path,
            store,
            state: RwLock::new(Arc::new(State {
                num_samples: 0,
                atoms_ptr: vec![0],
                edges_ptr: vec![0],
                active: None,
                fields: vec![],
            })),
            cache: ChunkCache::new(options.cache_bytes),
            codec_options,
            next_id: std::sync::atomic::AtomicU32::new(0),
        };
        reader.refresh()?;
        Ok(reader)
    }

    /// The store path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Physical sample count (deleted ones included).
    pub fn num_physical(&self) -> usize {
        self.snapshot().num_samples
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Empties the decoded-chunk cache and zeroes its counters.
    pub fn clear_cache(&self) {
        self.cache.clear();
        self.cache.reset_counters();
    }

    /// Dtype and trailing shape of every field.
    pub fn field_schema(&self) -> BTreeMap<String, (Level, DType, Vec<usize>)> {
        self.snapshot()
            .fields
            .iter()
            .map(|f| (f.name.clone(), (f.level, f.dtype, f.trailing.clone())))
            .collect()
    }

    pub(crate) fn snapshot(&self) -> Arc<State> {
        // The lock only guards an Arc swap; a poisoned lock still holds a valid Arc.
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Reads the root, the pointers and the mask, and opens every field
    /// array; every size the metadata claims is checked against the files
    /// before anything of that size is allocated (see [`crate::store::limits`]).
    fn load_state(&self) -> Result<State> {
        let p = &self.path;
        let root = format::read_root(p)?;
        // An add_custom that listed its field (its commit point) but had not
        // yet moved the finished array into `custom/`: the field is
        // committed, so read it where it is (the next writer moves it).
        let pending = format::interrupted_add_custom(p, &root).map(|(name, _)| name);
        let n = root.num_samples;
        let n1 = n as u64 + 1; // read_root keeps num_samples below i64::MAX
        let open = |rel: &str| -> Result<(Array<Store>, DType, limits::Geometry)> {
            let a = arrays::open_array(p, &self.store, rel)?;
            let dt = arrays::array_dtype(p, rel, &a)?;
            let g = limits::geometry(p, rel, &a, dt)?;
            Ok((a, dt, g))
        };
        let (atoms_arr, atoms_dt, atoms_g) = open(format::ATOMS_PTR)?;
        let (edges_arr, edges_dt, edges_g) = open(format::EDGES_PTR)?;
        let (mask_arr, mask_dt, mask_g) = open(format::SAMPLES_MASK)?;
        for (rel, a, dt) in [(format::ATOMS_PTR, &atoms_arr, atoms_dt), (format::EDGES_PTR, &edges_arr, edges_dt)] {
            if !matches!(dt, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
                return Err(Error::inconsistent(p, rel, format!("dtype {dt}, expected int64")));
            }
            let len = a.shape().first().copied().unwrap_or(0);
            if a.dimensionality() != 1 || len < n1 {
                return Err(Error::inconsistent(
                    p,
                    rel,
                    format!("shape {:?} too short for num_samples {n} (needs {n1} entries)", a.shape()),
                ));
            }
        }
        // One bool per sample, or the flags below would index past the pointers.
        if mask_dt != DType::Bool || mask_arr.dimensionality() != 1 {
            return Err(Error::inconsistent(
                p,
                format::SAMPLES_MASK,
                format!("{mask_dt} array of shape {:?}, expected a 1-d bool array", mask_arr.shape()),
            ));
        }
        let mask_len = mask_arr.shape().first().copied().unwrap_or(0);
        if mask_len < n as u64 {
            return Err(Error::inconsistent(p, format::SAMPLES_MASK, format!("{mask_len} entries for {n} samples")));
        }
        // num_samples (and the pointer shapes) are numbers anyone can write:
        // the pointer and mask files must be able to hold that many entries.
        limits::check_rows(
            p,
            format::ATOMS_PTR,
            &format!("num_samples {n}"),
            n1,
            &[(format::ATOMS_PTR, atoms_g), (format::EDGES_PTR, edges_g), (format::SAMPLES_MASK, mask_g)],
        )?;
        let read_i64 = |rel: &str, a: Array<Store>, dt: DType| -> Result<Vec<i64>> {
            // Through the checksummed decode path (see `read_rows`).
            let raw = self.read_rows(a, rel, dt, 0..n1)?;
            let data = HostData::from_bytes(dt, &raw).map_err(|e| Error::inconsistent(p, rel, e.to_string()))?;
            let v = data.to_i64_vec().unwrap_or_default();
            if v.len() as u64 != n1 {
                return Err(Error::inconsistent(p, rel, format!("{} pointers decoded, expected {n1}", v.len())));
            }
            if v.first() != Some(&0) {
                return Err(Error::inconsistent(p, rel, format!("first pointer is {:?}, expected 0", v.first())));
            }
            if let Some(i) = v.windows(2).position(|w| w[1] < w[0]) {
                return Err(Error::inconsistent(
                    p,
                    rel,
                    format!("pointers decrease at sample {i}: {} then {}", v[i], v[i + 1]),
                ));
            }
            Ok(v)
        };
        let atoms_ptr = read_i64(format::ATOMS_PTR, atoms_arr, atoms_dt)?;
        let edges_ptr = read_i64(format::EDGES_PTR, edges_arr, edges_dt)?;
        // Non-decreasing from 0, so the last pointer is the (non-negative) total.
        let total_atoms = atoms_ptr[n] as u64;
        let total_edges = edges_ptr[n] as u64;

        let mask = self.read_rows(mask_arr, format::SAMPLES_MASK, mask_dt, 0..n as u64)?;
        if mask.len() != n {
            return Err(Error::inconsistent(p, format::SAMPLES_MASK, format!("{} flags decoded for {n} samples", mask.len())));
        }
        let active = if mask.iter().all(|&b| b != 0) {
            None
        } else {
            Some(mask.iter().enumerate().filter(|(_, b)| **b != 0).map(|(i, _)| i).collect())
        };
        // Every array on the atom (edge) axis can back the pointers' totals.
        let mut atom_axis: Vec<(String, limits::Geometry)> = Vec::new();
        let mut edge_axis: Vec<(String, limits::Geometry)> = Vec::new();
        for (rel, need, axis) in [(format::ATOMS_MASK, total_atoms, &mut atom_axis), (format::EDGES_MASK, total_edges, &mut edge_axis)] {
            if p.join(rel).join("zarr.json").exists() {
                let (a, _, g) = open(rel)?;
                let len = a.shape().first().copied().unwrap_or(0);
                if len < need {
                    return Err(Error::inconsistent(p, rel, format!("{len} entries, pointers need {need}")));
                }
                axis.push((rel.to_string(), g));
            }
        }

        let mut opened = Vec::with_capacity(root.fields.len());
        for (name, info) in &root.fields {
            let rel = if pending.as_deref() == Some(name.as_str()) {
                format::pending_path(name)
            } else {
                format::field_path(info.group, name)
            };
            let (array, dtype, g) = open(&rel)?;
            // Its values are shifted by atom offsets on every read, and
            // checked per sample against the edge pointers.
            if name == "neighbor_list" && !matches!(dtype, DType::Int64 | DType::Int32 | DType::UInt64 | DType::UInt32) {
                return Err(Error::inconsistent(p, &rel, format!("dtype {dtype} is not an index type (int32/int64/uint32/uint64)")));
            }
            if name == "neighbor_list" && info.level != Level::Edge {
                return Err(Error::inconsistent(p, &rel, format!("listed at {} level; neighbor lists are edge-level", info.level)));
            }
            let need = match info.level {
                Level::Atom => total_atoms,
                Level::Edge => total_edges,
                Level::System => n as u64,
            };
            let len = array.shape().first().copied().unwrap_or(0);
            if len < need {
                return Err(Error::inconsistent(
                    p,
                    &rel,
                    format!("{len} rows, but the pointers need {need} ({} level)", info.level),
                ));
            }
            match info.level {
                Level::Atom => atom_axis.push((rel.clone(), g)),
                Level::Edge => edge_axis.push((rel.clone(), g)),
                Level::System => {}
            }
            opened.push((name, info, rel, array, dtype, g, need));
        }
        // The pointer values are claims too: some array on each axis must
        // hold that many rows.
        for (what, rows, axis) in [("atoms_ptr", total_atoms, &atom_axis), ("edges_ptr", total_edges, &edge_axis)] {
            let arrays: Vec<(&str, limits::Geometry)> = axis.iter().map(|(r, g)| (r.as_str(), *g)).collect();
            let rel = if what == "atoms_ptr" { format::ATOMS_PTR } else { format::EDGES_PTR };
            limits::check_rows(p, rel, &format!("the last pointer ({rows})"), rows, &arrays)?;
        }

        let mut fields = Vec::with_capacity(opened.len());
        for (name, info, rel, array, dtype, g, need) in opened {
            limits::check_field_bytes(p, &rel, need, &g)?;
            let trailing: Vec<usize> = array.shape().iter().skip(1).map(|&d| d as usize).collect();
            let shard_cache = ArrayShardedReadableExtCache::new(&array);
            let direct = DirectDecode::plan(&array, dtype);
            fields.push(FieldArray {
                name: name.clone(),
                rel,
                level: info.level,
                dtype,
                trailing,
                row_elems: g.row_elems,
                row_bytes: g.row_bytes,
                chunk_rows: g.chunk_rows,
                array,
                shard_cache,
                id: self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                direct,
                shard_indexes: Default::default(),
                wide_only: Default::default(),
                bad_samples: Default::default(),
                any_bad: Default::default(),
            });
        }
        Ok(State { num_samples: n, atoms_ptr, edges_ptr, active, fields })
    }

    /// Opens field `name` (array `rel`) for reading.
    fn field_array(&self, name: &str, rel: &str, level: Level, dtype: DType, array: Array<Store>) -> Result<FieldArray> {
        let trailing: Vec<usize> = array.shape().iter().skip(1).map(|&d| d as usize).collect();
        let row_elems: usize = trailing.iter().product();
        let chunk_rows = arrays::chunk_rows(&self.path, rel, &array)?;
        let shard_cache = ArrayShardedReadableExtCache::new(&array);
        let direct = DirectDecode::plan(&array, dtype);
        Ok(FieldArray {
            name: name.to_string(),
            rel: rel.to_string(),
            level,
            dtype,
            trailing,
            row_elems,
            row_bytes: row_elems * dtype.size(),
            chunk_rows,
            array,
            shard_cache,
            id: self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            direct,
            shard_indexes: Default::default(),
            wide_only: Default::default(),
            bad_samples: Default::default(),
            any_bad: Default::default(),
        })
    }

    /// Rows `rows` of a 1-d array (pointers, mask), chunk by chunk through
    /// the decode that field data takes, so their checksums are checked:
    /// zarrs' `retrieve_array_subset` decodes a partly read chunk with
    /// partial decoders, and its crc32c partial decoder skips the check.
    fn read_rows(&self, array: Array<Store>, rel: &str, dtype: DType, rows: std::ops::Range<u64>) -> Result<Vec<u8>> {
        let f = self.field_array(rel, rel, Level::System, dtype, array)?;
        let mut out = Vec::new();
        for c in chunks_of(&rows, f.chunk_rows) {
            let raw = self.decode_raw(&f, c)?;
            let lo = rows.start.max(c * f.chunk_rows) - c * f.chunk_rows;
            let hi = rows.end.min((c + 1) * f.chunk_rows) - c * f.chunk_rows;
            let part = raw
                .get(lo as usize * f.row_bytes..hi as usize * f.row_bytes)
                .ok_or_else(|| self.chunk_error(&f, c, "decoded chunk shorter than its rows"))?;
            out.extend_from_slice(part);
        }
        Ok(out)
    }

    fn chunk_error(&self, f: &FieldArray, chunk: u64, reason: impl Into<String>) -> Error {
        Error::Chunk { store: self.path.clone(), array: f.rel.clone(), chunk, reason: reason.into() }
    }

    /// One inner chunk of `f` from the cache, if held (a zero-width row
    /// needs no chunk at all).
    fn cached(&self, f: &FieldArray, chunk: u64, narrowed: bool) -> Option<ChunkBytes> {
        if f.row_bytes == 0 {
            // A zero-width trailing dimension ([n, 0]): rows hold no bytes,
            // though the stored chunk shape is at least 1 wide.
            return Some(Arc::new(Vec::new()));
        }
        self.cache.get(if narrowed { f.id | NARROWED } else { f.id }, chunk)
    }

    /// Decodes one inner chunk of `f`, narrowed to int32 when `narrowed`,
    /// and offers it to the cache. `Ok(None)`: a value did not fit int32 (the
    /// array is then marked wide-only; the caller plans again).
    ///
    /// Why narrow the cached chunk rather than each batch: narrowing costs
    /// several instructions per value at the baseline x86-64 target, and done
    /// per batch it slowed a warm epoch by ~15%; done here it runs once per
    /// chunk, and the cached chunk is half the size.
    fn decode_chunk_as(&self, st: &State, f: &FieldArray, chunk: u64, narrowed: bool) -> Result<Option<ChunkBytes>> {
        if !narrowed {
            return self.decode_chunk(st, f, chunk).map(Some);
        }
        let wide = self.decode_raw(f, chunk)?;
        self.verify_neighbors(st, f, chunk, &wide);
        match HostData::narrow_i64_bytes(&wide) {
            Some(narrow) => {
                let narrow = Arc::new(narrow);
                self.cache.insert(f.id | NARROWED, chunk, narrow.clone());
                Ok(Some(narrow))
            }
            None => {
                f.wide_only.store(true, std::sync::atomic::Ordering::Relaxed);
                self.cache.insert(f.id, chunk, Arc::new(wide));
                Ok(None)
            }
        }
    }

    /// Decodes one inner chunk of `f` and offers it to the cache.
    fn decode_chunk(&self, st: &State, f: &FieldArray, chunk: u64) -> Result<ChunkBytes> {
        let raw = Arc::new(self.decode_raw(f, chunk)?);
        self.verify_neighbors(st, f, chunk, &raw);
        self.cache.insert(f.id, chunk, raw.clone());
        Ok(raw)
    }

    /// For `neighbor_list`: checks every row of decoded (wide) `chunk`
    /// against the atoms of the active sample it belongs to, and records the
    /// samples with an index outside in `f.bad_samples`. Runs once per
    /// decode, so a warm epoch checks nothing again: a check fused into each
    /// batch's row copy measured ~10% of a warm shuffled epoch on the
    /// reference layout (the neighbor list is a third of its bytes), this
    /// one well under 1% (a pass over a freshly decoded chunk, beside zstd).
    fn verify_neighbors(&self, st: &State, f: &FieldArray, chunk: u64, wide: &[u8]) {
        if f.name != "neighbor_list" || f.row_elems == 0 {
            return;
        }
        let n = st.num_samples;
        let (atoms, edges) = (&st.atoms_ptr, &st.edges_ptr);
        let c0 = chunk * f.chunk_rows;
        let c1 = (c0 + f.chunk_rows).min(edges[n] as u64);
        if c0 >= c1 {
            return;
        }
        let owned;
        let vals: &[i64] = match (f.dtype, bytemuck::try_cast_slice::<u8, i64>(wide)) {
            (DType::Int64, Ok(v)) => v,
            _ => {
                owned = HostData::from_bytes(f.dtype, wide).ok().and_then(|d| d.to_i64_vec()).unwrap_or_default();
                &owned
            }
        };
        let row = |r: u64| (r - c0) as usize * f.row_elems;
        let active = |p: usize| st.active.as_ref().is_none_or(|a| a.binary_search(&p).is_ok());
        let mut bad = Vec::new();
        // The first sample whose edges end past the chunk's first row.
        let mut p = edges[1..=n].partition_point(|&e| e as u64 <= c0);
        while p < n && (edges[p] as u64) < c1 {
            let (r0, r1) = ((edges[p] as u64).max(c0), (edges[p + 1] as u64).min(c1));
            if r0 < r1 && active(p) {
                let (lo, last) = (atoms[p], atoms[p + 1] - atoms[p] - 1);
                let rows = vals.get(row(r0)..row(r1)).unwrap_or_default();
                // A short chunk (corrupt) counts as bad rather than unchecked.
                let short = rows.len() != row(r1) - row(r0);
                if short || rows.iter().fold(0, |acc, &x| crate::data::fold_index(acc, x, lo, last)) < 0 {
                    bad.push(p);
                }
            }
            p += 1;
        }
        if !bad.is_empty() {
            // A set of sample ids stays valid whatever a panicking writer did.
            f.bad_samples.write().unwrap_or_else(std::sync::PoisonError::into_inner).extend(bad);
            f.any_bad.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Decodes one inner chunk of `f`, checking its size.
    fn decode_raw(&self, f: &FieldArray, chunk: u64) -> Result<Vec<u8>> {
        let mut idx = vec![0u64; f.array.dimensionality()];
        idx[0] = chunk;
        let expected = f.chunk_rows * f.row_bytes as u64;
        let raw = match self.decode_direct(f, chunk, &idx, expected as usize)? {
            Some(raw) => raw,
            None => {
                let bytes: ArrayBytes = f
                    .array
                    .retrieve_subchunk_opt(&f.shard_cache, &idx, &self.codec_options)
                    .map_err(|e| match e {
                        ArrayError::CodecError(e) => self.codec_error(f, chunk, e),
                        e => self.chunk_error(f, chunk, e.to_string()),
                    })?;
                let raw = bytes.into_fixed().map_err(|e| self.chunk_error(f, chunk, e.to_string()))?;
                raw.into_owned()
            }
        };
        if raw.len() as u64 != expected {
            return Err(self.chunk_error(
                f,
                chunk,
                format!("decoded {} bytes, expected {}", raw.len(), f.chunk_rows * f.row_bytes as u64),
            ));
        }
        Ok(raw)
    }

    /// The [`DirectDecode`] path: `None` when `f` does not qualify or the
    /// chunk is not stored (zarrs then supplies the fill value).
    fn decode_direct(&self, f: &FieldArray, chunk: u64, idx: &[u64], expected: usize) -> Result<Option<Vec<u8>>> {
        use zarrs::storage::ReadableStorageTraits;
        let Some(plan) = &f.direct else { return Ok(None) };
        let err = |e: zarrs::storage::StorageError| self.chunk_error(f, chunk, e.to_string());
        let encoded = match plan.shard {
            None => f.array.retrieve_encoded_chunk(idx).map_err(err)?.map(zarrs::storage::Bytes::from),
            Some(layout) => {
                let shard = chunk / layout.inner_per_shard;
                let Some(index) = self.shard_index(f, shard, layout)? else { return Ok(None) };
                let (offset, size) = index.get((chunk % layout.inner_per_shard) as usize).copied().unwrap_or((u64::MAX, u64::MAX));
                if offset == u64::MAX && size == u64::MAX {
                    return Ok(None);
                }
                let mut shard_idx = vec![0u64; idx.len()];
                shard_idx[0] = shard;
                let key = f.array.chunk_key(&shard_idx);
                self.store.get_partial(&key, zarrs::storage::byte_range::ByteRange::FromStart(offset, Some(size))).map_err(err)?
            }
        };
        let Some(encoded) = encoded else { return Ok(None) };
        match &plan.inner {
            &InnerDecode::Hand { zstd, crc32c } => {
                let payload = if crc32c { self.check_crc32c(f, chunk, &encoded)? } else { &encoded[..] };
                if !zstd {
                    return Ok(Some(payload.to_vec()));
                }
                zstd_decode(payload, expected).map(Some).map_err(|e| {
                    let reason = format!("zstd: {e}");
                    // A frame written with zstd's own checksum (`checksum:
                    // true`) that does not match: libzstd's error says so.
                    if reason.contains("doesn't match checksum") {
                        self.checksum_error(f, chunk, reason)
                    } else {
                        self.chunk_error(f, chunk, reason)
                    }
                })
            }
            InnerDecode::Chain { codecs, shape } => {
                let decoded = codecs
                    .decode(std::borrow::Cow::Borrowed(&encoded[..]), shape, f.array.data_type(), f.array.fill_value(), &self.codec_options)
                    .map_err(|e| self.codec_error(f, chunk, e))?;
                let raw = decoded.into_fixed().map_err(|e| self.chunk_error(f, chunk, e.to_string()))?;
                Ok(Some(raw.into_owned()))
            }
        }
    }

    /// The payload of an encoded chunk that ends in a crc32c checksum, once
    /// the checksum matches it.
    fn check_crc32c<'a>(&self, f: &FieldArray, chunk: u64, encoded: &'a [u8]) -> Result<&'a [u8]> {
        let Some((payload, tail)) = encoded.split_last_chunk::<4>() else {
            return Err(self.chunk_error(f, chunk, format!("encoded chunk of {} bytes is shorter than its crc32c checksum", encoded.len())));
        };
        let (stored, computed) = (u32::from_le_bytes(*tail), crc32c::crc32c(payload));
        if stored != computed {
            return Err(self.checksum_error(
                f,
                chunk,
                format!("crc32c of its {} encoded bytes is {computed:#010x}, stored {stored:#010x}", payload.len()),
            ));
        }
        Ok(payload)
    }

    fn checksum_error(&self, f: &FieldArray, chunk: u64, reason: impl Into<String>) -> Error {
        Error::Checksum { store: self.path.clone(), array: f.rel.clone(), chunk, reason: reason.into() }
    }

    /// A zarrs codec error of chunk `chunk`: a typed checksum error when a
    /// checksum codec of the chain (crc32c) failed.
    fn codec_error(&self, f: &FieldArray, chunk: u64, e: CodecError) -> Error {
        match e {
            CodecError::InvalidChecksum => self.checksum_error(f, chunk, "the chain's checksum codec (crc32c) does not match the encoded bytes"),
            e => self.chunk_error(f, chunk, e.to_string()),
        }
    }

    /// The index of `shard` of `f` (read once, then cached), each entry checked
    /// to lie inside the shard file.
    fn shard_index(&self, f: &FieldArray, shard: u64, layout: ShardLayout) -> Result<ShardIndex> {
        use zarrs::storage::ReadableStorageTraits;
        use zarrs::storage::byte_range::ByteRange;
        let chunk = shard * layout.inner_per_shard;
        if let Some(found) = f.shard_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&shard) {
            return Ok(found.clone());
        }
        let bad = |reason: String| self.chunk_error(f, chunk, format!("shard {shard} index: {reason}"));
        let mut shard_idx = vec![0u64; f.array.dimensionality()];
        shard_idx[0] = shard;
        let key = f.array.chunk_key(&shard_idx);
        let index = match self.store.size_key(&key).map_err(|e| bad(e.to_string()))? {
            None => None,
            Some(file_len) => {
                let index_len = layout.index_len();
                if file_len < index_len {
                    return Err(bad(format!("shard file of {file_len} bytes is shorter than its {index_len}-byte index")));
                }
                let range = if layout.index_at_end { ByteRange::Suffix(index_len) } else { ByteRange::FromStart(0, Some(index_len)) };
                let raw = self
                    .store
                    .get_partial(&key, range)
                    .map_err(|e| bad(e.to_string()))?
                    .ok_or_else(|| bad("shard file vanished".into()))?;
                let entries = (layout.inner_per_shard * 16) as usize;
                let (body, tail) = raw.split_at(entries.min(raw.len()));
                if body.len() != entries {
                    return Err(bad(format!("{} index bytes, expected {entries}", body.len())));
                }
                if layout.crc32c {
                    let stored = tail.get(..4).and_then(|t| <[u8; 4]>::try_from(t).ok()).map(u32::from_le_bytes);
                    let computed = crc32c::crc32c(body);
                    if stored != Some(computed) {
                        let last = chunk + layout.inner_per_shard - 1;
                        return Err(self.checksum_error(
                            f,
                            chunk,
                            format!(
                                "index of shard {shard} (inner chunks {chunk}..={last}): crc32c is {computed:#010x}, stored {}",
                                stored.map_or("nothing".into(), |s| format!("{s:#010x}"))
                            ),
                        ));
                    }
                }
                let (data_start, data_end) =
                    if layout.index_at_end { (0, file_len - index_len) } else { (index_len, file_len) };
                let mut pairs = Vec::with_capacity(layout.inner_per_shard as usize);
                for e in body.chunks_exact(16) {
                    let word = |b: &[u8]| b.try_into().map(u64::from_le_bytes).unwrap_or(u64::MAX);
                    let (offset, size) = (word(&e[..8]), word(&e[8..]));
                    let missing = offset == u64::MAX && size == u64::MAX;
                    if !missing && (offset < data_start || offset.checked_add(size).is_none_or(|end| end > data_end)) {
                        return Err(bad(format!("inner chunk at {offset}+{size} outside the shard's data (bytes {data_start}..{data_end})")));
                    }
                    pairs.push((offset, size));
                }
                Some(Arc::new(pairs))
            }
        };
        f.shard_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(shard, index.clone());
        Ok(index)
    }

    /// Decodes every chunk the physical samples need, once each, in parallel
    /// over (array, chunk). Returns, per field, its sorted chunk ids and bytes.
    fn decode_needed(&self, st: &State, physical: &[usize], opts: CollateOptions) -> Result<Vec<Decoded>> {
        let narrowed: Vec<bool> = st.fields.iter().map(|f| f.narrowed(opts)).collect();
        let plans: Vec<Vec<u64>> = st
            .fields
            .iter()
            .map(|f| needed_chunks(st.ptrs(), f.level, f.chunk_rows, physical))
            .collect();
        let tasks: Vec<(usize, u64)> = plans
            .iter()
            .enumerate()
            .flat_map(|(fi, ids)| ids.iter().map(move |&c| (fi, c)))
            .collect();
        // Cache lookups first, on this thread: only decodes are worth rayon's
        // hand-off, and a request whose chunks are all cached (a warm epoch,
        // or `read(i)` one sample at a time) then wakes no worker at all.
        let mut found: Vec<Option<ChunkBytes>> =
            tasks.iter().map(|&(fi, c)| self.cached(&st.fields[fi], c, narrowed[fi])).collect();
        let missing: Vec<usize> = (0..tasks.len()).filter(|&i| found[i].is_none()).collect();
        let decode = |&i: &usize| self.decode_chunk_as(st, &st.fields[tasks[i].0], tasks[i].1, narrowed[tasks[i].0]);
        let decoded: Vec<Option<ChunkBytes>> = if missing.len() > 1 {
            missing.par_iter().map(decode).collect::<Result<_>>()?
        } else {
            missing.iter().map(decode).collect::<Result<_>>()?
        };
        if decoded.iter().any(Option::is_none) {
            // An array turned out not to fit int32 and is now wide-only: plan
            // again (it is read wide; everything decoded so far is cached).
            return self.decode_needed(st, physical, opts);
        }
        for (i, b) in missing.into_iter().zip(decoded) {
            found[i] = b;
        }
        // Every slot is filled (hits above, misses just now); a gap would be a
        // bug here, reported rather than misaligning the split below.
        let mut results: Vec<ChunkBytes> = found
            .into_iter()
            .map(|b| b.ok_or_else(|| Error::Background("read plan left a chunk undecoded".into())))
            .collect::<Result<_>>()?;
        let mut out = Vec::with_capacity(plans.len());
        for (ids, &narrowed) in plans.into_iter().zip(&narrowed).rev() {
            let bytes = results.split_off(results.len() - ids.len());
            out.push(Decoded { ids, bytes, narrowed });
        }
        out.reverse();
        Ok(out)
    }

    /// Hands `sink` the bytes of `rows` of field `f`, one chunk's run at a time.
    fn for_rows(&self, f: &FieldArray, dec: &Decoded, rows: std::ops::Range<u64>, mut sink: impl FnMut(&[u8])) -> Result<()> {
        let c_rows = f.chunk_rows;
        let row_bytes = if dec.narrowed { f.row_bytes / 2 } else { f.row_bytes };
        for c in chunks_of(&rows, c_rows) {
            let bytes = dec.get(c).ok_or_else(|| self.chunk_error(f, c, "chunk missing from the read plan"))?;
            let lo = rows.start.max(c * c_rows) - c * c_rows;
            let hi = rows.end.min((c + 1) * c_rows) - c * c_rows;
            let (a, b) = (lo as usize * row_bytes, hi as usize * row_bytes);
            let src = bytes.get(a..b).ok_or_else(|| self.chunk_error(f, c, "decoded chunk shorter than its rows"))?;
            sink(src);
        }
        Ok(())
    }

    /// Appends the rows `rows` of `f` from the decoded chunks to `dst`.
    fn copy_rows(&self, f: &FieldArray, dec: &Decoded, rows: std::ops::Range<u64>, dst: &mut HostData) -> Result<()> {
        self.for_rows(f, dec, rows, |src| dst.extend_from_bytes(src))
    }

    /// Appends field `f`'s rows of the samples `physical` (in order) to `dst`.
    fn fill_field(&self, f: &FieldArray, dec: &Decoded, ptrs: &Pointers, physical: &[usize], dst: &mut HostData) -> Result<()> {
        for &p in physical {
            self.copy_rows(f, dec, ptrs.rows(f.level, p), dst)?;
        }
        Ok(())
    }

    /// As [`Self::fill_field`] for `neighbor_list`: sample `k`'s stored
    /// (store-global) indices are moved to batch-local (its atoms start at
    /// `batch_atoms[k]`). A sample whose chunk check found an index outside
    /// its own atoms (one that would point into another structure of the
    /// batch) is an error naming logical sample `logical[k]`.
    #[allow(clippy::too_many_arguments)]
    fn fill_neighbors(
        &self,
        st: &State,
        f: &FieldArray,
        dec: &Decoded,
        physical: &[usize],
        logical: &[usize],
        batch_atoms: &[i64],
        dst: &mut HostData,
    ) -> Result<()> {
        let ptrs = st.ptrs();
        // Every chunk these rows come from was checked when it was decoded.
        let bad = f
            .any_bad
            .load(std::sync::atomic::Ordering::Acquire)
            .then(|| f.bad_samples.read().unwrap_or_else(std::sync::PoisonError::into_inner));
        for (k, &p) in physical.iter().enumerate() {
            let lo = ptrs.atoms[p];
            let off = batch_atoms[k] - lo;
            let rows = ptrs.rows(f.level, p);
            // Offsets are added during the copy: a second pass over the
            // neighbor list measured ~5% of a warm epoch.
            let start = dst.len();
            match dst {
                HostData::Int64(v) => self.for_rows(f, dec, rows, |src| HostData::extend_i64_offset(v, src, off))?,
                HostData::Int32(v) => self.for_rows(f, dec, rows, |src| HostData::extend_i32_offset(v, src, off))?,
                _ => {
                    self.copy_rows(f, dec, rows, dst)?;
                    dst.add_offset_from(start, off)?;
                }
            }
            if bad.as_ref().is_some_and(|b| b.contains(&p)) {
                let n = (ptrs.atoms[p + 1] - lo) as u64;
                return Err(bad_indices(dst, start, batch_atoms[k], n, |r| self.range_error_in(st, logical[k], r)));
            }
        }
        Ok(())
    }

    /// [`Reader::neighbor_index_error`] against the snapshot `st`: the
    /// diagnosis of nvalchemi-toolkit's append bug needs the store's atom
    /// offsets.
    fn range_error_in(&self, st: &State, index: usize, r: IndexReport) -> Error {
        let physical_index = if index < st.len() { st.physical(index) } else { index };
        let append_shift = (physical_index < st.num_samples)
            .then(|| crate::store::repair::append_shifts(&st.atoms_ptr, physical_index, r.min, r.max, r.num_atoms).next())
            .flatten();
        Error::NeighborIndex {
            source_name: self.source.to_string(),
            index,
            physical_index,
            value: r.value,
            num_atoms: r.num_atoms,
            append_shift,
        }
    }

    fn assemble(&self, st: &State, dec: &[Decoded], p: usize) -> Result<AtomicData> {
        let mut s = AtomicData::default();
        for (f, d) in st.fields.iter().zip(dec) {
            let rows = st.ptrs().rows(f.level, p);
            let n = (rows.end - rows.start) as usize;
            let mut data = HostData::with_capacity(f.dtype, n * f.row_elems);
            self.copy_rows(f, d, rows, &mut data)?;
            if f.name == "neighbor_list" {
                data.add_offset(-st.atoms_ptr[p])?;
            }
            let mut shape = Vec::with_capacity(1 + f.trailing.len());
            shape.push(n);
            shape.extend(&f.trailing);
            s.fields.insert(f.name.clone(), Field { level: f.level, shape, data });
        }
        Ok(s)
    }

    fn collate_into(&self, st: &State, dec: &[Decoded], batch: &[usize], out: &mut CollatedBatch) -> Result<()> {
        let layout: Vec<_> = st
            .fields
            .iter()
            .zip(dec)
            .map(|(f, d)| (f.name.clone(), f.level, if d.narrowed { DType::Int32 } else { f.dtype }, f.trailing.clone()))
            .collect();
        out.reset(&layout);
        let ptrs = st.ptrs();
        let physical: Vec<usize> = batch.iter().map(|&i| st.physical(i)).collect();
        let (mut atoms, mut edges) = (0i64, 0i64);
        for &p in &physical {
            atoms += ptrs.atoms[p + 1] - ptrs.atoms[p];
            edges += ptrs.edges[p + 1] - ptrs.edges[p];
            out.atoms_ptr.push(atoms);
            out.edges_ptr.push(edges);
        }
        for (f, d) in st.fields.iter().zip(dec) {
            let dst = match out.fields.get_mut(&f.name) {
                Some(dst) => &mut dst.data,
                None => continue, // reset() created every layout entry
            };
            let rows_total = match f.level {
                Level::Atom => atoms as usize,
                Level::Edge => edges as usize,
                Level::System => physical.len(),
            };
            dst.reserve(rows_total * f.row_elems);
            if f.name == "neighbor_list" {
                // Stored indices are store-global (see STORE_FORMAT.md).
                self.fill_neighbors(st, f, d, &physical, batch, &out.atoms_ptr, dst)?;
            } else {
                self.fill_field(f, d, &ptrs, &physical, dst)?;
            }
        }
        out.indices.clear();
        out.indices.extend_from_slice(batch);
        Ok(())
    }
}

/// The decoded chunks of one array for one request.
struct Decoded {
    ids: Vec<u64>,
    bytes: Vec<ChunkBytes>,
    /// The chunks of an int64 array, narrowed to int32.
    narrowed: bool,
}

impl Decoded {
    #[inline]
    fn get(&self, chunk: u64) -> Option<&ChunkBytes> {
        self.ids.binary_search(&chunk).ok().map(|i| &self.bytes[i])
    }
}

impl Reader for AtomicDataZarrReader {
    fn len(&self) -> usize {
        self.snapshot().len()
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn field_levels(&self) -> BTreeMap<String, Level> {
        self.snapshot().fields.iter().map(|f| (f.name.clone(), f.level)).collect()
    }

    fn load_many(&self, indices: &[usize]) -> Result<Vec<AtomicData>> {
        let st = self.snapshot();
        let physical: Vec<usize> = indices
            .iter()
            .map(|&i| {
                if i >= st.len() {
                    return Err(Error::IndexOutOfRange { source_name: self.source.to_string(), index: i as i64, len: st.len() });
                }
                Ok(st.physical(i))
            })
            .collect::<Result<_>>()?;
        let dec = self.decode_needed(&st, &physical, CollateOptions::default())?;
        // A few samples are copied faster than rayon hands them out.
        if physical.len() < 16 {
            physical.iter().map(|&p| self.assemble(&st, &dec, p)).collect()
        } else {
            physical.par_iter().map(|&p| self.assemble(&st, &dec, p)).collect()
        }
    }

    fn physical_index(&self, index: usize) -> usize {
        let st = self.snapshot();
        if index < st.len() { st.physical(index) } else { index }
    }

    fn get_metadata(&self, index: usize) -> Result<(usize, usize)> {
        let st = self.snapshot();
        if index >= st.len() {
            return Err(Error::IndexOutOfRange { source_name: self.source.to_string(), index: index as i64, len: st.len() });
        }
        let p = st.physical(index);
        Ok((
            (st.atoms_ptr[p + 1] - st.atoms_ptr[p]) as usize,
            (st.edges_ptr[p + 1] - st.edges_ptr[p]) as usize,
        ))
    }

    fn refresh(&self) -> Result<()> {
        let new = self.load_state()?;
        // Appends rewrite the last partial chunk, so cached chunks may be stale.
        self.cache.clear();
        *self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(new);
        Ok(())
    }

    fn load_collated(&self, batches: &[Vec<usize>], out: &mut Vec<CollatedBatch>) -> Result<()> {
        self.load_collated_with(batches, CollateOptions::default(), out)
    }

    fn load_collated_with(&self, batches: &[Vec<usize>], opts: CollateOptions, out: &mut Vec<CollatedBatch>) -> Result<()> {
        let st = self.snapshot();
        let len = st.len();
        if let Some(&bad) = batches.iter().flatten().find(|&&i| i >= len) {
            return Err(Error::IndexOutOfRange { source_name: self.source.to_string(), index: bad as i64, len });
        }
        let physical: Vec<usize> = batches.iter().flatten().map(|&i| st.physical(i)).collect();
        let dec = self.decode_needed(&st, &physical, opts)?;
        out.resize_with(batches.len(), CollatedBatch::default);
        out.par_iter_mut()
            .zip(batches.par_iter())
            .try_for_each(|(dst, b)| self.collate_into(&st, &dec, b, dst))
    }

    fn metadata_for(&self, i: usize) -> SampleMetadata {
        SampleMetadata { index: i, physical_index: self.physical_index(i), source: self.source.clone() }
    }

    /// Adds the diagnosis of nvalchemi-toolkit's append bug when it fits
    /// (see [`Error::NeighborIndex`]).
    fn neighbor_index_error(&self, index: usize, value: i64, num_atoms: usize, span: (i64, i64)) -> Error {
        let r = IndexReport { value, num_atoms, min: span.0, max: span.1 };
        self.range_error_in(&self.snapshot(), index, r)
    }
}

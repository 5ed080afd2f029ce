//! The I/O benchmark behind `atomzarr roundtrip` and `atomzarr read`
//! (the reference toolkit's `nvalchemi-io-test`): read orders, the timed read
//! loops, and the report rows.
//!
//! Three read paths are timed:
//! - `batch`: the public [`DataLoader`] over a [`Dataset`] with
//!   validation skipped, on the CPU (Flex) device: what a training loop sees.
//! - `raw`: [`Reader::read_collated`] in windows of `batch_size *
//!   prefetch_factor` samples, no loader: the reader's own ceiling.
//! - `single`: one [`Reader::read`] per sample (a baseline only).
//!
//! Every row also says how many samples were delivered, how many distinct
//! ones, whether they came back in the requested order, and how many bytes of
//! field data arrived, so a run proves it read each sample exactly once.
//! With `checksum` ([`ReadOptions::checksum`], the CLI's `--checksum`) it also
//! reports a content checksum of what was delivered, independent of order
//! (see [`sample_hash`]), so a run can prove it read the right bytes too.
//!
//! ```
//! use atomzarr::cli::bench::{ReadOrder, read_order};
//! let o = read_order(10, ReadOrder::BlockShuffle, 0, 4).unwrap();
//! let mut sorted = o.clone();
//! sorted.sort();
//! assert_eq!(sorted, (0..10).collect::<Vec<_>>());
//! // Blocks [0, 4), [4, 8), [8, 10) move whole and keep their inner order.
//! for start in [0, 4, 8] {
//!     let len = (10 - start).min(4);
//!     let at = o.iter().position(|&x| x == start).unwrap();
//!     assert_eq!(o[at..at + len], (start..start + len).collect::<Vec<_>>()[..]);
//! }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::pipeline::AtomicBatch;
use crate::data::CollatedBatch;
use crate::pipeline::Dataset;
use crate::pipeline::DataLoader;
use crate::sampler::ListSampler;
use crate::store::{Codec, Shuffle, ZarrArrayConfig, ZarrWriteConfig};
use crate::data::{AtomicData, HostData};
use crate::error::{Error, Result};
use crate::source::Reader;
use crate::store::AtomicDataZarrWriter;
use crate::store::{AtomicDataZarrReader, ReaderOptions};

/// The logical order samples are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOrder {
    /// 0, 1, 2, ...
    Sequential,
    /// A seeded permutation of every index.
    Shuffle,
    /// Contiguous blocks of indices, shuffled; order kept inside each block.
    BlockShuffle,
}

impl ReadOrder {
    /// The CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadOrder::Sequential => "sequential",
            ReadOrder::Shuffle => "shuffle",
            ReadOrder::BlockShuffle => "block-shuffle",
        }
    }
}

impl std::fmt::Display for ReadOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How samples are read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadPath {
    /// The public DataLoader (validation skipped, CPU device).
    Batch,
    /// `Reader::read` once per sample.
    Single,
    /// `Reader::read_collated` in read windows, without the DataLoader.
    Raw,
}

impl ReadPath {
    /// The CLI name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadPath::Batch => "batch",
            ReadPath::Single => "single",
            ReadPath::Raw => "raw",
        }
    }
}

impl std::fmt::Display for ReadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Builds the logical read order over `n` samples.
pub fn read_order(n: usize, order: ReadOrder, seed: u64, block_size: usize) -> Result<Vec<usize>> {
    if block_size == 0 {
        return Err(Error::Config("read_order_block_size must be >= 1, got 0".into()));
    }
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    match order {
        ReadOrder::Sequential => {}
        ReadOrder::Shuffle => idx.shuffle(&mut rng),
        ReadOrder::BlockShuffle => {
            let mut blocks: Vec<&[usize]> = idx.chunks(block_size).collect();
            blocks.shuffle(&mut rng);
            idx = blocks.concat();
        }
    }
    Ok(idx)
}

/// The read side of a benchmark run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOptions {
    /// Paths to time, in this order.
    pub paths: Vec<ReadPath>,
    /// Sample order.
    pub order: ReadOrder,
    /// Seed of the shuffled orders.
    pub seed: u64,
    /// Block size of `block-shuffle`.
    pub block_size: usize,
    /// Samples per emitted batch (batch and raw paths).
    pub batch_size: usize,
    /// Batches fused into one backend read; 0 reads one batch at a time.
    /// Signed so a negative value from a user gets a clear error.
    pub prefetch_factor: i64,
    /// Ask the loader for pinned host staging.
    pub pin_memory: bool,
    /// Decoded-chunk cache budget of the reader (0 disables it).
    pub cache_bytes: u64,
    /// Passes over the data with one reader (epochs after the first show the
    /// cache at work).
    pub epochs: usize,
    /// Progress bars on stderr.
    pub progress: bool,
    /// Compute the content checksum of what each pass delivers (hashing
    /// every byte: it is part of the timed pass, so off by default).
    pub checksum: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            paths: vec![ReadPath::Batch],
            order: ReadOrder::Sequential,
            seed: 0,
            block_size: 8192,
            batch_size: 64,
            prefetch_factor: 16,
            pin_memory: false,
            cache_bytes: crate::store::DEFAULT_CACHE_BYTES,
            epochs: 1,
            progress: false,
            checksum: false,
        }
    }
}

impl ReadOptions {
    /// Checks the options (the CLI's error messages come from here).
    pub fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(Error::Config("batch_size must be >= 1, got 0".into()));
        }
        if self.prefetch_factor < 0 {
            return Err(Error::Config(format!("prefetch_factor must be >= 0, got {}", self.prefetch_factor)));
        }
        if self.block_size == 0 {
            return Err(Error::Config("read_order_block_size must be >= 1, got 0".into()));
        }
        if self.epochs == 0 {
            return Err(Error::Config("epochs must be >= 1, got 0".into()));
        }
        if self.paths.is_empty() {
            return Err(Error::Config("at least one read mode is needed".into()));
        }
        Ok(())
    }

    /// Samples per backend read on the batch and raw paths:
    /// `batch_size * max(prefetch_factor, 1)` (the reference's definition).
    pub fn read_window(&self) -> usize {
        self.batch_size * (self.prefetch_factor.max(1) as usize)
    }

    fn prefetch(&self) -> usize {
        self.prefetch_factor.max(0) as usize
    }
}

/// What one timed pass delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadResult {
    /// Wall time of the pass (the first includes opening the reader).
    pub read_time: Duration,
    /// Samples delivered (duplicates counted).
    pub samples_read: usize,
    /// Distinct logical indices delivered.
    pub unique_samples: usize,
    /// Delivered indices equal the requested order.
    pub order_ok: bool,
    /// Bytes of field data delivered.
    pub read_bytes: u64,
    /// Cache hits during the pass.
    pub cache_hits: u64,
    /// Cache misses (chunk decodes) during the pass.
    pub cache_misses: u64,
    /// Wrapping sum of [`sample_hash`] over the delivered samples, when
    /// [`ReadOptions::checksum`] is set.
    pub content_checksum: Option<u64>,
}

/// FNV-1a, 64 bit: simple enough to re-implement anywhere a checksum must
/// be checked independently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Feeds a u64, little endian.
    pub fn write_u64(&mut self, x: u64) {
        self.write(&x.to_le_bytes());
    }

    /// The hash.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The content hash of one sample, as the toolkit returns it (system fields
/// `[1, ...]`, neighbor lists sample-local): [`Fnv1a`] over, for each field in
/// ascending name order, the name's byte length (u64 LE) and UTF-8 bytes, the
/// dtype name's (`float32`, `int64`, `bool`, ...) length and bytes, the rank
/// (u64 LE) and each dimension (u64 LE), the data's byte length (u64 LE) and
/// the data, each element little endian in the stored dtype (bool as one byte,
/// 0 or 1). A read's content checksum is the wrapping sum of its samples'
/// hashes: independent of order, changed by a missing or repeated sample.
///
/// ```
/// use atomzarr::AtomicData;
/// use atomzarr::cli::bench::{Fnv1a, sample_hash};
/// let s = AtomicData::new(vec![8], vec![[1.0, 2.0, 3.0]]).unwrap();
/// // By hand: atomic_numbers then positions.
/// let mut h = Fnv1a::default();
/// for (name, dtype, shape, data) in [
///     ("atomic_numbers", "int64", vec![1u64], 8i64.to_le_bytes().to_vec()),
///     ("positions", "float32", vec![1, 3], [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect()),
/// ] {
///     h.write_u64(name.len() as u64);
///     h.write(name.as_bytes());
///     h.write_u64(dtype.len() as u64);
///     h.write(dtype.as_bytes());
///     h.write_u64(shape.len() as u64);
///     shape.iter().for_each(|&d| h.write_u64(d));
///     h.write_u64(data.len() as u64);
///     h.write(&data);
/// }
/// assert_eq!(sample_hash(&s), h.finish());
/// ```
pub fn sample_hash(s: &AtomicData) -> u64 {
    let mut h = Fnv1a::default();
    for (name, f) in &s.fields {
        h.write_u64(name.len() as u64);
        h.write(name.as_bytes());
        let dtype = f.dtype().name();
        h.write_u64(dtype.len() as u64);
        h.write(dtype.as_bytes());
        h.write_u64(f.shape.len() as u64);
        for &d in &f.shape {
            h.write_u64(d as u64);
        }
        let bytes = f.data.as_bytes();
        h.write_u64(bytes.len() as u64);
        if cfg!(target_endian = "little") {
            h.write(bytes);
        } else {
            for e in bytes.chunks(f.dtype().size()) {
                e.iter().rev().for_each(|b| h.write(&[*b]));
            }
        }
    }
    h.finish()
}

/// Counts what a read path delivers.
struct Tally {
    seen: Vec<bool>,
    unique: usize,
    read: usize,
    bytes: u64,
    order_ok: bool,
    checksum: Option<u64>,
}

impl Tally {
    fn new(n: usize, checksum: bool) -> Tally {
        Tally { seen: vec![false; n], unique: 0, read: 0, bytes: 0, order_ok: true, checksum: checksum.then_some(0) }
    }

    /// Adds samples to the content checksum (when one is kept).
    fn hash(&mut self, samples: &[AtomicData]) {
        if let Some(c) = self.checksum.as_mut() {
            *c = samples.iter().fold(*c, |acc, s| acc.wrapping_add(sample_hash(s)));
        }
    }

    /// Records that logical `got` arrived where `want` was asked for.
    #[inline]
    fn sample(&mut self, got: usize, want: usize) {
        self.read += 1;
        self.order_ok &= got == want;
        if let Some(s) = self.seen.get_mut(got)
            && !*s
        {
            *s = true;
            self.unique += 1;
        }
    }
}

fn host_bytes(d: &HostData) -> u64 {
    (d.len() * d.dtype().size()) as u64
}

/// Bytes of field data in one sample.
pub fn sample_bytes(s: &AtomicData) -> u64 {
    s.fields.values().map(|f| host_bytes(&f.data)).sum()
}

fn batch_bytes(b: &CollatedBatch) -> u64 {
    b.fields.values().map(|f| host_bytes(&f.data)).sum()
}

fn bar(progress: bool, len: u64, msg: String) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg:>28} {bar:40} {pos}/{len} {elapsed_precise} {per_sec}") {
        b.set_style(style);
    }
    b.set_message(msg);
    b
}

/// Reads every active sample of the store at `path` once per epoch through
/// `path_kind`; one result per epoch. `expected` (if given) must equal the
/// store's active sample count.
pub fn time_reads(path: &Path, path_kind: ReadPath, opts: &ReadOptions, expected: Option<usize>) -> Result<Vec<ReadResult>> {
    opts.validate()?;
    let t0 = Instant::now();
    let reader = Arc::new(AtomicDataZarrReader::open_with(path, ReaderOptions { cache_bytes: opts.cache_bytes })?);
    let n = reader.len();
    if let Some(e) = expected
        && e != n
    {
        return Err(Error::inconsistent(path, "/", format!("expected {e} readable samples, found {n}")));
    }
    let order = read_order(n, opts.order, opts.seed, opts.block_size)?;
    let open_time = t0.elapsed();
    let mut out = Vec::with_capacity(opts.epochs);
    for epoch in 0..opts.epochs {
        let pb = bar(
            opts.progress,
            n as u64,
            format!("read {path_kind} {}{}", opts.order, if opts.epochs > 1 { format!(" #{}", epoch + 1) } else { String::new() }),
        );
        let before = reader.cache_stats();
        let t = Instant::now();
        let tally = match path_kind {
            ReadPath::Raw => read_raw(&reader, &order, opts, &pb)?,
            ReadPath::Single => read_single(&reader, &order, opts, &pb)?,
            ReadPath::Batch => read_loader(&reader, &order, opts, &pb)?,
        };
        let mut read_time = t.elapsed();
        if epoch == 0 {
            read_time += open_time;
        }
        pb.finish();
        let after = reader.cache_stats();
        out.push(ReadResult {
            read_time,
            samples_read: tally.read,
            unique_samples: tally.unique,
            order_ok: tally.order_ok && tally.read == order.len(),
            read_bytes: tally.bytes,
            cache_hits: after.hits - before.hits,
            cache_misses: after.misses - before.misses,
            content_checksum: tally.checksum,
        });
    }
    Ok(out)
}

/// The raw path: `read_collated` over windows of `read_window` samples.
fn read_raw(reader: &AtomicDataZarrReader, order: &[usize], opts: &ReadOptions, pb: &ProgressBar) -> Result<Tally> {
    let mut tally = Tally::new(order.len(), opts.checksum);
    let mut out: Vec<CollatedBatch> = Vec::new();
    let mut batches: Vec<Vec<i64>> = Vec::new();
    for window in order.chunks(opts.read_window()) {
        batches.clear();
        batches.extend(window.chunks(opts.batch_size).map(|b| b.iter().map(|&i| i as i64).collect()));
        reader.read_collated(&batches, &mut out)?;
        let mut k = 0;
        for b in out.iter().take(batches.len()) {
            for &i in &b.indices {
                tally.sample(i, window.get(k).copied().unwrap_or(usize::MAX));
                k += 1;
            }
            tally.bytes += batch_bytes(b);
            if opts.checksum {
                tally.hash(&b.to_samples()?);
            }
        }
        pb.inc(window.len() as u64);
    }
    Ok(tally)
}

/// The single path: one `read(i)` per sample.
fn read_single(reader: &AtomicDataZarrReader, order: &[usize], opts: &ReadOptions, pb: &ProgressBar) -> Result<Tally> {
    let mut tally = Tally::new(order.len(), opts.checksum);
    for &i in order {
        let s = reader.read(i as i64)?;
        tally.sample(s.metadata.index, i);
        tally.bytes += sample_bytes(&s.data);
        tally.hash(std::slice::from_ref(&s.data));
        pb.inc(1);
    }
    Ok(tally)
}

/// The batch path: the public DataLoader (fixed-order sampler, validation
/// skipped) on the CPU device, as the reference's batch mode does.
fn read_loader(reader: &Arc<AtomicDataZarrReader>, order: &[usize], opts: &ReadOptions, pb: &ProgressBar) -> Result<Tally> {
    type B = burn::backend::Flex;
    // Delivered bytes are counted in the store's dtypes (element count times
    // the stored element size), so they compare with raw_bytes whatever
    // element types the backend's tensors use.
    let schema = reader.field_schema();
    let sizes: BTreeMap<String, usize> = schema.iter().map(|(name, (_, dtype, _))| (name.clone(), dtype.size())).collect();
    let ds = Dataset::from_arc(reader.clone()).skip_validation(true);
    let device = burn::backend::flex::FlexDevice;
    let loader = DataLoader::<B, _>::builder(ds)
        .batch_size(opts.batch_size)
        .sampler(ListSampler::new(order.to_vec()))
        .prefetch_factor(opts.prefetch())
        .pin_memory(opts.pin_memory)
        .build(&device)?;
    let mut tally = Tally::new(order.len(), opts.checksum);
    let mut k = 0;
    for batch in loader.iter() {
        let batch: AtomicBatch<B> = batch?;
        for &i in &batch.indices {
            tally.sample(i, order.get(k).copied().unwrap_or(usize::MAX));
            k += 1;
        }
        for (name, f) in &batch.fields {
            let elems: usize = f.shape.iter().product();
            tally.bytes += (elems * sizes.get(name).copied().unwrap_or(0)) as u64;
        }
        if opts.checksum {
            tally.hash(&batch_to_host(&batch, &schema)?.to_samples()?);
        }
        pb.inc(batch.num_graphs as u64);
    }
    Ok(tally)
}

/// What a device batch holds, read back to the host in the store's dtypes
/// (the batch may hold int64 fields as int32, half floats as float32).
fn batch_to_host<B: burn::tensor::backend::Backend>(
    batch: &AtomicBatch<B>,
    schema: &BTreeMap<String, (crate::Level, crate::DType, Vec<usize>)>,
) -> Result<CollatedBatch> {
    use crate::DType;
    use crate::pipeline::BatchData;
    use crate::data::CollatedField;
    use half::{bf16, f16};
    let bad = |what: &str, e: burn::tensor::DataError| Error::Background(format!("reading back batch field {what}: {e:?}"));
    let ints = |t: &burn::tensor::Tensor<B, 1, burn::tensor::Int>, what: &str| {
        t.to_data().convert::<i64>().to_vec::<i64>().map_err(|e| bad(what, e))
    };
    let mut out = CollatedBatch {
        indices: batch.indices.clone(),
        atoms_ptr: ints(&batch.atoms_ptr, "atoms_ptr")?,
        edges_ptr: ints(&batch.edges_ptr, "edges_ptr")?,
        fields: BTreeMap::new(),
    };
    for (name, f) in &batch.fields {
        let dtype = schema.get(name).map(|s| s.1).ok_or_else(|| Error::Background(format!("batch field {name} not in the store")))?;
        let data = match &f.data {
            BatchData::Bool(t) => HostData::Bool(t.to_data().to_vec::<bool>().map_err(|e| bad(name, e))?),
            BatchData::Int(t) => {
                let v = ints(t, name)?;
                // Each value came from `dtype`, so the casts give it back.
                match dtype {
                    DType::Int8 => HostData::Int8(v.iter().map(|&x| x as i8).collect()),
                    DType::Int16 => HostData::Int16(v.iter().map(|&x| x as i16).collect()),
                    DType::Int32 => HostData::Int32(v.iter().map(|&x| x as i32).collect()),
                    DType::UInt8 => HostData::UInt8(v.iter().map(|&x| x as u8).collect()),
                    DType::UInt16 => HostData::UInt16(v.iter().map(|&x| x as u16).collect()),
                    DType::UInt32 => HostData::UInt32(v.iter().map(|&x| x as u32).collect()),
                    DType::UInt64 => HostData::UInt64(v.iter().map(|&x| x as u64).collect()),
                    _ => HostData::Int64(v),
                }
            }
            BatchData::Float(t) => {
                let d = t.to_data();
                match dtype {
                    DType::Float64 => HostData::Float64(d.convert::<f64>().to_vec::<f64>().map_err(|e| bad(name, e))?),
                    other => {
                        let v = d.convert::<f32>().to_vec::<f32>().map_err(|e| bad(name, e))?;
                        match other {
                            DType::Float16 => HostData::Float16(v.iter().map(|&x| f16::from_f32(x)).collect()),
                            DType::BFloat16 => HostData::BFloat16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
                            _ => HostData::Float32(v),
                        }
                    }
                }
            }
        };
        let trailing = f.shape.get(1..).unwrap_or_default().to_vec();
        out.fields.insert(name.clone(), CollatedField { level: f.level, trailing_shape: trailing, data });
    }
    Ok(out)
}

/// Size facts of a store's active samples.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct StoreFacts {
    /// Active samples.
    pub num_systems: usize,
    /// Atoms over active samples.
    pub total_atoms: u64,
    /// Edges over active samples.
    pub total_edges: u64,
    /// Bytes of field data of the active samples (decoded).
    pub raw_bytes: u64,
    /// Bytes on disk under the store.
    pub disk_bytes: u64,
    /// Files under the store.
    pub num_files: u64,
}

/// Computes [`StoreFacts`] from the pointers and the schema (no field data read).
pub fn store_facts(path: &Path) -> Result<StoreFacts> {
    let reader = AtomicDataZarrReader::open_with(path, ReaderOptions { cache_bytes: 0 })?;
    let schema = reader.field_schema();
    let n = reader.len();
    let (mut atoms, mut edges) = (0u64, 0u64);
    for i in 0..n {
        let (a, e) = reader.get_metadata(i)?;
        atoms += a as u64;
        edges += e as u64;
    }
    let mut raw = 0u64;
    for (level, dtype, trailing) in schema.values() {
        let row = (trailing.iter().product::<usize>() * dtype.size()) as u64;
        let rows = match level {
            crate::Level::Atom => atoms,
            crate::Level::Edge => edges,
            crate::Level::System => n as u64,
        };
        raw += row * rows;
    }
    let (disk_bytes, num_files) = crate::store::format::disk_usage(path);
    Ok(StoreFacts { num_systems: n, total_atoms: atoms, total_edges: edges, raw_bytes: raw, disk_bytes, num_files })
}

/// One report row (a table line, or one JSON object with `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportRow {
    /// The store read.
    pub store: PathBuf,
    /// Active samples in the store.
    pub systems: usize,
    /// Read path.
    pub read_path: ReadPath,
    /// Read order.
    pub read_order: ReadOrder,
    /// Block size (block-shuffle only).
    pub read_order_block_size: Option<usize>,
    /// Samples per emitted batch (1 for single).
    pub batch: usize,
    /// Prefetch factor (0 for single).
    pub prefetch: usize,
    /// Samples per backend read (1 for single).
    pub read_window: usize,
    /// Pass number, from 1.
    pub epoch: usize,
    /// Mean atoms per sample.
    pub avg_atoms: f64,
    /// Mean edges per sample.
    pub avg_edges: f64,
    /// Total atoms.
    pub total_atoms: u64,
    /// Total edges.
    pub total_edges: u64,
    /// Decoded bytes of the active samples' field data.
    pub raw_bytes: u64,
    /// Bytes on disk.
    pub disk_bytes: u64,
    /// raw_bytes / disk_bytes.
    pub ratio: f64,
    /// Files in the store.
    pub num_files: u64,
    /// Write codec description (roundtrip only).
    pub codec: Option<String>,
    /// Seconds to write the store (roundtrip only).
    pub write_time: Option<f64>,
    /// Seconds to read every sample once.
    pub read_time: f64,
    /// systems / write_time.
    pub write_samples_per_s: Option<f64>,
    /// systems / read_time (the table's samples/s).
    pub read_samples_per_s: f64,
    /// Bytes of field data delivered.
    pub read_bytes: u64,
    /// Samples delivered.
    pub samples_read: usize,
    /// Distinct samples delivered.
    pub unique_samples: usize,
    /// Delivered in the requested order.
    pub order_ok: bool,
    /// Cache budget of the reader.
    pub cache_bytes: u64,
    /// Cache hits during the pass.
    pub cache_hits: u64,
    /// Cache misses (chunk decodes) during the pass.
    pub cache_misses: u64,
    /// Content checksum of what the pass delivered (16 hex digits; see
    /// [`sample_hash`]), with `--checksum`; a string so JSON tools keep all
    /// 64 bits.
    pub content_checksum: Option<String>,
}

fn rows_for(
    store: &Path,
    facts: &StoreFacts,
    write: Option<(f64, String)>,
    opts: &ReadOptions,
    path: ReadPath,
    results: Vec<ReadResult>,
) -> Vec<ReportRow> {
    let n = facts.num_systems;
    let per = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let rate = |t: f64| if t > 0.0 { n as f64 / t } else { 0.0 };
    let single = path == ReadPath::Single;
    results
        .into_iter()
        .enumerate()
        .map(|(e, r)| {
            let t = r.read_time.as_secs_f64();
            ReportRow {
                store: store.to_path_buf(),
                systems: n,
                read_path: path,
                read_order: opts.order,
                read_order_block_size: (opts.order == ReadOrder::BlockShuffle).then_some(opts.block_size),
                batch: if single { 1 } else { opts.batch_size },
                prefetch: if single { 0 } else { opts.prefetch() },
                read_window: if single { 1 } else { opts.read_window() },
                epoch: e + 1,
                avg_atoms: per(facts.total_atoms),
                avg_edges: per(facts.total_edges),
                total_atoms: facts.total_atoms,
                total_edges: facts.total_edges,
                raw_bytes: facts.raw_bytes,
                disk_bytes: facts.disk_bytes,
                ratio: if facts.disk_bytes > 0 { facts.raw_bytes as f64 / facts.disk_bytes as f64 } else { 0.0 },
                num_files: facts.num_files,
                codec: write.as_ref().map(|w| w.1.clone()),
                write_time: write.as_ref().map(|w| w.0),
                read_time: t,
                write_samples_per_s: write.as_ref().map(|w| rate(w.0)),
                read_samples_per_s: rate(t),
                read_bytes: r.read_bytes,
                samples_read: r.samples_read,
                unique_samples: r.unique_samples,
                order_ok: r.order_ok,
                cache_bytes: opts.cache_bytes,
                cache_hits: r.cache_hits,
                cache_misses: r.cache_misses,
                content_checksum: r.content_checksum.map(|c| format!("{c:016x}")),
            }
        })
        .collect()
}

/// `atomzarr read PATH`: times every requested path against an existing store.
pub fn read_bench(path: &Path, opts: &ReadOptions) -> Result<Vec<ReportRow>> {
    opts.validate()?;
    let facts = store_facts(path)?;
    let mut rows = Vec::new();
    for &p in &opts.paths {
        let r = time_reads(path, p, opts, Some(facts.num_systems))?;
        rows.extend(rows_for(path, &facts, None, opts, p, r));
    }
    Ok(rows)
}

/// Codec choice of the benchmark CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchCodec {
    /// zstd.
    Zstd,
    /// blosc with lz4 (the reference's `lz4`).
    Lz4,
    /// blosc with zstd.
    BloscZstd,
    /// No compression.
    None,
}

/// The write side of `atomzarr roundtrip`.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOptions {
    /// System counts; each gets its own store (a prefix of one generated set).
    pub num_systems: Vec<usize>,
    /// Minimum atoms per structure.
    pub min_atoms: usize,
    /// Maximum atoms per structure.
    pub max_atoms: usize,
    /// Generator seed.
    pub seed: u64,
    /// Codec (None: the library default, zstd level 0).
    pub codec: Option<BenchCodec>,
    /// Codec level (zstd level, blosc clevel).
    pub level: i32,
    /// Rows per chunk of core arrays.
    pub chunk_size: Option<u64>,
    /// Rows per shard of core arrays.
    pub shard_size: Option<u64>,
    /// Rows per chunk of edge arrays (neighbor_list, shifts).
    pub edge_chunk_size: Option<u64>,
    /// Rows per shard of edge arrays.
    pub edge_shard_size: Option<u64>,
    /// Where stores go (kept); None: a temporary directory (removed).
    pub output_dir: Option<PathBuf>,
    /// A crc32c checksum per chunk on every array (the library default);
    /// off writes checksum-free stores, as the reference toolkit does.
    pub checksum: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            num_systems: vec![1000],
            min_atoms: 10,
            max_atoms: 100,
            seed: 42,
            codec: None,
            level: 3,
            chunk_size: None,
            shard_size: None,
            edge_chunk_size: None,
            edge_shard_size: None,
            output_dir: None,
            checksum: true,
        }
    }
}

impl WriteOptions {
    /// The store configuration these options describe, as the reference builds
    /// it: codec, chunk and shard on `core`, edge sizes as overrides of
    /// `neighbor_list` and `shifts`.
    pub fn write_config(&self) -> Result<ZarrWriteConfig> {
        let codec = match self.codec {
            None => None,
            Some(BenchCodec::None) => Some(Codec::None),
            Some(BenchCodec::Zstd) => Some(Codec::Zstd { level: self.level }),
            Some(c @ (BenchCodec::Lz4 | BenchCodec::BloscZstd)) => {
                let clevel = u8::try_from(self.level)
                    .ok()
                    .filter(|l| *l <= 9)
                    .ok_or_else(|| Error::Config(format!("blosc level {} outside 0..=9", self.level)))?;
                Some(if c == BenchCodec::Lz4 {
                    Codec::BloscLz4 { clevel, shuffle: Shuffle::Shuffle }
                } else {
                    Codec::BloscZstd { clevel, shuffle: Shuffle::Shuffle }
                })
            }
        };
        let checksum = Some(self.checksum);
        let core = ZarrArrayConfig { codec, chunk_size: self.chunk_size, shard_size: self.shard_size, write_empty_chunks: None, checksum };
        let mut config = ZarrWriteConfig::default()
            .with_core(core)
            .with_meta(ZarrArrayConfig { checksum, ..Default::default() })
            .with_custom(ZarrArrayConfig { checksum, ..Default::default() });
        if self.edge_chunk_size.is_some() || self.edge_shard_size.is_some() {
            let edge = ZarrArrayConfig {
                codec,
                chunk_size: self.edge_chunk_size.or(self.chunk_size),
                shard_size: self.edge_shard_size.or(self.shard_size),
                write_empty_chunks: None,
                checksum,
            };
            config = config.with_override("neighbor_list", edge).with_override("shifts", edge);
        }
        config.validate()?;
        Ok(config)
    }

    /// A one-line description for the table title.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.codec {
            Some(BenchCodec::Zstd) => parts.push(format!("zstd L{}", self.level)),
            Some(BenchCodec::Lz4) => parts.push(format!("lz4 L{}", self.level)),
            Some(BenchCodec::BloscZstd) => parts.push(format!("blosc-zstd L{}", self.level)),
            Some(BenchCodec::None) => parts.push("no compression".into()),
            None => parts.push("default codec".into()),
        }
        for (name, v) in [
            ("chunk", self.chunk_size),
            ("shard", self.shard_size),
            ("edge_chunk", self.edge_chunk_size),
            ("edge_shard", self.edge_shard_size),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name}={v}"));
            }
        }
        if !self.checksum {
            parts.push("no checksum".into());
        }
        parts.join(", ")
    }
}

/// `atomzarr roundtrip`: for each system count, generate, write (timed), read
/// back through every requested path (timed), report.
pub fn roundtrip(w: &WriteOptions, opts: &ReadOptions) -> Result<Vec<ReportRow>> {
    opts.validate()?;
    let config = w.write_config()?;
    let mut counts = w.num_systems.clone();
    counts.sort_unstable();
    counts.dedup();
    let max = counts.last().copied().ok_or_else(|| Error::Config("at least one -n is needed".into()))?;
    let tmp;
    let dir = match &w.output_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("atomzarr_bench_")
                .tempdir()
                .map_err(|e| Error::io(&std::env::temp_dir(), e))?;
            tmp.path().to_path_buf()
        }
    };

    // One generated set; smaller counts use its prefix (the generator is
    // sequential, so a prefix equals a smaller generation with the same seed).
    let pb = bar(opts.progress, max as u64, "generate".into());
    let samples = crate::data::synth::generate_with_progress(max, w.min_atoms, w.max_atoms, w.seed, |k| pb.set_position(k as u64))?;
    pb.finish();

    let mut rows = Vec::new();
    for n in counts {
        let data = &samples[..n];
        let store = dir.join(format!("bench_{n}.zarr"));
        let pb = bar(opts.progress, n as u64, format!("write {n}"));
        pb.enable_steady_tick(Duration::from_millis(100));
        let t = Instant::now();
        AtomicDataZarrWriter::create(&store, config.clone())?.write(data)?;
        let write_time = t.elapsed().as_secs_f64();
        pb.set_position(n as u64);
        pb.finish();
        let mut facts = store_facts(&store)?;
        // The reference counts raw bytes on the generated data.
        facts.raw_bytes = data.iter().map(sample_bytes).sum();
        for &p in &opts.paths {
            let r = time_reads(&store, p, opts, Some(n))?;
            rows.extend(rows_for(&store, &facts, Some((write_time, w.describe())), opts, p, r));
        }
    }
    Ok(rows)
}

/// Human-readable bytes, as the reference prints them.
pub fn fmt_bytes(n: u64) -> String {
    let mut x = n as f64;
    for unit in ["B", "KB", "MB", "GB"] {
        if x.abs() < 1024.0 {
            return format!("{x:.1} {unit}");
        }
        x /= 1024.0;
    }
    format!("{x:.1} TB")
}

/// The report table (the reference's columns; samples/s is read throughput).
pub fn table(rows: &[ReportRow]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    // Only runs with --checksum have the checksum column.
    let checksums = rows.iter().any(|r| r.content_checksum.is_some());
    let mut header = vec![
        "systems",
        "read path",
        "read order",
        "batch",
        "prefetch",
        "read window",
        "avg atoms",
        "avg edges",
        "raw bytes",
        "disk bytes",
        "ratio",
        "file count",
        "write time",
        "read time",
        "samples/s",
    ];
    if checksums {
        header.push("content checksum");
    }
    t.set_header(header);
    for r in rows {
        let mut order = r.read_order.to_string();
        if let Some(b) = r.read_order_block_size {
            order.push_str(&format!(" (blk={b})"));
        }
        let mut path = r.read_path.to_string();
        if r.epoch > 1 {
            path.push_str(&format!(" #{}", r.epoch));
        }
        let mut row = vec![
            r.systems.to_string(),
            path,
            order,
            r.batch.to_string(),
            r.prefetch.to_string(),
            r.read_window.to_string(),
            format!("{:.0}", r.avg_atoms),
            format!("{:.0}", r.avg_edges),
            fmt_bytes(r.raw_bytes),
            fmt_bytes(r.disk_bytes),
            format!("{:.2}x", r.ratio),
            r.num_files.to_string(),
            r.write_time.map_or("-".into(), |t| format!("{t:.3}s")),
            format!("{:.3}s", r.read_time),
            format!("{:.0}", r.read_samples_per_s),
        ];
        if checksums {
            row.push(r.content_checksum.clone().unwrap_or_else(|| "-".into()));
        }
        t.add_row(row);
    }
    for i in [0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t
}

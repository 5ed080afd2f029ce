//! The timed read loops: `raw` (collated windows from the reader), `single`
//! (one `read` per sample) and `batch` (the DataLoader on the CPU device),
//! each tallying what it delivered.

use crate::Location;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::content::{sample_bytes, sample_hash};
use super::indices::Indices;
use super::memory::{minor_faults, peak_rss, reset_peak_rss};
use super::options::{
    ReadOptions, ReadOrder, ReadPath, ReadResult, chunk_shuffle_order, default_shuffle_order, rank_part, read_order,
};
use crate::ReaderOptions;
use crate::data::{AtomicData, CollateOptions, CollatedBatch, DType, HostData, Level};
use crate::error::{Error, Result};
use crate::pipeline::{AtomicBatch, DataLoader, Dataset};
use crate::progress::Progress;
use crate::sampler::ListSampler;
use crate::source::{ChunkedReader, Reader, ReaderExt};
use crate::store::AtomicDataZarrReader;

/// Counts what a read path delivers.
pub(super) struct Tally {
    seen: Vec<bool>,
    pub(super) unique: usize,
    pub(super) read: usize,
    pub(super) bytes: u64,
    order_ok: bool,
    pub(super) checksum: Option<u64>,
    /// When the first sample arrived.
    pub(super) first: Option<Instant>,
}

impl Tally {
    /// A tally over a store of `n` samples.
    pub(super) fn new(n: usize, checksum: bool) -> Tally {
        Tally {
            seen: vec![false; n],
            unique: 0,
            read: 0,
            bytes: 0,
            order_ok: true,
            checksum: checksum.then_some(0),
            first: None,
        }
    }

    /// Adds samples to the content checksum (when one is kept).
    pub(super) fn hash(&mut self, samples: &[AtomicData]) {
        if let Some(c) = self.checksum.as_mut() {
            *c = samples.iter().fold(*c, |acc, s| acc.wrapping_add(sample_hash(s)));
        }
    }

    /// Records that logical `got` arrived where `want` was asked for.
    #[inline]
    pub(super) fn sample(&mut self, got: usize, want: usize) {
        if self.read == 0 {
            self.first = Some(Instant::now());
        }
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

/// Reads every active sample of the store at `store` once per epoch through
/// `path_kind`; one result per epoch. `expected` (if given) must equal the
/// store's active sample count.
///
/// # Errors
/// [`Error::Config`] for invalid `opts` (as [`ReadOptions::validate_for`] with one store);
/// [`Error::Inconsistent`] when the store's sample count is not `expected`;
/// the errors of opening and reading the store.
pub fn time_reads(
    store: &Location,
    path_kind: ReadPath,
    opts: &ReadOptions,
    expected: Option<usize>,
) -> Result<Vec<ReadResult>> {
    opts.validate_for(1)?;
    reset_peak_rss();
    let mut faults = minor_faults();
    let t0 = Instant::now();
    let reader =
        Arc::new(open_reader(store, ReaderOptions::default().with_cache_bytes(opts.cache_bytes), &opts.remote)?);
    let mut io = crate::store::bytes::IoStats::default();
    let n = reader.len();
    if let Some(e) = expected
        && e != n
    {
        return Err(Error::inconsistent(store, "/", format!("expected {e} readable samples, found {n}")));
    }
    let t_order = Instant::now();
    let (mut order, pool_blocks) = match opts.order {
        ReadOrder::Sequential => (Indices::in_order(n, opts), None),
        ReadOrder::ChunkShuffle => {
            (Indices::List(rank_part(&chunk_shuffle_order(&*reader, opts)?, opts)), Some(opts.pool_blocks))
        }
        ReadOrder::DefaultShuffle => {
            let (order, pool) = default_shuffle_order(&*reader, opts);
            (Indices::List(rank_part(&order, opts)), pool)
        }
        o => (Indices::List(rank_part(&read_order(n, o, opts.seed, opts.block_size)?, opts)), None),
    };
    if let Some(m) = opts.max_samples {
        order.truncate(m);
    }
    // The loader plans a default shuffle itself, inside the timed pass: the
    // order computed here only checks what it delivers.
    let untimed = if opts.order == ReadOrder::DefaultShuffle && path_kind == ReadPath::Batch {
        t_order.elapsed()
    } else {
        Duration::ZERO
    };
    let open_time = t0.elapsed().saturating_sub(untimed);
    let mut out = Vec::with_capacity(opts.epochs);
    for epoch in 0..opts.epochs {
        let pb = start_epoch(opts, epoch, n as u64, &path_kind.to_string(), &mut faults);
        let before = reader.cache_stats();
        let decode_before = reader.decode_counters();
        let t = Instant::now();
        let tally = match path_kind {
            ReadPath::Raw => read_raw(&reader, &order, opts, &pb)?,
            ReadPath::Single => read_single(&reader, &order, opts, &pb)?,
            ReadPath::Batch => read_loader(&reader, &order, opts, &pb)?,
        };
        let (read_time, first_batch_time) = epoch_times(t, tally.first, epoch, open_time);
        pb.finish_and_clear();
        let after = reader.cache_stats();
        let decode = reader.decode_counters().since(&decode_before);
        let io_now = reader.io_stats();
        out.push(ReadResult {
            read_time,
            samples_read: tally.read,
            unique_samples: tally.unique,
            order_ok: tally.order_ok && tally.read == order.len(),
            read_bytes: tally.bytes,
            cache_hits: after.hits - before.hits,
            cache_misses: after.misses - before.misses,
            content_checksum: tally.checksum,
            decode,
            peak_rss: peak_rss(),
            minor_faults: faults.zip(minor_faults()).map(|(a, b)| b.saturating_sub(a)),
            requests: io_now.requests - io.requests,
            fetched_bytes: io_now.bytes - io.bytes,
            first_batch_time,
            pool_blocks,
        });
        io = io_now;
    }
    Ok(out)
}

/// Opens the store at `store`: a local path, or a URL reached with `remote`.
pub(super) fn open_reader(
    store: &Location,
    options: ReaderOptions,
    remote: &crate::store::remote::RemoteOptions,
) -> Result<AtomicDataZarrReader> {
    AtomicDataZarrReader::open_remote(store, options, remote.clone())
}

/// The raw path: the reader's fused read over windows of `read_window`
/// samples, pipelined as the DataLoader is (so its overhead figure means
/// overhead): a background thread reads the next window while this one is
/// consumed, announcing the window after the one it reads, with at most one
/// finished window waiting. Consumed batches give their buffers back to the
/// reader's batch pool ([`CollatedBatch::recycle`]), as the loader's device
/// tensors do when dropped, so later windows write into memory already
/// mapped.
fn read_raw(reader: &AtomicDataZarrReader, order: &Indices, opts: &ReadOptions, pb: &Progress) -> Result<Tally> {
    let windows = order.windows(opts.read_window());
    let lists = |w: &[usize]| -> Vec<Vec<usize>> { w.chunks(opts.batch_size).map(<[usize]>::to_vec).collect() };
    // What the DataLoader asks of the reader on the CPU device, so that
    // `batch` against `raw` is the loader's overhead alone.
    let collate = raw_collate().with_skip_edges(opts.cutoff.is_some());
    // Delivered bytes in the store's dtypes, as the batch path counts them.
    let schema = delivered_schema(reader, opts);
    let sizes = schema_sizes(&schema);
    let mut tally = Tally::new(reader.len(), opts.checksum);
    std::thread::scope(|scope| -> Result<()> {
        // A rendezvous channel: the window being read and the one being
        // consumed are all that exist at once (a buffered one let a third
        // wait in the channel: ~200 MB more of fresh memory on bulk stores).
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(usize, Vec<CollatedBatch>)>>(0);
        let windows = &windows;
        scope.spawn(move || {
            // Each window is planned while the one before is read (as the
            // DataLoader does): its chunks stay cached until its own read.
            let mut plans = windows.iter().map(|w| reader.plan(lists(&order.slice(w.clone())), collate)).enumerate();
            let mut next = plans.next();
            while let Some((wi, this)) = next {
                next = plans.next();
                let mut out = Vec::new();
                let r = this
                    .and_then(|plan| reader.read_plan(plan, &mut out))
                    .and_then(|()| with_cutoff(&mut out, opts))
                    .map(|()| (wi, out));
                let failed = r.is_err();
                // A closed channel: the consumer stopped on an error.
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        for msg in rx {
            let (wi, out) = msg?;
            let window = order.slice(windows[wi].clone());
            let mut k = 0;
            for b in out {
                for &i in &b.indices {
                    tally.sample(i, window.get(k).copied().unwrap_or(usize::MAX));
                    k += 1;
                }
                tally.bytes += b.fields.iter().map(|(name, f)| field_bytes(&sizes, name, f.data.len())).sum::<u64>();
                if opts.checksum {
                    tally.hash(&widened(&b, &schema)?.to_samples()?);
                }
                b.recycle();
            }
            pb.inc(window.len() as u64);
        }
        Ok(())
    })?;
    Ok(tally)
}

/// The progress bar of epoch `epoch` (of `total` samples, reading `what`);
/// past the first, the peak memory and the fault count start anew.
pub(super) fn start_epoch(
    opts: &ReadOptions,
    epoch: usize,
    total: u64,
    what: &str,
    faults: &mut Option<u64>,
) -> Progress {
    if epoch > 0 {
        reset_peak_rss();
        *faults = minor_faults();
    }
    let nth = if opts.epochs > 1 { format!(" #{}", epoch + 1) } else { String::new() };
    Progress::new(opts.progress, total, format!("read {what} {}{nth}", opts.order))
}

/// An epoch's read time and first batch's time, from `start` (the pass's
/// start) and `first` (its first batch); the first epoch's include opening
/// the store (`open_time`), as the toolkit's figures do.
pub(super) fn epoch_times(
    start: Instant,
    first: Option<Instant>,
    epoch: usize,
    open_time: Duration,
) -> (Duration, Option<Duration>) {
    let open = if epoch == 0 { open_time } else { Duration::ZERO };
    (start.elapsed() + open, first.map(|f| f.duration_since(start) + open))
}

/// `b` with its int32-narrowed fields back in the store's int64 (as
/// `schema` says), so its checksum is the stored samples'.
pub(super) fn widened(
    b: &CollatedBatch,
    schema: &BTreeMap<String, (Level, DType, Vec<usize>)>,
) -> Result<CollatedBatch> {
    let mut b = b.clone();
    for (name, f) in &mut b.fields {
        if matches!(schema.get(name), Some((_, DType::Int64, _))) && f.data.dtype() == DType::Int32 {
            let wide = f.data.to_i64_vec().ok_or_else(|| Error::Internal(format!("{name}: int32 not widened")))?;
            f.data = HostData::Int64(wide);
        }
    }
    Ok(b)
}

/// The fields a read delivers, in the store's dtypes: the store's, and with
/// a cutoff the edges built while loading, as `import --cutoff` would store
/// them.
pub(super) fn delivered_schema(
    reader: &AtomicDataZarrReader,
    opts: &ReadOptions,
) -> BTreeMap<String, (Level, DType, Vec<usize>)> {
    let mut schema = reader.field_schema();
    if opts.cutoff.is_some() {
        schema.insert(crate::data::NEIGHBOR_LIST.into(), (Level::Edge, DType::Int64, vec![2]));
        schema.insert(crate::data::neighbors::SHIFTS.into(), (Level::Edge, DType::Float32, vec![3]));
    }
    schema
}

/// Element size of each field in the store's dtype, by name.
pub(super) fn schema_sizes(schema: &BTreeMap<String, (Level, DType, Vec<usize>)>) -> BTreeMap<String, usize> {
    schema.iter().map(|(name, (_, dtype, _))| (name.clone(), dtype.size())).collect()
}

/// Bytes of `elems` elements of field `name` in the store's dtype.
pub(super) fn field_bytes(sizes: &BTreeMap<String, usize>, name: &str, elems: usize) -> u64 {
    (elems * sizes.get(name).copied().unwrap_or(0)) as u64
}

/// The raw path's collate options: int64 fields narrowed to int32, as the
/// DataLoader reads for devices with int32 int tensors (Flex, CUDA).
fn raw_collate() -> CollateOptions {
    CollateOptions::default().with_narrow_int64(true)
}

/// Gives a raw read's batches lists built at `opts.cutoff`, if set (int32
/// indices, as [`raw_collate`]), naming a failing sample by its logical
/// index.
fn with_cutoff(batches: &mut [CollatedBatch], opts: &ReadOptions) -> Result<()> {
    let Some(cutoff) = opts.cutoff else { return Ok(()) };
    crate::data::build_edges_all(batches, cutoff, raw_collate().narrow_int64(), &|i, e| {
        Error::invalid(format!("sample {i}"), e.to_string())
    })
}

/// The single path: one `read(i)` per sample.
fn read_single(reader: &AtomicDataZarrReader, order: &Indices, opts: &ReadOptions, pb: &Progress) -> Result<Tally> {
    let mut tally = Tally::new(reader.len(), opts.checksum);
    for i in order.iter() {
        let mut s = reader.read(i as i64)?;
        if let Some(c) = opts.cutoff {
            s.data = crate::data::neighbors::with_neighbors(s.data, c)
                .map_err(|e| Error::invalid(format!("sample {i}"), e.to_string()))?;
        }
        tally.sample(s.metadata.index, i);
        tally.bytes += sample_bytes(&s.data);
        tally.hash(std::slice::from_ref(&s.data));
        pb.inc(1);
    }
    Ok(tally)
}

/// The batch path: the public DataLoader (fixed-order sampler, validation
/// skipped) on the CPU device, as the reference's batch mode does.
fn read_loader(
    reader: &Arc<AtomicDataZarrReader>,
    order: &Indices,
    opts: &ReadOptions,
    pb: &Progress,
) -> Result<Tally> {
    // Delivered bytes are counted in the store's dtypes (element count times
    // the stored element size), so they compare with raw_bytes whatever
    // element types the backend's tensors use.
    let schema = delivered_schema(reader, opts);
    let sizes = schema_sizes(&schema);
    let mut ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
    if let Some(c) = opts.cutoff {
        ds = ds.with_cutoff(c)?;
    }
    let device = burn::tensor::Device::flex();
    let mut builder = DataLoader::builder(ds)
        .with_batch_size(opts.batch_size)
        .with_prefetch_factor(opts.prefetch())
        .with_pin_memory(opts.pin_memory);
    builder = match (opts.order, order) {
        // Exactly what a user's shuffled loader reads (its own plan).
        (ReadOrder::DefaultShuffle, _) => {
            builder.with_shuffle(true).with_seed(opts.seed).with_rank(opts.rank, opts.world_size)
        }
        // A user's in-order loader: its own range, never a list.
        (ReadOrder::Sequential, _) => builder.with_rank(opts.rank, opts.world_size),
        (_, Indices::List(l)) => builder.with_sampler(ListSampler::new(l.clone())),
        (_, Indices::Range(r)) => builder.with_sampler(ListSampler::new(r.clone().collect())),
    };
    let loader = builder.build(&device)?;
    let mut tally = Tally::new(reader.len(), opts.checksum);
    let mut k = 0;
    for batch in loader.iter() {
        let batch: AtomicBatch = batch?;
        for &i in &batch.indices {
            tally.sample(i, order.get(k).unwrap_or(usize::MAX));
            k += 1;
        }
        tally.bytes +=
            batch.fields.iter().map(|(name, f)| field_bytes(&sizes, name, f.shape.iter().product())).sum::<u64>();
        if opts.checksum {
            tally.hash(&batch_to_host(&batch, &schema)?.to_samples()?);
        }
        pb.inc(batch.num_graphs as u64);
        // A timed prefix (`max_samples`) of the loader's own epoch.
        if k >= order.len() {
            break;
        }
    }
    Ok(tally)
}

/// What a device batch holds, read back to the host in the store's dtypes
/// (the batch may hold int64 fields as int32, half floats as float32).
fn batch_to_host(batch: &AtomicBatch, schema: &BTreeMap<String, (Level, DType, Vec<usize>)>) -> Result<CollatedBatch> {
    use crate::BatchData;
    use crate::data::CollatedField;
    use half::{bf16, f16};
    let bad = |what: &str, e: burn::tensor::DataError| Error::Device {
        field: what.to_string(),
        reason: format!("reading back: {e:?}"),
    };
    let ints = |t: &burn::tensor::Tensor<1, burn::tensor::Int>, what: &str| {
        t.to_data().try_into_vec_as::<i64>().map_err(|e| bad(what, e))
    };
    let mut out = CollatedBatch {
        indices: batch.indices.clone(),
        atoms_ptr: ints(&batch.atoms_ptr, "atoms_ptr")?,
        edges_ptr: ints(&batch.edges_ptr, "edges_ptr")?,
        fields: BTreeMap::new(),
        strings: batch.strings.clone(),
        buffers: Default::default(),
    };
    for (name, f) in &batch.fields {
        let dtype = schema.get(name).map(|s| s.1).ok_or_else(|| Error::InvalidInput {
            context: format!("batch field {name}"),
            reason: "not in the store".into(),
        })?;
        let data = match &f.data {
            BatchData::Bool(t) => HostData::Bool(t.to_data().try_into_vec_as::<bool>().map_err(|e| bad(name, e))?),
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
                    DType::Float64 => HostData::Float64(d.try_into_vec_as::<f64>().map_err(|e| bad(name, e))?),
                    other => {
                        let v = d.try_into_vec_as::<f32>().map_err(|e| bad(name, e))?;
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

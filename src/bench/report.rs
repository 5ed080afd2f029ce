//! The report: facts about a store, one row per (store, read path), and the
//! table the CLI prints.

use serde::Serialize;

use super::mix::{MixReport, time_mixture};
use super::options::{ReadOptions, ReadOrder, ReadPath, ReadResult};
use super::read::time_reads;
use crate::error::Result;
use crate::source::{Reader, ReaderExt};
use crate::{Location, ReaderOptions};

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
///
/// # Errors
/// The errors of opening the store and reading its pointers (as
/// [`AtomicDataZarrReader::open_opt`](crate::AtomicDataZarrReader::open_opt)).
pub fn store_facts(store: &Location) -> Result<StoreFacts> {
    let reader = super::read::open_reader(store, ReaderOptions::default().with_cache_bytes(0), &Default::default())?;
    let schema = reader.field_schema();
    let n = reader.len();
    let (mut atoms, mut edges) = (0u64, 0u64);
    for i in 0..n {
        let (a, e) = reader.sample_sizes(i)?;
        atoms += a as u64;
        edges += e as u64;
    }
    let mut raw = 0u64;
    for (level, dtype, trailing) in schema.values() {
        let row = (trailing.iter().product::<usize>() * dtype.size()) as u64;
        let rows = level.pick(atoms, edges, n as u64);
        raw += row * rows;
    }
    let (disk_bytes, num_files) = crate::store::format::store_usage(store, &*reader.byte_source(), "")?;
    Ok(StoreFacts { num_systems: n, total_atoms: atoms, total_edges: edges, raw_bytes: raw, disk_bytes, num_files })
}

/// One report row (a table line, or one JSON object with `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportRow {
    /// The store read; for a mixture its name, `multi[A, B]` (its stores
    /// are in `children`).
    pub store: Location,
    /// Active samples in the store.
    pub systems: usize,
    /// Read path.
    pub read_path: ReadPath,
    /// Read order.
    pub read_order: ReadOrder,
    /// Block size (block-shuffle only).
    pub read_order_block_size: Option<usize>,
    /// Blocks in the pool (chunk-shuffle, and default-shuffle on a store
    /// larger than the cache).
    pub pool_blocks: Option<usize>,
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
    /// samples_read / read_time (the table's samples/s; systems / read_time
    /// for a whole epoch).
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
    /// Bytes decoded during the pass.
    pub decoded_bytes: u64,
    /// Bytes decoded per byte of samples read during the pass (1 when each
    /// needed chunk was decoded once and used whole).
    pub decode_amplification: Option<f64>,
    /// Samples per second at the decode floor: the store's samples over the
    /// time to decode every inner chunk once on all cores (best of two),
    /// with `--decode-floor`.
    pub decode_floor_samples_per_s: Option<f64>,
    /// read_samples_per_s / decode_floor_samples_per_s.
    pub floor_fraction: Option<f64>,
    /// Peak resident memory of the process during the pass, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Minor page faults (pages touched fresh) during the pass.
    pub minor_faults: Option<u64>,
    /// Minor page faults per GB (10^9 bytes) of field data delivered.
    pub minor_faults_per_gb: Option<f64>,
    /// Seconds from the start of the pass (of opening the store, for the
    /// first) to the first batch delivered.
    pub first_batch_s: Option<f64>,
    /// Content checksum of what the pass delivered (16 hex digits; see
    /// [`sample_hash`](super::sample_hash)), with `--checksum`; a string so JSON tools keep all
    /// 64 bits.
    pub content_checksum: Option<String>,
    /// Requests made to the store during the pass (file reads for a local
    /// store, round trips for a remote one; the first pass includes opening).
    pub requests: u64,
    /// Bytes received from the store during the pass.
    pub fetched_bytes: u64,
    /// A mixture's own fields (`sampler`, `replacement`, `children`,
    /// `counts_ok`: see [`MixReport`]); absent for one store.
    #[serde(flatten)]
    pub mixture: Option<MixReport>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rows_for(
    store: &Location,
    facts: &StoreFacts,
    write: Option<(f64, String)>,
    opts: &ReadOptions,
    path: ReadPath,
    results: Vec<ReadResult>,
    floor: Option<f64>,
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
            let read_rate = if t > 0.0 { r.samples_read as f64 / t } else { 0.0 };
            ReportRow {
                store: store.clone(),
                systems: n,
                read_path: path,
                read_order: opts.order,
                read_order_block_size: (opts.order == ReadOrder::BlockShuffle).then_some(opts.block_size),
                pool_blocks: r.pool_blocks,
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
                read_samples_per_s: read_rate,
                read_bytes: r.read_bytes,
                samples_read: r.samples_read,
                unique_samples: r.unique_samples,
                order_ok: r.order_ok,
                cache_bytes: opts.cache_bytes,
                cache_hits: r.cache_hits,
                cache_misses: r.cache_misses,
                decoded_bytes: r.decode.decoded_bytes,
                decode_amplification: r.decode.amplification(),
                decode_floor_samples_per_s: floor,
                floor_fraction: floor.filter(|f| *f > 0.0).map(|f| read_rate / f),
                peak_rss_bytes: r.peak_rss,
                minor_faults: r.minor_faults,
                minor_faults_per_gb: r
                    .minor_faults
                    .filter(|_| r.read_bytes > 0)
                    .map(|f| f as f64 / (r.read_bytes as f64 / 1e9)),
                first_batch_s: r.first_batch_time.map(|d| d.as_secs_f64()),
                content_checksum: r.content_checksum.map(|c| format!("{c:016x}")),
                requests: r.requests,
                fetched_bytes: r.fetched_bytes,
                mixture: None,
            }
        })
        .collect()
}

/// `atomzarr read STORE`: times every requested path against an existing store.
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) for invalid `opts`; otherwise as
/// [`store_facts`], [`decode_floor`] and [`time_reads`].
pub fn read_bench(store: impl Into<Location>, opts: &ReadOptions) -> Result<Vec<ReportRow>> {
    opts.validate_for(1)?;
    let store = &store.into();
    let facts = store_facts(store)?;
    let floor = decode_floor(store, opts)?;
    let mut rows = Vec::new();
    for &p in &opts.paths {
        let r = time_reads(store, p, opts, Some(facts.num_systems))?;
        rows.extend(rows_for(store, &facts, None, opts, p, r, floor));
    }
    Ok(rows)
}

/// `atomzarr read STORE [STORE ...]`: one store as [`read_bench`]; two or
/// more as one mixture behind a [`MultiReader`](crate::MultiReader), read
/// through the loader with the sampler [`ReadOptions::mix`] asks for
/// ([`time_mixture`](super::time_mixture)). A mixture's rows add up its
/// stores' size facts and carry its [`MixReport`].
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) for invalid `opts` (as
/// [`ReadOptions::validate_for`]); otherwise as [`store_facts`],
/// [`read_bench`] and [`time_mixture`](super::time_mixture).
pub fn read_bench_many(stores: &[Location], opts: &ReadOptions) -> Result<Vec<ReportRow>> {
    opts.validate_for(stores.len())?;
    if let [one] = stores {
        return read_bench(one, opts);
    }
    let mut facts = StoreFacts::default();
    for s in stores {
        let f = store_facts(s)?;
        facts.num_systems += f.num_systems;
        facts.total_atoms += f.total_atoms;
        facts.total_edges += f.total_edges;
        facts.raw_bytes += f.raw_bytes;
        facts.disk_bytes += f.disk_bytes;
        facts.num_files += f.num_files;
    }
    let names: Vec<String> = stores.iter().map(Location::to_string).collect();
    let store = Location::parse(&format!("multi[{}]", names.join(", ")));
    let (results, reports): (Vec<ReadResult>, Vec<MixReport>) = time_mixture(stores, opts)?.into_iter().unzip();
    let mut rows = rows_for(&store, &facts, None, opts, ReadPath::Batch, results, None);
    for (row, report) in rows.iter_mut().zip(reports) {
        row.mixture = Some(report);
    }
    Ok(rows)
}

/// With [`ReadOptions::decode_floor`]: the store's samples per second when
/// every inner chunk is decoded once on all cores, no cache, no row copy
/// (best of two runs, so both see a warm page cache, as the timed passes
/// after it do). Opening the store is not part of it.
///
/// # Errors
/// The errors of opening the store and of
/// [`AtomicDataZarrReader::decode_every_chunk`](crate::AtomicDataZarrReader::decode_every_chunk).
pub fn decode_floor(store: &Location, opts: &ReadOptions) -> Result<Option<f64>> {
    if !opts.decode_floor {
        return Ok(None);
    }
    let reader = super::read::open_reader(store, ReaderOptions::default().with_cache_bytes(0), &opts.remote)?;
    let n = reader.len() as f64;
    let mut best = f64::INFINITY;
    for _ in 0..2 {
        let t = std::time::Instant::now();
        reader.decode_every_chunk()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(Some(if best > 0.0 { n / best } else { 0.0 }))
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

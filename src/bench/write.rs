//! `atomzarr roundtrip`: generate, write (timed) with the benchmark's codec
//! settings, then read back through the timed paths.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::content::sample_bytes;
use super::options::ReadOptions;
use super::read::time_reads;
use super::report::{ReportRow, decode_floor, rows_for, store_facts};
use crate::data::NEIGHBOR_LIST;
use crate::data::synth::{Generator, Preset};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::store::{AtomicDataZarrWriter, ZarrWriteConfig};
use crate::{Codec, ZarrArrayConfig};

/// Structures generated and written at a time by [`roundtrip`] by default: large
/// enough that appends rewrite few partial shards (the reference layout's
/// 500,000-row shards hold ~9,000 samples' atoms), small enough to keep the
/// generated batch (~250 MB) well below a large store.
pub const DEFAULT_WRITE_BATCH: usize = 50_000;

/// The write side of `atomzarr roundtrip`.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOptions {
    /// System counts; each gets its own store (a prefix of one generated set).
    pub num_systems: Vec<usize>,
    /// What kind of structures to generate.
    pub preset: Preset,
    /// Minimum atoms per structure.
    pub min_atoms: usize,
    /// Maximum atoms per structure.
    pub max_atoms: usize,
    /// Generator seed.
    pub seed: u64,
    /// Codec (None: the library default, zstd level 0).
    pub codec: Option<Codec>,
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
    /// Samples per `write`/`append` call (the first call writes, the rest
    /// append); small values time small appends.
    pub write_batch: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            num_systems: vec![1000],
            preset: Preset::Reference,
            min_atoms: 10,
            max_atoms: 100,
            seed: 42,
            codec: None,
            chunk_size: None,
            shard_size: None,
            edge_chunk_size: None,
            edge_shard_size: None,
            output_dir: None,
            checksum: true,
            write_batch: DEFAULT_WRITE_BATCH,
        }
    }
}

impl WriteOptions {
    /// The store configuration these options describe, as the reference builds
    /// it: codec, chunk and shard on `core`, edge sizes as overrides of
    /// `neighbor_list` and `shifts`.
    ///
    /// # Errors
    /// [`Error::Config`] for a blosc level outside 0..=9 or a configuration that
    /// does not validate (as [`ZarrWriteConfig::validate`]).
    pub fn write_config(&self) -> Result<ZarrWriteConfig> {
        let codec = self.codec;
        let checksum = Some(self.checksum);
        let core = ZarrArrayConfig {
            codec,
            chunk_size: self.chunk_size,
            shard_size: self.shard_size,
            write_empty_chunks: None,
            checksum,
        };
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
            config = config.with_override(NEIGHBOR_LIST, edge).with_override("shifts", edge);
        }
        config.validate()?;
        Ok(config)
    }

    /// A one-line description for the table title.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Preset::Bulk { cutoff } = self.preset {
            parts.push(format!("bulk cells, cutoff {cutoff} Å"));
        }
        match self.codec {
            Some(Codec::None) => parts.push("no compression".into()),
            Some(c) => parts.push(c.to_string()),
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
        if self.write_batch != DEFAULT_WRITE_BATCH {
            parts.push(format!("appends of {}", self.write_batch));
        }
        parts.join(", ")
    }
}

/// The part of a [`roundtrip`] about to run, for its `on_phase` hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A store is about to be written, a batch at a time.
    Write,
    /// The store is written; the timed reads come next.
    Read,
}

/// `atomzarr roundtrip`: for each system count, generate, write (timed), read
/// back through every requested path (timed), report. `on_phase` runs before
/// each write and before the reads that follow it: the `atomzarr` binary
/// tunes its allocator there (process-wide settings are the program's to
/// make, not the library's); pass `&mut |_| {}` for none.
///
/// # Errors
/// [`Error::Config`] for invalid `opts`, a zero `write_batch`, no system
/// count or an invalid write configuration; [`Error::Io`] naming the output
/// folder; the errors of writing and reading the stores.
pub fn roundtrip(w: &WriteOptions, opts: &ReadOptions, on_phase: &mut dyn FnMut(Phase)) -> Result<Vec<ReportRow>> {
    opts.validate_for(1)?;
    Error::check_at_least_one("write_batch", w.write_batch)?;
    let config = w.write_config()?;
    let mut counts = w.num_systems.clone();
    counts.sort_unstable();
    counts.dedup();
    if counts.is_empty() {
        return Err(Error::Config("at least one -n is needed".into()));
    }
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

    // Each store is generated again from the seed, a batch at a time while
    // it is written, so memory stays bounded by one batch whatever `-n` is
    // (the generator is sequential: a smaller count is a prefix of a larger).
    let mut rows = Vec::new();
    for n in counts {
        let store = dir.join(format!("bench_{n}.zarr"));
        let pb = Progress::new(opts.progress, n as u64, format!("write {n}"));
        let mut generator = Generator::with_preset(w.preset, w.min_atoms, w.max_atoms, w.seed)?;
        on_phase(Phase::Write);
        let mut writer = AtomicDataZarrWriter::create(&store, config.clone())?;
        let (mut write_time, mut raw_bytes, mut done) = (Duration::ZERO, 0u64, 0usize);
        while done < n {
            let batch = generator.batch(w.write_batch.min(n - done))?;
            raw_bytes += batch.iter().map(sample_bytes).sum::<u64>();
            let t = Instant::now();
            if done == 0 {
                writer.write(&batch)?
            } else {
                writer.append(&batch)?
            }
            write_time += t.elapsed();
            done += batch.len();
            pb.inc(batch.len() as u64);
        }
        drop(writer);
        on_phase(Phase::Read);
        let write_time = write_time.as_secs_f64();
        pb.finish_and_clear();
        let location = crate::Location::Local(store.clone());
        let mut facts = store_facts(&location)?;
        // The reference counts raw bytes on the generated data.
        facts.raw_bytes = raw_bytes;
        let floor = decode_floor(&location, opts)?;
        for &p in &opts.paths {
            let r = time_reads(&location, p, opts, Some(n))?;
            rows.extend(rows_for(&location, &facts, Some((write_time, w.describe())), opts, p, r, floor));
        }
    }
    Ok(rows)
}

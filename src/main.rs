//! The `atomzarr` command line: a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use comfy_table::Table;

use atomzarr::cli::bench::{Phase, ReadOptions, ReadOrder, ReadPath, WriteOptions};
use atomzarr::data::synth::Preset;
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Codec, Location, ZarrArrayConfig, ZarrWriteConfig};

#[derive(Parser)]
#[command(name = "atomzarr", version, about = "Atomic-structure Zarr stores for Burn training")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every logical sample as JSON (the reference fixtures' format).
    Dump {
        /// The store.
        store: Location,
        /// Build neighbor lists at this cutoff (Å) while reading, replacing
        /// any stored edges (the lists `import --cutoff` stores).
        #[arg(long)]
        cutoff: Option<f64>,
    },
    /// Summarise a store: samples, and per array level, dtype, shape, codec,
    /// chunk, shard, bytes on disk and file count.
    Inspect {
        /// The store.
        store: Location,
    },
    /// Write a small synthetic store (default: a temp dir) and inspect it.
    Demo {
        /// Where to write (must not exist); default a temporary directory.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Number of structures.
        #[arg(short, long, default_value_t = 1000)]
        n: usize,
    },
    /// I/O benchmark: generate synthetic structures, write a store per -n,
    /// read it all back, report sizes and throughput (mirrors the reference
    /// toolkit's `nvalchemi-io-test roundtrip`).
    Roundtrip(RoundtripArgs),
    /// Rewrite the neighbor lists that nvalchemi-toolkit's `append` stored
    /// shifted (indices out of their sample's range, shifted by one atom
    /// offset per appended batch) where the fix is unambiguous; list the
    /// out-of-range samples it could not fix (exit status 1 if any).
    Repair {
        /// The store.
        store: PathBuf,
        /// Only report what would be fixed; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Import data sets into a store (created, or appended to): extended XYZ
    /// (plain, .gz, .xz, .bz2), ASE SQLite .db, fairchem .aselmdb, SPICE and
    /// ANI-1x HDF5, rMD17 and sGDML npz, MPtrj JSON. The format is told from
    /// each file; values are stored in eV, Å, eV/Å and eV/Å³.
    Import(ImportArgs),
    /// Write a store's samples as extended XYZ that `ase.io.read(OUT, ":")`
    /// reads back as the original frames (labels a frame does not have are
    /// left out of it; neighbor lists are not written).
    Export {
        /// The store.
        store: Location,
        /// The extended-XYZ file to write (must not exist).
        out: PathBuf,
    },
    /// Dataset statistics for MLIP training: counts, atoms and edges per
    /// sample, elements, per-element reference energies (E0s, least
    /// squares), energy per atom, force RMS, average number of neighbors.
    Stats {
        /// The store.
        store: Location,
        /// Only the samples of a part of the split saved under this name
        /// (`atomzarr split --save NAME`).
        #[arg(long)]
        split: Option<String>,
        /// The part of `--split` (default train).
        #[arg(long, default_value = "train", requires = "split")]
        part: String,
        /// Save the statistics in the store's root attributes (`atomzarr.stats`).
        #[arg(long)]
        save: bool,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Split the samples into parts (train / val / test) by a hash of
    /// (seed, group key), so every group lands whole in one part, the split
    /// is the same on every machine, and appends never move a sample.
    Split {
        /// The store.
        store: Location,
        /// Group samples by this system label (a string label, or an
        /// integer field printed in decimal): mp_id, smiles, config_type.
        /// Without it each sample is its own group.
        #[arg(long)]
        by: Option<String>,
        /// The parts and their fractions, in order; they must sum to 1.
        #[arg(long, default_value = "train=0.8,val=0.1,test=0.1")]
        fractions: String,
        /// Seed of the hash.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Save the rule in the store's root attributes under this name, for
        /// `atomzarr stats --split NAME` and `Split::from_store(&reader, NAME)`.
        #[arg(long)]
        save: Option<String>,
        /// Print `{"splits": {part: [logical indices]}, "rule": ..., "parts": ...}`.
        #[arg(long)]
        json: bool,
    },
    /// I/O benchmark against an existing store (ours or the Python toolkit's),
    /// local or at a URL (s3://, gs://, az://, http(s)://).
    Read {
        /// The store.
        store: Location,
        /// Build neighbor lists at this cutoff (Å) while reading, replacing
        /// any stored edges (every read mode; the lists `import --cutoff`
        /// stores).
        #[arg(long)]
        cutoff: Option<f64>,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Copy a whole store: publish a local store to object storage
    /// (s3://, gs://, az://), fetch one back, or copy between them. The
    /// destination must not exist; its root zarr.json is written last.
    Copy {
        /// The store to copy (path or URL).
        src: Location,
        /// Where to put it (path or URL).
        dst: Location,
        #[command(flatten)]
        remote: RemoteArgs,
        #[command(flatten)]
        wait: WaitArg,
    },
}

/// The writer lock of the commands that change a store.
/// `atomzarr import`'s arguments.
#[derive(Args)]
struct ImportArgs {
    /// Input files, then the store (the last path).
    #[arg(required = true, num_args = 2..)]
    paths: Vec<PathBuf>,
    /// The inputs' format, instead of telling it from each file:
    /// extxyz, asedb, aselmdb, hdf5, npz or mptrj.
    #[arg(long)]
    format: Option<String>,
    /// The inputs' units, over their format's own: e.g.
    /// `energy=hartree,length=bohr` or `stress=kbar` (energy: eV, hartree,
    /// kcal/mol, kJ/mol, Ry; length: Å, bohr, nm; stress: GPa, kbar).
    #[arg(long)]
    units: Option<String>,
    /// HDF5: the energy dataset (another level of theory), e.g. `ccsd(t)_cbs.energy`.
    #[arg(long)]
    energy_key: Option<String>,
    /// HDF5: the forces (or gradient) dataset.
    #[arg(long)]
    forces_key: Option<String>,
    /// Labels only some frames have: `fill` stores them for every frame
    /// (NaN, 0 with `<name>_present`, or ""); `error` stops at the first
    /// frame whose fields differ from the first frame's.
    #[arg(long, value_enum, default_value_t = MissingArg::Fill)]
    missing: MissingArg,
    /// Build neighbor lists (`neighbor_list`, `shifts`) for this cutoff, Å.
    #[arg(long)]
    cutoff: Option<f64>,
    /// Frames per batch (parsed together, written in one append).
    #[arg(long, default_value_t = 8192)]
    batch_frames: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    wait: WaitArg,
}

#[derive(Args, Clone, Copy)]
struct WaitArg {
    /// Wait up to SECONDS for another writer of the store to finish, instead
    /// of failing at once (one writer per store at a time; readers never wait).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, default_value = "0")]
    wait: std::time::Duration,
}

fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| format!("{s}: seconds must be finite and not negative"))
}

/// How stores at URLs are reached and fetched. Credentials and the endpoint
/// also come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
/// AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, GOOGLE_*, AZURE_*).
#[derive(Args, Clone)]
struct RemoteArgs {
    /// Requests in flight at once.
    #[arg(long, default_value_t = atomzarr::store::remote::DEFAULT_CONCURRENCY)]
    concurrency: usize,
    /// Largest gap (bytes) between two inner chunks of a shard fetched in one request.
    #[arg(long, default_value_t = atomzarr::store::remote::DEFAULT_MERGE_GAP)]
    merge_gap: u64,
    /// One request per inner chunk (no merging of neighbouring ranges).
    #[arg(long)]
    no_merge: bool,
    /// Keep fetched encoded chunks in this folder (bounded by --disk-cache-bytes).
    #[arg(long)]
    disk_cache: Option<PathBuf>,
    /// Byte bound of the disk cache.
    #[arg(long, default_value_t = 10 << 30)]
    disk_cache_bytes: u64,
    /// S3 endpoint of an S3-compatible service (else AWS_ENDPOINT_URL).
    #[arg(long)]
    endpoint: Option<String>,
    /// Retries of a transient failure.
    #[arg(long, default_value_t = 3)]
    retries: usize,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 30.0)]
    timeout_s: f64,
}

impl RemoteArgs {
    fn options(&self) -> atomzarr::store::remote::RemoteOptions {
        let mut o = atomzarr::store::remote::RemoteOptions::default()
            .with_concurrency(self.concurrency)
            .with_merge_gap((!self.no_merge).then_some(self.merge_gap))
            .with_retries(self.retries)
            .with_timeout(std::time::Duration::from_secs_f64(self.timeout_s.max(0.001)));
        if let Some(d) = &self.disk_cache {
            o = o.with_disk_cache(d, self.disk_cache_bytes);
        }
        if let Some(e) = &self.endpoint {
            o = o.with_endpoint(e);
        }
        o
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MissingArg {
    /// Store every label any frame has; absent values read as NaN, 0 / false (with `<name>_present`) or "".
    Fill,
    /// Stop at a frame whose fields differ from the first frame's.
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    /// The public DataLoader (validation skipped, CPU device).
    Batch,
    /// One `read(i)` per sample.
    Single,
    /// batch, then single.
    Both,
    /// The reader's `read_collated` in read windows, without the DataLoader.
    Raw,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PresetArg {
    /// 10-100 random atoms, 1-4 random edges per atom (the reference benchmark).
    Reference,
    /// 50-300-atom fcc metal cells, neighbor lists at --cutoff.
    Bulk,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OrderArg {
    Sequential,
    Shuffle,
    BlockShuffle,
    /// Chunk-aware shuffle: the store's chunk blocks permuted,
    /// --buffer-blocks of them in the pool the samples are drawn from.
    ChunkShuffle,
    /// What a DataLoader with shuffle on reads: a full permutation when the
    /// store fits the cache, else the block pool sized from the cache.
    DefaultShuffle,
}

#[derive(Args)]
struct ReadArgs {
    /// Read path(s) to time; repeat to time several, in order.
    #[arg(long = "read-mode", value_enum, default_values_t = [ModeArg::Batch])]
    read_mode: Vec<ModeArg>,
    /// Samples per emitted batch.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Batches fused into one backend read (read window = batch size x prefetch).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    prefetch_factor: i64,
    /// Logical read order.
    #[arg(long, value_enum, default_value_t = OrderArg::Sequential)]
    read_order: OrderArg,
    /// Seed of the shuffled read orders.
    #[arg(long, default_value_t = 0)]
    read_seed: u64,
    /// Contiguous block size of block-shuffle.
    #[arg(long, default_value_t = 8192)]
    read_order_block_size: usize,
    /// Blocks in chunk-shuffle's pool (K): more mixes more blocks into each
    /// batch and needs more cache (default-shuffle sizes K from the cache).
    #[arg(long, default_value_t = atomzarr::sampler::DEFAULT_BUFFER_BLOCKS)]
    buffer_blocks: usize,
    /// Also time the decode floor (every inner chunk decoded once on all
    /// cores) and report each pass against it.
    #[arg(long)]
    decode_floor: bool,
    /// Time only the first N samples of the read order (for orders too slow
    /// to run a whole epoch of, such as a shuffle of a store far larger than
    /// the cache).
    #[arg(long)]
    max_samples: Option<usize>,
    /// Read rank R's part of the epoch (of --world-size ranks), as a
    /// data-parallel rank's loader does (with default-shuffle: its own
    /// blocks).
    #[arg(long, default_value_t = 0)]
    rank: usize,
    /// Ranks the epoch is split over (see --rank).
    #[arg(long, default_value_t = 1)]
    world_size: usize,
    /// Ask the loader for pinned host staging.
    #[arg(long)]
    pin_memory: bool,
    /// Decoded-chunk cache budget in bytes (0 disables the cache).
    #[arg(long, default_value_t = atomzarr::DEFAULT_CACHE_BYTES)]
    cache_bytes: u64,
    /// Passes over the data with one reader (later passes show the cache).
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// One JSON object per row on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also report a content checksum of what each pass read, independent
    /// of order (hashing every byte, inside the timed pass).
    #[arg(long)]
    checksum: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

#[derive(Args)]
struct RoundtripArgs {
    /// Number of systems (repeat for several stores).
    #[arg(short = 'n', long = "num-systems", default_values_t = [1000usize, 10_000, 100_000])]
    num_systems: Vec<usize>,
    /// What to generate: the reference benchmark's random structures, or
    /// periodic fcc metal cells with real neighbor lists (bulk materials,
    /// where the neighbor lists are most of the bytes).
    #[arg(long, value_enum, default_value_t = PresetArg::Reference)]
    preset: PresetArg,
    /// Neighbor-list cutoff of the bulk preset, Å.
    #[arg(long, default_value_t = 5.0)]
    cutoff: f64,
    /// Minimum atoms per structure [default: 10, bulk 50].
    #[arg(long)]
    min_atoms: Option<usize>,
    /// Maximum atoms per structure [default: 100, bulk 300].
    #[arg(long)]
    max_atoms: Option<usize>,
    /// Compression codec (omit for the library default, zstd level 0);
    /// `lz4` is blosc with lz4.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(Codec::NAMES))]
    codec: Option<String>,
    /// Compression level.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    level: i32,
    /// Rows per chunk along dimension 0.
    #[arg(long)]
    chunk_size: Option<u64>,
    /// Rows per shard (enables sharding).
    #[arg(long)]
    shard_size: Option<u64>,
    /// Rows per chunk of edge arrays (neighbor_list, shifts).
    #[arg(long)]
    edge_chunk_size: Option<u64>,
    /// Rows per shard of edge arrays.
    #[arg(long)]
    edge_shard_size: Option<u64>,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory for the stores (kept); default a temporary directory (removed).
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Write no crc32c checksum per chunk (as the reference toolkit writes).
    #[arg(long)]
    no_checksum: bool,
    /// Samples per write call: the first writes, the rest append (small
    /// values time small appends).
    #[arg(long, default_value_t = atomzarr::cli::bench::DEFAULT_WRITE_BATCH)]
    write_batch: usize,
    #[command(flatten)]
    read: ReadArgs,
}

impl ReadArgs {
    fn options(&self) -> ReadOptions {
        let mut paths = Vec::new();
        for m in &self.read_mode {
            match m {
                ModeArg::Batch => paths.push(ReadPath::Batch),
                ModeArg::Single => paths.push(ReadPath::Single),
                ModeArg::Both => paths.extend([ReadPath::Batch, ReadPath::Single]),
                ModeArg::Raw => paths.push(ReadPath::Raw),
            }
        }
        ReadOptions {
            paths,
            order: match self.read_order {
                OrderArg::Sequential => ReadOrder::Sequential,
                OrderArg::Shuffle => ReadOrder::Shuffle,
                OrderArg::BlockShuffle => ReadOrder::BlockShuffle,
                OrderArg::ChunkShuffle => ReadOrder::ChunkShuffle,
                OrderArg::DefaultShuffle => ReadOrder::DefaultShuffle,
            },
            seed: self.read_seed,
            block_size: self.read_order_block_size,
            buffer_blocks: self.buffer_blocks,
            decode_floor: self.decode_floor,
            max_samples: self.max_samples,
            rank: self.rank,
            world_size: self.world_size,
            batch_size: self.batch_size,
            prefetch_factor: self.prefetch_factor,
            pin_memory: self.pin_memory,
            cache_bytes: self.cache_bytes,
            epochs: self.epochs,
            progress: !self.json || std::io::IsTerminal::is_terminal(&std::io::stderr()),
            checksum: self.checksum,
            remote: self.remote.options(),
            cutoff: None,
        }
    }
}

/// Pins glibc's mmap threshold (`M_MMAP_THRESHOLD`) at `bytes`: allocations
/// at least that large get their own mapping and go back to the system when
/// freed. Nothing on other allocators.
///
/// Why: `roundtrip` writes a large store a batch at a time, freeing and
/// reallocating ~250 MB per batch; with glibc's default (a threshold that
/// rises to the largest buffer freed so far) those buffers land on the heap
/// and fragment it, and the process grew by ~1.2 KB per sample written
/// (peaks near 900 MB at 400,000 samples) though it holds one batch. Pinned
/// at 128 KiB for the write, it went back to ~30 MB after each batch. The read
/// passes after it run with the threshold at glibc's maximum (32 MiB), where
/// the default settles in a long read.
fn set_mmap_threshold(bytes: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning parameter.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, i32::try_from(bytes).unwrap_or(i32::MAX));
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

/// A report that could not be written as JSON.
fn json_err(e: serde_json::Error) -> atomzarr::Error {
    atomzarr::Error::Serialization { what: "the JSON report".into(), source: e }
}

/// A failed write to standard output.
fn stdout_err(e: std::io::Error) -> atomzarr::Error {
    atomzarr::Error::Io { path: "<stdout>".into(), source: e }
}

fn print_rows(title: &str, rows: &[atomzarr::cli::bench::ReportRow], json: bool) -> atomzarr::Result<()> {
    use std::io::Write;
    let mut text = String::new();
    if json {
        for r in rows {
            text.push_str(&serde_json::to_string(r).map_err(json_err)?);
            text.push('\n');
        }
    } else {
        text = format!("{title}\n{}\n", atomzarr::cli::bench::table(rows));
    }
    // A closed pipe (`| head`) is the reader's choice, not an error worth a panic.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(stdout_err(e)),
        _ => Ok(()),
    }
}

fn print_inspect(store: &Location) -> atomzarr::Result<()> {
    let r = atomzarr::cli::inspect::inspect(store)?;
    println!("store {store}");
    println!(
        "samples: {} physical, {} active, {} deleted; {} bytes on disk in {} files",
        r.num_samples,
        r.active,
        r.num_samples - r.active,
        r.disk_bytes,
        r.files
    );
    let mut t = Table::new();
    t.set_header(["array", "level", "dtype", "shape", "codec", "chunk", "shard", "checksum", "disk bytes", "files"]);
    for a in &r.arrays {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
        t.add_row([
            a.path.clone(),
            a.level.map_or("meta".into(), |l| l.to_string()),
            a.dtype.to_string(),
            format!("{:?}", a.shape),
            a.config.codec().map_or("-".into(), |c| c.to_string()),
            opt(a.config.chunk_size()),
            opt(a.config.shard_size()),
            match a.config.checksum() {
                Some(true) => "crc32c".into(),
                Some(false) => "none".into(),
                None => "-".into(),
            },
            a.disk_bytes.to_string(),
            a.files.to_string(),
        ]);
    }
    println!("{t}");
    Ok(())
}

/// Prints a repair report; errors when out-of-range samples remain.
fn print_repair(r: &atomzarr::store::repair::RepairReport, json: bool) -> atomzarr::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r).map_err(json_err)?);
    } else {
        let verb = if r.written { "fixed" } else { "would fix" };
        println!("store {}: {} samples with edges checked", r.store, r.samples_checked);
        for run in &r.fixed {
            let (a, b) = (run.physical[0], run.physical[run.physical.len() - 1]);
            println!(
                "{verb} {} samples (physical {a}..={b}): indices shifted by -{} (toolkit append bug)",
                run.physical.len(),
                run.shift
            );
        }
        for u in &r.unfixed {
            println!(
                "not fixed: sample {} (physical {}): index {} outside [0, {}): {}",
                u.index, u.physical_index, u.value, u.num_atoms, u.reason
            );
        }
        if r.fixed.is_empty() && r.unfixed.is_empty() {
            println!("every neighbor index is in range");
        }
    }
    if r.unfixed.is_empty() {
        Ok(())
    } else {
        Err(atomzarr::Error::Inconsistent {
            store: r.store.clone(),
            array: "core/neighbor_list".into(),
            reason: format!(
                "{} samples with out-of-range neighbor indices could not be fixed (listed above)",
                r.unfixed.len()
            ),
        })
    }
}

#[cfg(feature = "remote")]
fn copy(src: &Location, dst: &Location, remote: &RemoteArgs, wait: std::time::Duration) -> atomzarr::Result<()> {
    let r = atomzarr::store::remote::copy(src, dst, &remote.options().with_lock_timeout(wait))?;
    println!("copied {src} to {dst}: {} objects, {} bytes", r.objects, r.bytes);
    Ok(())
}

#[cfg(not(feature = "remote"))]
fn copy(src: &Location, _dst: &Location, _remote: &RemoteArgs, _wait: std::time::Duration) -> atomzarr::Result<()> {
    Err(atomzarr::Error::Remote {
        url: src.to_string(),
        kind: atomzarr::RemoteErrorKind::Unsupported,
        reason: "this build of atomzarr has no `remote` feature (copy needs it)".into(),
    })
}

/// `atomzarr demo`: a small synthetic store, inspected.
fn demo(output: Option<PathBuf>, n: usize) -> atomzarr::Result<()> {
    let tmp;
    let path = match output {
        Some(p) => p,
        None => {
            tmp = tempfile::tempdir().map_err(|e| atomzarr::Error::Io { path: std::env::temp_dir(), source: e })?;
            tmp.path().join("demo.zarr")
        }
    };
    let samples = atomzarr::data::synth::generate(n, 10, 100, 0)?;
    let config = ZarrWriteConfig::default().with_core(
        ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(10_000)
            .with_shard_size(500_000),
    );
    AtomicDataZarrWriter::create(&path, config)?.write(&samples)?;
    print_inspect(&Location::Local(path))?;
    Ok(())
}

/// `atomzarr roundtrip`: the I/O benchmark's write and read.
fn roundtrip(a: &RoundtripArgs) -> atomzarr::Result<()> {
    let read = a.read.options();
    let preset = match a.preset {
        PresetArg::Reference => Preset::Reference,
        PresetArg::Bulk => Preset::Bulk { cutoff: a.cutoff },
    };
    let (min_atoms, max_atoms) = preset.default_atoms();
    let w = WriteOptions {
        num_systems: a.num_systems.clone(),
        preset,
        min_atoms: a.min_atoms.unwrap_or(min_atoms),
        max_atoms: a.max_atoms.unwrap_or(max_atoms),
        seed: a.seed,
        codec: a.codec.as_deref().map(|name| Codec::from_name(name, a.level)).transpose()?,
        chunk_size: a.chunk_size,
        shard_size: a.shard_size,
        edge_chunk_size: a.edge_chunk_size,
        edge_shard_size: a.edge_shard_size,
        output_dir: a.output_dir.clone(),
        checksum: !a.no_checksum,
        write_batch: a.write_batch,
    };
    if !a.read.json {
        eprintln!(
            "atomzarr roundtrip  atoms={}-{}  config={}  read window={}",
            w.min_atoms,
            w.max_atoms,
            w.describe(),
            read.read_window()
        );
    }
    // Keeps the batch-at-a-time write from fragmenting the heap; the reads
    // then run as a long-lived process would (see set_mmap_threshold).
    let rows = atomzarr::cli::bench::roundtrip(&w, &read, &mut |phase| match phase {
        Phase::Write => set_mmap_threshold(128 << 10),
        Phase::Read => set_mmap_threshold(32 << 20),
    })?;
    print_rows(&format!("Zarr I/O roundtrip benchmark: {}", w.describe()), &rows, a.read.json)?;
    Ok(())
}

/// `atomzarr import`: files of any supported format into a store.
fn import(a: ImportArgs) -> atomzarr::Result<()> {
    let ImportArgs { mut paths, format, units, energy_key, forces_key, missing, cutoff, batch_frames, json, wait } = a;
    use atomzarr::formats::input::Format;
    let store = paths.pop().ok_or_else(|| atomzarr::Error::Config("import needs a store path".into()))?;
    let format = match format {
        Some(f) => Some(
            Format::parse(&f)
                .ok_or_else(|| atomzarr::Error::Config(format!("--format {f}: one of {}", Format::names())))?,
        ),
        None => None,
    };
    let units = match units {
        Some(u) => Some(u.parse().map_err(|e| atomzarr::Error::Config(format!("--units: {e}")))?),
        None => None,
    };
    let show = !json || std::io::IsTerminal::is_terminal(&std::io::stderr());
    let source = atomzarr::formats::FrameOptions::default()
        .with_format(format)
        .with_units(units)
        .with_energy_key(energy_key)
        .with_forces_key(forces_key);
    let options = atomzarr::formats::import::ImportOptions::default()
        .with_cutoff(cutoff)
        .with_batch_frames(batch_frames)
        .with_missing(match missing {
            MissingArg::Fill => atomzarr::formats::import::Missing::Fill,
            MissingArg::Error => atomzarr::formats::import::Missing::Error,
        })
        .with_frame_options(source)
        .with_progress(show)
        .with_write_config(ZarrWriteConfig::default().with_lock_timeout(wait.wait));
    let t = std::time::Instant::now();
    let r = atomzarr::formats::import::import_files(&paths, &store, &options)?;
    let secs = t.elapsed().as_secs_f64();
    if json {
        let mut v = serde_json::to_value(&r).map_err(json_err)?;
        v["seconds"] = secs.into();
        println!("{v}");
    } else {
        for f in &r.files {
            println!("{}: {} {} ({}), {} frames", f.file.display(), f.format, f.layout, f.units, f.frames);
        }
        println!(
            "{} {}: {} frames, {} atoms, {} edges from {} files in {secs:.2} s ({:.0} frames/s)",
            if r.appended { "appended to" } else { "created" },
            r.store.display(),
            r.frames,
            r.atoms,
            r.edges,
            paths.len(),
            r.frames as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}

fn run(cli: Cli) -> atomzarr::Result<()> {
    match cli.cmd {
        Cmd::Dump { store, cutoff } => {
            let reader = AtomicDataZarrReader::open(&store)?;
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            match cutoff {
                Some(c) => {
                    let ds = atomzarr::Dataset::new(reader).with_skip_validation(true).with_cutoff(c)?;
                    atomzarr::cli::dump::dump_json(&ds, &mut lock)?;
                }
                None => atomzarr::cli::dump::dump_json(&reader, &mut lock)?,
            }
            use std::io::Write;
            lock.write_all(b"\n").map_err(stdout_err)?;
        }
        Cmd::Inspect { store } => print_inspect(&store)?,
        Cmd::Demo { output, n } => demo(output, n)?,
        Cmd::Roundtrip(a) => roundtrip(&a)?,
        Cmd::Repair { store, dry_run, json, wait } => {
            let report = if dry_run {
                atomzarr::store::repair::check(&store)?
            } else {
                atomzarr::store::repair::repair_with_lock_timeout(&store, wait.wait)?
            };
            print_repair(&report, json)?;
        }
        Cmd::Import(a) => import(a)?,
        Cmd::Export { store, out } => {
            let reader = AtomicDataZarrReader::open(&store)?;
            let n = atomzarr::formats::export::export_extxyz(&reader, &out)?;
            println!("wrote {n} frames to {}", out.display());
        }
        Cmd::Stats { store, split, part, save, json } => {
            use atomzarr::prep::stats::{StatsOptions, dataset_stats, subset_stats};
            let reader = AtomicDataZarrReader::open(&store)?;
            let show = !json || std::io::IsTerminal::is_terminal(&std::io::stderr());
            let options = StatsOptions::default().with_progress(show);
            let s = match &split {
                Some(name) => {
                    let sp = atomzarr::prep::split::Split::from_store(&reader, name)?;
                    subset_stats(&reader, sp.indices(&part)?, &options)?
                }
                None => dataset_stats(&reader, &options)?,
            };
            if save {
                let scope = split.as_deref().map(|n| (n, part.as_str()));
                AtomicDataZarrWriter::open(&store, ZarrWriteConfig::default())?.save_stats(&s, scope, &reader)?;
            }
            if json {
                println!("{}", serde_json::to_string(&s).map_err(json_err)?);
            } else {
                if let Some(name) = &split {
                    println!("split {name}, part {part}");
                }
                println!("{}", atomzarr::cli::stats::render(&store, &s));
                if save {
                    println!("saved in {store} (root attribute atomzarr.stats)");
                }
            }
        }
        Cmd::Split { store, by, fractions, seed, save, json } => {
            use atomzarr::prep::split::{Split, SplitRule};
            let reader = AtomicDataZarrReader::open(&store)?;
            let rule = SplitRule::parse(&fractions)?.with_by(by).with_seed(seed);
            let split = Split::compute(&reader, &rule)?;
            if let Some(name) = &save {
                AtomicDataZarrWriter::open(&store, ZarrWriteConfig::default())?.save_split(name, &split, &reader)?;
            }
            if json {
                println!("{}", atomzarr::cli::split::to_json(&split));
            } else {
                println!("{}", atomzarr::cli::split::render(&store, &split));
                if let Some(name) = &save {
                    println!("saved as {name} in {store} (root attribute atomzarr.splits.{name})");
                }
            }
        }
        Cmd::Read { store, cutoff, read: a } => {
            let rows = atomzarr::cli::bench::read_bench(&store, &ReadOptions { cutoff, ..a.options() })?;
            print_rows(&format!("Zarr read benchmark: {store}"), &rows, a.json)?;
        }
        Cmd::Copy { src, dst, remote, wait } => copy(&src, &dst, &remote, wait.wait)?,
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("atomzarr=info"))
        .format_timestamp(None)
        .format_target(false)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

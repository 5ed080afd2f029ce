//! The command line's arguments (clap): one variant of [`Cmd`] per command,
//! the option groups several commands share ([`ReadArgs`], [`RemoteArgs`],
//! [`WaitArg`]), and their conversion into the library's options.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use atomzarr::bench::{MixOptions, ReadOptions, ReadOrder, ReadPath};
use atomzarr::sampler::EpochPolicy;
use atomzarr::{Codec, Location};

#[derive(Parser)]
#[command(name = "atomzarr", version, about = "Atomic-structure Zarr stores for Burn training")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
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
    /// Soft-delete samples (logical indices, as `dump` numbers them) in one
    /// call: from a file (one index per line) or a range. `defragment`
    /// reclaims their space.
    Delete(DeleteArgs),
    /// Select samples to delete: forces above a bound, energy-per-atom
    /// outliers (robust z-score per composition or after E0s), duplicate
    /// structures, absent labels. Prints counts per reason, writes the
    /// indices to a file, and deletes them only with --apply (one delete).
    Filter(FilterArgs),
    /// Rewrite the store without its deleted samples (crash-safe: the new
    /// store is built beside it and swapped in).
    Defragment {
        /// The store.
        store: PathBuf,
        #[command(flatten)]
        wait: WaitArg,
    },
    /// Check a whole store, reading every chunk of every array once:
    /// checksums, pointers, masks, neighbor indices, shapes and dtypes.
    /// Lists every fault (store, array, chunk, sample); exit status 1 if any.
    Verify {
        /// The store (path or URL).
        store: Location,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
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
    /// I/O benchmark against existing stores (ours or the Python toolkit's),
    /// local or at URLs (s3://, gs://, az://, http(s)://).
    ///
    /// Two or more stores are read as one weighted mixture (a MultiReader over them,
    /// read through the DataLoader): by per-store rates (MultiDatasetSampler;
    /// --weights, --num-samples) or a fixed count of each store per batch
    /// (MultiDatasetBatchSampler; --samples-per-dataset, --epoch-policy,
    /// --num-batches), shuffled (--read-order shuffle or default-shuffle) or
    /// in order (sequential); each pass also reports, per store, the samples
    /// drawn against the sampler's counts, the bytes decoded and how spread
    /// over the store each batch's draw from it is (mixing: 1 = every sample
    /// from another 0.1% of the store, 0 = all from one).
    Read {
        /// The store, or several to read as one mixture.
        #[arg(required = true, num_args = 1.., value_name = "STORE")]
        stores: Vec<Location>,
        /// Build neighbor lists at this cutoff (Å) while reading, replacing
        /// any stored edges (every read mode; the lists `import --cutoff`
        /// stores).
        #[arg(long)]
        cutoff: Option<f64>,
        #[command(flatten)]
        mix: MixArgs,
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

/// `atomzarr delete`'s arguments.
#[derive(Args)]
pub(crate) struct DeleteArgs {
    /// The store.
    pub(crate) store: PathBuf,
    /// A file of logical indices, one per line (`#` comments allowed).
    #[arg(long, conflicts_with = "range", required_unless_present = "range")]
    pub(crate) indices: Option<PathBuf>,
    /// Logical indices A..B (B excluded) or A..=B.
    #[arg(long, value_parser = crate::curate::parse_range)]
    pub(crate) range: Option<std::ops::Range<usize>>,
    /// Only say what would be deleted.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) wait: WaitArg,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum BasisArg {
    /// Within each element composition.
    Composition,
    /// After per-element reference energies (the E0 fit of `stats`).
    E0,
}

impl From<BasisArg> for atomzarr::prep::filter::EnergyBasis {
    fn from(b: BasisArg) -> Self {
        match b {
            BasisArg::Composition => Self::Composition,
            BasisArg::E0 => Self::E0,
        }
    }
}

/// `atomzarr filter`'s arguments.
#[derive(Args)]
pub(crate) struct FilterArgs {
    /// The store.
    pub(crate) store: PathBuf,
    /// Select samples whose largest per-atom force norm is above this (eV/Å).
    #[arg(long, value_name = "EV_PER_A")]
    pub(crate) max_force: Option<f64>,
    /// Select samples whose energy per atom has a robust z-score
    /// (0.6745 (x - median) / MAD) above this in absolute value.
    #[arg(long, value_name = "Z")]
    pub(crate) energy_z: Option<f64>,
    /// What --energy-z compares against.
    #[arg(long, value_enum, default_value_t = BasisArg::E0)]
    pub(crate) energy_basis: BasisArg,
    /// Select duplicate structures (same numbers, positions and cell), all
    /// but the first of each.
    #[arg(long)]
    pub(crate) duplicates: bool,
    /// Compare positions and cell of --duplicates rounded to multiples of
    /// this (Å); 0 compares them exactly.
    #[arg(long, default_value_t = 0.0, requires = "duplicates")]
    pub(crate) tolerance: f64,
    /// Select samples that lack this label (repeat for several).
    #[arg(long, value_name = "LABEL")]
    pub(crate) missing: Vec<String>,
    /// Where to write the selected logical indices, one per line
    /// [default: STORE with extension .filter.txt].
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Delete the selected samples (one delete); without it nothing changes.
    #[arg(long)]
    pub(crate) apply: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) wait: WaitArg,
}

/// `atomzarr import`'s arguments.
#[derive(Args)]
pub(crate) struct ImportArgs {
    /// Input files, then the store (the last path).
    #[arg(required = true, num_args = 2..)]
    pub(crate) paths: Vec<PathBuf>,
    /// The inputs' format, instead of telling it from each file:
    /// extxyz, asedb, aselmdb, hdf5, npz or mptrj.
    #[arg(long)]
    pub(crate) format: Option<String>,
    /// The inputs' units, over their format's own: e.g.
    /// `energy=hartree,length=bohr` or `stress=kbar` (energy: eV, hartree,
    /// kcal/mol, kJ/mol, Ry; length: Å, bohr, nm; stress: GPa, kbar).
    #[arg(long)]
    pub(crate) units: Option<String>,
    /// HDF5: the energy dataset (another level of theory), e.g. `ccsd(t)_cbs.energy`.
    #[arg(long)]
    pub(crate) energy_key: Option<String>,
    /// HDF5: the forces (or gradient) dataset.
    #[arg(long)]
    pub(crate) forces_key: Option<String>,
    /// Labels only some frames have: `fill` stores them for every frame
    /// (NaN, 0 with `<name>_present`, or ""); `error` stops at the first
    /// frame whose fields differ from the first frame's.
    #[arg(long, value_enum, default_value_t = MissingArg::Fill)]
    pub(crate) missing: MissingArg,
    /// Build neighbor lists (`neighbor_list`, `shifts`) for this cutoff, Å.
    #[arg(long)]
    pub(crate) cutoff: Option<f64>,
    /// Frames per batch (parsed together, written in one append).
    #[arg(long, default_value_t = 8192)]
    pub(crate) batch_frames: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) wait: WaitArg,
}

/// The writer lock of the commands that change a store.
#[derive(Args, Clone, Copy)]
pub(crate) struct WaitArg {
    /// Wait up to SECONDS for another writer of the store to finish, instead
    /// of failing at once (one writer per store at a time; readers never wait).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, default_value = "0")]
    pub(crate) wait: std::time::Duration,
}

pub(crate) fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| format!("{s}: seconds must be finite and not negative"))
}

/// How stores at URLs are reached and fetched. Credentials and the endpoint
/// also come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
/// AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, GOOGLE_*, AZURE_*).
#[derive(Args, Clone)]
pub(crate) struct RemoteArgs {
    /// Requests in flight at once.
    #[arg(long, default_value_t = atomzarr::store::remote::DEFAULT_CONCURRENCY)]
    pub(crate) concurrency: usize,
    /// Largest gap (bytes) between two inner chunks of a shard fetched in one request.
    #[arg(long, default_value_t = atomzarr::store::remote::DEFAULT_MERGE_GAP)]
    pub(crate) merge_gap: u64,
    /// One request per inner chunk (no merging of neighbouring ranges).
    #[arg(long)]
    pub(crate) no_merge: bool,
    /// Keep fetched encoded chunks in this folder (bounded by --disk-cache-bytes).
    #[arg(long)]
    pub(crate) disk_cache: Option<PathBuf>,
    /// Byte bound of the disk cache.
    #[arg(long, default_value_t = 10 << 30)]
    pub(crate) disk_cache_bytes: u64,
    /// S3 endpoint of an S3-compatible service (else AWS_ENDPOINT_URL).
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
    /// Retries of a transient failure.
    #[arg(long, default_value_t = 3)]
    pub(crate) retries: usize,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) timeout_s: f64,
}

impl RemoteArgs {
    pub(crate) fn options(&self) -> atomzarr::store::remote::RemoteOptions {
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
pub(crate) enum MissingArg {
    /// Store every label any frame has; absent values read as NaN, 0 / false (with `<name>_present`) or "".
    Fill,
    /// Stop at a frame whose fields differ from the first frame's.
    Error,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    /// The public DataLoader (validation skipped, CPU device).
    Batch,
    /// One `read(i)` per sample.
    Single,
    /// batch, then single.
    Both,
    /// The reader's fused read in read windows, as the DataLoader asks for
    /// it (int32 indices), without the DataLoader.
    Raw,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PresetArg {
    /// 10-100 random atoms, 1-4 random edges per atom (the reference benchmark).
    Reference,
    /// 50-300-atom fcc metal cells, neighbor lists at --cutoff.
    Bulk,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OrderArg {
    Sequential,
    Shuffle,
    BlockShuffle,
    /// Chunk-aware shuffle: the store's chunk blocks permuted,
    /// --pool-blocks of them in the pool the samples are drawn from.
    ChunkShuffle,
    /// What a DataLoader with shuffle on reads: a full permutation when the
    /// store fits the cache, else the block pool sized from the cache.
    DefaultShuffle,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PolicyArg {
    /// With replacement, as many batches as all the stores' samples fill;
    /// without, as min-size.
    #[value(name = "dataset-size")]
    Dataset,
    /// Until the first store is used up.
    #[value(name = "min-size")]
    Min,
    /// Until the largest store is used up, oversampling the smaller ones.
    #[value(name = "max-size")]
    Max,
}

/// How `read` mixes two or more stores (refused with one).
#[derive(Args)]
pub(crate) struct MixArgs {
    /// Per-store rates of a sample-by-sample mixture (MultiDatasetSampler),
    /// one per store in order, e.g. 0.5,0.5 [default: proportional to each
    /// store's length].
    #[arg(long, value_name = "W,...", value_delimiter = ',', allow_negative_numbers = true)]
    pub(crate) weights: Option<Vec<f64>>,
    /// Temper the rates (--weights, or the stores' lengths D_i): rates
    /// (D_i / D)^(1/T), normalised; 1 keeps them, a large T tends to equal
    /// rates (fairchem's temperature sampling).
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub(crate) temperature: Option<f64>,
    /// Samples per epoch of the sample-by-sample mixture [default: the
    /// stores' samples, summed].
    #[arg(long, value_name = "N")]
    pub(crate) num_samples: Option<usize>,
    /// Samples of each store in every batch, one per store in order, e.g.
    /// 32,32: read with MultiDatasetBatchSampler instead (the batch size is
    /// their sum; exclusive with --weights).
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub(crate) samples_per_dataset: Option<Vec<usize>>,
    /// How --samples-per-dataset sizes an epoch without --num-batches
    /// [default: dataset-size].
    #[arg(long, value_enum)]
    pub(crate) epoch_policy: Option<PolicyArg>,
    /// Batches per epoch of --samples-per-dataset.
    #[arg(long, value_name = "N")]
    pub(crate) num_batches: Option<usize>,
    /// Draw without replacement: no sample twice in an epoch (an epoch that
    /// would need more samples than a store holds is an error).
    #[arg(long)]
    pub(crate) no_replacement: bool,
}

impl MixArgs {
    pub(crate) fn options(&self) -> MixOptions {
        MixOptions {
            weights: self.weights.clone(),
            temperature: self.temperature,
            num_samples: self.num_samples,
            samples_per_dataset: self.samples_per_dataset.clone(),
            epoch_policy: self.epoch_policy.map(|p| match p {
                PolicyArg::Dataset => EpochPolicy::DatasetSize,
                PolicyArg::Min => EpochPolicy::MinSize,
                PolicyArg::Max => EpochPolicy::MaxSize,
            }),
            num_batches: self.num_batches,
            replacement: !self.no_replacement,
        }
    }
}

#[derive(Args)]
pub(crate) struct ReadArgs {
    /// Read path(s) to time; repeat to time several, in order.
    #[arg(long = "read-mode", value_enum, default_values_t = [ModeArg::Batch])]
    pub(crate) read_mode: Vec<ModeArg>,
    /// Samples per emitted batch [default: 64; with --samples-per-dataset,
    /// their sum].
    #[arg(long)]
    pub(crate) batch_size: Option<usize>,
    /// Batches fused into one backend read (read window = batch size x prefetch).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    pub(crate) prefetch_factor: i64,
    /// Logical read order (several stores: sequential reads the mixture's
    /// sampler with shuffle off, shuffle and default-shuffle with it on).
    #[arg(long, value_enum, default_value_t = OrderArg::Sequential)]
    pub(crate) read_order: OrderArg,
    /// Seed of the shuffled read orders.
    #[arg(long, default_value_t = 0)]
    pub(crate) read_seed: u64,
    /// Contiguous block size of block-shuffle.
    #[arg(long, default_value_t = 8192)]
    pub(crate) read_order_block_size: usize,
    /// Blocks in chunk-shuffle's pool: more mixes more blocks into each
    /// batch and needs more cache (default-shuffle sizes the pool from the
    /// cache).
    #[arg(long, alias = "buffer-blocks", default_value_t = atomzarr::sampler::DEFAULT_POOL_BLOCKS)]
    pub(crate) pool_blocks: usize,
    /// Also time the decode floor (every inner chunk decoded once on all
    /// cores) and report each pass against it.
    #[arg(long)]
    pub(crate) decode_floor: bool,
    /// Time only the first N samples of the read order (for orders too slow
    /// to run a whole epoch of, such as a shuffle of a store far larger than
    /// the cache).
    #[arg(long)]
    pub(crate) max_samples: Option<usize>,
    /// Read rank R's part of the epoch (of --world-size ranks), as a
    /// data-parallel rank's loader does (sequential: its contiguous range
    /// of the store; default-shuffle: its own blocks; several stores: the
    /// loader's with_rank over the mixture's sampler).
    #[arg(long, default_value_t = 0)]
    pub(crate) rank: usize,
    /// Ranks the epoch is split over (see --rank).
    #[arg(long, default_value_t = 1)]
    pub(crate) world_size: usize,
    /// Ask the loader for pinned host staging.
    #[arg(long)]
    pub(crate) pin_memory: bool,
    /// Decoded-chunk cache budget in bytes (0 disables the cache; the
    /// stores of a mixture share it).
    #[arg(long, default_value_t = atomzarr::DEFAULT_CACHE_BYTES)]
    pub(crate) cache_bytes: u64,
    /// Passes over the data with one reader (later passes show the cache).
    #[arg(long, default_value_t = 1)]
    pub(crate) epochs: usize,
    /// One JSON object per row on stdout instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also report a content checksum of what each pass read, independent
    /// of order (hashing every byte, inside the timed pass).
    #[arg(long)]
    pub(crate) checksum: bool,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

#[derive(Args)]
pub(crate) struct RoundtripArgs {
    /// Number of systems (repeat for several stores).
    #[arg(short = 'n', long = "num-systems", default_values_t = [1000usize, 10_000, 100_000])]
    pub(crate) num_systems: Vec<usize>,
    /// What to generate: the reference benchmark's random structures, or
    /// periodic fcc metal cells with real neighbor lists (bulk materials,
    /// where the neighbor lists are most of the bytes).
    #[arg(long, value_enum, default_value_t = PresetArg::Reference)]
    pub(crate) preset: PresetArg,
    /// Neighbor-list cutoff of the bulk preset, Å.
    #[arg(long, default_value_t = 5.0)]
    pub(crate) cutoff: f64,
    /// Minimum atoms per structure [default: 10, bulk 50].
    #[arg(long)]
    pub(crate) min_atoms: Option<usize>,
    /// Maximum atoms per structure [default: 100, bulk 300].
    #[arg(long)]
    pub(crate) max_atoms: Option<usize>,
    /// Compression codec (omit for the library default, zstd level 0);
    /// `lz4` is blosc with lz4.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(Codec::NAMES))]
    pub(crate) codec: Option<String>,
    /// Compression level.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub(crate) level: i32,
    /// Rows per chunk along dimension 0.
    #[arg(long)]
    pub(crate) chunk_size: Option<u64>,
    /// Rows per shard (enables sharding).
    #[arg(long)]
    pub(crate) shard_size: Option<u64>,
    /// Rows per chunk of edge arrays (neighbor_list, shifts).
    #[arg(long)]
    pub(crate) edge_chunk_size: Option<u64>,
    /// Rows per shard of edge arrays.
    #[arg(long)]
    pub(crate) edge_shard_size: Option<u64>,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Directory for the stores (kept); default a temporary directory (removed).
    #[arg(long)]
    pub(crate) output_dir: Option<PathBuf>,
    /// Write no crc32c checksum per chunk (as the reference toolkit writes).
    #[arg(long)]
    pub(crate) no_checksum: bool,
    /// Samples per write call: the first writes, the rest append (small
    /// values time small appends).
    #[arg(long, default_value_t = atomzarr::bench::DEFAULT_WRITE_BATCH)]
    pub(crate) write_batch: usize,
    #[command(flatten)]
    pub(crate) read: ReadArgs,
}

impl ReadArgs {
    pub(crate) fn options(&self) -> ReadOptions {
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
            pool_blocks: self.pool_blocks,
            decode_floor: self.decode_floor,
            max_samples: self.max_samples,
            rank: self.rank,
            world_size: self.world_size,
            batch_size: self.batch_size.unwrap_or(64),
            prefetch_factor: self.prefetch_factor,
            pin_memory: self.pin_memory,
            cache_bytes: self.cache_bytes,
            epochs: self.epochs,
            progress: crate::output::show_progress(self.json),
            checksum: self.checksum,
            remote: self.remote.options(),
            cutoff: None,
            mix: MixOptions::default(),
        }
    }
}

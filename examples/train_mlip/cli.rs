//! The example's command line: its arguments with their defaults, and the
//! `--learner` / `--devices` mode, where burn-train drives the epochs.

use std::path::PathBuf;
#[cfg(feature = "train")]
use std::time::Instant;

#[cfg(feature = "train")]
use burn::tensor::Device;
use clap::Parser;

#[cfg(feature = "train")]
use crate::learner;
#[cfg(feature = "train")]
use crate::model;
use crate::model::{Forces, Scatter};
#[cfg(feature = "train")]
use crate::training::{self, Split};
use crate::training::{BoxError, Prep};

/// The compute backend: which Burn `Device` training runs on (with autodiff).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// Burn's CPU backend (`Device::flex()`).
    Flex,
    /// Burn's CUDA backend (`Device::cuda(0)`; build with `--features cuda`).
    Cuda,
    /// Burn's wgpu backend on a Vulkan device, a software one too
    /// (`Device::wgpu(DeviceKind::DefaultDevice)`; build with `--features wgpu`).
    Wgpu,
}

impl BackendArg {
    /// CUDA when built in, else wgpu when built in, else Flex.
    pub fn default_for_build() -> BackendArg {
        if cfg!(feature = "cuda") {
            BackendArg::Cuda
        } else if cfg!(feature = "wgpu") {
            BackendArg::Wgpu
        } else {
            BackendArg::Flex
        }
    }
}

/// How the `--devices` replicas train together (`--parallel`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParallelArg {
    /// Burn's distributed data parallel (`ExecutionStrategy::ddp`):
    /// gradients all-reduced (mean) between the devices; CUDA only.
    Ddp,
    /// burn-train's multi-device strategy (`ExecutionStrategy::multi`):
    /// gradients summed on the first device; any backend.
    Multi,
}

/// The training order (`--shuffle`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleArg {
    /// The loader's default shuffle (`with_shuffle(true)`).
    Default,
    /// A full permutation every epoch (`ListSampler::shuffled`).
    Full,
}

/// Train an interatomic potential on a Lennard-Jones Ar/Kr store.
#[derive(Parser, Debug)]
#[command(about = "Train a small interatomic potential on a Lennard-Jones Ar/Kr atomzarr store")]
pub struct Args {
    /// Store path; built if absent. Default: target/train_mlip/lj_ar_kr.zarr
    /// (target/train_mlip/lj_ar_kr_tiny.zarr with --tiny).
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Delete and rebuild the store first.
    #[arg(long)]
    pub rebuild: bool,
    /// Structures to generate when building the store.
    #[arg(long)]
    pub structures: Option<usize>,
    /// A tiny store (64 small structures), batches of 8 and 2 epochs: a smoke test in seconds.
    #[arg(long)]
    pub tiny: bool,
    /// Store the structures without neighbor lists and build them at the
    /// cutoff in the loader (`Dataset::with_cutoff`). The
    /// default store gets a `_noedges` name.
    #[arg(long)]
    pub edges_in_loader: bool,
    /// Build the store with its structures in order of energy per atom,
    /// lowest first: an adversarial order for a shuffle that reads the store
    /// in blocks. The default store gets a `_sorted` name.
    #[arg(long)]
    pub sort_by_energy: bool,
    /// Rows per chunk of the built store's core arrays (default: about
    /// 1 MiB decoded). The default store gets a `_c<ROWS>` name.
    #[arg(long)]
    pub chunk_rows: Option<u64>,
    /// The reader's decoded-chunk cache, MiB (default 1,280). On a store
    /// that decodes to more, `--shuffle default` reads the block pool.
    #[arg(long)]
    pub cache_mib: Option<u64>,
    /// The training order: `default`, what `with_shuffle(true)` reads (a
    /// full permutation when the store fits the reader's cache, else the
    /// block pool), or `full`, a full permutation of the training part every
    /// epoch whatever the cache.
    #[arg(long, value_enum, default_value_t = ShuffleArg::Default)]
    pub shuffle: ShuffleArg,
    /// Training epochs (default 12; 2 with --tiny).
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Structures per batch (default 32; 8 with --tiny).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Batches fused into one background read.
    #[arg(long, default_value_t = 8)]
    pub prefetch_factor: usize,
    /// Seed of the data generation, model initialisation and shuffling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Peak learning rate (cosine decay to 5% of it).
    #[arg(long, default_value_t = 5e-3)]
    pub lr: f64,
    /// How the model predicts forces: `conservative`, the exact negative
    /// gradient of its energy (an MLP per atom over species-resolved radial
    /// descriptors, its gradient written out: no double backward), or
    /// `direct`, a rotation-equivariant force head beside the energy head of
    /// a message-passing model.
    #[arg(long, default_value = "conservative")]
    pub forces: Forces,
    /// Feature width of the model (both models: the conservative model's MLP
    /// and center-species embedding, the direct model's features).
    #[arg(long, default_value_t = 32)]
    pub hidden: usize,
    /// Message-passing rounds before the energy and force heads of the
    /// direct model (0: a pure radial-basis pair model). The conservative
    /// model has none: it does not apply there.
    #[arg(long, default_value_t = 1)]
    pub interactions: usize,
    /// After training, run this many steps of NVE molecular dynamics (1 fs,
    /// velocity Verlet) with the trained model from the first validation
    /// structure, and print the largest energy drift per atom.
    #[arg(long, default_value_t = 0)]
    pub md_steps: usize,
    /// Weight of the energy term of the loss (the force term has weight 1).
    #[arg(long, default_value_t = 4.0)]
    pub energy_weight: f64,
    /// Fraction of the store held out for validation.
    #[arg(long, default_value_t = 0.1)]
    pub val_fraction: f64,
    /// The string label the structures are split by (whole groups to train
    /// or validation); `index`: the last --val-fraction of the store.
    #[arg(long, default_value = "trajectory")]
    pub split_by: String,
    /// Seed of the split hash.
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// Train on the raw energies: no E0s fitted or subtracted.
    #[arg(long)]
    no_e0: bool,
    /// Rotate each training structure by a random rotation per epoch
    /// (seeded by --seed, the epoch and the sample).
    #[arg(long)]
    pub rotate: bool,
    /// Train through burn-train's SupervisedTraining / Learner instead of
    /// the example's own loop (needs `--features train`).
    #[arg(long)]
    pub learner: bool,
    /// burn-train's checkpoints and logs (default: next to the store,
    /// `<store>_learner`).
    #[arg(long)]
    pub artifacts: Option<PathBuf>,
    /// Resume the Learner from its checkpoint of this epoch (the train
    /// loader continues with the next epoch's shuffle).
    #[arg(long)]
    pub checkpoint: Option<usize>,
    /// Model replicas training data parallel in this process; more than 1
    /// implies --learner. Each replica reads its own contiguous part of
    /// every epoch. With --backend cuda: CUDA devices 0..N; otherwise N
    /// replicas share the one device (worker threads).
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
    /// How the --devices replicas train together (default: ddp with
    /// --backend cuda, else multi; Burn 0.22 has DDP all-reduces only
    /// between CUDA devices).
    #[arg(long, value_enum)]
    pub parallel: Option<ParallelArg>,
    /// Compute backend (default: cuda if built with it, else wgpu if built
    /// with it, else flex).
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// Also write each epoch's numbers (losses, MAEs, baselines, samples/s,
    /// the process's resident memory) to this file, one JSON object a line,
    /// at full precision: what `scripts/compare-backends.py` compares.
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    /// Gathers and sums over the graph: `select` (select / scatter-add, the
    /// CPU default), `partitioned` (scatter-add in parts: linear in the
    /// edges and parallel, the GPU default) or `incidence` (block one-hot
    /// matmuls).
    #[arg(long)]
    pub scatter: Option<Scatter>,
}

impl Args {
    /// The store: `--store`, or the default for `--tiny` or not.
    pub fn store(&self) -> PathBuf {
        self.store.clone().unwrap_or_else(|| {
            let name = if self.tiny { "lj_ar_kr_tiny" } else { "lj_ar_kr" };
            let edges = if self.edges_in_loader { "_noedges" } else { "" };
            let sorted = if self.sort_by_energy { "_sorted" } else { "" };
            let chunks = self.chunk_rows.map(|r| format!("_c{r}")).unwrap_or_default();
            PathBuf::from("target/train_mlip").join(format!("{name}{edges}{sorted}{chunks}.zarr"))
        })
    }
    /// Training epochs.
    pub fn epochs(&self) -> usize {
        self.epochs.unwrap_or(if self.tiny { 2 } else { 12 })
    }
    /// Structures per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size.unwrap_or(if self.tiny { 8 } else { 32 })
    }
    /// How the training set is prepared from the store.
    pub fn prep(&self) -> Prep {
        Prep {
            val_fraction: self.val_fraction,
            by: (self.split_by != "index").then(|| self.split_by.clone()),
            split_seed: self.split_seed,
            e0: !self.no_e0,
            rotate: self.rotate.then_some(self.seed),
            cutoff: self.edges_in_loader.then_some(crate::physics::CUTOFF),
            cache_bytes: self.cache_mib.map(|m| m << 20),
            full_shuffle: self.shuffle == ShuffleArg::Full,
        }
    }
    /// Whether burn-train's Learner runs the epochs.
    pub fn learner(&self) -> Result<bool, BoxError> {
        if self.devices == 0 {
            return Err("--devices 0: at least one device trains".into());
        }
        Ok(self.learner || self.devices > 1)
    }
    /// Builds the store if it is absent (or `--rebuild`).
    pub fn ensure_store(&self, store: &std::path::Path) -> Result<(), BoxError> {
        if self.rebuild && store.exists() {
            std::fs::remove_dir_all(store)?;
        }
        if store.exists() {
            if self.structures.is_some() {
                println!("note: {} exists, --structures ignored (use --rebuild)", store.display());
            }
            return Ok(());
        }
        if let Some(dir) = store.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let spec = if self.tiny {
            crate::physics::DatasetSpec::tiny(self.structures.unwrap_or(64))
        } else {
            crate::physics::DatasetSpec::standard(self.structures.unwrap_or(2000))
        };
        let t = std::time::Instant::now();
        let layout = crate::physics::StoreLayout { sort_by_energy: self.sort_by_energy, chunk_rows: self.chunk_rows };
        let n = crate::physics::build_store_with(store, spec, self.seed, !self.edges_in_loader, layout)?;
        println!(
            "built {} : {n} Lennard-Jones Ar/Kr structures (clusters + periodic boxes, MD frames), cutoff {} Å, in {:.1}s",
            store.display(),
            crate::physics::CUTOFF,
            t.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// The `--learner` / `--devices` run: burn-train drives the epochs on
/// `devices` (each with autodiff; the first also holds `split`'s loaders),
/// their replicas trained together as `parallel` says.
#[cfg(feature = "train")]
#[allow(clippy::too_many_arguments)]
pub fn run_learner(
    args: &Args,
    store: &std::path::Path,
    split: &Split,
    config: &model::MlipConfig,
    scatter: Scatter,
    epochs: usize,
    start: Instant,
    devices: Vec<Device>,
    parallel: ParallelArg,
) -> Result<(), BoxError> {
    use atomzarr::AtomicBatch;
    use burn::data::dataloader::DataLoader as BurnDataLoader;
    use std::sync::Arc;
    let device = devices.first().ok_or("no device")?.clone();
    let artifacts = args.artifacts.clone().unwrap_or_else(|| {
        let stem = store.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
        store.with_file_name(format!("{stem}_learner"))
    });
    if args.checkpoint.is_none() && artifacts.exists() {
        std::fs::remove_dir_all(&artifacts)?; // a fresh run: no stale checkpoints or logs
    }
    if let Some(c) = args.checkpoint {
        // burn-train resumes at its epoch c + 1 (its epochs count from 1);
        // the loader's epochs count from 0, so its next is c.
        split.train.set_epoch(c as u64);
    }
    device.seed(args.seed);
    let model = learner::Potential::new(config, args.energy_weight, &device).with_scatter(scatter);
    let train: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(split.train.clone());
    let valid: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(split.val.clone());
    let n = devices.len();
    let parallel = match parallel {
        ParallelArg::Ddp => learner::Parallel::Ddp,
        ParallelArg::Multi => learner::Parallel::Multi,
    };
    // Each replica steps once per batch of its part of the epoch.
    let steps_per_epoch = split.train.len().div_ceil(n);
    println!(
        "learner: burn-train SupervisedTraining, {} epochs, {} steps/epoch{}; checkpoints in {}",
        epochs,
        steps_per_epoch,
        if n > 1 { format!(", {n} replicas ({parallel:?})") } else { String::new() },
        artifacts.display()
    );
    let run = learner::LearnerRun {
        artifacts,
        epochs,
        steps_per_epoch,
        lr: args.lr,
        energy_weight: args.energy_weight,
        checkpoint: args.checkpoint,
        devices,
        parallel,
        store,
    };
    let out = learner::fit(run, model, train, valid)?;
    let m = training::evaluate(&out.model.mlip, &split.val, split.stats.energy_per_atom)?;
    let saved = training::save(out.model.mlip.clone(), config, store)?;
    println!("saved {}", saved.display());
    if args.md_steps > 0 {
        crate::md::after_training(
            &out.model.mlip,
            config.cutoff,
            store,
            &split.val_indices,
            args.md_steps,
            args.seed,
            &device.inner(),
        )?;
    }
    println!("total {:.1}s", start.elapsed().as_secs_f64());
    println!(
        "final: val_energy_mae={:.5} val_force_mae={:.5} baseline_energy_mae={:.5} baseline_force_mae={:.5} data_wait={:.2}% samples_seen={} params_checksum={} forces={}",
        m.energy_mae(),
        m.force_mae(),
        m.baseline_energy_mae(),
        m.baseline_force_mae(),
        100.0 * out.times.wait_fraction(),
        out.times.samples,
        learner::params_checksum(&out.model),
        config.forces
    );
    Ok(())
}

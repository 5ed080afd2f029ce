//! Train a small machine-learned interatomic potential (MLIP) in Burn on an
//! atomzarr store, fed by atomzarr's `DataLoader`.
//!
//! ```text
//! cargo run --release --example train_mlip                      # CPU (Autodiff<Flex>)
//! cargo run --release --example train_mlip -- --tiny            # seconds, small store
//! cargo run --release --features cuda --example train_mlip      # GPU (Autodiff<Cuda>)
//! cargo run --release --features wgpu --example train_mlip -- --backend wgpu   # any Vulkan device
//! ```
//!
//! On a GPU backend (`cuda`, `wgpu`) the loader stages uploads in pinned
//! memory and builds device batches on its own upload thread (its own
//! stream), and the model's gathers and sums run as block one-hot matmuls
//! (`--scatter incidence`, `incidence.rs`); on the CPU as `select` /
//! scatter-add (`--scatter select`).
//!
//! 1. If the store does not exist, it is built: argon/krypton structures
//!    (clusters and periodic, possibly triclinic boxes) from short MD runs,
//!    labelled with exact Lennard-Jones energies and forces (`physics.rs`),
//!    with neighbor lists and per-edge periodic shifts, written with
//!    `AtomicDataZarrWriter`.
//! 2. The training set is prepared with atomzarr: the structures are split
//!    by their `trajectory` label (atomzarr's grouped, seeded split: no
//!    trajectory is in both parts), per-element reference energies (E0s)
//!    are fitted on the training part only and subtracted from every energy
//!    both loaders yield (`--no-e0` trains on the raw energies), and
//!    `--rotate` turns on a random rotation of every training structure
//!    per epoch.
//! 3. A message-passing potential with a direct, rotation-equivariant force
//!    head (`model.rs` explains why: Burn has no double backward) trains on
//!    an energy + force loss, batches from the DataLoader (shuffled, fused
//!    prefetch; pinned staging and an upload stream on a GPU).
//! 4. Each epoch prints the training loss, validation MAEs next to a
//!    predict-the-mean baseline, throughput and the share of step time spent
//!    waiting for data; the model is saved next to the store with Burn's
//!    `CompactRecorder`.

mod incidence;
#[cfg(feature = "train")]
mod learner;
mod model;
mod physics;
mod training;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use clap::Parser;
use model::{Scatter, Trainer};
use training::{BoxError, LoaderOptions, Prep, Split};

/// The compute backend (training runs on `Autodiff` over it).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// Burn's CPU backend.
    Flex,
    /// burn-cuda (build with `--features cuda`).
    Cuda,
    /// burn-wgpu on a Vulkan device, a software one too (build with `--features wgpu`).
    Wgpu,
}

impl BackendArg {
    /// CUDA when built in, else wgpu when built in, else Flex.
    fn default_for_build() -> BackendArg {
        if cfg!(feature = "cuda") {
            BackendArg::Cuda
        } else if cfg!(feature = "wgpu") {
            BackendArg::Wgpu
        } else {
            BackendArg::Flex
        }
    }
}

/// Train an interatomic potential on a Lennard-Jones Ar/Kr store.
#[derive(Parser, Debug)]
#[command(about = "Train a small interatomic potential on a Lennard-Jones Ar/Kr atomzarr store")]
struct Args {
    /// Store path; built if absent. Default: target/train_mlip/lj_ar_kr.zarr
    /// (target/train_mlip/lj_ar_kr_tiny.zarr with --tiny).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Delete and rebuild the store first.
    #[arg(long)]
    rebuild: bool,
    /// Structures to generate when building the store.
    #[arg(long)]
    structures: Option<usize>,
    /// A tiny store (64 small structures), batches of 8 and 2 epochs: a smoke test in seconds.
    #[arg(long)]
    tiny: bool,
    /// Training epochs (default 12; 2 with --tiny).
    #[arg(long)]
    epochs: Option<usize>,
    /// Structures per batch (default 32; 8 with --tiny).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Batches fused into one background read.
    #[arg(long, default_value_t = 8)]
    prefetch_factor: usize,
    /// Seed of the data generation, model initialisation and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Peak learning rate (cosine decay to 5% of it).
    #[arg(long, default_value_t = 5e-3)]
    lr: f64,
    /// Feature width of the model.
    #[arg(long, default_value_t = 32)]
    hidden: usize,
    /// Message-passing rounds before the energy and force heads (0: a pure
    /// radial-basis pair model).
    #[arg(long, default_value_t = 1)]
    interactions: usize,
    /// Weight of the energy term of the loss (the force term has weight 1).
    #[arg(long, default_value_t = 4.0)]
    energy_weight: f64,
    /// Fraction of the store held out for validation.
    #[arg(long, default_value_t = 0.1)]
    val_fraction: f64,
    /// The string label the structures are split by (whole groups to train
    /// or validation); `index`: the last --val-fraction of the store.
    #[arg(long, default_value = "trajectory")]
    split_by: String,
    /// Seed of the split hash.
    #[arg(long, default_value_t = 0)]
    split_seed: u64,
    /// Train on the raw energies: no E0s fitted or subtracted.
    #[arg(long)]
    no_e0: bool,
    /// Rotate each training structure by a random rotation per epoch
    /// (seeded by --seed, the epoch and the sample).
    #[arg(long)]
    rotate: bool,
    /// Train through burn-train's SupervisedTraining / Learner instead of
    /// the example's own loop (needs `--features train`).
    #[arg(long)]
    learner: bool,
    /// burn-train's checkpoints and logs (default: next to the store,
    /// `<store>_learner[_rankR]`).
    #[arg(long)]
    artifacts: Option<PathBuf>,
    /// Resume the Learner from its checkpoint of this epoch (the train
    /// loader continues with the next epoch's shuffle).
    #[arg(long)]
    checkpoint: Option<usize>,
    /// Data-parallel nodes (processes); more than 1 implies --learner and
    /// all-reduces gradients with burn-collective.
    #[arg(long, default_value_t = 1)]
    num_nodes: usize,
    /// This node's rank, 0..num_nodes; rank 0 also runs the global orchestrator.
    #[arg(long, default_value_t = 0)]
    node_rank: usize,
    /// HOST:PORT of the global orchestrator (rank 0 listens on PORT).
    #[arg(long, default_value = "127.0.0.1:3000")]
    global_address: String,
    /// Host the other nodes reach this node at.
    #[arg(long, default_value = "127.0.0.1")]
    node_host: String,
    /// Port of this node's tensor data service.
    #[arg(long, default_value_t = 3001)]
    node_port: u16,
    /// Compute backend (default: cuda if built with it, else wgpu if built
    /// with it, else flex).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Gathers and sums over the graph: `select` (select / scatter-add, the
    /// CPU default) or `incidence` (block one-hot matmuls, the GPU default).
    #[arg(long)]
    scatter: Option<Scatter>,
}

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    match args.backend.unwrap_or_else(BackendArg::default_for_build) {
        BackendArg::Flex => {
            run::<Autodiff<burn::backend::Flex>>(&args, Default::default(), "Autodiff<Flex> (CPU)", false)
        }
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => run::<Autodiff<burn_cuda::Cuda>>(&args, Default::default(), "Autodiff<Cuda>", true),
        #[cfg(feature = "wgpu")]
        BackendArg::Wgpu => run::<Autodiff<burn_wgpu::Wgpu>>(&args, Default::default(), "Autodiff<Wgpu>", true),
        #[allow(unreachable_patterns)]
        other => Err(format!("--backend {other:?}: build with --features {other:?}").to_lowercase().into()),
    }
}

/// The whole run on backend `Train` (`gpu`: pinned staging, an upload
/// stream, and the incidence form of the model's gathers and sums).
fn run<Train: AutodiffBackend>(args: &Args, device: Train::Device, backend: &str, gpu: bool) -> Result<(), BoxError> {
    let start = Instant::now();
    let store = args.store.clone().unwrap_or_else(|| {
        PathBuf::from(if args.tiny {
            "target/train_mlip/lj_ar_kr_tiny.zarr"
        } else {
            "target/train_mlip/lj_ar_kr.zarr"
        })
    });
    let epochs = args.epochs.unwrap_or(if args.tiny { 2 } else { 12 });
    let batch_size = args.batch_size.unwrap_or(if args.tiny { 8 } else { 32 });
    let scatter = args.scatter.unwrap_or(if gpu { Scatter::Incidence } else { Scatter::Select });

    // 1. The store.
    if args.rebuild && store.exists() {
        std::fs::remove_dir_all(&store)?;
    }
    if !store.exists() {
        if let Some(dir) = store.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let spec = if args.tiny {
            physics::DatasetSpec::tiny(args.structures.unwrap_or(64))
        } else {
            physics::DatasetSpec::standard(args.structures.unwrap_or(2000))
        };
        let t = Instant::now();
        let n = physics::build_store(&store, spec, args.seed)?;
        println!(
            "built {} : {n} Lennard-Jones Ar/Kr structures (clusters + periodic boxes, MD frames), cutoff {} Å, in {:.1}s",
            store.display(),
            physics::CUTOFF,
            t.elapsed().as_secs_f64()
        );
    } else if args.structures.is_some() {
        println!("note: {} exists, --structures ignored (use --rebuild)", store.display());
    }

    // 2. Loaders over the split, and the training statistics.
    let opts = LoaderOptions {
        batch_size,
        prefetch_factor: args.prefetch_factor,
        seed: args.seed,
        pin_memory: gpu,
        use_streams: gpu,
    };
    let learner = args.learner || args.num_nodes > 1;
    if args.node_rank >= args.num_nodes.max(1) {
        return Err(format!("--node-rank {} out of range for --num-nodes {}", args.node_rank, args.num_nodes).into());
    }
    let prep = Prep {
        val_fraction: args.val_fraction,
        by: (args.split_by != "index").then(|| args.split_by.clone()),
        split_seed: args.split_seed,
        e0: !args.no_e0,
        rotate: args.rotate.then_some(args.seed),
    };
    let split = Split::<Train>::open_prepared(&store, &prep, opts, (args.node_rank, args.num_nodes), &device)?;
    let stats = split.stats;
    println!(
        "split by {}{}{}",
        prep.by.as_deref().unwrap_or("index (the last --val-fraction)"),
        match &split.e0s {
            Some(e) => format!(
                "; E0s fitted on the training part, subtracted from every energy: {}",
                e.e0s().iter().map(|(z, e)| format!("Z={z} {e:.4} eV")).collect::<Vec<_>>().join(", ")
            ),
            None => "; raw energies (no E0s)".to_string(),
        },
        if args.rotate { "; random rotation of every training structure" } else { "" }
    );
    println!(
        "{} train / {} validation structures; mean energy {:.4} eV/atom (spread {:.4}), RMS force {:.4} eV/Å, {:.1} neighbors/atom",
        split.train_indices.len(),
        split.val_indices.len(),
        stats.energy_per_atom,
        stats.energy_scale,
        stats.force_scale,
        stats.avg_neighbors
    );

    // 3. Model and training.
    <Train as burn::tensor::backend::Backend>::seed(&device, args.seed);
    let config = stats.config(physics::CUTOFF).with_hidden(args.hidden).with_interactions(args.interactions);
    let mut trainer = Trainer::<Train>::new(&config, &device);
    trainer.model = trainer.model.clone().with_scatter(scatter);
    trainer.weights.energy = args.energy_weight;
    {
        use burn::module::Module;
        println!(
            "model: message passing + direct force head, {} parameters, backend {backend}, scatter {scatter:?}; batch {} prefetch {}{}",
            trainer.model.num_params(),
            batch_size,
            args.prefetch_factor,
            if gpu { ", pinned uploads on the loader's upload stream" } else { "" }
        );
    }
    if learner {
        #[cfg(feature = "train")]
        return run_learner::<Train>(args, &store, &split, &config, scatter, epochs, start, &device);
        #[cfg(not(feature = "train"))]
        return Err("--learner and --num-nodes need the Learner: build with --features train".into());
    }
    let (mut wait_after_first, mut total_after_first) = (Duration::ZERO, Duration::ZERO);
    let mut samples_after_first = 0;
    let mut last = None;
    for epoch in 0..epochs {
        let lr = training::cosine_lr(args.lr, 0.05, epoch, epochs);
        let r = training::train_epoch(&mut trainer, &split.train, epoch as u64, lr)?;
        if epoch > 0 || epochs == 1 {
            wait_after_first += r.wait;
            total_after_first += r.total;
            samples_after_first += r.samples;
        }
        let m = training::evaluate(&trainer.valid(), &split.val, stats.energy_per_atom)?;
        println!(
            "epoch {:>2}/{epochs}: train loss {:.4} | val energy MAE {:.4} eV (baseline {:.4}) force MAE {:.4} eV/Å (baseline {:.4}) | {:.0} samples/s, data wait {:.2}% | lr {:.1e}",
            epoch + 1,
            r.loss,
            m.energy_mae(),
            m.baseline_energy_mae(),
            m.force_mae(),
            m.baseline_force_mae(),
            r.samples_per_s(),
            100.0 * r.wait_fraction(),
            lr
        );
        last = Some(m);
    }
    let m = last.ok_or("no epochs run")?;

    // 4. Save next to the store.
    let saved = training::save(trainer.valid(), &config, &store)?;
    println!(
        "saved {} (+ .json config); energy MAE {:.1}% and force MAE {:.1}% of the baseline's; total {:.1}s",
        saved.display(),
        100.0 * m.energy_mae() / m.baseline_energy_mae(),
        100.0 * m.force_mae() / m.baseline_force_mae(),
        start.elapsed().as_secs_f64()
    );
    println!(
        "final: e0={} rotate={} val_energy_mae={:.5} val_force_mae={:.5} baseline_energy_mae={:.5} baseline_force_mae={:.5} data_wait={:.2}% samples_per_s={:.1}",
        split.e0s.is_some(),
        args.rotate,
        m.energy_mae(),
        m.force_mae(),
        m.baseline_energy_mae(),
        m.baseline_force_mae(),
        100.0 * wait_after_first.as_secs_f64() / total_after_first.as_secs_f64().max(1e-9),
        samples_after_first as f64 / total_after_first.as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// The `--learner` / `--num-nodes` run: burn-train drives the epochs.
#[cfg(feature = "train")]
#[allow(clippy::too_many_arguments)]
fn run_learner<Train: AutodiffBackend>(
    args: &Args,
    store: &std::path::Path,
    split: &Split<Train>,
    config: &model::MlipConfig,
    scatter: Scatter,
    epochs: usize,
    start: Instant,
    device: &Train::Device,
) -> Result<(), BoxError> {
    use atomzarr::AtomicBatch;
    use burn::data::dataloader::DataLoader as BurnDataLoader;
    use std::sync::Arc;
    type Inner<T> = <T as AutodiffBackend>::InnerBackend;
    let nodes = (args.num_nodes > 1).then(|| learner::Nodes {
        num_nodes: args.num_nodes,
        rank: args.node_rank,
        global_address: args.global_address.clone(),
        node_host: args.node_host.clone(),
        node_port: args.node_port,
    });
    if let Some(n) = &nodes
        && n.rank == 0
    {
        n.start_orchestrator()?;
    }
    let artifacts = args.artifacts.clone().unwrap_or_else(|| {
        let stem = store.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
        let rank = if args.num_nodes > 1 { format!("_rank{}", args.node_rank) } else { String::new() };
        store.with_file_name(format!("{stem}_learner{rank}"))
    });
    if args.checkpoint.is_none() && artifacts.exists() {
        std::fs::remove_dir_all(&artifacts)?; // a fresh run: no stale checkpoints or logs
    }
    if let Some(c) = args.checkpoint {
        // burn-train resumes at its epoch c + 1 (its epochs count from 1);
        // the loader's epochs count from 0, so its next is c.
        split.train.set_epoch(c as u64);
    }
    // Same seed on every node: same initial weights.
    <Train as burn::tensor::backend::Backend>::seed(device, args.seed);
    let model = learner::Potential::<Train>::new(config, args.energy_weight, device).with_scatter(scatter);
    let train: Arc<dyn BurnDataLoader<Train, AtomicBatch<Train>>> = Arc::new(split.train.clone());
    let valid: Arc<dyn BurnDataLoader<Inner<Train>, AtomicBatch<Inner<Train>>>> = Arc::new(split.val.clone());
    println!(
        "learner: burn-train SupervisedTraining, {} epochs, {} steps/epoch{}; checkpoints in {}",
        epochs,
        split.train.len(),
        nodes
            .as_ref()
            .map(|n| format!(", node {} of {} (burn-collective all-reduce)", n.rank, n.num_nodes))
            .unwrap_or_default(),
        artifacts.display()
    );
    let run = learner::LearnerRun {
        artifacts,
        epochs,
        steps_per_epoch: split.train.len(),
        lr: args.lr,
        energy_weight: args.energy_weight,
        checkpoint: args.checkpoint,
        nodes,
        store,
    };
    let out = learner::fit(run, model, train, valid, device)?;
    let m = training::evaluate(&out.model.mlip, &split.val, split.stats.energy_per_atom)?;
    if args.node_rank == 0 {
        // One writer: every node holds the same weights.
        let saved = training::save(out.model.mlip.clone(), config, store)?;
        println!("saved {}", saved.display());
    }
    println!("total {:.1}s", start.elapsed().as_secs_f64());
    println!(
        "final: val_energy_mae={:.5} val_force_mae={:.5} baseline_energy_mae={:.5} baseline_force_mae={:.5} data_wait={:.2}% samples_seen={} params_checksum={}",
        m.energy_mae(),
        m.force_mae(),
        m.baseline_energy_mae(),
        m.baseline_force_mae(),
        100.0 * out.times.wait_fraction(),
        out.times.samples,
        learner::params_checksum(&out.model)
    );
    Ok(())
}

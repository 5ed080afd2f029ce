//! Train a small machine-learned interatomic potential (MLIP) in Burn on an
//! atomzarr store, fed by atomzarr's `DataLoader`.
//!
//! ```text
//! cargo run --release --example train_mlip                      # CPU (Device::flex())
//! cargo run --release --example train_mlip -- --tiny            # seconds, small store
//! cargo run --release --features cuda --example train_mlip      # GPU (Device::cuda(0))
//! cargo run --release --features wgpu --example train_mlip -- --backend wgpu   # any Vulkan device
//! ```
//!
//! Training runs on the chosen device with autodiff (`device.autodiff()`),
//! validation on the same device without.
//!
//! On a GPU backend (`cuda`, `wgpu`) the loader stages uploads in pinned
//! memory and builds device batches on its own upload thread (its own
//! stream), and the model's gathers and sums run as a scatter-add in parts
//! (`--scatter partitioned`, `partitioned.rs`: linear in the edges, parallel);
//! on the CPU as `select` / scatter-add (`--scatter select`).
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
//!    waiting for data; the model is saved next to the store as a Burn
//!    record (burnpack, `.bpk`).

mod cli;
mod conservative;
mod incidence;
#[cfg(feature = "train")]
mod learner;
mod md;
#[path = "../gpu_check/memory.rs"]
mod memory;
mod model;
mod partitioned;
mod physics;
mod report;
mod step;
mod training;

use burn::tensor::Device;
use clap::Parser;
use cli::{Args, BackendArg};
use model::Scatter;
use step::Trainer;
use training::{BoxError, LoaderOptions, TrainingSet};

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let backend = args.backend.unwrap_or_else(BackendArg::default_for_build);
    // The devices, each with autodiff: CUDA devices 0..N, or the one device
    // of the other backends once per replica.
    let n = args.devices.max(1);
    let (devices, name, gpu) = match backend {
        BackendArg::Flex => (vec![Device::flex(); n], "Flex (CPU)", false),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => ((0..n).map(Device::cuda).collect(), "CUDA", true),
        #[cfg(feature = "wgpu")]
        BackendArg::Wgpu => (vec![Device::wgpu(burn::tensor::DeviceKind::DefaultDevice); n], "wgpu", true),
        #[allow(unreachable_patterns)]
        other => return Err(format!("--backend {other:?}: build with --features {other:?}").to_lowercase().into()),
    };
    let parallel = args.parallel.unwrap_or(if backend == BackendArg::Cuda {
        cli::ParallelArg::Ddp
    } else {
        cli::ParallelArg::Multi
    });
    if n > 1 && parallel == cli::ParallelArg::Ddp && backend != BackendArg::Cuda {
        return Err(format!(
            "--parallel ddp on {name}: Burn 0.22 all-reduces gradients only between CUDA devices; use --parallel multi"
        )
        .into());
    }
    let devices: Vec<Device> = devices.into_iter().map(Device::autodiff).collect();
    run(&args, devices, parallel, name, gpu)
}

/// The data path, store to training step, on `devices[0]` (with autodiff;
/// more devices train data parallel through the Learner); `gpu`: pinned
/// staging, an upload stream, and the partitioned form of the model's sums.
fn run(
    args: &Args,
    devices: Vec<Device>,
    parallel: cli::ParallelArg,
    backend: &str,
    gpu: bool,
) -> Result<(), BoxError> {
    let device = devices[0].clone();
    let start = std::time::Instant::now();
    // 1. The store: an atomzarr store, built from Lennard-Jones MD if absent.
    let store = args.store();
    args.ensure_store(&store)?;
    // 2. The training set: split by a label, E0s fitted on the training part.
    let set = TrainingSet::prepare(&store, &args.prep())?;
    report::training_set(&set, args);
    // 3. Dataset -> DataLoader per part (training: shuffled, fused prefetch,
    //    E0s subtracted in the batch; pinned uploads on their own stream on a GPU).
    let opts = LoaderOptions {
        batch_size: args.batch_size(),
        prefetch_factor: args.prefetch_factor,
        seed: args.seed,
        pin_memory: gpu,
        use_streams: gpu,
        cutoff: args.edges_in_loader.then_some(physics::CUTOFF),
    };
    let split = set.loaders(opts, &device)?;
    report::order(&split.train.state(), args);
    // 4. The model.
    device.seed(args.seed);
    let scatter = args.scatter.unwrap_or(if gpu { Scatter::Partitioned } else { Scatter::Select });
    let config = split
        .stats
        .config(physics::CUTOFF)
        .with_hidden(args.hidden)
        .with_interactions(args.interactions)
        .with_forces(args.forces);
    let mut trainer = Trainer::new(&config, &device);
    trainer.model = trainer.model.clone().with_scatter(scatter);
    trainer.weights.energy = args.energy_weight;
    report::model(&trainer, backend, scatter, args, gpu);
    if args.learner()? {
        #[cfg(feature = "train")]
        return cli::run_learner(args, &store, &split, &config, scatter, args.epochs(), start, devices, parallel);
        #[cfg(not(feature = "train"))]
        return Err(
            format!("--learner and --devices need the Learner ({parallel:?}): build with --features train").into()
        );
    }
    // 5. Batches -> steps: each epoch iterates the training loader (device
    //    batches, disjoint graphs) and steps on each; then validation.
    let mut run = report::Run::new(args.epochs(), args.metrics.as_deref())?;
    for epoch in 0..args.epochs() {
        let lr = training::cosine_lr(args.lr, 0.05, epoch, args.epochs());
        let r = training::train_epoch(&mut trainer, &split.train, epoch as u64, lr)?;
        let m = training::evaluate(&trainer.valid(), &split.val, split.stats.energy_per_atom)?;
        run.epoch(epoch, &r, m, lr)?;
    }
    // 6. The model, saved next to the store.
    let saved = training::save(trainer.valid(), &config, &store)?;
    if args.md_steps > 0 {
        md::after_training(
            &trainer.valid(),
            config.cutoff,
            &store,
            &split.val_indices,
            args.md_steps,
            args.seed,
            &device.clone().inner(),
        )?;
    }
    run.finish(&saved, split.e0s.is_some(), args.rotate, args.forces, start)
}

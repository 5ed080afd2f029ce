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
//!    waiting for data; the model is saved next to the store with Burn's
//!    `CompactRecorder`.

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
mod training;

use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use clap::Parser;
use cli::{Args, BackendArg};
use model::{Scatter, Trainer};
use training::{BoxError, LoaderOptions, TrainingSet};

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

/// The data path, store to training step, on backend `Train` (`gpu`: pinned
/// staging, an upload stream, and the incidence form of the model's sums).
fn run<Train: AutodiffBackend>(args: &Args, device: Train::Device, backend: &str, gpu: bool) -> Result<(), BoxError> {
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
    let split = set.loaders::<Train>(opts, (args.node_rank, args.num_nodes), &device)?;
    report::order(&split.train.state(), args);
    // 4. The model.
    <Train as burn::tensor::backend::Backend>::seed(&device, args.seed);
    let scatter = args.scatter.unwrap_or(if gpu { Scatter::Partitioned } else { Scatter::Select });
    let config = split
        .stats
        .config(physics::CUTOFF)
        .with_hidden(args.hidden)
        .with_interactions(args.interactions)
        .with_forces(args.forces);
    let mut trainer = Trainer::<Train>::new(&config, &device);
    trainer.model = trainer.model.clone().with_scatter(scatter);
    trainer.weights.energy = args.energy_weight;
    report::model(&trainer, backend, scatter, args, gpu);
    if args.learner()? {
        #[cfg(feature = "train")]
        return cli::run_learner::<Train>(args, &store, &split, &config, scatter, args.epochs(), start, &device);
        #[cfg(not(feature = "train"))]
        return Err("--learner and --num-nodes need the Learner: build with --features train".into());
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
            &device,
        )?;
    }
    run.finish(&saved, split.e0s.is_some(), args.rotate, args.forces, start)
}

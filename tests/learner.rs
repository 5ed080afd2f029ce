//! burn-train on atomzarr's DataLoader, with the `train_mlip` example's
//! modules included as-is:
//! - one Learner epoch on a tiny store reads every training structure once,
//!   writes its checkpoint and improves on the untrained model;
//! - two replicas training data parallel: burn-train cuts every epoch of the
//!   loader into two contiguous parts (`split_dataloader`, through the
//!   loader's `slice`), each sample of an epoch is read exactly once, and
//!   the model improves;
//! - Burn's DDP refuses CPU devices (hence the multi-device strategy in the
//!   second test).
//!
//! Data parallel in Burn 0.22 is within one process: `ExecutionStrategy::ddp`
//! (a replica per device, every gradient all-reduced between the devices
//! after each backward) or `ExecutionStrategy::multi` (gradients summed on
//! the first device). DDP's all-reduce runs on the device runtime's
//! collectives, which of Burn 0.22's backends only CUDA has (NCCL:
//! cubecl-cuda 0.11.3 `src/runtime.rs` is the one runtime that sets
//! `server_comm_enabled`; `Client::all_reduce` in cubecl-runtime 0.11.4
//! `src/client.rs` panics without it, so on wgpu). Flex is not a
//! distributed backend at all (burn-backend-extension 0.22.1
//! `src/catalog.rs`: `distributed: false`), so `DistributedContext::init`
//! panics for Flex devices (burn-dispatch 0.22.1 `src/ops/distributed.rs`).
//! Across machines Burn 0.22 has no counterpart of 0.21's burn-collective
//! (the crate is gone, with its global orchestrator and its all-reduce
//! between processes). What reaches other machines is a remote `Device`
//! (feature `remote`, burn-remote 0.22.1: `Device::remote_iroh` /
//! `Device::remote_websocket`, served by `burn::server` on the other
//! machine), which runs ordinary tensor operations there. DDP over remote
//! devices works for the devices of one server only (the burn book's "DDP
//! on Remote Devices"): an all-reduce between devices of two servers is
//! refused, "cross-peer all_reduce is not supported yet" (burn-remote
//! 0.22.1 `src/client/runner.rs`). Training on several machines at once
//! therefore needs a launcher and a gradient exchange of one's own, each
//! process reading its part of every epoch (`DataLoaderBuilder::with_rank`).
//!
//! Needs `--features train`.

#[path = "../examples/train_mlip/conservative.rs"]
mod conservative;
#[path = "../examples/train_mlip/incidence.rs"]
mod incidence;
#[path = "../examples/train_mlip/learner.rs"]
mod learner;
#[path = "../examples/train_mlip/model.rs"]
mod model;
#[path = "../examples/train_mlip/partitioned.rs"]
mod partitioned;
#[path = "../examples/train_mlip/physics.rs"]
mod physics;
#[path = "../examples/train_mlip/step.rs"]
mod step;
#[path = "../examples/train_mlip/training.rs"]
mod training;

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use atomzarr::AtomicBatch;
use burn::data::dataloader::DataLoader as BurnDataLoader;
use burn::module::Module;
use burn::tensor::Device;
use learner::{LearnerRun, LoaderTimes, Parallel, Potential};
use training::{LoaderOptions, Split};

fn tiny_store(dir: &Path, n: usize) -> PathBuf {
    let store = dir.join("tiny.zarr");
    assert_eq!(physics::build_store(&store, physics::DatasetSpec::tiny(n), 1).unwrap(), n);
    store
}

fn opts() -> LoaderOptions {
    LoaderOptions { batch_size: 4, prefetch_factor: 2, seed: 3, pin_memory: false, use_streams: false, cutoff: None }
}

/// What a Learner run did.
struct Trained {
    /// What the train loader yielded.
    times: LoaderTimes,
    /// Validation force MAE before and after.
    before: f64,
    after: f64,
    /// The train loader's epoch afterwards, as its user handle sees it.
    epoch: u64,
    /// The training indices.
    train_indices: Vec<usize>,
}

/// Trains through burn-train on `replicas` CPU devices (with `parallel`
/// when more than one).
fn train(store: &Path, artifacts: PathBuf, epochs: usize, replicas: usize, parallel: Parallel) -> Trained {
    let device = Device::flex().autodiff();
    let split = Split::open_prepared(store, &training::Prep::by_index(0.25), opts(), &device).unwrap();
    device.seed(0);
    let config = split.stats.config(physics::CUTOFF).with_hidden(8);
    let model = Potential::new(&config, 4.0, &device);
    let before = training::evaluate(&model.mlip.valid(), &split.val, split.stats.energy_per_atom).unwrap();
    let train: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(split.train.clone());
    let valid: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(split.val.clone());
    let run = LearnerRun {
        artifacts,
        epochs,
        steps_per_epoch: split.train.len().div_ceil(replicas),
        lr: 1e-2,
        energy_weight: 4.0,
        checkpoint: None,
        devices: vec![device; replicas],
        parallel,
        store,
    };
    let out = learner::fit(run, model, train, valid).unwrap();
    let after = training::evaluate(&out.model.mlip, &split.val, split.stats.energy_per_atom).unwrap();
    let state = split.train.state();
    assert_eq!(state.position(), 0, "burn-train ran whole epochs");
    Trained {
        times: out.times,
        before: before.force_mae(),
        after: after.force_mae(),
        epoch: state.epoch(),
        train_indices: split.train_indices,
    }
}

fn checkpoint_names(artifacts: &Path) -> Vec<String> {
    let ckpt = artifacts.join("checkpoint");
    std::fs::read_dir(&ckpt)
        .unwrap_or_else(|e| panic!("{}: {e}", ckpt.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn one_learner_epoch_on_a_tiny_store() {
    let dir = common::tmpdir();
    let store = tiny_store(dir.path(), 40);
    let artifacts = dir.path().join("artifacts");
    let t = train(&store, artifacts.clone(), 1, 1, Parallel::Multi);
    // The Learner iterated its own to_device copy; the handle sees its epoch.
    assert_eq!(t.epoch, 1, "the Learner's epoch did not reach the user's loader");
    assert_eq!(t.times.samples, 30, "every training structure once (40 minus 10 held out)");
    assert!(t.after < t.before, "validation force MAE did not fall: {:.5} -> {:.5}", t.before, t.after);
    let names = checkpoint_names(&artifacts);
    assert!(names.iter().any(|n| n.starts_with("model-1")), "no epoch-1 model checkpoint in {names:?}");
    assert!(names.iter().any(|n| n.starts_with("optim-1")), "no epoch-1 optimizer checkpoint in {names:?}");
}

/// Two replicas, two epochs: each epoch's 30 training structures are cut
/// into two contiguous parts of 15, one per replica, and read exactly once
/// between them; the gradients of both steps train the one model.
#[test]
fn two_replicas_read_each_sample_of_an_epoch_once() {
    let dir = common::tmpdir();
    let store = tiny_store(dir.path(), 40);
    let artifacts = dir.path().join("artifacts");
    let t = train(&store, artifacts.clone(), 2, 2, Parallel::Multi);
    assert_eq!(t.times.samples, 2 * 30, "two epochs of the 30 training structures");
    // One entry per replica and epoch, the epochs in order.
    assert_eq!(t.times.indices.len(), 2 * 2, "{:?}", t.times.indices);
    let mut want = t.train_indices.clone();
    want.sort_unstable();
    for (e, parts) in t.times.indices.chunks(2).enumerate() {
        assert_eq!(
            parts.iter().map(Vec::len).collect::<Vec<_>>(),
            [15, 15],
            "epoch {}: the replicas' parts {parts:?}",
            e + 1
        );
        let mut seen: Vec<usize> = parts.concat();
        seen.sort_unstable();
        assert_eq!(seen, want, "epoch {}: not every training structure exactly once", e + 1);
    }
    // The shuffle moves on with the epoch: the two epochs' orders differ.
    let order = |e: usize| t.times.indices[2 * e..2 * e + 2].iter().flatten().copied().collect::<Vec<_>>();
    assert_ne!(order(0), order(1), "both epochs read the same order");
    assert!(t.after < t.before, "validation force MAE did not fall: {:.5} -> {:.5}", t.before, t.after);
    let names = checkpoint_names(&artifacts);
    assert!(names.iter().any(|n| n.starts_with("model-2")), "no epoch-2 model checkpoint in {names:?}");
}

/// Burn 0.22's DDP all-reduces through device collectives, which the CPU
/// backend does not have: setting up DDP on two Flex devices panics (the
/// data-parallel test above runs burn-train's multi-device strategy). When
/// this fails, Burn has collectives on the CPU and that test can run DDP.
#[test]
fn ddp_on_cpu_devices_is_refused() {
    use burn::tensor::distributed::{DistributedConfig, ReduceOperation};
    use burn::train::ExecutionStrategy;
    let devices = vec![Device::flex().autodiff(); 2];
    let config = DistributedConfig { all_reduce_op: ReduceOperation::Mean };
    let err = std::panic::catch_unwind(|| ExecutionStrategy::ddp(devices, config)).map(|_| ()).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()));
    let msg = msg.unwrap_or_default();
    assert!(msg.contains("not supported"), "DDP on Flex devices failed otherwise: {msg}");
}

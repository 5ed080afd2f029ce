//! The numbers a model sees on a CubeCL device against the CPU backend:
//! every tensor the `train_mlip` example's model consumes, the derived ones
//! too (atom counts from `atoms_ptr`, the graph index, edge vectors and
//! lengths, per-graph sums through the graph index, energies after the E0
//! subtraction and the scale/shift), read back from Burn's wgpu device
//! (Mesa's lavapipe in CI) and from Flex, batch by batch, over several epochs, with
//! fused prefetch, pinned staging and the loader's upload threads running
//! as in training.
//!
//! The device results are read back only at the end of each epoch: until
//! then the kernels that read a batch stay queued on the consuming thread's
//! stream while the batch itself is dropped and the upload threads go on
//! writing the next batches, which is where memory shared across streams
//! was once reused too early (the next upload's bytes landed in a slot a
//! queued kernel still had to read).
//!
//! Run with `cargo test --release --features wgpu --test device_numbers`
//! (needs a Vulkan driver; `apt-get install mesa-vulkan-drivers` gives one).

#[path = "../examples/train_mlip/conservative.rs"]
mod conservative;
#[path = "../examples/train_mlip/incidence.rs"]
mod incidence;
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

use std::path::Path;
use std::sync::Arc;

use atomzarr::prep::transforms::{ScaleShift, SubtractE0s};
use atomzarr::{AtomicBatch, AtomicDataZarrReader, DataLoader, Dataset};
use burn::tensor::{Device, DeviceKind, IndexingUpdateOp, Tensor};
use model::GraphBatch;
use training::{Prep, TrainingSet};

/// How the loader runs: the batch geometry and the device path.
#[derive(Debug, Clone, Copy)]
struct Setting {
    batch_size: usize,
    prefetch_factor: usize,
    /// Upload threads (0: device batches built on the consuming thread).
    streams: usize,
    pin: bool,
    epochs: u64,
}

/// What the model consumes from one batch, as named `[rows, cols]` float
/// tensors still on the device (integers converted on the device).
fn consumed(b: AtomicBatch) -> Vec<(&'static str, Tensor<2>)> {
    let g = GraphBatch::from_atomic(b).expect("the store holds every field the model needs");
    let [v, _] = g.positions.dims();
    let [e, _] = g.edges.dims();
    let src = g.edges.clone().narrow(1, 0, 1).reshape([e]);
    let dst = g.edges.clone().narrow(1, 1, 1).reshape([e]);
    // As the model's forward: r_ij = r_j - r_i + shift_ij, |r_ij|.
    let rvec = g.positions.clone().select(0, dst) - g.positions.clone().select(0, src) + g.shifts.clone();
    let r = rvec.clone().powi_scalar(2).sum_dim(1).sqrt();
    // Sums per graph through the graph index (the model's atom -> graph sum).
    let device = g.positions.device();
    let force_sum = Tensor::<2>::zeros([g.num_graphs, 3], &device).select_assign(
        0,
        g.graph_index.clone(),
        g.forces.clone(),
        IndexingUpdateOp::Add,
    );
    let energy_per_atom = g.energy.clone() / g.num_atoms.clone();
    vec![
        ("positions", g.positions),
        ("atomic_numbers", g.atomic_numbers.float().reshape([v, 1])),
        ("graph_index", g.graph_index.float().reshape([v, 1])),
        ("neighbor_list", g.edges.float()),
        ("shifts", g.shifts),
        ("num_atoms (from atoms_ptr)", g.num_atoms),
        ("energy (E0s subtracted, scaled and shifted)", g.energy),
        ("energy per atom", energy_per_atom),
        ("forces (scaled)", g.forces),
        ("edge vectors", rvec),
        ("edge lengths", r),
        ("forces summed per graph", force_sum),
    ]
}

/// One batch's consumed tensors on the host.
type HostBatch = Vec<(&'static str, Vec<f32>)>;

fn to_host(t: Vec<(&'static str, Tensor<2>)>) -> HostBatch {
    t.into_iter().map(|(name, t)| (name, t.into_data().try_to_vec::<f32>().expect("float tensor"))).collect()
}

/// A loader over `reader` on `device` with the training set's E0s, a
/// scale/shift and a random rotation per epoch (all applied on the host,
/// as in the example), shuffled.
fn loader(
    reader: &Arc<AtomicDataZarrReader>,
    set: &(SubtractE0s, ScaleShift),
    s: Setting,
    device: &Device,
) -> DataLoader<AtomicDataZarrReader> {
    let mut b = DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_size(s.batch_size)
        .with_shuffle(true)
        .with_seed(5)
        .with_prefetch_factor(s.prefetch_factor)
        .with_pin_memory(s.pin)
        .with_subtract_e0s(set.0.clone())
        .with_scale_shift(set.1)
        .with_random_rotation(9);
    if s.streams > 0 {
        b = b.with_use_streams(true).with_num_streams(s.streams);
    }
    b.build(device).expect("loader")
}

/// One epoch of consumed tensors: on the CPU read back batch by batch; on
/// the device read back only once the epoch's last batch was consumed.
fn epoch(l: &DataLoader<AtomicDataZarrReader>, epoch: u64) -> Vec<(Vec<usize>, HostBatch)> {
    l.set_epoch(epoch);
    let mut queued = Vec::new();
    for batch in l.iter() {
        let batch = batch.expect("batch");
        let indices = batch.indices.clone();
        queued.push((indices, consumed(batch)));
    }
    queued.into_iter().map(|(i, t)| (i, to_host(t))).collect()
}

/// The first difference between the CPU's and the device's epoch, if any.
fn first_difference(cpu: &[(Vec<usize>, HostBatch)], dev: &[(Vec<usize>, HostBatch)]) -> Option<String> {
    if cpu.len() != dev.len() {
        return Some(format!("{} batches on the CPU, {} on the device", cpu.len(), dev.len()));
    }
    for (k, ((ci, ct), (di, dt))) in cpu.iter().zip(dev).enumerate() {
        if ci != di {
            return Some(format!("batch {k}: samples {ci:?} on the CPU, {di:?} on the device"));
        }
        for ((name, c), (_, d)) in ct.iter().zip(dt) {
            if c.len() != d.len() {
                return Some(format!("batch {k} {name}: {} values on the CPU, {} on the device", c.len(), d.len()));
            }
            for (j, (x, y)) in c.iter().zip(d).enumerate() {
                // f32 arithmetic in another order: a few ulps; wrong data is
                // off by far more (or NaN, which fails this too).
                let close = (x - y).abs() <= 1e-5 + 1e-5 * x.abs().max(y.abs());
                if !close {
                    return Some(format!("batch {k} (samples {ci:?}) {name}[{j}]: CPU {x}, device {y}"));
                }
            }
        }
    }
    None
}

/// The example's tiny store with its E0s and a scale/shift from the
/// training part's statistics.
fn store(dir: &Path, structures: usize) -> (Arc<AtomicDataZarrReader>, (SubtractE0s, ScaleShift)) {
    let path = dir.join("tiny.zarr");
    physics::build_store(&path, physics::DatasetSpec::tiny(structures), 1).expect("store");
    let set = TrainingSet::prepare(&path, &Prep { val_fraction: 0.25, e0: true, ..Prep::default() }).expect("prep");
    let e0s = set.e0s.clone().expect("E0s");
    let scale_shift = ScaleShift::new(set.stats.force_scale, set.stats.energy_per_atom).expect("scale/shift");
    (set.reader, (e0s, scale_shift))
}

/// Every epoch of `setting` on the device equals the CPU's.
fn device_equals_cpu(structures: usize, setting: Setting) {
    let dir = common::tmpdir();
    let (reader, set) = store(dir.path(), structures);
    let cpu = loader(&reader, &set, Setting { streams: 0, pin: false, ..setting }, &Device::flex());
    let device = Device::wgpu(DeviceKind::DefaultDevice);
    let dev = loader(&reader, &set, setting, &device);
    let mut failures = Vec::new();
    for e in 0..setting.epochs {
        let (c, d) = (epoch(&cpu, e), epoch(&dev, e));
        assert!(!c.is_empty());
        if let Some(diff) = first_difference(&c, &d) {
            failures.push(format!("epoch {e}: {diff}"));
        }
    }
    dev.sync_uploads().expect("upload streams");
    assert!(failures.is_empty(), "{setting:?}: the device's numbers differ from the CPU's:\n{}", failures.join("\n"));
}

/// As the example trains on a GPU: batches of 4, prefetch 4, pinned staging,
/// one upload thread.
#[test]
fn the_models_inputs_on_the_device_equal_the_cpus_in_every_epoch() {
    device_equals_cpu(96, Setting { batch_size: 4, prefetch_factor: 4, streams: 1, pin: true, epochs: 4 });
}

/// Buffers recycled under load: many batches of one or two structures,
/// 16 fused per read, two upload threads writing while the consumer's
/// kernels wait.
#[test]
fn recycled_buffers_under_load_keep_the_numbers() {
    device_equals_cpu(160, Setting { batch_size: 2, prefetch_factor: 16, streams: 2, pin: true, epochs: 4 });
    device_equals_cpu(64, Setting { batch_size: 1, prefetch_factor: 16, streams: 2, pin: false, epochs: 3 });
}

/// The device path without upload threads (device batches built on the
/// consuming thread) gives the same numbers too.
#[test]
fn uploads_on_the_consuming_thread_keep_the_numbers() {
    device_equals_cpu(64, Setting { batch_size: 3, prefetch_factor: 8, streams: 0, pin: true, epochs: 2 });
}

/// The model's partitioned sums and gathers on the device equal plain loops
/// on the host at a real batch's size (10,000 atoms and 500,000 edges), and
/// where few targets per row would make each part long (300,000 rows into
/// 100,000): more rows than a lavapipe shader loop runs (65,535), so a part
/// summed by one thread over all its rows would drop rows there.
#[test]
fn partitioned_sums_and_gathers_on_the_device_equal_loops_at_real_sizes() {
    let device = Device::wgpu(DeviceKind::DefaultDevice);
    for (rows, targets, c) in [(500_000usize, 10_000usize, 2usize), (300_000, 100_000, 1)] {
        model::model_tests::partitioned_against_loops(rows, targets, c, |i| i * 7919 + i / 50, &device)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

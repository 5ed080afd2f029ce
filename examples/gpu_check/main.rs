//! GPU check, run by `scripts/gpu-check.sh` on a machine with an NVIDIA GPU
//! (and runnable on any CubeCL device: `--backend wgpu` on a Vulkan one, a
//! software one too). It prints, in order:
//!
//! 1. the backend and its dtypes for float, int and bool tensors;
//! 2. batch equality on every dtype: loader batches on the device (pinned
//!    and pageable, with and without the upload stream) against the samples
//!    that were written, field by field in the device's types;
//! 3. upload GB/s, pinned against pageable: host batches already read and
//!    collated, uploaded alone; bytes as the device holds them; every
//!    stream synced; the two modes alternate epochs and order, the first
//!    epoch of each is warm-up and not counted;
//! 4. loader-alone samples/s (read, collate, upload; synced per epoch);
//! 5. host memory over the epochs of a pinned loader with upload threads
//!    whose batches a kernel reads: resident bytes and the driver-mapped
//!    (page-locked) bytes after each epoch; more than 10% growth over the
//!    second half of the epochs fails the run (pinned slots that are never
//!    released grow with every batch; pools filling up settle in the first).
//!
//! ```text
//! cargo build --profile gpu-check --features cuda --example gpu_check
//! cargo run --release --features wgpu --example gpu_check -- --backend wgpu --samples 400
//! ```

mod expected;
mod memory;

use std::sync::Arc;
use std::time::Instant;

use atomzarr::data::CollateOptions;
use atomzarr::{
    AtomicBatch, AtomicDataZarrReader, AtomicDataZarrWriter, BatchData, Codec, CollatedBatch, DataLoader, Dataset,
    ReaderExt, ZarrArrayConfig, ZarrWriteConfig,
};
use burn::tensor::Device;
use clap::Parser;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// Burn's CPU backend (a reference run: no device copies).
    Flex,
    /// Burn's CUDA device (`--features cuda`).
    Cuda,
    /// Burn's wgpu device (`--features wgpu`).
    Wgpu,
}

/// Check and measure atomzarr's device batches.
#[derive(Parser, Debug)]
struct Args {
    /// Backend (default: cuda if built with it, else wgpu, else flex).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Structures in the synthetic store.
    #[arg(long, default_value_t = 20_000)]
    samples: usize,
    /// Atoms per structure at most (at least 1).
    #[arg(long, default_value_t = 64)]
    max_atoms: usize,
    /// Structures per batch.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Structures per batch in the upload measurement (large batches show
    /// the copy bandwidth rather than the per-tensor cost).
    #[arg(long, default_value_t = 1024)]
    upload_batch_size: usize,
    /// Timed epochs per mode (after one warm-up epoch each).
    #[arg(long, default_value_t = 4)]
    epochs: usize,
    /// Epochs of the memory check (at least 2).
    #[arg(long, default_value_t = 12)]
    memory_epochs: usize,
    /// Growth of resident or driver-mapped memory from the middle epoch of
    /// the memory check to the last that fails the run (0.10: 10%).
    #[arg(long, default_value_t = 0.10)]
    memory_tolerance: f64,
    /// Run the memory check only (skip equality, uploads and loader speed).
    #[arg(long)]
    memory_only: bool,
}

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let default = if cfg!(feature = "cuda") {
        BackendArg::Cuda
    } else if cfg!(feature = "wgpu") {
        BackendArg::Wgpu
    } else {
        BackendArg::Flex
    };
    match args.backend.unwrap_or(default) {
        BackendArg::Flex => run(&args, &Device::flex(), "Flex (CPU)"),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => run(&args, &Device::cuda(0), "Cuda"),
        #[cfg(feature = "wgpu")]
        BackendArg::Wgpu => run(&args, &Device::wgpu(burn::tensor::DeviceKind::DefaultDevice), "Wgpu"),
        #[allow(unreachable_patterns)]
        other => Err(format!("--backend {other:?}: build with that feature").into()),
    }
}

/// Bytes the device holds for a batch: every tensor's elements times its
/// device dtype's size.
fn device_bytes(b: &AtomicBatch) -> usize {
    let int = |t: &burn::tensor::Tensor<1, burn::tensor::Int>| t.shape().num_elements() * t.dtype().size();
    let fields: usize = b
        .fields
        .values()
        .map(|f| match &f.data {
            BatchData::Float(t) => t.shape().num_elements() * t.dtype().size(),
            BatchData::Int(t) => t.shape().num_elements() * t.dtype().size(),
            BatchData::Bool(t) => t.shape().num_elements() * t.dtype().size(),
        })
        .sum();
    fields + int(&b.graph_index) + int(&b.atoms_ptr) + int(&b.edges_ptr)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run(args: &Args, device: &Device, name: &str) -> Result<(), BoxError> {
    let settings = device.settings();
    println!(
        "== backend {name}: float {:?}, int {:?}, bool {:?}",
        settings.float_dtype, settings.int_dtype, settings.bool_dtype
    );

    // The store: synthetic structures with a field of every kind.
    let t = Instant::now();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("gpu.zarr");
    let samples = expected::samples(args.samples, args.max_atoms.max(1), 0)?;
    let config = ZarrWriteConfig::default().with_core(
        ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(10_000)
            .with_shard_size(500_000),
    );
    AtomicDataZarrWriter::create(&path, config)?.write(&samples)?;
    let reader = Arc::new(AtomicDataZarrReader::open(&path)?);
    println!("store: {} structures written in {:.1} s", samples.len(), t.elapsed().as_secs_f64());
    if args.memory_only {
        return memory_check(args, &reader, device);
    }

    // 2. Equality on every dtype.
    println!("== batch equality (device batches against the written samples)");
    for (pin, streams) in [(false, 0), (true, 0), (true, 1), (false, 2)] {
        let mut b = DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_batch_size(args.batch_size)
            .with_shuffle(true)
            .with_seed(3)
            .with_prefetch_factor(4)
            .with_pin_memory(pin);
        if streams > 0 {
            b = b.with_use_streams(true).with_num_streams(streams);
        }
        let loader = b.build(device)?;
        let mut total = expected::Counts::new();
        let mut batches = 0;
        for (k, batch) in loader.iter().enumerate() {
            let counts =
                expected::check_batch(&batch?, &samples, device).map_err(|e| format!("batch {k} differs: {e}"))?;
            for (kind, (f, v)) in counts {
                let c = total.entry(kind).or_default();
                *c = (c.0.max(f), c.1 + v);
            }
            batches += 1;
        }
        let per_kind: Vec<String> = total.iter().map(|(k, (f, v))| format!("{k}: {f} fields, {v} values")).collect();
        println!("equal: pin_memory={pin} upload streams={streams}: {batches} batches; {}", per_kind.join("; "));
    }

    // 3. Uploads alone, pinned against pageable.
    println!("== upload alone (host batches read beforehand; device bytes; all streams synced)");
    let plan = DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_size(args.upload_batch_size)
        .with_shuffle(true)
        .build(device)?
        .planned_batches();
    let lists: Vec<Vec<i64>> = plan.iter().map(|b| b.iter().map(|&i| i as i64).collect()).collect();
    let mut host: Vec<CollatedBatch> = Vec::new();
    let int32 = settings.int_dtype == burn::tensor::IntDType::I32;
    reader.read_collated_opt(&lists, CollateOptions::default().with_narrow_int64(int32), &mut host)?;
    let mut rates: [Vec<f64>; 2] = [vec![], vec![]];
    for epoch in 0..=args.epochs {
        let order = if epoch % 2 == 0 { [true, false] } else { [false, true] };
        for pin in order {
            let batches = host.clone();
            device.sync()?;
            let t = Instant::now();
            let mut bytes = 0;
            let mut on_device = Vec::with_capacity(batches.len());
            for c in batches {
                let b = AtomicBatch::from_collated(c, device, pin)?;
                bytes += device_bytes(&b);
                on_device.push(b);
            }
            device.sync()?;
            let s = t.elapsed().as_secs_f64();
            let what = if epoch == 0 { " (warm-up, not counted)" } else { "" };
            println!(
                "upload pin_memory={pin} epoch {epoch}: {:.1} MB in {s:.3} s = {:.2} GB/s{what}",
                bytes as f64 / 1e6,
                bytes as f64 / s / 1e9
            );
            if epoch > 0 {
                rates[usize::from(pin)].push(bytes as f64 / s / 1e9);
            }
            drop(on_device);
        }
    }
    println!(
        "upload median over {} epochs: pinned {:.2} GB/s, pageable {:.2} GB/s",
        args.epochs,
        median(rates[1].clone()),
        median(rates[0].clone())
    );

    // 4. The loader alone.
    println!("== loader alone (shuffled; read, collate, upload; synced per epoch)");
    for (label, pin, streams) in [("pinned, upload stream", true, true), ("pageable, consumer thread", false, false)] {
        let loader = DataLoader::builder(Dataset::from_arc(reader.clone()).with_skip_validation(true))
            .with_batch_size(args.batch_size)
            .with_shuffle(true)
            .with_prefetch_factor(16)
            .with_pin_memory(pin)
            .with_use_streams(streams)
            .build(device)?;
        let mut rates = vec![];
        for epoch in 0..=args.epochs {
            let t = Instant::now();
            let mut k = 0;
            for b in loader.iter() {
                k += b?.num_graphs;
            }
            loader.sync_uploads()?;
            device.sync()?;
            let s = t.elapsed().as_secs_f64();
            if epoch > 0 {
                rates.push(k as f64 / s);
            }
        }
        println!("loader {label}: median {:.0} samples/s over {} epochs", median(rates), args.epochs);
    }
    memory_check(args, &reader, device)
}

/// Step 5: host memory stays flat over the epochs of a pinned loader with
/// two upload threads whose batches a kernel on this thread reads: resident
/// and driver-mapped bytes after each epoch; an error past
/// `--memory-tolerance` growth from the middle epoch to the last.
fn memory_check(args: &Args, reader: &Arc<AtomicDataZarrReader>, device: &Device) -> Result<(), BoxError> {
    let epochs = args.memory_epochs.max(2);
    println!("== host memory over {epochs} epochs (pinned, 2 upload streams, prefetch 16)");
    let loader = DataLoader::builder(Dataset::from_arc(reader.clone()).with_skip_validation(true))
        .with_batch_size(args.batch_size)
        .with_shuffle(true)
        .with_prefetch_factor(16)
        .with_pin_memory(true)
        .with_use_streams(true)
        .with_num_streams(2)
        .build(device)?;
    let mut seen = Vec::new();
    for epoch in 0..epochs {
        for b in loader.iter() {
            // Consumed on this thread's stream as training would (a kernel
            // that reads the batch, queued, the batch dropped).
            let _ = b?.positions().map(|p| p.sum());
        }
        loader.sync_uploads()?;
        device.sync()?;
        let now = (memory::resident_bytes(), memory::driver_mapped_bytes());
        println!("epoch {}: resident {}, driver-mapped (pinned) {}", epoch + 1, memory::mib(now.0), memory::mib(now.1));
        seen.push(now);
    }
    // The pools fill during the first epochs (every new batch shape may take
    // a new page, and on a software device device memory is host memory);
    // a leak grows with every batch, so it shows in the second half too.
    let mid = epochs / 2;
    let (half, last) = (seen[mid], seen[epochs - 1]);
    for (what, a, b) in [("resident", half.0, last.0), ("driver-mapped", half.1, last.1)] {
        if let (Some(a), Some(b)) = (a, b)
            && b as f64 > (1.0 + args.memory_tolerance) * a as f64 + 1048576.0
        {
            return Err(format!(
                "{what} memory grew from {} after epoch {} to {} after epoch {}",
                memory::mib(Some(a)),
                mid + 1,
                memory::mib(Some(b)),
                epochs
            )
            .into());
        }
    }
    println!("memory flat: within {:.0}% from epoch {} to epoch {}", 100.0 * args.memory_tolerance, mid + 1, epochs);
    Ok(())
}

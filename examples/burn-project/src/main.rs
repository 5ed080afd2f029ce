//! A Burn 0.22 project of its own on atomzarr, as a user starts one: `burn`
//! named directly in Cargo.toml, atomzarr by path.
//!
//! ```sh
//! cargo run --release -- train                 # the README's quick start, then a few training steps
//! cargo run --release -- read STORE            # one epoch in order: Burn's DataLoaderBuilder vs atomzarr's DataLoader
//! ```
//!
//! `train` writes the README's water store, reads it through atomzarr's
//! `DataLoader` on an autodiff device and fits a per-element energy model
//! with Adam; it fails unless the loss falls. `read` reads a store once
//! through Burn's own `DataLoaderBuilder` over atomzarr's `Dataset` (no
//! shuffle: Burn's loader calls `Dataset::get_many` with each batch's
//! indices, which atomzarr answers with one fused read) and once through
//! atomzarr's `DataLoader`, checks that both yield the same samples in the
//! same order, and prints both rates and their ratio.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use atomzarr::{
    AtomicBatch, AtomicBatcher, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, Reader,
    ZarrWriteConfig,
};
use burn::data::dataloader::DataLoaderBuilder;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, IndexingUpdateOp, Tensor};
use clap::{Parser, Subcommand};

type BoxError = Box<dyn Error + Send + Sync>;

#[derive(Parser)]
#[command(about = "A fresh Burn 0.22 project on atomzarr")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The README's quick start, then a few training steps on its store.
    Train {
        /// Where to write the store (a temporary folder when absent).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Training steps.
        #[arg(long, default_value_t = 20)]
        steps: usize,
    },
    /// One epoch in order through Burn's DataLoaderBuilder and through
    /// atomzarr's DataLoader.
    Read {
        /// The store.
        store: PathBuf,
        /// Samples per batch.
        #[arg(long, default_value_t = 64)]
        batch_size: usize,
        /// Read only this many leading samples.
        #[arg(long)]
        max_samples: Option<usize>,
    },
}

fn main() -> Result<(), BoxError> {
    match Args::parse().command {
        Command::Train { store, steps } => train(store, steps),
        Command::Read { store, batch_size, max_samples } => read(&store, batch_size, max_samples),
    }
}

/// Energy as a sum of per-atom terms, each a function of the element.
#[derive(Module, Debug)]
struct AtomEnergy {
    embed: Embedding,
    out: Linear,
}

impl AtomEnergy {
    fn new(device: &Device) -> Self {
        AtomEnergy { embed: EmbeddingConfig::new(119, 8).init(device), out: LinearConfig::new(8, 1).init(device) }
    }

    /// `[B, 1]` energies of a batch's graphs.
    fn forward(&self, batch: &AtomicBatch) -> Result<Tensor<2>, BoxError> {
        let z = batch.atomic_numbers().ok_or("the batch has no atomic_numbers")?;
        let per_atom = self.out.forward(self.embed.forward(z.unsqueeze::<2>()).squeeze_dim::<2>(0));
        let device = per_atom.device();
        Ok(Tensor::<2>::zeros([batch.num_graphs, 1], &device).select_assign(
            0,
            batch.graph_index.clone(),
            per_atom,
            IndexingUpdateOp::Add,
        ))
    }
}

fn train(store: Option<PathBuf>, steps: usize) -> Result<(), BoxError> {
    let tmp = std::env::temp_dir().join(format!("burn-project-{}", std::process::id()));
    let path = store.unwrap_or_else(|| tmp.join("water.zarr"));

    // The README's quick start, as written there.
    let water = AtomicData::new(vec![8, 1, 1], vec![[0.0, 0.0, 0.0], [0.96, 0.0, 0.0], [-0.24, 0.93, 0.0]])?
        .with_energy(-14.2)
        .with_forces(vec![[0.0; 3]; 3])?
        .with_neighbor_list(vec![[0, 1], [0, 2], [1, 0], [2, 0]], None)?;
    let mut writer = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
    writer.write(&vec![water; 100])?;
    drop(writer);

    let device = Device::flex().autodiff();
    let reader = AtomicDataZarrReader::open(&path)?;
    let dataset = Dataset::new(reader).with_skip_validation(true);
    let loader = DataLoader::builder(dataset)
        .with_batch_size(16)
        .with_shuffle(true)
        .with_seed(0)
        .with_prefetch_factor(4)
        .build(&device)?;

    let mut model = AtomEnergy::new(&device);
    let mut optim = AdamConfig::new().init();
    let (mut first, mut last, mut step) = (None, 0.0f32, 0);
    'epochs: for epoch in 0.. {
        loader.set_epoch(epoch);
        for batch in loader.iter() {
            let batch = batch?;
            let target = batch.energy().ok_or("the batch has no energy")?;
            let diff = model.forward(&batch)? - target;
            let loss = (diff.clone() * diff).mean();
            let value = loss.clone().into_scalar::<f32>();
            first.get_or_insert(value);
            last = value;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(0.05, model, grads);
            step += 1;
            if step >= steps {
                break 'epochs;
            }
        }
    }
    let first = first.ok_or("no batch was read")?;
    println!("{step} steps on {}: loss {first:.4} -> {last:.4}", path.display());
    let _ = std::fs::remove_dir_all(&tmp);
    // NaN on either side is no fall either.
    if last.partial_cmp(&first) != Some(std::cmp::Ordering::Less) {
        return Err(format!("the loss did not fall ({first} -> {last})").into());
    }
    Ok(())
}

/// Each graph's atom count, in batch order.
fn sizes(batch: &AtomicBatch) -> impl Iterator<Item = i64> + '_ {
    batch.host_atoms_ptr.windows(2).map(|w| w[1] - w[0])
}

/// Reads batches until `n` samples have come, timing it: each sample's
/// atom count in order (Burn's batcher numbers a batch's samples from 0,
/// so two reads are compared by these), and the seconds it took.
fn timed_sizes(
    batches: impl Iterator<Item = Result<AtomicBatch, BoxError>>,
    n: usize,
) -> Result<(Vec<i64>, f64), BoxError> {
    let t = Instant::now();
    let mut out = Vec::with_capacity(n);
    for batch in batches {
        out.extend(sizes(&batch?));
        if out.len() >= n {
            break;
        }
    }
    Ok((out, t.elapsed().as_secs_f64()))
}

fn read(store: &std::path::Path, batch_size: usize, max_samples: Option<usize>) -> Result<(), BoxError> {
    let device = Device::flex();
    let reader = std::sync::Arc::new(AtomicDataZarrReader::open(store)?);
    let n = max_samples.unwrap_or(reader.len()).min(reader.len());

    // Burn's own loader over atomzarr's Dataset: `get_many` per batch.
    let burn_loader = DataLoaderBuilder::<AtomicData, AtomicBatch>::new(AtomicBatcher::default())
        .batch_size(batch_size)
        .set_device(device.clone())
        .build(Dataset::from_arc(reader.clone()).with_skip_validation(true));
    let (mut burn_sizes, burn_s) = timed_sizes(burn_loader.iter().map(|b| b.map_err(BoxError::from)), n)?;

    // atomzarr's DataLoader, in order.
    let ours = DataLoader::builder(Dataset::from_arc(reader.clone()).with_skip_validation(true))
        .with_batch_size(batch_size)
        .with_prefetch_factor(16)
        .build(&device)?;
    let (mut our_sizes, our_s) = timed_sizes(ours.iter().map(|b| b.map_err(BoxError::from)), n)?;

    burn_sizes.truncate(n);
    our_sizes.truncate(n);
    if burn_sizes != our_sizes {
        return Err("Burn's loader and atomzarr's read different samples".into());
    }
    let (burn_rate, our_rate) = (n as f64 / burn_s, n as f64 / our_s);
    println!("store: {} ({n} samples read, batch {batch_size})", store.display());
    println!("Burn DataLoaderBuilder over atomzarr::Dataset: {burn_rate:.0} samples/s ({burn_s:.2} s)");
    println!("atomzarr DataLoader:                          {our_rate:.0} samples/s ({our_s:.2} s)");
    println!("ratio Burn / atomzarr: {:.2}", burn_rate / our_rate);
    Ok(())
}

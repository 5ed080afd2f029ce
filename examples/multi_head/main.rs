//! Multi-head fine-tuning with replay, on a mixture of two data sets that
//! disagree: a periodic set with cells and stress, and a molecular set
//! without either, computed at another level of theory (its energies carry
//! per-element offsets).
//!
//! ```text
//! cargo run --release --example multi_head
//! cargo run --release --example multi_head -- --epochs 60 --temperature 1
//! ```
//!
//! 1. Both sets are imported with atomzarr's own import
//!    (`assets/multitask/*.extxyz`, made with ASE's EMT by
//!    `scripts/make_multitask_sets.py`), neighbor lists built at import,
//!    and each is split into a training and a held-out store (a seeded
//!    split, 80/20).
//! 2. The two training stores are mixed by a [`MultiReader`] with
//!    `output_strict` off: the batches carry the union of the fields, the
//!    molecules' absent stress as NaN with `stress_present` false, their
//!    absent cells as zeros (no periodic image), each graph's
//!    `dataset_index` and its set's `loss_weight` (the periodic set is the
//!    replayed one, weighted `--replay-weight`). A [`MultiDatasetSampler`]
//!    draws the sets by temperature, p_i ∝ (D_i / D)^(1/T).
//! 3. One model with a shared representation and one energy head per set
//!    trains on [`multi_task_loss`]: energy, forces and stress, masked
//!    where a label is absent, weighted per set. A single-head model trains
//!    on the same mixture for comparison.
//! 4. Each head is scored on each set's held-out store: energy MAE per
//!    atom, force MAE, and stress MAE where the set has stress.

mod model;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use atomzarr::formats::import::{ImportOptions, import_files};
use atomzarr::pipeline::loss::{TermWeights, multi_task_loss};
use atomzarr::prep::split::{Split, SplitRule};
use atomzarr::sampler::MultiDatasetSampler;
use atomzarr::{
    AtomicBatch, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, MultiReader,
    MultiReaderOptions, Reader, ReaderExt, ZarrWriteConfig,
};
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Int, Tensor};
use clap::Parser;

use model::{CUTOFF, MultiHead};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Multi-head fine-tuning with replay on a mixture of a periodic and a molecular set.
#[derive(Parser, Debug)]
struct Args {
    /// Where the stores are written.
    #[arg(long, default_value = "target/multi_head")]
    work: PathBuf,
    /// Passes over the mixture.
    #[arg(long, default_value_t = 40)]
    epochs: u64,
    /// Sampling temperature: 1 draws the sets by size, large T uniformly.
    #[arg(long, default_value_t = 2.0)]
    temperature: f64,
    /// Loss weight of the replayed (periodic) set; the molecular set's is 1.
    #[arg(long, default_value_t = 0.5)]
    replay_weight: f32,
    #[arg(long, default_value_t = 16)]
    batch_size: usize,
    #[arg(long, default_value_t = 32)]
    hidden: usize,
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// The two sets: name and file.
const SETS: [(&str, &str); 2] = [("periodic", "periodic.extxyz"), ("molecules", "molecules.extxyz")];

/// Weights of the loss terms: a per-atom energy error of 0.03 eV, a force
/// component's of 0.3 eV/Å and a stress component's of 0.003 eV/Å³ count
/// about alike.
const TERMS: TermWeights = TermWeights { energy: 10.0, forces: 1.0, stress: 1000.0 };

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/multitask");
    std::fs::create_dir_all(&args.work)?;
    let mut train = Vec::new();
    let mut test = Vec::new();
    for (name, file) in SETS {
        let (tr, te) = import_and_split(&assets.join(file), &args.work, name, args.seed)?;
        println!("{name}: {} training, {} held-out frames", tr.len(), te.len());
        train.push(tr);
        test.push(te);
    }
    let e0: Vec<f64> = train.iter().map(|r| mean_energy_per_atom(r)).collect::<Result<_, _>>()?;
    let union_e0 =
        (e0[0] * train[0].len() as f64 + e0[1] * train[1].len() as f64) / (train[0].len() + train[1].len()) as f64;
    let device = Device::flex();
    let ad = device.clone().autodiff();
    // Both models start from weights drawn with the seed: runs repeat.
    ad.seed(args.seed);
    let multi = train_model(&args, &train, MultiHead::new(args.hidden, e0, &ad), true)?;
    ad.seed(args.seed);
    let single = train_model(&args, &train, MultiHead::new(args.hidden, vec![union_e0], &ad), false)?;
    println!("\nheld-out errors (energy meV/atom, forces meV/Å, stress meV/Å³):");
    println!("{:<36} {:<10} {:>8} {:>8} {:>8}", "model", "set", "energy", "forces", "stress");
    for (s, (name, _)) in SETS.iter().enumerate() {
        for head in 0..2i64 {
            let e = evaluate(&multi, &test[s], head, &device)?;
            let own = if head as usize == s { "its own head" } else { "the other head" };
            println!("{:<36} {name:<10} {e}", format!("multi-head, head {head} ({own})"));
        }
        println!("{:<36} {name:<10} {}", "single-head on the union", evaluate(&single, &test[s], 0, &device)?);
    }
    Ok(())
}

/// Imports `file` into `work/<name>.zarr` (neighbor lists within
/// [`CUTOFF`]) and writes its seeded 80/20 split as
/// `<name>-train.zarr` and `<name>-test.zarr`.
fn import_and_split(
    file: &Path,
    work: &Path,
    name: &str,
    seed: u64,
) -> Result<(Arc<AtomicDataZarrReader>, Arc<AtomicDataZarrReader>), BoxError> {
    let whole = work.join(format!("{name}.zarr"));
    for p in [whole.clone(), work.join(format!("{name}-train.zarr")), work.join(format!("{name}-test.zarr"))] {
        if p.exists() {
            std::fs::remove_dir_all(&p)?;
        }
    }
    import_files(&[file], &whole, &ImportOptions::default().with_cutoff(CUTOFF)?)?;
    let reader = AtomicDataZarrReader::open(&whole)?;
    let split = Split::compute(&reader, &SplitRule::parse("train=0.8,test=0.2")?.with_seed(seed))?;
    let mut parts = Vec::new();
    for part in ["train", "test"] {
        let indices: Vec<i64> = split.indices(part)?.iter().map(|&i| i as i64).collect();
        let samples: Vec<AtomicData> = reader.read_many(&indices)?.into_iter().map(|s| s.data).collect();
        let path = work.join(format!("{name}-{part}.zarr"));
        AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
        parts.push(Arc::new(AtomicDataZarrReader::open(&path)?));
    }
    let test = parts.pop().ok_or("no test part")?;
    let train = parts.pop().ok_or("no train part")?;
    Ok((train, test))
}

/// The mean energy per atom of a store's samples.
fn mean_energy_per_atom(r: &AtomicDataZarrReader) -> Result<f64, BoxError> {
    let all: Vec<i64> = (0..r.len() as i64).collect();
    let (mut e, mut n) = (0.0, 0usize);
    for s in r.read_many(&all)? {
        e += s.data.field("energy").and_then(|f| f.data.get_f64(0)).ok_or("a sample without energy")?;
        n += s.data.num_atoms();
    }
    Ok(e / n.max(1) as f64)
}

/// Trains `model` on the two training stores mixed by temperature; each
/// graph's energy comes from its set's head (`per_set_heads`) or the one head.
fn train_model(
    args: &Args,
    train: &[Arc<AtomicDataZarrReader>],
    mut model: MultiHead,
    per_set_heads: bool,
) -> Result<MultiHead, BoxError> {
    let children: Vec<Arc<dyn Reader>> = train.iter().map(|r| r.clone() as Arc<dyn Reader>).collect();
    let options = MultiReaderOptions::default().with_output_strict(false).with_dataset_index(true);
    let multi = MultiReader::with_options(children, options)?.with_loss_weights(vec![args.replay_weight, 1.0])?;
    let sampler =
        MultiDatasetSampler::builder(&multi).with_temperature(args.temperature).with_seed(args.seed).build()?;
    println!(
        "\n{} model: {:?} samples per set per epoch (temperature {})",
        if per_set_heads { "multi-head" } else { "single-head" },
        sampler.counts(),
        args.temperature
    );
    let device = Device::flex().autodiff();
    let loader = DataLoader::builder(Dataset::new(multi))
        .with_batch_size(args.batch_size)
        .with_sampler(sampler)
        .build(&device)?;
    let mut optim: ModuleOptimizer = AdamConfig::new().init();
    for epoch in 0..args.epochs {
        loader.set_epoch(epoch);
        let (mut sum, mut steps) = (0.0, 0);
        for batch in loader.iter() {
            let batch = batch?;
            let head = heads(&batch, per_set_heads)?;
            let pred = model.forward(&batch, head);
            let loss = multi_task_loss(&batch, &pred, TERMS)?.total;
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            sum += loss.into_scalar::<f64>();
            steps += 1;
            let lr = args.lr * 0.5 * (1.0 + (std::f64::consts::PI * epoch as f64 / args.epochs as f64).cos());
            model = optim.step(lr, model, grads);
        }
        if !sum.is_finite() {
            return Err(format!("epoch {epoch}: the loss is {sum}").into());
        }
        if epoch % 10 == 0 || epoch + 1 == args.epochs {
            println!("  epoch {epoch:>3}: mean loss {:.4}", sum / steps.max(1) as f64);
        }
    }
    Ok(model.valid())
}

/// Each graph's head: its `dataset_index`, or 0 for a single head.
fn heads(batch: &AtomicBatch, per_set: bool) -> Result<Tensor<1, Int>, BoxError> {
    if per_set {
        return batch.int::<1>("dataset_index").ok_or_else(|| "the batch has no dataset_index".into());
    }
    Ok(Tensor::zeros([batch.num_graphs], &batch.graph_index.device()))
}

/// Mean absolute errors on a held-out store.
struct Errors {
    energy: (f64, usize),
    forces: (f64, usize),
    stress: (f64, usize),
}

impl std::fmt::Display for Errors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mae = |(s, n): (f64, usize)| if n == 0 { "-".to_string() } else { format!("{:.1}", 1000.0 * s / n as f64) };
        write!(f, "{:>8} {:>8} {:>8}", mae(self.energy), mae(self.forces), mae(self.stress))
    }
}

/// `model`'s errors on `store` with every graph's energy from head `head`.
fn evaluate(
    model: &MultiHead,
    store: &Arc<AtomicDataZarrReader>,
    head: i64,
    device: &Device,
) -> Result<Errors, BoxError> {
    let loader = DataLoader::builder(Dataset::from_arc(store.clone())).with_batch_size(32).build(device)?;
    let mut err = Errors { energy: (0.0, 0), forces: (0.0, 0), stress: (0.0, 0) };
    for batch in loader.iter() {
        let batch = batch?;
        let g = batch.num_graphs;
        let pred = model.forward(&batch, Tensor::<1, Int>::full([g], head, device));
        let host = |t: Tensor<2>| t.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"));
        let counts: Vec<f32> = batch.host_atoms_ptr.windows(2).map(|p| (p[1] - p[0]) as f32).collect();
        let (pe, te) = (host(pred.energy)?, host(batch.energy().ok_or("no energy")?)?);
        for k in 0..g {
            err.energy.0 += f64::from((pe[k] - te[k]).abs() / counts[k]);
        }
        err.energy.1 += g;
        if let (Some(p), Some(t)) = (pred.forces, batch.forces()) {
            let (p, t) = (host(p)?, host(t)?);
            err.forces.0 += p.iter().zip(&t).map(|(a, b)| f64::from((a - b).abs())).sum::<f64>();
            err.forces.1 += t.len();
        }
        if let (Some(p), Some(t)) = (pred.stress, batch.stress()) {
            let (p, t) = (host(p.reshape([g, 9]))?, host(t.reshape([g, 9]))?);
            for (a, b) in p.iter().zip(&t).filter(|(_, b)| !b.is_nan()) {
                err.stress.0 += f64::from((a - b).abs());
                err.stress.1 += 1;
            }
        }
    }
    Ok(err)
}

//! The training loop's reusable parts: loaders over a train/validation split
//! of a store, one training epoch (timing how long the step waits for data),
//! validation, and saving the model.
//!
//! Shared by the example and by `tests/train_mlip.rs` (`#[path]` include).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atomzarr::prep::split::{Split as LabelSplit, SplitRule};
use atomzarr::prep::stats::{StatsOptions, subset_stats};
use atomzarr::prep::transforms::{CollatedTransform, SubtractE0s};
use atomzarr::sampler::ListSampler;
use atomzarr::{AtomicBatch, AtomicDataZarrReader, DataLoader, Dataset, Reader, ReaderExt};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::Device;

use crate::model::{GraphBatch, Mlip, MlipConfig};
use crate::step::{DataStats, Metrics, Trainer};

/// Boxed error for the example's plumbing.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Loader options.
#[derive(Debug, Clone, Copy)]
pub struct LoaderOptions {
    /// Structures per batch.
    pub batch_size: usize,
    /// Batches fused into one background read.
    pub prefetch_factor: usize,
    /// Shuffle seed (the epoch is mixed in by `set_epoch`).
    pub seed: u64,
    /// Stage uploads in page-locked memory (useful on CUDA; a no-op on CPU).
    pub pin_memory: bool,
    /// Build device batches on the loader's own upload thread (its own
    /// device stream), overlapping uploads with the training step: for GPUs.
    pub use_streams: bool,
    /// Build neighbor lists at this cutoff in the loaders (a store without
    /// edges), instead of reading stored ones.
    pub cutoff: Option<f64>,
}

/// How the training set is prepared from the store.
#[derive(Debug, Clone, Default)]
pub struct Prep {
    /// Fraction of the structures held out for validation.
    pub val_fraction: f64,
    /// Split by this string label (`trajectory`): whole groups go to train
    /// or validation by atomzarr's split hash with `split_seed`. `None`:
    /// the last `val_fraction` of the store is validation.
    pub by: Option<String>,
    /// Seed of the split hash.
    pub split_seed: u64,
    /// Fit per-element reference energies (E0s) on the training part and
    /// subtract them from every energy the loaders yield.
    pub e0: bool,
    /// Rotate every training structure by a random rotation drawn from
    /// (this seed, epoch, sample).
    pub rotate: Option<u64>,
    /// The store has no edges: statistics (neighbors per atom) come from
    /// lists built at this cutoff, as the loaders will build them.
    pub cutoff: Option<f64>,
    /// The reader's decoded-chunk cache (`None`: the default, 1,280 MiB).
    pub cache_bytes: Option<u64>,
    /// Train in a full permutation of the training part every epoch
    /// (`ListSampler::shuffled`), rather than the loader's default shuffle,
    /// which reads the block pool when the store is larger than the cache.
    pub full_shuffle: bool,
}

impl Prep {
    /// The last `val_fraction` of the store is validation, nothing else.
    pub fn by_index(val_fraction: f64) -> Prep {
        Prep { val_fraction, ..Prep::default() }
    }
}

/// A training set prepared from a store: the split, the E0s fitted on its
/// training part, and the statistics of what the model trains on. By index
/// (the default, [`Prep::by_index`]): the last `val_fraction` of the store
/// is validation (the store is written trajectory by trajectory, so
/// validation holds whole unseen trajectories, save at most one straddling
/// the boundary). By a label ([`Prep::by`]): atomzarr's grouped, seeded
/// split.
pub struct TrainingSet {
    /// The store's reader, shared by both loaders.
    pub reader: Arc<AtomicDataZarrReader>,
    /// Training indices.
    pub train_indices: Vec<usize>,
    /// Validation indices.
    pub val_indices: Vec<usize>,
    /// Training-set statistics (of the energies after the E0s with
    /// [`Prep::e0`]).
    pub stats: DataStats,
    /// The E0s fitted on the training part, subtracted by both loaders.
    pub e0s: Option<SubtractE0s>,
    /// Rotation seed of the training loader ([`Prep::rotate`]).
    pub rotate: Option<u64>,
    /// [`Prep::full_shuffle`].
    pub full_shuffle: bool,
}

impl TrainingSet {
    /// Opens `store`, splits it, fits the E0s and computes the statistics.
    pub fn prepare(store: &Path, prep: &Prep) -> Result<TrainingSet, BoxError> {
        let mut options = atomzarr::ReaderOptions::default();
        if let Some(bytes) = prep.cache_bytes {
            options = options.with_cache_bytes(bytes);
        }
        let reader = Arc::new(AtomicDataZarrReader::open_opt(store, options)?);
        let n = reader.len();
        if n < 2 {
            return Err(format!("{}: {n} structures, need at least 2 to split", store.display()).into());
        }
        let (train_indices, val_indices) = match &prep.by {
            None => {
                let n_val = ((n as f64 * prep.val_fraction).round() as usize).clamp(1, n - 1);
                ((0..n - n_val).collect::<Vec<_>>(), (n - n_val..n).collect::<Vec<_>>())
            }
            Some(label) => {
                let f = prep.val_fraction;
                let rule = SplitRule::new(vec![("train".into(), 1.0 - f), ("val".into(), f)])?
                    .with_by(Some(label.clone()))
                    .with_seed(prep.split_seed);
                let split = LabelSplit::compute(&*reader, &rule)?;
                (split.indices("train")?.to_vec(), split.indices("val")?.to_vec())
            }
        };
        if train_indices.is_empty() || val_indices.is_empty() {
            return Err(format!(
                "{}: the split left a part empty; change --split-seed or --val-fraction",
                store.display()
            )
            .into());
        }
        // E0s from the training part only (one streamed pass).
        let e0s = if prep.e0 {
            Some(SubtractE0s::from_stats(&subset_stats(&*reader, &train_indices, &StatsOptions::default())?)?)
        } else {
            None
        };
        // Statistics of the training split (one collated read of all of it),
        // of the energies the model is trained on.
        let mut all = Vec::new();
        match prep.cutoff {
            Some(c) => {
                let ds = atomzarr::Dataset::from_arc(reader.clone()).with_skip_validation(true).with_cutoff(c)?;
                all = ds.load_batches(std::slice::from_ref(&train_indices))?;
            }
            None => reader.read_collated(&[train_indices.iter().map(|&i| i as i64).collect()], &mut all)?,
        }
        if let Some(e0s) = &e0s {
            all.iter_mut().try_for_each(|b| e0s.apply(b, 0))?;
        }
        let stats = DataStats::from_collated(all.iter());
        Ok(TrainingSet {
            reader,
            train_indices,
            val_indices,
            stats,
            e0s,
            rotate: prep.rotate,
            full_shuffle: prep.full_shuffle,
        })
    }

    /// The data path: a `Dataset` over the store, and a `DataLoader` per
    /// part. Training: the training indices shuffled per epoch,
    /// `prefetch_factor` batches fused into one background read, E0s
    /// subtracted and rotations applied in the collated batch, pinned
    /// staging and an upload stream on a GPU, batches on `device` (with
    /// autodiff). Validation: in order, whole, on `device` without autodiff.
    pub fn loaders(self, opts: LoaderOptions, device: &Device) -> Result<Split, BoxError> {
        // Validation stays on (the default): each sample's shapes, neighbor
        // indices and positions are checked as it is loaded. With a cutoff,
        // the dataset builds the lists while loading.
        let mut dataset = Dataset::from_arc(self.reader.clone());
        if let Some(c) = opts.cutoff {
            dataset = dataset.with_cutoff(c)?;
        }
        let mut train = DataLoader::builder(dataset.clone())
            .with_batch_size(opts.batch_size)
            .with_seed(opts.seed)
            .with_prefetch_factor(opts.prefetch_factor)
            .with_pin_memory(opts.pin_memory)
            .with_use_streams(opts.use_streams);
        train = match self.full_shuffle {
            true => train.with_sampler(ListSampler::shuffled(self.train_indices.clone(), opts.seed)),
            false => train.with_shuffle(true).with_sampler(ListSampler::new(self.train_indices.clone())),
        };
        let mut val = DataLoader::builder(dataset)
            .with_batch_size(opts.batch_size)
            .with_prefetch_factor(opts.prefetch_factor)
            .with_pin_memory(opts.pin_memory)
            .with_use_streams(opts.use_streams)
            .with_sampler(ListSampler::new(self.val_indices.clone()));
        if let Some(e0s) = &self.e0s {
            train = train.with_subtract_e0s(e0s.clone());
            val = val.with_subtract_e0s(e0s.clone());
        }
        if let Some(seed) = self.rotate {
            train = train.with_random_rotation(seed);
        }
        Ok(Split {
            train: train.build(device)?,
            val: val.build(&device.clone().inner())?,
            train_indices: self.train_indices,
            val_indices: self.val_indices,
            stats: self.stats,
            e0s: self.e0s,
        })
    }
}

/// Train and validation loaders over one store ([`TrainingSet::loaders`]).
pub struct Split {
    /// Shuffled training batches on the training (autodiff) device.
    pub train: DataLoader<AtomicDataZarrReader>,
    /// Sequential validation batches on the same device without autodiff.
    pub val: DataLoader<AtomicDataZarrReader>,
    /// Training indices.
    pub train_indices: Vec<usize>,
    /// Validation indices.
    pub val_indices: Vec<usize>,
    /// Training-set statistics.
    pub stats: DataStats,
    /// The E0s subtracted by both loaders.
    pub e0s: Option<SubtractE0s>,
}

impl Split {
    /// Opens `store` and builds both loaders, the last `val_fraction` for
    /// validation; `device` is the training device (with autodiff).
    pub fn open(store: &Path, val_fraction: f64, opts: LoaderOptions, device: &Device) -> Result<Split, BoxError> {
        Self::open_prepared(store, &Prep::by_index(val_fraction), opts, device)
    }

    /// [`TrainingSet::prepare`], then [`TrainingSet::loaders`].
    pub fn open_prepared(store: &Path, prep: &Prep, opts: LoaderOptions, device: &Device) -> Result<Split, BoxError> {
        TrainingSet::prepare(store, prep)?.loaders(opts, device)
    }
}

/// What one training epoch did.
#[derive(Debug, Clone, Copy, Default)]
pub struct EpochReport {
    /// Mean training loss over the epoch's batches.
    pub loss: f64,
    /// Structures trained on.
    pub samples: usize,
    /// Batches.
    pub batches: usize,
    /// Time blocked in the loader waiting for the next batch.
    pub wait: Duration,
    /// Wall time of the epoch (waiting + stepping).
    pub total: Duration,
}

impl EpochReport {
    /// Structures per second.
    pub fn samples_per_s(&self) -> f64 {
        self.samples as f64 / self.total.as_secs_f64().max(1e-9)
    }
    /// Fraction of step time spent waiting for data.
    pub fn wait_fraction(&self) -> f64 {
        self.wait.as_secs_f64() / self.total.as_secs_f64().max(1e-9)
    }
}

/// The model's view of a loader batch.
pub fn graph_batch(b: AtomicBatch) -> Result<GraphBatch, BoxError> {
    Ok(GraphBatch::from_atomic(b)?)
}

/// One pass over the training loader at learning rate `lr`. The wait time is
/// measured around `next()` only; the step itself syncs (it reads the loss
/// back), so the split between waiting and computing is real on GPU too.
pub fn train_epoch(
    trainer: &mut Trainer,
    loader: &DataLoader<AtomicDataZarrReader>,
    epoch: u64,
    lr: f64,
) -> Result<EpochReport, BoxError> {
    loader.set_epoch(epoch);
    let mut report = EpochReport::default();
    let start = Instant::now();
    let mut iter = loader.iter();
    let mut loss_sum = 0.0;
    loop {
        let t = Instant::now();
        let Some(batch) = iter.next() else { break };
        report.wait += t.elapsed();
        let batch = batch?;
        let indices = batch.indices.clone();
        let batch = graph_batch(batch)?;
        let loss = trainer.step(&batch, lr);
        // Training through NaN or Inf only spoils the model: stop, naming
        // where (the first epoch and batch are 1).
        if !loss.is_finite() {
            return Err(format!(
                "epoch {}, batch {}: the training loss is {loss} (samples {indices:?}); stopping",
                epoch + 1,
                report.batches + 1,
            )
            .into());
        }
        report.samples += batch.num_graphs;
        report.batches += 1;
        loss_sum += loss;
    }
    report.total = start.elapsed();
    report.loss = loss_sum / report.batches.max(1) as f64;
    Ok(report)
}

/// Validation MAEs of `model` and of the predict-the-mean baseline.
pub fn evaluate(
    model: &Mlip,
    loader: &DataLoader<AtomicDataZarrReader>,
    mean_energy_per_atom: f64,
) -> Result<Metrics, BoxError> {
    loader.set_epoch(0);
    let mut m = Metrics::default();
    for (k, batch) in loader.iter().enumerate() {
        let batch = batch?;
        let indices = batch.indices.clone();
        let batch = graph_batch(batch)?;
        let pred = model.forward(&batch);
        m.add(&pred, &batch, mean_energy_per_atom);
        if !m.is_finite() {
            return Err(format!(
                "validation batch {} (samples {indices:?}): a prediction or label is not finite; stopping",
                k + 1,
            )
            .into());
        }
    }
    Ok(m)
}

/// Cosine decay from `lr` to `lr * floor` over `epochs`.
pub fn cosine_lr(lr: f64, floor: f64, epoch: usize, epochs: usize) -> f64 {
    let t = epoch as f64 / epochs.max(1) as f64;
    lr * (floor + (1.0 - floor) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos()))
}

/// Where the model files of a store go: `<store without .zarr>_mlip` +
/// `.bpk` (weights, Burn's burnpack record) and `.json` (MlipConfig).
pub fn model_path(store: &Path) -> PathBuf {
    let stem = store.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    store.with_file_name(format!("{stem}_mlip"))
}

/// Saves weights and config next to the store; returns the weights path.
pub fn save(model: Mlip, config: &MlipConfig, store: &Path) -> Result<PathBuf, BoxError> {
    let base = model_path(store);
    config.save(base.with_extension("json"))?;
    let weights = base.with_extension("bpk");
    model.save_file(&weights)?;
    Ok(weights)
}

/// Loads a model saved by [`save`].
pub fn load(store: &Path, device: &Device) -> Result<(Mlip, MlipConfig), BoxError> {
    let base = model_path(store);
    let config = MlipConfig::load(base.with_extension("json"))?;
    let model = config.init(device).try_load_file(base.with_extension("bpk"))?;
    Ok((model, config))
}

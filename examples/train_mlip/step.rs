//! The loss, one training step (model + Adam) and the validation metrics
//! of the potential in `model.rs`, and the dataset statistics the model is
//! scaled by.
#![allow(dead_code)]
// Index loops over a batch's graphs read like the formulas they implement.
#![allow(clippy::needless_range_loop)]

use atomzarr::CollatedBatch;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor};

use crate::model::{GraphBatch, Mlip, MlipConfig, Prediction};

/// Relative weights of the two loss terms.
#[derive(Debug, Clone, Copy)]
pub struct LossWeights {
    /// Weight of the (per-atom, normalised) energy term.
    pub energy: f64,
    /// Weight of the (normalised) force term.
    pub force: f64,
}

impl Default for LossWeights {
    fn default() -> Self {
        LossWeights { energy: 4.0, force: 1.0 }
    }
}

/// Energy + force loss in normalised units: mean squared per-atom energy error
/// over `energy_scale²` plus mean squared force-component error over
/// `force_scale²`.
pub fn loss(model: &Mlip, pred: &Prediction, batch: &GraphBatch, w: LossWeights) -> Tensor<1> {
    let de = (pred.energy.clone() - batch.energy.clone()) / batch.num_atoms.clone() / model.energy_scale;
    let df = (pred.forces.clone() - batch.forces.clone()) / model.force_scale;
    de.powi_scalar(2).mean() * w.energy + df.powi_scalar(2).mean() * w.force
}

/// Model + Adam, one call per batch.
pub struct Trainer {
    /// The model being trained (on an autodiff device).
    pub model: Mlip,
    optim: ModuleOptimizer,
    /// Loss weights.
    pub weights: LossWeights,
}

impl Trainer {
    /// A trainer for a fresh model from `config` on `device` (with autodiff:
    /// `device.autodiff()`).
    pub fn new(config: &MlipConfig, device: &Device) -> Trainer {
        let optim =
            AdamConfig::new().with_grad_clipping(Some(burn::grad_clipping::GradientClippingConfig::Norm(10.0))).init();
        Trainer { model: config.init(device), optim, weights: LossWeights::default() }
    }

    /// Forward, backward, Adam update at learning rate `lr`; returns the loss.
    pub fn step(&mut self, batch: &GraphBatch, lr: f64) -> f64 {
        let pred = self.model.forward(batch);
        let loss = loss(&self.model, &pred, batch, self.weights);
        let grads = GradientsParams::from_grads(loss.backward(), &self.model);
        let value = loss.into_scalar::<f64>();
        self.model = self.optim.step(lr, self.model.clone(), grads);
        value
    }

    /// The model without autodiff, for validation and saving.
    pub fn valid(&self) -> Mlip {
        self.model.valid()
    }
}

/// Validation accumulators: MAEs of the model and of the predict-the-mean baseline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics {
    energy_abs: f64,
    force_abs: f64,
    base_energy_abs: f64,
    base_force_abs: f64,
    graphs: usize,
    components: usize,
}

impl Metrics {
    /// Adds one batch. `mean_energy_per_atom` is the training-set mean the
    /// baseline predicts (times the atom count); the force baseline is zero.
    pub fn add(&mut self, pred: &Prediction, batch: &GraphBatch, mean_energy_per_atom: f64) {
        let sum = |t: Tensor<2>| t.abs().sum().into_scalar::<f64>();
        self.energy_abs += sum(pred.energy.clone() - batch.energy.clone());
        self.force_abs += sum(pred.forces.clone() - batch.forces.clone());
        self.base_energy_abs += sum(batch.num_atoms.clone() * mean_energy_per_atom - batch.energy.clone());
        self.base_force_abs += sum(batch.forces.clone());
        self.graphs += batch.num_graphs;
        self.components += batch.forces.dims()[0] * 3;
    }

    /// Whether every sum so far is finite (no NaN or Inf reached them).
    pub fn is_finite(&self) -> bool {
        [self.energy_abs, self.force_abs, self.base_energy_abs, self.base_force_abs].iter().all(|x| x.is_finite())
    }

    /// Energy MAE, eV per structure.
    pub fn energy_mae(&self) -> f64 {
        self.energy_abs / self.graphs.max(1) as f64
    }
    /// Force MAE, eV/Å per component.
    pub fn force_mae(&self) -> f64 {
        self.force_abs / self.components.max(1) as f64
    }
    /// Baseline energy MAE.
    pub fn baseline_energy_mae(&self) -> f64 {
        self.base_energy_abs / self.graphs.max(1) as f64
    }
    /// Baseline force MAE.
    pub fn baseline_force_mae(&self) -> f64 {
        self.base_force_abs / self.components.max(1) as f64
    }
}

/// Training-set statistics for normalisation and the baseline.
#[derive(Debug, Clone, Copy)]
pub struct DataStats {
    /// Mean of E/N over training structures, eV/atom (the baseline's prediction per atom).
    pub energy_per_atom: f64,
    /// Standard deviation of E/N, eV/atom.
    pub energy_scale: f64,
    /// RMS force component, eV/Å.
    pub force_scale: f64,
    /// Mean edges per atom.
    pub avg_neighbors: f64,
}

impl DataStats {
    /// Accumulates statistics from host-collated batches.
    pub fn from_collated<'a>(batches: impl IntoIterator<Item = &'a CollatedBatch>) -> DataStats {
        let (mut e_sum, mut e_sq, mut graphs) = (0.0, 0.0, 0usize);
        let (mut f_sq, mut comps, mut atoms, mut edges) = (0.0, 0usize, 0usize, 0usize);
        for b in batches {
            let energy = b.fields["energy"].data.to_f64_vec();
            for k in 0..b.num_graphs() {
                let per_atom = energy[k] / (b.atoms_ptr[k + 1] - b.atoms_ptr[k]) as f64;
                e_sum += per_atom;
                e_sq += per_atom * per_atom;
            }
            graphs += b.num_graphs();
            let f = b.fields["forces"].data.to_f64_vec();
            f_sq += f.iter().map(|x| x * x).sum::<f64>();
            comps += f.len();
            atoms += b.num_atoms();
            edges += b.num_edges();
        }
        let g = graphs.max(1) as f64;
        let mean = e_sum / g;
        DataStats {
            energy_per_atom: mean,
            energy_scale: (e_sq / g - mean * mean).max(1e-12).sqrt(),
            force_scale: (f_sq / comps.max(1) as f64).sqrt().max(1e-6),
            avg_neighbors: edges as f64 / atoms.max(1) as f64,
        }
    }

    /// A model config carrying these statistics.
    pub fn config(&self, cutoff: f64) -> MlipConfig {
        MlipConfig::new()
            .with_cutoff(cutoff)
            .with_energy_per_atom(self.energy_per_atom)
            .with_energy_scale(self.energy_scale)
            .with_force_scale(self.force_scale)
            .with_avg_neighbors(self.avg_neighbors)
    }
}

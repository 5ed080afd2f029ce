//! Losses over labels that only some frames have: an absent float label is
//! NaN in the store (docs/LABELS.md), so a batch's `forces` or `stress`
//! holds NaN rows for frames without them. These helpers leave those
//! values out of a loss instead of letting one NaN spread to every gradient.
//!
//! ```
//! use burn::tensor::{Device, Tensor};
//! use atomzarr::pipeline::loss::{label_mask, masked_mse};
//! let dev = Device::flex();
//! let target = Tensor::<2>::from_floats([[1.0, 2.0], [f32::NAN, f32::NAN]], &dev);
//! let pred = Tensor::<2>::from_floats([[1.5, 2.0], [9.0, 9.0]], &dev);
//! assert_eq!(label_mask(&target).sum().into_scalar::<f32>(), 2.0);
//! assert_eq!(masked_mse(pred, target).into_scalar::<f32>(), 0.125); // (0.5² + 0²) / 2
//! ```

use burn::tensor::Tensor;

/// 1 where `target` holds a value, 0 where it is absent (NaN).
pub fn label_mask<const D: usize>(target: &Tensor<D>) -> Tensor<D> {
    target.clone().is_nan().bool_not().float()
}

/// `target` with its absent (NaN) values replaced by `value`.
pub fn fill_absent<const D: usize>(target: Tensor<D>, value: f32) -> Tensor<D> {
    let nan = target.clone().is_nan();
    target.mask_fill(nan, value)
}

/// Mean squared error over the values `target` holds (absent ones, NaN,
/// left out of both the sum and the count; 0 when none is present). The
/// gradient flows only through the present elements of `pred`.
pub fn masked_mse<const D: usize>(pred: Tensor<D>, target: Tensor<D>) -> Tensor<1> {
    let mask = label_mask(&target);
    let diff = (pred - fill_absent(target, 0.0)) * mask.clone();
    let count = mask.sum().clamp_min(1.0);
    (diff.clone() * diff).sum() / count
}

/// Weights of the three terms of [`multi_task_loss`] (default 1 each).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermWeights {
    /// The energy-per-atom term.
    pub energy: f32,
    /// The force-component term.
    pub forces: f32,
    /// The stress-component term.
    pub stress: f32,
}

impl Default for TermWeights {
    fn default() -> Self {
        TermWeights { energy: 1.0, forces: 1.0, stress: 1.0 }
    }
}

/// A model's outputs for a batch: `[G,1]` energies, and `[V,3]` forces and
/// `[G,3,3]` stresses when it predicts them.
#[derive(Debug, Clone)]
pub struct Predicted {
    /// `[G,1]` total energies.
    pub energy: Tensor<2>,
    /// `[V,3]` forces.
    pub forces: Option<Tensor<2>>,
    /// `[G,3,3]` stresses.
    pub stress: Option<Tensor<3>>,
}

/// The terms of [`multi_task_loss`] and their weighted sum.
#[derive(Debug, Clone)]
pub struct MultiTaskLoss {
    /// `energy·E + forces·F + stress·S` by the [`TermWeights`].
    pub total: Tensor<1>,
    /// E: the energy-per-atom term.
    pub energy: Tensor<1>,
    /// F: the force term, when forces were predicted.
    pub forces: Option<Tensor<1>>,
    /// S: the stress term, when stresses were predicted.
    pub stress: Option<Tensor<1>>,
}

/// The masked, weighted loss of a multi-task batch: each term a mean of
/// squared errors over the values the batch holds, each graph's errors
/// scaled by its weight.
///
/// - A graph's weight is its [`LOSS_WEIGHT`](crate::source::LOSS_WEIGHT)
///   (the data set's, [`MultiReader::with_loss_weights`](crate::MultiReader::with_loss_weights))
///   times its sample weight `weight` ([`SampleWeights`](crate::prep::transforms::SampleWeights)),
///   each 1 when the batch lacks it.
/// - A value counts where the graph holds the label: its
///   `<name>_present` flag (a mixture's, [`MultiReaderOptions::with_output_strict`](crate::MultiReaderOptions::with_output_strict))
///   is true, or the batch has no flag, and the value is not NaN.
/// - E = Σ_g w_g m_g ((Ê_g − E_g) / N_g)² / Σ_g m_g (N_g the graph's atoms),
///   F = Σ_{a,c} w_a m_ac (F̂_ac − F_ac)² / Σ m_ac (each atom weighted as
///   its graph), S = Σ_{g,ij} w_g m_gij (σ̂_gij − σ_gij)² / Σ m_gij; each 0
///   when no value counts.
///
/// Absent values never reach the sum, nor the gradient: a prediction where
/// the label is absent (a molecule's stress) is selected out, not
/// multiplied by zero, so it may be anything finite in the forward pass.
///
/// ```
/// use burn::tensor::{Device, Tensor};
/// use atomzarr::{AtomicBatcher, AtomicData};
/// use atomzarr::pipeline::loss::{multi_task_loss, Predicted, TermWeights};
/// # fn main() -> atomzarr::Result<()> {
/// let dev = Device::flex();
/// let a = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.7, 0.0, 0.0]])?.with_energy(-2.0);
/// let b = AtomicData::new(vec![8], vec![[0.0; 3]])?.with_energy(f32::NAN); // no energy
/// let batch = AtomicBatcher::new(false).try_batch(&[a, b], &dev)?;
/// let pred = Predicted { energy: Tensor::<2>::from_floats([[-1.0], [5.0]], &dev), forces: None, stress: None };
/// let loss = multi_task_loss(&batch, &pred, TermWeights::default())?;
/// assert_eq!(loss.energy.into_scalar::<f32>(), 0.25); // ((-1 + 2) / 2 atoms)², one graph counts
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when the batch lacks
/// a label that was predicted, or a prediction's shape is not the label's.
pub fn multi_task_loss(batch: &crate::AtomicBatch, pred: &Predicted, w: TermWeights) -> crate::Result<MultiTaskLoss> {
    let dev = pred.energy.device();
    let g = batch.num_graphs;
    let ones = || Tensor::<1>::ones([g], &dev);
    let per_graph = |name: &str| batch.float::<1>(name).or_else(|| batch.float::<2>(name).map(|t| t.reshape([g])));
    let weight = per_graph(crate::source::LOSS_WEIGHT).unwrap_or_else(ones)
        * per_graph(crate::prep::transforms::WEIGHT).unwrap_or_else(ones);
    let flag = |name: &str| {
        batch.bool::<1>(&format!("{name}{}", crate::source::PRESENT_SUFFIX)).map(|b| b.float()).unwrap_or_else(ones)
    };
    let label = |name: &str, want: &[usize]| -> crate::Result<()> {
        match batch.fields.get(name) {
            Some(f) if f.shape == want => Ok(()),
            Some(f) => Err(crate::Error::invalid(
                format!("multi_task_loss: {name}"),
                format!("the batch's {name} is {:?}, the prediction {want:?}", f.shape),
            )),
            None => Err(crate::Error::invalid(
                format!("multi_task_loss: {name}"),
                "predicted, but the batch has no such label",
            )),
        }
    };
    let counts = Tensor::<1>::from_floats(
        batch.host_atoms_ptr.windows(2).map(|p| (p[1] - p[0]).max(1) as f32).collect::<Vec<_>>().as_slice(),
        &dev,
    );
    label("energy", &pred.energy.dims())?;
    let energy_target = batch
        .float::<2>("energy")
        .ok_or_else(|| crate::Error::invalid("multi_task_loss: energy", "not a float [G,1]"))?;
    let per_atom = |t: Tensor<2>| t / counts.clone().reshape([g, 1]);
    let energy = weighted_mse(
        per_atom(pred.energy.clone()),
        per_atom(energy_target),
        flag("energy").reshape([g, 1]),
        weight.clone().reshape([g, 1]),
    );
    let mut total = energy.clone() * w.energy;
    let forces = match &pred.forces {
        Some(f) => {
            label("forces", &f.dims())?;
            let target =
                batch.forces().ok_or_else(|| crate::Error::invalid("multi_task_loss: forces", "not a float [V,3]"))?;
            let atoms = |t: Tensor<1>| t.select(0, batch.graph_index.clone()).reshape([batch.num_atoms, 1]);
            let term = weighted_mse(f.clone(), target, atoms(flag("forces")), atoms(weight.clone()));
            total = total + term.clone() * w.forces;
            Some(term)
        }
        None => None,
    };
    let stress = match &pred.stress {
        Some(s) => {
            label("stress", &s.dims())?;
            let target = batch
                .stress()
                .ok_or_else(|| crate::Error::invalid("multi_task_loss: stress", "not a float [G,3,3]"))?;
            let term = weighted_mse(s.clone(), target, flag("stress").reshape([g, 1, 1]), weight.reshape([g, 1, 1]));
            total = total + term.clone() * w.stress;
            Some(term)
        }
        None => None,
    };
    Ok(MultiTaskLoss { total, energy, forces, stress })
}

/// Σ weight·mask·(pred − target)² / Σ mask, `flag` and `weight` broadcast
/// over `target`, the mask also 0 where `target` is NaN.
fn weighted_mse<const D: usize>(pred: Tensor<D>, target: Tensor<D>, flag: Tensor<D>, weight: Tensor<D>) -> Tensor<1> {
    let mask = label_mask(&target) * flag;
    let off = mask.clone().equal_elem(0.0);
    let diff = (pred - fill_absent(target, 0.0)).mask_fill(off, 0.0);
    let count = mask.sum().clamp_min(1.0);
    (diff.clone() * diff * weight).sum() / count
}

//! Transforms of collated host batches ([`CollatedTransform`]): the
//! training-set preparation that uses saved statistics, applied to a
//! batch's buffers in place (no sample is copied out):
//!
//! | transform | does | to |
//! |---|---|---|
//! | [`SubtractE0s`] | `E -= Σ_atoms E0[z]` | `energy` |
//! | [`ScaleShift`] | `E = (E - shift · n_atoms) / scale`, `F = F / scale`, `σ = σ / scale` | `energy`, `forces`, `stress`, `virial` |
//! | [`RandomRotation`] | one uniform SO(3) rotation per sample and epoch: `v = R v`, `S = R S Rᵀ` | positions, forces, velocities, momenta, cell, shifts, dipole; stress, virial |
//! | [`SampleWeights`] | a per-sample weight from a label (`config_type=aimd:0.5,...`) | adds `weight` `[B, 1]` |
//!
//! Each is a [`Dataset`](crate::Dataset) transform
//! ([`Dataset::with_collated_transform`](crate::Dataset::with_collated_transform))
//! and a [`DataLoader`](crate::DataLoader) option
//! ([`DataLoaderBuilder::with_subtract_e0s`](crate::DataLoaderBuilder::with_subtract_e0s),
//! `with_scale_shift`, `with_random_rotation`, `with_sample_weights`). On the
//! batch paths they run on the collated batch (the reader's fast path stays
//! fast); a single sample read through the Dataset (`get_sample`, Burn's
//! `Dataset::get`) is collated alone, transformed and split back. Absent
//! labels (NaN) stay NaN.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use std::collections::BTreeMap;
//! use atomzarr::{AtomicData, CollatedBatch};
//! use atomzarr::prep::transforms::{CollatedTransform, ScaleShift, SubtractE0s};
//! let water = AtomicData::new(vec![8, 1, 1], vec![[0.0; 3]; 3])?.with_energy(-14.0);
//! let mut b = CollatedBatch::from_samples(&[0], &[water])?;
//! SubtractE0s::new(BTreeMap::from([(1, -1.5), (8, -10.0)])).apply(&mut b, 0)?;
//! assert_eq!(b.fields["energy"].data.to_f64_vec(), vec![-1.0]); // -14 - (-10 - 1.5 - 1.5)
//! ScaleShift::new(0.5, -0.1)?.apply(&mut b, 0)?;
//! assert!((b.fields["energy"].data.to_f64_vec()[0] + 1.4).abs() < 1e-6); // (-1 + 0.3) / 0.5
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::data::rotation::Rotation;
use crate::data::{CollatedBatch, CollatedField, HostData, Level};
use crate::error::{Error, Result};
use crate::prep::stats::DatasetStats;

/// A transform of a collated host batch, in place. `epoch` is the
/// [`DataLoader`](crate::DataLoader)'s epoch (a [`Dataset`](crate::Dataset)'s
/// own, 0 unless set with [`Dataset::with_epoch`](crate::Dataset::with_epoch));
/// `batch.indices` are the samples' logical indices.
///
/// Closures `Fn(&mut CollatedBatch, u64) -> Result<()>` are transforms.
pub trait CollatedTransform: Send + Sync {
    /// Transforms `batch` in place.
    ///
    /// # Errors
    /// The transform's own; the crate's transforms return [`Error::InvalidInput`]
    /// naming themselves when the batch lacks a field they need or it has the
    /// wrong shape.
    fn apply(&self, batch: &mut CollatedBatch, epoch: u64) -> Result<()>;
}

impl<F: Fn(&mut CollatedBatch, u64) -> Result<()> + Send + Sync> CollatedTransform for F {
    fn apply(&self, batch: &mut CollatedBatch, epoch: u64) -> Result<()> {
        self(batch, epoch)
    }
}

/// A shared transform, as a Dataset holds them.
pub type SharedTransform = Arc<dyn CollatedTransform>;

/// The name of the per-sample weight field [`SampleWeights`] adds.
pub const WEIGHT: &str = "weight";

fn bad(what: &str, reason: impl Into<String>) -> Error {
    Error::invalid(what, reason)
}

/// `name`, a system field with one value per graph.
fn per_graph<'a>(b: &'a mut CollatedBatch, name: &str, what: &str) -> Result<&'a mut CollatedField> {
    let n = b.num_graphs();
    let f = b.fields.get_mut(name).ok_or_else(|| bad(what, format!("the batch has no {name} field")))?;
    if f.level != Level::System || f.data.len() != n {
        return Err(bad(what, format!("{name} is not one value per sample ({} values, {n} samples)", f.data.len())));
    }
    Ok(f)
}

/// Updates every value of float field `f` (of `what`) with `op`.
fn update_all(f: &mut CollatedField, what: &str, op: impl FnMut(&mut [f64])) -> Result<()> {
    let row: usize = f.trailing_shape.iter().product::<usize>().max(1);
    let rows = f.data.len() / row;
    f.data.update_rows_f64(0..rows, row, op).map_err(|r| bad(what, r))
}

/// Subtracts per-element reference energies from each sample's energy:
/// `E -= Σ_atoms E0[z]` (the E0s of `atomzarr stats`, fitted on the
/// training split). An element without an E0 is an error naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct SubtractE0s {
    e0: BTreeMap<i64, f64>,
}

impl SubtractE0s {
    /// From E0s by atomic number.
    pub fn new(e0: BTreeMap<i64, f64>) -> Self {
        SubtractE0s { e0 }
    }

    /// The E0s of `stats`; an error when they have none (see
    /// [`DatasetStats::e0_note`]).
    ///
    /// # Errors
    /// [`Error::Config`] when `stats` has no E0s.
    pub fn from_stats(stats: &DatasetStats) -> Result<Self> {
        let e0: Option<BTreeMap<i64, f64>> = stats.elements.iter().map(|e| Some((e.z, e.e0?))).collect();
        match e0 {
            Some(e0) if !e0.is_empty() => Ok(SubtractE0s { e0 }),
            _ => Err(Error::Config(format!(
                "the statistics have no E0s ({})",
                stats.e0_note.as_deref().unwrap_or("no elements")
            ))),
        }
    }

    /// The E0s.
    pub fn e0s(&self) -> &BTreeMap<i64, f64> {
        &self.e0
    }

    /// `Σ E0[z]` over each graph's atoms.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the batch has no integer `atomic_numbers`,
    /// inconsistent atom pointers, or an element without an E0.
    pub fn per_graph(&self, b: &CollatedBatch) -> Result<Vec<f64>> {
        const WHAT: &str = "SubtractE0s";
        let z = &b.fields.get("atomic_numbers").ok_or_else(|| bad(WHAT, "the batch has no atomic_numbers"))?.data;
        (0..b.num_graphs())
            .map(|k| {
                let rows = b.graph_rows(Level::Atom, k).ok_or_else(|| bad(WHAT, "inconsistent atom pointers"))?;
                rows.map(|a| {
                    let z = z.get_i64(a).ok_or_else(|| bad(WHAT, "atomic_numbers is not an integer field"))?;
                    self.e0
                        .get(&z)
                        .copied()
                        .ok_or_else(|| bad(WHAT, format!("sample {} has element Z={z}, which has no E0", b.indices[k])))
                })
                .sum()
            })
            .collect()
    }
}

impl CollatedTransform for SubtractE0s {
    fn apply(&self, b: &mut CollatedBatch, _epoch: u64) -> Result<()> {
        let sums = self.per_graph(b)?;
        let f = per_graph(b, "energy", "SubtractE0s")?;
        let mut k = 0;
        update_all(f, "SubtractE0s", |e| {
            e[0] -= sums[k];
            k += 1;
        })
    }
}

/// Normalises energies and forces: `E = (E - shift · n_atoms) / scale`,
/// `F = F / scale`, and stress and virial (energies per volume) `/ scale`.
/// A model trained on the result predicts `e`, `f`; in eV and eV/Å its
/// predictions are `E = scale · e + shift · n_atoms (+ Σ E0 after
/// [`SubtractE0s`])`, `F = scale · f`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleShift {
    scale: f64,
    shift: f64,
}

impl ScaleShift {
    /// `scale` (eV) must be finite and positive, `shift` (eV per atom) finite.
    ///
    /// # Errors
    /// [`Error::Config`] when `scale` is not finite and positive or `shift` is
    /// not finite.
    pub fn new(scale: f64, shift: f64) -> Result<Self> {
        if !(scale.is_finite() && scale > 0.0 && shift.is_finite()) {
            return Err(Error::Config(format!("ScaleShift: scale {scale} must be > 0 and shift {shift} finite")));
        }
        Ok(ScaleShift { scale, shift })
    }

    /// MACE's defaults from saved statistics: shift = the mean energy per
    /// atom after the E0s, scale = the force RMS (so use it after
    /// [`SubtractE0s`]). An error when either is missing.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `stats` has no energy per atom after E0s
    /// or no force RMS, or as [`ScaleShift::new`].
    pub fn from_stats(stats: &DatasetStats) -> Result<Self> {
        let shift = stats.residual_energy_per_atom.map(|m| m.mean).ok_or_else(|| {
            Error::invalid("ScaleShift::from_stats", "the statistics have no energy per atom after E0s")
        })?;
        let scale = stats
            .force_rms
            .ok_or_else(|| Error::invalid("ScaleShift::from_stats", "the statistics have no force RMS"))?;
        ScaleShift::new(scale, shift)
    }

    /// The scale (eV).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The shift (eV per atom).
    pub fn shift(&self) -> f64 {
        self.shift
    }
}

impl CollatedTransform for ScaleShift {
    fn apply(&self, b: &mut CollatedBatch, _epoch: u64) -> Result<()> {
        const WHAT: &str = "ScaleShift";
        let atoms: Vec<f64> = b.atoms_ptr.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let (scale, shift) = (self.scale, self.shift);
        if b.fields.contains_key("energy") {
            let mut k = 0;
            update_all(per_graph(b, "energy", WHAT)?, WHAT, |e| {
                e[0] = (e[0] - shift * atoms[k]) / scale;
                k += 1;
            })?;
        }
        for name in ["forces", "stress", "virial"] {
            if let Some(f) = b.fields.get_mut(name) {
                update_all(f, WHAT, |row| row.iter_mut().for_each(|x| *x /= scale))?;
            }
        }
        Ok(())
    }
}

/// What a field is to a rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Rows of 3-vectors (`v = R v` for each).
    Vectors,
    /// 3x3 tensors (`S = R S Rᵀ`).
    Tensor,
}

/// Fields rotated as vectors unless told otherwise: cartesian positions,
/// forces, velocities, momenta, the cell's rows (lattice vectors), the
/// edges' cartesian shifts and the dipole.
pub const ROTATED_VECTORS: &[&str] = &["positions", "forces", "velocities", "momenta", "cell", "shifts", "dipole"];
/// Fields rotated as rank-2 tensors unless told otherwise.
pub const ROTATED_TENSORS: &[&str] = &["stress", "virial"];

/// One uniformly random rotation per sample, the same for the same
/// `(seed, epoch, logical index)` (so a resumed run sees the rotations it
/// would have seen; [`Rotation::for_sample`]), applied about the origin:
/// vectors `v = R v` ([`ROTATED_VECTORS`]), tensors `S = R S Rᵀ`
/// ([`ROTATED_TENSORS`]). Distances, energies, neighbor lists and every
/// other scalar are unchanged.
///
/// A float field not in these lists whose rows end in a dimension of 3
/// might be a vector the rotation would leave behind, so it is an error
/// until declared: [`with_vectors`](Self::with_vectors),
/// [`with_tensors`](Self::with_tensors) (3x3) or
/// [`with_invariant`](Self::with_invariant). Integer and bool fields
/// (`pbc`, `neighbor_list`, integer image offsets) are never rotated.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, CollatedBatch};
/// use atomzarr::prep::transforms::{CollatedTransform, RandomRotation};
/// let s = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.74, 0.0, 0.0]])?;
/// let mut b = CollatedBatch::from_samples(&[5], &[s])?;
/// RandomRotation::new(1).apply(&mut b, 0)?;
/// let p = b.fields["positions"].data.to_f64_vec();
/// let d = ((p[3] - p[0]).powi(2) + (p[4] - p[1]).powi(2) + (p[5] - p[2]).powi(2)).sqrt();
/// assert!((d - 0.74).abs() < 1e-6);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RandomRotation {
    seed: u64,
    kinds: BTreeMap<String, Option<Kind>>,
}

impl RandomRotation {
    /// Rotations seeded by `seed`, the default field lists.
    pub fn new(seed: u64) -> Self {
        let kinds = ROTATED_VECTORS
            .iter()
            .map(|n| (n.to_string(), Some(Kind::Vectors)))
            .chain(ROTATED_TENSORS.iter().map(|n| (n.to_string(), Some(Kind::Tensor))))
            .collect();
        RandomRotation { seed, kinds }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Also rotates these fields as rows of 3-vectors.
    pub fn with_vectors<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.kinds.extend(names.into_iter().map(|n| (n.into(), Some(Kind::Vectors))));
        self
    }

    /// Also rotates these fields as 3x3 tensors.
    pub fn with_tensors<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.kinds.extend(names.into_iter().map(|n| (n.into(), Some(Kind::Tensor))));
        self
    }

    /// Leaves these fields as they are (rotation-invariant).
    pub fn with_invariant<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.kinds.extend(names.into_iter().map(|n| (n.into(), None)));
        self
    }

    /// The rotation of logical sample `index` in `epoch`.
    pub fn rotation(&self, epoch: u64, index: usize) -> Rotation {
        Rotation::for_sample(self.seed, epoch, index as u64)
    }
}

impl CollatedTransform for RandomRotation {
    fn apply(&self, b: &mut CollatedBatch, epoch: u64) -> Result<()> {
        const WHAT: &str = "RandomRotation";
        let rotations: Vec<Rotation> = b.indices.iter().map(|&i| self.rotation(epoch, i)).collect();
        let ptrs = (b.atoms_ptr.clone(), b.edges_ptr.clone());
        let rows_of = |level: Level, k: usize| -> Option<std::ops::Range<usize>> {
            crate::data::Pointers { atoms: &ptrs.0, edges: &ptrs.1 }.checked_rows(level, k)
        };
        for (name, f) in b.fields.iter_mut() {
            let float = matches!(
                f.data,
                HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_)
            );
            if !float {
                continue;
            }
            let kind = match self.kinds.get(name) {
                Some(k) => *k,
                None if f.trailing_shape.last() == Some(&3) => {
                    return Err(bad(
                        WHAT,
                        format!(
                            "field {name} (rows of shape {:?}) may be a cartesian vector; declare it with \
                             with_vectors, with_tensors or with_invariant",
                            f.trailing_shape
                        ),
                    ));
                }
                None => None,
            };
            let Some(kind) = kind else { continue };
            let row: usize = f.trailing_shape.iter().product();
            let fits = match kind {
                Kind::Vectors => row > 0 && row.is_multiple_of(3),
                Kind::Tensor => row == 9,
            };
            if !fits {
                return Err(bad(WHAT, format!("field {name} has rows of shape {:?}, not {kind:?}", f.trailing_shape)));
            }
            for (k, r) in rotations.iter().enumerate() {
                let rows = rows_of(f.level, k).ok_or_else(|| bad(WHAT, "inconsistent batch pointers"))?;
                let op = |x: &mut [f64]| match kind {
                    Kind::Vectors => r.apply_in_place(x),
                    Kind::Tensor => r.apply_tensor_in_place(x),
                };
                f.data.update_rows_f64(rows, row, op).map_err(|e| bad(WHAT, format!("field {name}: {e}")))?;
            }
        }
        Ok(())
    }
}

/// A per-sample weight from a label, added to each batch as the system
/// field `weight` (`[B, 1]`, float32): the weight of the sample's label
/// value, `default` for values not listed and for samples whose label is
/// absent. The label is a system string label (`config_type`) or integer
/// field (its value in decimal).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, CollatedBatch};
/// use atomzarr::prep::transforms::{CollatedTransform, SampleWeights};
/// let s = |t: &str| AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_string("config_type", t);
/// let mut b = CollatedBatch::from_samples(&[0, 1, 2], &[s("aimd"), s("md"), s("")])?;
/// SampleWeights::parse("config_type=aimd:0.5,md:2")?.apply(&mut b, 0)?;
/// assert_eq!(b.fields["weight"].data.to_f64_vec(), vec![0.5, 2.0, 1.0]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SampleWeights {
    label: String,
    weights: BTreeMap<String, f64>,
    default: f64,
}

impl SampleWeights {
    /// Weights of `label`'s values; others weigh `default`. Weights must be
    /// finite and non-negative.
    ///
    /// # Errors
    /// [`Error::Config`] when a weight (or `default`) is not a finite number
    /// >= 0.
    pub fn new(label: impl Into<String>, weights: BTreeMap<String, f64>, default: f64) -> Result<Self> {
        let label = label.into();
        if let Some((v, w)) = weights
            .iter()
            .map(|(v, w)| (v.as_str(), *w))
            .chain([("default", default)])
            .find(|(_, w)| !(w.is_finite() && *w >= 0.0))
        {
            return Err(Error::Config(format!("SampleWeights {label}: weight {w} of {v} is not a number >= 0")));
        }
        Ok(SampleWeights { label, weights, default })
    }

    /// From `label=value:weight,value:weight,...`, default weight 1
    /// (`config_type=aimd:0.5,md:2`).
    ///
    /// # Errors
    /// [`Error::Config`] when `spec` is not `label=value:weight,...` with
    /// numeric weights; otherwise as [`SampleWeights::new`].
    pub fn parse(spec: &str) -> Result<Self> {
        let err = |why: &str| Error::Config(format!("sample weights {spec:?}: {why} (e.g. config_type=aimd:0.5,md:2)"));
        let (label, rest) = spec.split_once('=').ok_or_else(|| err("no label="))?;
        let mut weights = BTreeMap::new();
        for item in rest.split(',') {
            let (v, w) = item.rsplit_once(':').ok_or_else(|| err("an item is not value:weight"))?;
            let w: f64 = w.trim().parse().map_err(|_| err("a weight is not a number"))?;
            weights.insert(v.to_string(), w);
        }
        SampleWeights::new(label.trim(), weights, 1.0)
    }

    /// The weight of values not listed (default 1).
    ///
    /// # Errors
    /// As [`SampleWeights::new`].
    pub fn with_default(mut self, w: f64) -> Result<Self> {
        self.default = w;
        SampleWeights::new(self.label, self.weights, self.default)
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The label's value of each graph (`None`: absent).
    fn values(&self, b: &CollatedBatch) -> Result<Vec<Option<String>>> {
        const WHAT: &str = "SampleWeights";
        let n = b.num_graphs();
        if let Some(s) = b.strings.get(&self.label) {
            if s.level != Level::System || s.values.len() != n {
                return Err(bad(WHAT, format!("{} is not one string per sample", self.label)));
            }
            return Ok(s.values.iter().map(|v| (!v.is_empty()).then(|| v.clone())).collect());
        }
        let f = b.fields.get(&self.label).ok_or_else(|| bad(WHAT, format!("the batch has no label {}", self.label)))?;
        if f.level != Level::System || f.data.len() != n {
            return Err(bad(WHAT, format!("{} is not one value per sample", self.label)));
        }
        let present = b.fields.get(&format!("{}_present", self.label)).map(|p| &p.data);
        (0..n)
            .map(|k| {
                if let Some(HostData::Bool(p)) = present
                    && !p.get(k).copied().unwrap_or(true)
                {
                    return Ok(None);
                }
                let v =
                    f.data.get_i64(k).ok_or_else(|| bad(WHAT, format!("{} is not an integer label", self.label)))?;
                Ok(Some(v.to_string()))
            })
            .collect()
    }
}

impl CollatedTransform for SampleWeights {
    fn apply(&self, b: &mut CollatedBatch, _epoch: u64) -> Result<()> {
        let w: Vec<f32> = self
            .values(b)?
            .iter()
            .map(|v| v.as_ref().and_then(|v| self.weights.get(v)).copied().unwrap_or(self.default) as f32)
            .collect();
        if b.fields.contains_key(WEIGHT) {
            return Err(bad("SampleWeights", format!("the batch already has a {WEIGHT} field")));
        }
        b.fields.insert(
            WEIGHT.to_string(),
            CollatedField { level: Level::System, trailing_shape: vec![1], data: HostData::Float32(w) },
        );
        Ok(())
    }
}

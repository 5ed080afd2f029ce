//! Dataset statistics an MLIP trainer needs to normalise targets and choose
//! hyperparameters: counts, atoms and edges per sample, the elements, the
//! per-element reference energies (E0s, by least squares), energy per atom
//! before and after the E0s, force RMS and the average number of neighbors.
//!
//! Computed in one streaming pass over all samples ([`dataset_stats`]) or a
//! subset, such as a split's training part ([`subset_stats`]): chunks of
//! samples are read and reduced in parallel (rayon) into small accumulators
//! (the E0 normal equations are `K x K` for `K` elements), so memory does
//! not grow with the dataset.
//!
//! The energy per atom after the E0s, `r = (E - Σ_z n_z E0_z) / n`, needs
//! the E0s, which are known only at the end of the pass. Writing
//! `y = E / n` and `c_z = n_z / n`, `r = y - c·E0`, so its mean and variance
//! follow from sums the same pass collects: `Σ y`, `Σ y²`, `Σ c`, `Σ y c`
//! and `Σ c cᵀ` (another `K x K`).

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::{AtomicData, NEIGHBOR_LIST};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::Reader;

/// Options of [`dataset_stats`].
///
/// ```
/// let o = atomzarr::prep::stats::StatsOptions::default().with_chunk_size(512);
/// assert_eq!(o.chunk_size(), 512);
/// ```
#[derive(Debug, Clone)]
pub struct StatsOptions {
    chunk_size: usize,
    progress: bool,
}

impl Default for StatsOptions {
    fn default() -> Self {
        StatsOptions { chunk_size: 1024, progress: false }
    }
}

impl StatsOptions {
    /// Samples read per parallel work item (memory is about this many
    /// samples per thread). Default 1024.
    pub fn with_chunk_size(mut self, n: usize) -> Self {
        self.chunk_size = n.max(1);
        self
    }
    /// The chunk size.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }
    /// Shows a progress bar (feature `progress`; else log lines).
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }
    /// Whether progress is shown.
    pub fn progress(&self) -> bool {
        self.progress
    }
}

/// Minimum, mean and maximum of a per-sample count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MinMeanMax {
    /// Smallest.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: u64,
}

/// Mean and (population) standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    /// Mean.
    pub mean: f64,
    /// Standard deviation (population, ddof = 0).
    pub std: f64,
}

/// One element of the dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElementStats {
    /// Atomic number.
    pub z: i64,
    /// Chemical symbol (`?` outside 1..=118).
    pub symbol: &'static str,
    /// Atoms of this element in the dataset.
    pub count: u64,
    /// Reference energy (eV), from the least-squares fit of total energies
    /// to compositions; `None` when the fit is underdetermined or there are
    /// no energies.
    pub e0: Option<f64>,
}

/// [`ElementStats`] as read back: the symbol is the table's own for `z`.
#[derive(Deserialize)]
struct ElementRecord {
    z: i64,
    count: u64,
    e0: Option<f64>,
}

impl<'de> Deserialize<'de> for ElementStats {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let r = ElementRecord::deserialize(d)?;
        Ok(ElementStats { z: r.z, symbol: crate::data::elements::symbol(r.z).unwrap_or("?"), count: r.count, e0: r.e0 })
    }
}

/// What [`dataset_stats`] reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetStats {
    /// Samples (logical, deleted ones excluded).
    pub num_samples: usize,
    /// Atoms in all samples.
    pub num_atoms: u64,
    /// Edges in all samples (`None` without a `neighbor_list` field).
    pub num_edges: Option<u64>,
    /// Atoms per sample.
    pub atoms_per_sample: Option<MinMeanMax>,
    /// Edges per sample.
    pub edges_per_sample: Option<MinMeanMax>,
    /// Elements present, by atomic number.
    pub elements: Vec<ElementStats>,
    /// Why the E0s are missing, when they are.
    pub e0_note: Option<String>,
    /// Total energy divided by atom count, over samples (`energy` field;
    /// samples whose energy is absent, NaN, are left out, here and in the E0s).
    pub energy_per_atom: Option<MeanStd>,
    /// Energy per atom after the E0s, `(E - Σ_z n_z E0_z) / n`, over the
    /// samples with an energy (`None` without E0s): what a model's
    /// per-atom output is shifted and scaled by.
    #[serde(default)]
    pub residual_energy_per_atom: Option<MeanStd>,
    /// Root mean square of every force component (`forces` field; NaN
    /// components, absent forces, left out).
    pub force_rms: Option<f64>,
    /// Edges per atom (`num_edges / num_atoms`): the normalisation of
    /// message sums in most MLIPs.
    pub avg_num_neighbors: Option<f64>,
}

/// Partial sums of one chunk (merged pairwise).
#[derive(Debug, Clone, Default)]
struct Acc {
    samples: u64,
    atoms: u64,
    atoms_min: u64,
    atoms_max: u64,
    edges: u64,
    edges_min: u64,
    edges_max: u64,
    edge_samples: u64,
    counts: BTreeMap<i64, u64>,
    /// Normal equations of E = sum_z n_z E0_z: A^T A and A^T E.
    ata: BTreeMap<(i64, i64), f64>,
    atb: BTreeMap<i64, f64>,
    energy_samples: u64,
    /// Energy per atom: mean and sum of squared deviations (Chan's merge).
    epa_mean: f64,
    epa_m2: f64,
    /// For the energy per atom after E0s: Σ y, Σ y², Σ c_z, Σ y c_z, Σ c_z c_w
    /// (y = E / n, c_z = n_z / n).
    y_sum: f64,
    y_sq: f64,
    c_sum: BTreeMap<i64, f64>,
    yc_sum: BTreeMap<i64, f64>,
    cc_sum: BTreeMap<(i64, i64), f64>,
    force_sq: f64,
    force_n: u64,
}

impl Acc {
    fn add(&mut self, s: &AtomicData, index: usize, source: &str) -> Result<()> {
        let bad = |r: String| Error::Validation { source_name: source.to_string(), index, reason: r };
        let n = s.num_atoms() as u64;
        if self.samples == 0 || n < self.atoms_min {
            self.atoms_min = n;
        }
        self.atoms_max = self.atoms_max.max(n);
        self.samples += 1;
        self.atoms += n;
        if let Some(nl) = s.field(NEIGHBOR_LIST) {
            let e = nl.rows() as u64;
            if self.edge_samples == 0 || e < self.edges_min {
                self.edges_min = e;
            }
            self.edges_max = self.edges_max.max(e);
            self.edges += e;
            self.edge_samples += 1;
        }
        let z = s
            .field("atomic_numbers")
            .and_then(|f| f.data.to_i64_vec())
            .ok_or_else(|| bad("no integer atomic_numbers field".into()))?;
        let mut comp: BTreeMap<i64, f64> = BTreeMap::new();
        for &x in &z {
            *self.counts.entry(x).or_default() += 1;
            *comp.entry(x).or_default() += 1.0;
        }
        // An absent label (NaN, see docs/LABELS.md) takes no part in the sums.
        if let Some(e) = s.field("energy") {
            let e = e
                .data
                .get_f64(0)
                .filter(|_| e.data.len() == 1)
                .ok_or_else(|| bad("energy is not one number".into()))?;
            if e.is_nan() {
                self.add_forces(s);
                return Ok(());
            }
            for (&a, &na) in &comp {
                *self.atb.entry(a).or_default() += na * e;
                for (&b, &nb) in &comp {
                    *self.ata.entry((a, b)).or_default() += na * nb;
                }
            }
            if n > 0 {
                let x = e / n as f64;
                self.energy_samples += 1;
                let d = x - self.epa_mean;
                self.epa_mean += d / self.energy_samples as f64;
                self.epa_m2 += d * (x - self.epa_mean);
                self.y_sum += x;
                self.y_sq += x * x;
                let inv = 1.0 / n as f64;
                for (&a, &na) in &comp {
                    *self.c_sum.entry(a).or_default() += na * inv;
                    *self.yc_sum.entry(a).or_default() += x * na * inv;
                    for (&b, &nb) in &comp {
                        *self.cc_sum.entry((a, b)).or_default() += na * nb * inv * inv;
                    }
                }
            }
        }
        self.add_forces(s);
        Ok(())
    }

    /// Force components into the RMS, NaN ones (absent forces) left out.
    fn add_forces(&mut self, s: &AtomicData) {
        if let Some(f) = s.field("forces") {
            for x in f.data.to_f64_vec().into_iter().filter(|x| !x.is_nan()) {
                self.force_sq += x * x;
                self.force_n += 1;
            }
        }
    }

    fn merge(mut self, o: Acc) -> Acc {
        if o.samples > 0 {
            self.atoms_min = if self.samples == 0 { o.atoms_min } else { self.atoms_min.min(o.atoms_min) };
        }
        if o.edge_samples > 0 {
            self.edges_min = if self.edge_samples == 0 { o.edges_min } else { self.edges_min.min(o.edges_min) };
        }
        self.samples += o.samples;
        self.atoms += o.atoms;
        self.atoms_max = self.atoms_max.max(o.atoms_max);
        self.edges += o.edges;
        self.edges_max = self.edges_max.max(o.edges_max);
        self.edge_samples += o.edge_samples;
        for (k, v) in o.counts {
            *self.counts.entry(k).or_default() += v;
        }
        for (k, v) in o.ata {
            *self.ata.entry(k).or_default() += v;
        }
        for (k, v) in o.atb {
            *self.atb.entry(k).or_default() += v;
        }
        self.y_sum += o.y_sum;
        self.y_sq += o.y_sq;
        for (k, v) in o.c_sum {
            *self.c_sum.entry(k).or_default() += v;
        }
        for (k, v) in o.yc_sum {
            *self.yc_sum.entry(k).or_default() += v;
        }
        for (k, v) in o.cc_sum {
            *self.cc_sum.entry(k).or_default() += v;
        }
        let (na, nb) = (self.energy_samples as f64, o.energy_samples as f64);
        if nb > 0.0 {
            let n = na + nb;
            let d = o.epa_mean - self.epa_mean;
            self.epa_mean += d * nb / n;
            self.epa_m2 += o.epa_m2 + d * d * na * nb / n;
            self.energy_samples += o.energy_samples;
        }
        self.force_sq += o.force_sq;
        self.force_n += o.force_n;
        self
    }
}

/// Solves the symmetric system `a x = b` by Gaussian elimination with
/// partial pivoting; `None` when it is singular (relative pivot below 1e-10).
/// K is the number of elements (at most ~100): no linear-algebra crate needed.
pub(crate) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let k = b.len();
    let scale = a.iter().flatten().fold(0f64, |m, x| m.max(x.abs()));
    if scale == 0.0 {
        return None;
    }
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() <= 1e-10 * scale {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        let (top, rest) = a.split_at_mut(c + 1);
        let pivot = &top[c];
        for (k_r, row) in rest.iter_mut().enumerate() {
            let f = row[c] / pivot[c];
            if f != 0.0 {
                for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
                b[c + 1 + k_r] -= f * b[c];
            }
        }
    }
    let mut x = vec![0.0; k];
    for c in (0..k).rev() {
        let s: f64 = (c + 1..k).map(|j| a[c][j] * x[j]).sum();
        x[c] = (b[c] - s) / a[c][c];
    }
    Some(x)
}

/// Statistics of every logical sample of `reader`, in one parallel pass.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, InMemoryReader};
/// use atomzarr::prep::stats::{StatsOptions, dataset_stats};
/// let mk = |z: Vec<i64>, e: f32| {
///     let n = z.len();
///     AtomicData::new(z, vec![[0.0; 3]; n]).unwrap().with_energy(e)
/// };
/// // E0(H) = -1, E0(O) = -5.
/// let data = InMemoryReader::from_samples(&[mk(vec![1, 1], -2.0), mk(vec![8], -5.0), mk(vec![1, 8], -6.0)], "toy")?;
/// let s = dataset_stats(&data, &StatsOptions::default())?;
/// assert_eq!(s.num_atoms, 5);
/// assert!((s.elements[0].e0.unwrap() + 1.0).abs() < 1e-9);
/// assert!((s.elements[1].e0.unwrap() + 5.0).abs() < 1e-9);
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::Validation`] naming the sample when it has no integer
/// `atomic_numbers` or an `energy` that is not one number; the reader's
/// errors (as [`Reader::load_many`]).
pub fn dataset_stats<R: Reader + ?Sized>(reader: &R, options: &StatsOptions) -> Result<DatasetStats> {
    stats_over(reader, reader.len(), |k| k, options)
}

/// Statistics of the logical samples `indices` of `reader` (a split's
/// training part: E0s and normalisation from the training data only), in
/// one parallel pass.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{AtomicData, InMemoryReader};
/// use atomzarr::prep::stats::{StatsOptions, subset_stats};
/// let mk = |e: f32| AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2]).unwrap().with_energy(e);
/// let data = InMemoryReader::from_samples(&[mk(-2.0), mk(-2.0), mk(8.0)], "toy")?;
/// let s = subset_stats(&data, &[0, 1], &StatsOptions::default())?;
/// assert_eq!(s.num_samples, 2);
/// assert!((s.elements[0].e0.unwrap() + 1.0).abs() < 1e-9); // the outlier is not in the subset
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::IndexOutOfRange`] for an index not below the reader's length;
/// otherwise as [`dataset_stats`].
pub fn subset_stats<R: Reader + ?Sized>(reader: &R, indices: &[usize], options: &StatsOptions) -> Result<DatasetStats> {
    let len = reader.len();
    Error::check_indices(|| reader.name().to_string(), indices, len)?;
    stats_over(reader, indices.len(), |k| indices[k], options)
}

/// The statistics of samples `index(0..n)`.
fn stats_over<R: Reader + ?Sized>(
    reader: &R,
    len: usize,
    index: impl Fn(usize) -> usize + Sync,
    options: &StatsOptions,
) -> Result<DatasetStats> {
    let chunk = options.chunk_size();
    let chunks = len.div_ceil(chunk);
    let bar = Progress::new(options.progress(), len as u64, "stats");
    let acc = (0..chunks)
        .into_par_iter()
        .map(|c| -> Result<Acc> {
            let idx: Vec<usize> = (c * chunk..((c + 1) * chunk).min(len)).map(&index).collect();
            let samples = reader.load_many(&idx)?;
            let mut acc = Acc::default();
            for (i, s) in idx.iter().zip(&samples) {
                acc.add(s, *i, reader.name())?;
            }
            bar.inc(idx.len() as u64);
            Ok(acc)
        })
        .try_reduce(Acc::default, |a, b| Ok(a.merge(b)))?;
    bar.finish_and_clear();
    Ok(finish(acc))
}

/// The statistics from the merged sums.
fn finish(acc: Acc) -> DatasetStats {
    let zs: Vec<i64> = acc.counts.keys().copied().collect();
    let (e0s, e0_note) = if acc.energy_samples == 0 && acc.atb.is_empty() {
        (None, Some("no energy field".to_string()))
    } else {
        let a: Vec<Vec<f64>> =
            zs.iter().map(|&i| zs.iter().map(|&j| acc.ata.get(&(i, j)).copied().unwrap_or(0.0)).collect()).collect();
        let b: Vec<f64> = zs.iter().map(|z| acc.atb.get(z).copied().unwrap_or(0.0)).collect();
        match solve(a, b) {
            Some(x) => (Some(x), None),
            None => (
                None,
                Some("compositions do not determine one energy per element (underdetermined least squares)".into()),
            ),
        }
    };
    let elements = zs
        .iter()
        .enumerate()
        .map(|(k, &z)| ElementStats {
            z,
            symbol: crate::data::elements::symbol(z).unwrap_or("?"),
            count: acc.counts[&z],
            e0: e0s.as_ref().map(|x| x[k]),
        })
        .collect();
    let n = acc.samples;
    let mmm =
        |min, sum: u64, max, count: u64| (count > 0).then(|| MinMeanMax { min, mean: sum as f64 / count as f64, max });
    let residual_energy_per_atom = e0s.as_ref().filter(|_| acc.energy_samples > 0).map(|x| {
        let e0: BTreeMap<i64, f64> = zs.iter().copied().zip(x.iter().copied()).collect();
        let m = acc.energy_samples as f64;
        let at = |map: &BTreeMap<i64, f64>, z: &i64| map.get(z).copied().unwrap_or(0.0);
        let mean = (acc.y_sum - zs.iter().map(|z| e0[z] * at(&acc.c_sum, z)).sum::<f64>()) / m;
        let cross: f64 = zs.iter().map(|z| e0[z] * at(&acc.yc_sum, z)).sum();
        let quad: f64 = zs
            .iter()
            .flat_map(|a| zs.iter().map(move |b| (a, b)))
            .map(|(a, b)| e0[a] * e0[b] * acc.cc_sum.get(&(*a, *b)).copied().unwrap_or(0.0))
            .sum();
        let second = (acc.y_sq - 2.0 * cross + quad) / m;
        // Rounding can leave a tiny negative variance for an exact fit.
        MeanStd { mean, std: (second - mean * mean).max(0.0).sqrt() }
    });
    DatasetStats {
        num_samples: n as usize,
        num_atoms: acc.atoms,
        num_edges: (acc.edge_samples > 0).then_some(acc.edges),
        atoms_per_sample: mmm(acc.atoms_min, acc.atoms, acc.atoms_max, n),
        edges_per_sample: mmm(acc.edges_min, acc.edges, acc.edges_max, acc.edge_samples),
        elements,
        e0_note,
        energy_per_atom: (acc.energy_samples > 0)
            .then(|| MeanStd { mean: acc.epa_mean, std: (acc.epa_m2 / acc.energy_samples as f64).sqrt() }),
        residual_energy_per_atom,
        force_rms: (acc.force_n > 0).then(|| (acc.force_sq / acc.force_n as f64).sqrt()),
        avg_num_neighbors: (acc.edge_samples > 0 && acc.atoms > 0).then(|| acc.edges as f64 / acc.atoms as f64),
    }
}

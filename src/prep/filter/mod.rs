//! Curating a data set: the samples to delete, selected by what is wrong
//! with them (`atomzarr filter`):
//!
//! - **forces**: the largest per-atom force norm above a bound (eV/Å);
//! - **energy**: energy per atom with a robust z-score (`0.6745 (x -
//!   median) / MAD`) above a bound, within each element composition, or
//!   over all samples after per-element reference energies (the E0s of
//!   [`stats`](crate::prep::stats), fitted in the same pass);
//! - **duplicates**: every sample after the first with the same atomic
//!   numbers, positions and cell (a 128-bit hash of their bytes; with a
//!   tolerance, of positions and cell rounded to its multiples, so two
//!   structures within it across a rounding boundary are not found);
//! - **missing**: a label absent (docs/LABELS.md: NaN, `<name>_present`
//!   false, or an empty string).
//!
//! One streaming pass over collated batches (the reader's fused read, the
//! edge arrays left out unless an edge label is asked about), each read
//! window's batches reduced in parallel (rayon); memory is the reader's
//! window and cache, 48 bytes a sample (what the selections need of it)
//! and, for the energy selection, each sample's composition (16 bytes an
//! element). Deleting is
//! [`AtomicDataZarrWriter::delete_logical`](crate::AtomicDataZarrWriter::delete_logical),
//! one call for the whole selection.
//!
//! ```
//! # fn main() -> atomzarr::Result<()> {
//! use atomzarr::{AtomicData, InMemoryReader};
//! use atomzarr::prep::filter::{FilterOptions, select};
//! let mk = |f: f32| AtomicData::new(vec![1, 1], vec![[0.0; 3], [1.0, 0.0, 0.0]]).unwrap().with_forces(vec![[f, 0.0, 0.0]; 2]).unwrap();
//! let data = InMemoryReader::from_samples(&[mk(0.1), mk(80.0), mk(0.2)], "toy")?;
//! let r = select(&data, &FilterOptions::default().with_max_force(50.0).with_duplicates(0.0))?;
//! assert_eq!(r.force, vec![1]);
//! assert_eq!(r.duplicate, vec![1, 2]); // same structure as sample 0
//! assert_eq!(r.selected, vec![1, 2]);
//! # Ok(()) }
//! ```

mod robust;
mod scan;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::source::Reader;

/// What the energy z-score is computed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EnergyBasis {
    /// Energy per atom within each element composition.
    Composition,
    /// Energy per atom after per-element reference energies (E0s), over all samples.
    E0,
}

/// What [`select`] selects by; nothing by default.
///
/// ```
/// use atomzarr::prep::filter::{EnergyBasis, FilterOptions};
/// let o = FilterOptions::default().with_energy_z(6.0, EnergyBasis::E0).with_missing("stress");
/// assert_eq!(o.missing(), ["stress"]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct FilterOptions {
    max_force: Option<f64>,
    energy_z: Option<(f64, EnergyBasis)>,
    duplicates: Option<f64>,
    missing: Vec<String>,
    progress: bool,
}

impl FilterOptions {
    /// Selects samples whose largest per-atom force norm is above `bound`.
    pub fn with_max_force(mut self, bound: f64) -> Self {
        self.max_force = Some(bound);
        self
    }
    /// Selects samples whose energy per atom has a robust z-score above
    /// `bound` in absolute value, against `basis`.
    pub fn with_energy_z(mut self, bound: f64, basis: EnergyBasis) -> Self {
        self.energy_z = Some((bound, basis));
        self
    }
    /// Selects duplicate structures (all but the first of each), positions
    /// and cell compared rounded to multiples of `tolerance` (Å; 0: exactly).
    pub fn with_duplicates(mut self, tolerance: f64) -> Self {
        self.duplicates = Some(tolerance);
        self
    }
    /// Selects samples that lack `label` (repeat for several, at most 64).
    pub fn with_missing(mut self, label: impl Into<String>) -> Self {
        self.missing.push(label.into());
        self
    }
    /// The labels asked about.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }
    /// Shows a progress bar (feature `progress`; else log lines).
    pub fn with_progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }
}

/// What [`select`] found: logical indices, ascending, per reason and together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterReport {
    /// Logical samples scanned (the reader's length).
    pub num_samples: usize,
    /// Per label asked about, the samples that lack it.
    pub missing: BTreeMap<String, Vec<usize>>,
    /// Largest force norm above the bound.
    pub force: Vec<usize>,
    /// Energy per atom an outlier.
    pub energy: Vec<usize>,
    /// Duplicates of an earlier sample.
    pub duplicate: Vec<usize>,
    /// Every sample selected for any reason.
    pub selected: Vec<usize>,
}

/// Selects the samples of `reader` to delete, in one pass (see the
/// [module docs](self)).
///
/// # Errors
/// [`Error::InvalidInput`] for more than 64 labels, a label the reader's
/// schema lacks, or an E0 fit the compositions do not determine;
/// [`Error::Validation`] naming a sample without integer `atomic_numbers`
/// or whose `energy` is not one number; the reader's errors.
pub fn select<R: Reader + ?Sized>(reader: &R, options: &FilterOptions) -> Result<FilterReport> {
    let invalid = |reason: String| Error::InvalidInput { context: format!("filter {}", reader.name()), reason };
    if options.missing.len() > 64 {
        return Err(invalid("at most 64 labels".into()));
    }
    let schema = reader.schema();
    if let Some(l) =
        options.missing.iter().find(|l| !schema.fields.contains_key(*l) && !schema.strings.contains_key(*l))
    {
        return Err(invalid(format!("the store has no label {l:?}")));
    }
    let want = scan::Wanted {
        hash_tolerance: options.duplicates,
        labels: &options.missing,
        compositions: options.energy_z.is_some(),
    };
    let scanned = scan::scan(reader, &want, options.progress)?;
    let rows = &scanned.rows;
    let mut starts = Vec::with_capacity(rows.len() + 1);
    starts.push(0usize);
    for r in rows {
        starts.push(starts[starts.len() - 1] + r.comp_len as usize);
    }
    let composition = |i: usize| &scanned.compositions[starts[i]..starts[i + 1]];
    let mut report = FilterReport {
        num_samples: rows.len(),
        missing: BTreeMap::new(),
        force: vec![],
        energy: vec![],
        duplicate: vec![],
        selected: vec![],
    };
    if let Some(bound) = options.max_force {
        report.force = (0..rows.len()).filter(|&i| rows[i].force_max > bound).collect();
    }
    if let Some((bound, basis)) = options.energy_z {
        let y: Vec<f64> = rows.iter().map(|r| r.energy_per_atom).collect();
        let members: Vec<usize> = (0..rows.len()).filter(|&i| y[i].is_finite()).collect();
        report.energy = match basis {
            EnergyBasis::Composition => robust::by_composition(members.iter().copied(), composition)
                .iter()
                .flat_map(|g| robust::outliers(&y, g, bound))
                .collect(),
            EnergyBasis::E0 => {
                let r = robust::e0_residuals(&members, &y, composition).ok_or_else(|| {
                    invalid(
                        "the compositions do not determine one energy per element (E0 fit); use per composition".into(),
                    )
                })?;
                robust::outliers(&r, &members, bound)
            }
        };
        report.energy.sort_unstable();
    }
    if options.duplicates.is_some() {
        let mut first: HashMap<u128, usize> = HashMap::with_capacity(rows.len());
        report.duplicate = (0..rows.len()).filter(|&i| *first.entry(rows[i].key).or_insert(i) != i).collect();
    }
    for (k, label) in options.missing.iter().enumerate() {
        report.missing.insert(label.clone(), (0..rows.len()).filter(|&i| rows[i].missing >> k & 1 == 1).collect());
    }
    let mut all: Vec<usize> = report.force.iter().chain(&report.energy).chain(&report.duplicate).copied().collect();
    all.extend(report.missing.values().flatten());
    all.sort_unstable();
    all.dedup();
    report.selected = all;
    Ok(report)
}

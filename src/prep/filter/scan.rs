//! The one pass of a filter: each sample reduced to the few numbers the
//! selections need (largest force norm, energy per atom, composition,
//! structure hash, which labels it lacks). The samples are read as
//! collated batches, a read window of them at a time, without the edge
//! arrays unless an edge label is asked about (the reader's fused read:
//! each chunk decoded once, no per-sample allocation), and the batches of
//! a window reduced in parallel.

use std::hash::{Hash, Hasher};

use rayon::prelude::*;

use crate::data::{CollateOptions, CollatedBatch, HostData, Level};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::{Reader, ReaderExt};

/// What the pass keeps of one sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// Largest per-atom force norm; NaN without forces (or absent ones).
    pub force_max: f64,
    /// Energy per atom; NaN without an energy (or an absent one), or atoms.
    pub energy_per_atom: f64,
    /// Hash of numbers, positions and cell (0 when not asked for).
    pub key: u128,
    /// Bit `k`: the sample lacks label `k` of the asked ones.
    pub missing: u64,
    /// Its composition's entries in [`Scanned::compositions`].
    pub comp_len: u32,
}

/// Every sample's [`Row`], in logical order, and their compositions
/// (`(Z, count)` sorted by Z, `comp_len` entries a sample, concatenated).
#[derive(Default)]
pub(crate) struct Scanned {
    pub rows: Vec<Row>,
    pub compositions: Vec<(i64, u32)>,
}

/// What to compute per sample.
pub(crate) struct Wanted<'a> {
    /// Hash structures, positions and cell rounded to this (0: exact bits).
    pub hash_tolerance: Option<f64>,
    /// The labels whose absence is asked about (at most 64).
    pub labels: &'a [String],
    /// Whether to keep compositions (what the energy selection needs).
    pub compositions: bool,
}

/// Samples per collated batch, and batches per read window.
const BATCH: usize = 1024;
const WINDOW: usize = 16;

/// A batch's fields as the reduction reads them.
struct View<'a> {
    b: &'a CollatedBatch,
    z: Vec<i64>,
    forces: Option<Vec<f64>>,
    energy: Option<Vec<f64>>,
}

fn field<'a>(b: &'a CollatedBatch, name: &str) -> Option<&'a HostData> {
    b.fields.get(name).map(|f| &f.data)
}

/// The rows of sample `j` of a batch on `level`'s axis.
fn rows(b: &CollatedBatch, level: Level, j: usize) -> std::ops::Range<usize> {
    match level {
        Level::Atom => b.atoms_ptr[j] as usize..b.atoms_ptr[j + 1] as usize,
        Level::Edge => b.edges_ptr[j] as usize..b.edges_ptr[j + 1] as usize,
        Level::System => j..j + 1,
    }
}

/// Whether sample `j` of `b` lacks `label` (docs/LABELS.md): a float
/// label is NaN in every element, an integer or bool one has
/// `<label>_present` false, a string label is empty.
fn lacks(b: &CollatedBatch, j: usize, label: &str) -> bool {
    if let Some(v) = b.strings.get(label) {
        let r = rows(b, v.level, j);
        return v.values.get(r).is_none_or(|v| v.iter().all(String::is_empty));
    }
    let Some(f) = b.fields.get(label) else { return true };
    match &f.data {
        HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_) => {
            let per: usize = f.trailing_shape.iter().product();
            let r = rows(b, f.level, j);
            (r.start * per..r.end * per).all(|i| f.data.get_f64(i).is_none_or(f64::is_nan))
        }
        _ => field(b, &format!("{label}_present")).is_some_and(|p| p.get_f64(j) == Some(0.0)),
    }
}

/// Feeds elements `r` of `values` to `h`: exact bits, or rounded to
/// multiples of `tol`.
fn hash_values(h: &mut impl Hasher, values: &HostData, r: std::ops::Range<usize>, tol: f64) {
    if tol > 0.0 {
        for i in r {
            h.write_i64((values.get_f64(i).unwrap_or(f64::NAN) / tol).round() as i64);
        }
    } else {
        let size = values.dtype().size();
        h.write(values.as_bytes().get(r.start * size..r.end * size).unwrap_or_default());
    }
}

/// A 128-bit hash (two independent 64-bit ones) of the numbers,
/// positions and cell of sample `j`.
fn structure_key(v: &View<'_>, j: usize, tol: f64) -> u128 {
    let mut a = std::hash::DefaultHasher::new();
    let mut b = rustc_hash::FxHasher::default();
    let atoms = rows(v.b, Level::Atom, j);
    for &x in &v.z[atoms.clone()] {
        a.write_i64(x);
        b.write_i64(x);
    }
    for (name, r) in [("positions", atoms.start * 3..atoms.end * 3), ("cell", j * 9..j * 9 + 9)] {
        name.hash(&mut a);
        name.hash(&mut b);
        if let Some(f) = field(v.b, name) {
            hash_values(&mut a, f, r.clone(), tol);
            hash_values(&mut b, f, r, tol);
        }
    }
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// The largest per-atom force norm of sample `j` (NaN when absent).
fn force_max(v: &View<'_>, j: usize) -> f64 {
    let Some(f) = &v.forces else { return f64::NAN };
    let r = rows(v.b, Level::Atom, j);
    let mut most = 0f64;
    for a in f.get(r.start * 3..r.end * 3).unwrap_or_default().chunks_exact(3) {
        let n = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        if n.is_nan() {
            return f64::NAN;
        }
        most = most.max(n);
    }
    most
}

/// Reduces sample `j` of the batch.
fn reduce(v: &View<'_>, j: usize, want: &Wanted<'_>, comps: &mut Vec<(i64, u32)>) -> Row {
    let atoms = rows(v.b, Level::Atom, j);
    let before = comps.len();
    if want.compositions {
        let mut sorted = v.z[atoms.clone()].to_vec();
        sorted.sort_unstable();
        for run in sorted.chunk_by(|a, b| a == b) {
            comps.push((run[0], run.len() as u32));
        }
    }
    let n = atoms.len();
    let energy = v.energy.as_ref().and_then(|e| e.get(j).copied()).unwrap_or(f64::NAN);
    let mut missing = 0u64;
    for (k, label) in want.labels.iter().enumerate() {
        if lacks(v.b, j, label) {
            missing |= 1 << k;
        }
    }
    Row {
        force_max: force_max(v, j),
        energy_per_atom: if n > 0 { energy / n as f64 } else { f64::NAN },
        key: want.hash_tolerance.map_or(0, |t| structure_key(v, j, t)),
        missing,
        comp_len: (comps.len() - before) as u32,
    }
}

/// Reduces every sample of batch `b` (of reader `source`).
fn reduce_batch(b: &CollatedBatch, source: &str, want: &Wanted<'_>) -> Result<Scanned> {
    let bad =
        |index: usize, r: &str| Error::Validation { source_name: source.to_string(), index, reason: r.to_string() };
    let first = b.indices.first().copied().unwrap_or(0);
    let z = field(b, "atomic_numbers")
        .and_then(HostData::to_i64_vec)
        .ok_or_else(|| bad(first, "no integer atomic_numbers"))?;
    let energy = match b.fields.get("energy") {
        Some(e) if e.trailing_shape.iter().product::<usize>() != 1 => {
            return Err(bad(first, "energy is not one number"));
        }
        Some(e) => Some(e.data.to_f64_vec()),
        None => None,
    };
    let v = View { b, z, forces: field(b, "forces").map(HostData::to_f64_vec), energy };
    let mut part = Scanned { rows: Vec::with_capacity(b.indices.len()), compositions: Vec::new() };
    for j in 0..b.indices.len() {
        part.rows.push(reduce(&v, j, want, &mut part.compositions));
    }
    Ok(part)
}

/// Reads every logical sample of `reader`, a window of batches at a time.
pub(crate) fn scan<R: Reader + ?Sized>(reader: &R, want: &Wanted<'_>, progress: bool) -> Result<Scanned> {
    let len = reader.len();
    let schema = reader.schema();
    let edge_label = want.labels.iter().any(|l| schema.fields.get(l) == Some(&Level::Edge));
    let opts = CollateOptions::default().with_skip_edges(!edge_label);
    let bar = Progress::new(progress, len as u64, "filter");
    let mut out = Scanned { rows: Vec::with_capacity(len), compositions: Vec::new() };
    let mut batches = Vec::new();
    for start in (0..len).step_by(BATCH * WINDOW) {
        let end = (start + BATCH * WINDOW).min(len);
        let plan: Vec<Vec<usize>> = (start..end).step_by(BATCH).map(|s| (s..(s + BATCH).min(end)).collect()).collect();
        reader.load_collated_opt(&plan, opts, &mut batches)?;
        let parts: Vec<Scanned> =
            batches.par_iter().map(|b| reduce_batch(b, reader.name(), want)).collect::<Result<_>>()?;
        for mut p in parts {
            out.rows.append(&mut p.rows);
            out.compositions.append(&mut p.compositions);
        }
        bar.inc((end - start) as u64);
    }
    bar.finish_and_clear();
    Ok(out)
}

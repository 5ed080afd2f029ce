//! The one pass of a filter: each sample reduced to the few numbers the
//! selections need (largest force norm, energy per atom, composition,
//! structure hash, which labels it lacks), chunks of samples read and
//! reduced in parallel.

use std::hash::{Hash, Hasher};

use rayon::prelude::*;

use crate::data::{AtomicData, HostData};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::source::Reader;

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
}

/// Whether `s` lacks `label` (docs/LABELS.md): a float label is NaN in
/// every element, an integer or bool one has `<label>_present` false, a
/// string label is empty.
fn lacks(s: &AtomicData, label: &str) -> bool {
    if let Some(v) = s.strings.get(label) {
        return v.values.iter().all(String::is_empty);
    }
    let Some(f) = s.field(label) else { return true };
    match &f.data {
        HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_) => {
            f.data.to_f64_vec().iter().all(|x| x.is_nan())
        }
        _ => s.field(&format!("{label}_present")).is_some_and(|p| p.data.get_f64(0) == Some(0.0)),
    }
}

/// Feeds `values` to `h`: exact bits, or rounded to multiples of `tol`.
fn hash_values(h: &mut impl Hasher, values: &HostData, tol: f64) {
    if tol > 0.0 {
        for x in values.to_f64_vec() {
            h.write_i64((x / tol).round() as i64);
        }
    } else {
        h.write(values.as_bytes());
    }
}

/// A 128-bit hash (two independent 64-bit ones) of the numbers,
/// positions and cell of `s`.
fn structure_key(s: &AtomicData, tol: f64) -> u128 {
    let mut a = std::hash::DefaultHasher::new();
    let mut b = rustc_hash::FxHasher::default();
    for name in ["atomic_numbers", "positions", "cell"] {
        name.hash(&mut a);
        name.hash(&mut b);
        if let Some(f) = s.field(name) {
            let exact = name == "atomic_numbers";
            hash_values(&mut a, &f.data, if exact { 0.0 } else { tol });
            hash_values(&mut b, &f.data, if exact { 0.0 } else { tol });
        }
    }
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// The largest per-atom force norm of `s` (NaN when absent).
fn force_max(s: &AtomicData) -> f64 {
    let Some(f) = s.field("forces") else { return f64::NAN };
    let v = f.data.to_f64_vec();
    let mut most = 0f64;
    for a in v.chunks_exact(3) {
        let n = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
        if n.is_nan() {
            return f64::NAN;
        }
        most = most.max(n);
    }
    most
}

/// Reduces sample `s` (logical `index` of `source`).
fn reduce(s: &AtomicData, index: usize, source: &str, want: &Wanted<'_>, comps: &mut Vec<(i64, u32)>) -> Result<Row> {
    let bad = |r: &str| Error::Validation { source_name: source.to_string(), index, reason: r.to_string() };
    let z = s.field("atomic_numbers").and_then(|f| f.data.to_i64_vec()).ok_or_else(|| bad("no integer atomic_numbers"))?;
    let mut sorted = z.clone();
    sorted.sort_unstable();
    let before = comps.len();
    for run in sorted.chunk_by(|a, b| a == b) {
        comps.push((run[0], run.len() as u32));
    }
    let energy = match s.field("energy") {
        Some(e) => e.data.get_f64(0).filter(|_| e.data.len() == 1).ok_or_else(|| bad("energy is not one number"))?,
        None => f64::NAN,
    };
    let n = z.len();
    let mut missing = 0u64;
    for (k, label) in want.labels.iter().enumerate() {
        if lacks(s, label) {
            missing |= 1 << k;
        }
    }
    Ok(Row {
        force_max: force_max(s),
        energy_per_atom: if n > 0 { energy / n as f64 } else { f64::NAN },
        key: want.hash_tolerance.map_or(0, |t| structure_key(s, t)),
        missing,
        comp_len: (comps.len() - before) as u32,
    })
}

/// Reads every logical sample of `reader`, `chunk` at a time in parallel.
pub(crate) fn scan<R: Reader + ?Sized>(reader: &R, want: &Wanted<'_>, chunk: usize, progress: bool) -> Result<Scanned> {
    let len = reader.len();
    let bar = Progress::new(progress, len as u64, "filter");
    let parts: Vec<Scanned> = (0..len.div_ceil(chunk))
        .into_par_iter()
        .map(|c| -> Result<Scanned> {
            let idx: Vec<usize> = (c * chunk..((c + 1) * chunk).min(len)).collect();
            let samples = reader.load_many(&idx)?;
            let mut part = Scanned { rows: Vec::with_capacity(idx.len()), compositions: Vec::new() };
            for (&i, s) in idx.iter().zip(&samples) {
                part.rows.push(reduce(s, i, reader.name(), want, &mut part.compositions)?);
            }
            bar.inc(idx.len() as u64);
            Ok(part)
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();
    let mut out = Scanned::default();
    for mut p in parts {
        out.rows.append(&mut p.rows);
        out.compositions.append(&mut p.compositions);
    }
    Ok(out)
}

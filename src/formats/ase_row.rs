//! An ASE database row (`ase.db.row.AtomsRow`: what ASE's SQLite database
//! and fairchem's `.aselmdb` both hold) as an [`AtomicData`] frame.
//!
//! | row | field | dtype, shape |
//! |---|---|---|
//! | `numbers` | `atomic_numbers` | int64 `[n]` |
//! | `positions`, `cell`, `pbc` | same names | float32 `[n,3]`, `[1,3,3]`; bool `[1,3]` |
//! | `energy` | `energy` | float32 `[1,1]` |
//! | `free_energy`, `magmom` | same names | float32 `[1]` |
//! | `forces` | `forces` | float32 `[n,3]` |
//! | `stress` (Voigt 6 `xx yy zz yz xz xy`, or 3x3) | `stress` | float32 `[1,3,3]` |
//! | `dipole` | `dipole` | float32 `[1,3]` |
//! | `magmoms`, `charges`, `initial_magmoms`, `initial_charges` | same names | float32 `[n]` |
//! | `masses` | `atomic_masses` | float32 `[n]` |
//! | `momenta` | `momenta` | float32 `[n,3]` |
//! | `tags` | `tags` | int64 `[n]` |
//! | the row id | `ase_id` | int64 `[1]` |
//! | `key_value_pairs`: numbers, bools | same names | float32 / int64 / bool `[1]` |
//! | `key_value_pairs`: strings | string labels | |
//!
//! A row's `data` dictionary (free-form, often large) and its bookkeeping
//! (`unique_id`, `user`, `ctime`, `mtime`, `calculator`, constraints) are
//! not kept. Energies, lengths, forces and stresses are converted by the
//! given [`Factors`].

use crate::data::{AtomicData, Field, HostData, Level, StringField};
use crate::error::{Error, Result};
use crate::formats::units::{Factors, scale_f32};
use crate::formats::{Frame, Frames};
use std::path::{Path, PathBuf};

/// A value of `key_value_pairs`.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

/// The parts of a row the import keeps (flat row-major arrays).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AseRow {
    pub id: i64,
    pub numbers: Vec<i64>,
    pub positions: Vec<f64>,
    pub cell: Vec<f64>,
    pub pbc: [bool; 3],
    pub energy: Option<f64>,
    pub free_energy: Option<f64>,
    pub magmom: Option<f64>,
    pub forces: Option<Vec<f64>>,
    pub stress: Option<Vec<f64>>,
    pub dipole: Option<Vec<f64>>,
    pub magmoms: Option<Vec<f64>>,
    pub charges: Option<Vec<f64>>,
    pub initial_magmoms: Option<Vec<f64>>,
    pub initial_charges: Option<Vec<f64>>,
    pub masses: Option<Vec<f64>>,
    pub momenta: Option<Vec<f64>>,
    pub tags: Option<Vec<i64>>,
    pub key_value_pairs: Vec<(String, KeyValue)>,
}

/// The names a key-value pair may not take: they are the row's own fields.
const RESERVED: &[&str] = &[
    "atomic_numbers",
    "positions",
    "cell",
    "pbc",
    "energy",
    "free_energy",
    "magmom",
    "forces",
    "stress",
    "dipole",
    "magmoms",
    "charges",
    "initial_magmoms",
    "initial_charges",
    "atomic_masses",
    "momenta",
    "tags",
    "ase_id",
    "neighbor_list",
    "shifts",
];

impl AseRow {
    /// The row as a frame; `file` and `record` name it in errors.
    pub(crate) fn into_frame(self, factors: &Factors, file: &std::path::Path, record: usize) -> Result<AtomicData> {
        let err = |field: &str, reason: String| Error::Parse {
            file: file.to_path_buf(),
            line: record,
            field: field.to_string(),
            reason: format!("row id {}: {reason}", self.id),
        };
        let n = self.numbers.len();
        let f32s = |v: &[f64], factor: f64| -> Vec<f32> { v.iter().map(|&x| scale_f32(x, factor)).collect() };
        let mut d = AtomicData::default();
        let put = |d: &mut AtomicData, name: &str, level: Level, shape: Vec<usize>, data: HostData| -> Result<()> {
            let f = Field::new(level, shape, data).map_err(|e| err(name, e.to_string()))?;
            d.fields.insert(name.to_string(), f);
            Ok(())
        };
        if self.positions.len() != 3 * n {
            return Err(err("positions", format!("{} values for {n} atoms", self.positions.len())));
        }
        if self.cell.len() != 9 {
            return Err(err("cell", format!("{} values, expected 9", self.cell.len())));
        }
        put(&mut d, "atomic_numbers", Level::Atom, vec![n], self.numbers.clone().into())?;
        put(&mut d, "positions", Level::Atom, vec![n, 3], f32s(&self.positions, factors.length).into())?;
        put(&mut d, "cell", Level::System, vec![1, 3, 3], f32s(&self.cell, factors.length).into())?;
        put(&mut d, "pbc", Level::System, vec![1, 3], self.pbc.to_vec().into())?;
        put(&mut d, "ase_id", Level::System, vec![1], vec![self.id].into())?;
        if let Some(e) = self.energy {
            put(&mut d, "energy", Level::System, vec![1, 1], vec![scale_f32(e, factors.energy)].into())?;
        }
        if let Some(e) = self.free_energy {
            put(&mut d, "free_energy", Level::System, vec![1], vec![scale_f32(e, factors.energy)].into())?;
        }
        if let Some(m) = self.magmom {
            put(&mut d, "magmom", Level::System, vec![1], vec![m as f32].into())?;
        }
        let per_atom = [
            ("forces", &self.forces, 3, factors.forces),
            ("momenta", &self.momenta, 3, 1.0),
            ("magmoms", &self.magmoms, 1, 1.0),
            ("charges", &self.charges, 1, 1.0),
            ("initial_magmoms", &self.initial_magmoms, 1, 1.0),
            ("initial_charges", &self.initial_charges, 1, 1.0),
            ("atomic_masses", &self.masses, 1, 1.0),
        ];
        for (name, v, k, factor) in per_atom {
            let Some(v) = v else { continue };
            if v.len() != n * k {
                return Err(err(name, format!("{} values for {n} atoms", v.len())));
            }
            let shape = if k == 1 { vec![n] } else { vec![n, k] };
            put(&mut d, name, Level::Atom, shape, f32s(v, factor).into())?;
        }
        if let Some(t) = &self.tags {
            if t.len() != n {
                return Err(err("tags", format!("{} values for {n} atoms", t.len())));
            }
            put(&mut d, "tags", Level::Atom, vec![n], t.clone().into())?;
        }
        if let Some(s) = &self.stress {
            let m = crate::formats::stress::to_matrix(s, crate::formats::stress::NineOrder::RowMajor)
                .map_err(|r| err("stress", r))?;
            put(&mut d, "stress", Level::System, vec![1, 3, 3], f32s(&m, factors.stress).into())?;
        }
        if let Some(p) = &self.dipole {
            if p.len() != 3 {
                return Err(err("dipole", format!("{} values, expected 3", p.len())));
            }
            put(&mut d, "dipole", Level::System, vec![1, 3], f32s(p, 1.0).into())?;
        }
        for (key, value) in self.key_value_pairs {
            if RESERVED.contains(&key.as_str()) {
                return Err(err(&key, "this key-value pair's name is taken by a field of the row".into()));
            }
            match value {
                KeyValue::Int(i) => put(&mut d, &key, Level::System, vec![1], vec![i].into())?,
                KeyValue::Float(x) => put(&mut d, &key, Level::System, vec![1], vec![x as f32].into())?,
                KeyValue::Bool(b) => put(&mut d, &key, Level::System, vec![1], vec![b].into())?,
                KeyValue::Str(s) => {
                    d.strings.insert(key, StringField::system(s));
                }
            }
        }
        Ok(d)
    }
}

/// ASE's `key_value_pairs` JSON (numbers, bools and strings only).
#[cfg(feature = "sqlite")]
pub(crate) fn key_values(json: &str) -> std::result::Result<Vec<(String, KeyValue)>, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("key_value_pairs: {e}"))?;
    let Some(map) = v.as_object() else { return Ok(vec![]) };
    map.iter().map(|(k, v)| Ok((k.clone(), key_value(k, v)?))).collect()
}

/// One key-value pair's value (ASE allows numbers, bools and strings).
pub(crate) fn key_value(k: &str, v: &serde_json::Value) -> std::result::Result<KeyValue, String> {
    use serde_json::Value;
    Ok(match v {
        Value::Bool(b) => KeyValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => KeyValue::Int(i),
            None => KeyValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => KeyValue::Str(s.clone()),
        other => return Err(format!("key_value_pairs[{k}]: {other} is not a number, bool or string")),
    })
}

/// Where an ASE database's rows come from (SQLite's `systems` table,
/// fairchem's LMDB): batches of raw rows in id order, and how one becomes an
/// [`AseRow`]. [`AseRows`] does the rest, the same for both.
pub trait RowSource: Send {
    /// One raw row: what is read under the database's lock, before parsing.
    type Raw: Send;
    /// Up to `max` raw rows after those already read (`done` of them);
    /// empty at the end. `file` names the database in errors.
    fn next_rows(&mut self, max: usize, file: &Path, done: u64) -> Result<Vec<Self::Raw>>;
    /// The raw row of `record` (numbered from 1) as an [`AseRow`], on a rayon thread.
    fn parse(file: &Path, record: usize, raw: Self::Raw) -> Result<AseRow>;
}

/// Streams the rows of an ASE database as frames: raw rows read a batch at
/// a time, so memory holds one batch whatever the database's size, then
/// parsed and converted in parallel.
pub struct AseRows<S> {
    path: PathBuf,
    source: S,
    done: u64,
    total: u64,
    factors: Factors,
}

impl<S: RowSource> AseRows<S> {
    /// The `total` rows of `source`, in the database at `path`, whose energies and lengths are in `units`.
    pub(crate) fn new(path: &Path, source: S, total: u64, units: crate::formats::units::Units) -> Self {
        AseRows { path: path.to_path_buf(), source, done: 0, total, factors: units.factors() }
    }
}

impl<S: RowSource> Frames for AseRows<S> {
    fn next_batch(&mut self, max_frames: usize) -> Result<Option<Vec<Frame>>> {
        let raw = self.source.next_rows(max_frames.max(1), &self.path, self.done)?;
        if raw.is_empty() {
            return Ok(None);
        }
        let start = self.done as usize;
        self.done += raw.len() as u64;
        let (factors, file) = (&self.factors, self.path.as_path());
        use rayon::prelude::*;
        raw.into_par_iter()
            .enumerate()
            .map(|(k, raw)| {
                let record = start + k + 1;
                let row = S::parse(file, record, raw)?;
                Ok(Frame { line: record, data: row.into_frame(factors, file, record)? })
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn progress(&self) -> (u64, u64) {
        (self.done, self.total)
    }
}

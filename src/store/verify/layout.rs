//! The metadata half of a check: every array's dtype and shape against
//! the format (`meta/` arrays: int64 pointers with `num_samples + 1`
//! entries, bool masks with one entry per row of their axis; fields: one
//! row per row of their level, and the core fields' element kind and
//! trailing shape as the toolkit's `AtomicData` model has them).

use super::report::Fault;
use crate::data::{DType, Level};
use crate::location::Location;
use crate::store::format;
use crate::store::reader::FieldArray;

/// The rows each level's arrays must have: atoms, edges, samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Totals {
    pub atoms: u64,
    pub edges: u64,
    pub samples: u64,
}

impl Totals {
    /// Rows of `level`'s axis.
    pub(crate) fn of_level(&self, level: Level) -> u64 {
        level.pick(self.atoms, self.edges, self.samples)
    }
}

/// The kind of element a core field holds.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Float,
    Bool,
}

fn kind(d: DType) -> Kind {
    match d {
        DType::Bool => Kind::Bool,
        DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => Kind::Float,
        _ => Kind::Int,
    }
}

/// The element kind and (where the format fixes it) trailing shape of a
/// core field.
fn core_spec(name: &str) -> Option<(Kind, Option<&'static [usize]>)> {
    Some(match name {
        "atomic_numbers" => (Kind::Int, Some(&[])),
        "neighbor_list" => (Kind::Int, Some(&[2])),
        "positions" | "forces" | "velocities" | "shifts" | "neighbor_list_shifts" => (Kind::Float, Some(&[3])),
        "cell" => (Kind::Float, Some(&[3, 3])),
        "pbc" => (Kind::Bool, Some(&[3])),
        "energy" | "stress" | "virial" | "dipole" | "charge" | "charges" | "atomic_masses" => (Kind::Float, None),
        _ => return None,
    })
}

/// Faults of `meta/` array `f` (`rel`): its dtype and its 1-d shape.
pub(crate) fn meta_faults(store: &Location, rel: &str, f: &FieldArray, t: Totals) -> Vec<Fault> {
    let mut out = Vec::new();
    let want_dtype = format::META_ARRAYS.iter().find(|(r, _)| *r == rel).map(|(_, d)| *d);
    if let Some(d) = want_dtype
        && d != f.dtype
    {
        out.push(Fault::array(store, rel, format!("dtype {}, the format's is {d}", f.dtype)));
    }
    let want = match rel {
        format::ATOMS_PTR | format::EDGES_PTR => t.samples + 1,
        format::SAMPLES_MASK => t.samples,
        format::ATOMS_MASK => t.atoms,
        _ => t.edges,
    };
    let shape = f.array.shape();
    if shape != [want] {
        let what = match rel {
            format::ATOMS_PTR | format::EDGES_PTR => "num_samples + 1",
            format::SAMPLES_MASK => "num_samples",
            format::ATOMS_MASK => "the last atom pointer",
            _ => "the last edge pointer",
        };
        out.push(Fault::array(store, rel, format!("shape {shape:?}, expected [{want}] ({what})")));
    }
    out
}

/// Faults of field array `f`: its rows against the pointers (the arrays
/// end where the last pointer of their level says), and a core field's
/// element kind and trailing shape against the format.
pub(crate) fn field_faults(store: &Location, f: &FieldArray, t: Totals) -> Vec<Fault> {
    let mut out = Vec::new();
    let rows = f.array.shape().first().copied().unwrap_or(0);
    let want = t.of_level(f.level);
    if rows != want {
        let by = if f.level == Level::System { "num_samples" } else { "the last pointer" };
        out.push(Fault::array(store, &f.rel, format!("{rows} rows, {by} says {want} ({} level)", f.level)));
    }
    if !f.rel.starts_with(format::StoreGroup::Core.name()) {
        return out;
    }
    if let Some((k, trailing)) = core_spec(&f.name) {
        if kind(f.dtype) != k {
            out.push(Fault::array(store, &f.rel, format!("dtype {} is not the format's element kind", f.dtype)));
        }
        if let Some(tr) = trailing
            && f.trailing != tr
        {
            out.push(Fault::array(store, &f.rel, format!("trailing shape {:?}, the format's is {tr:?}", f.trailing)));
        }
    }
    out
}

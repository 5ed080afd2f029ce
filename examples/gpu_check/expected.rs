//! What a device batch must hold, from the samples that were written (not
//! from the loader's own code path): shared by `gpu_check` and
//! `tests/device_batches.rs`.
#![allow(dead_code)]

use std::collections::BTreeMap;

use atomzarr::{AtomicBatch, AtomicData, BatchData, HostData, Level};
use burn::tensor::{BoolStore, DType, Device, Int, Tensor, TensorData};
use half::f16;

/// Samples with every kind of field: float32 (positions, forces, shifts,
/// energy, cell), float64 and float16 custom fields (narrowed and widened to
/// f32), int64 (atomic numbers, neighbor lists: int32 on the device), int32
/// and uint8 custom fields, and bool `pbc` with both values.
pub fn samples(n: usize, max_atoms: usize, seed: u64) -> atomzarr::Result<Vec<AtomicData>> {
    atomzarr::data::synth::generate(n, 1, max_atoms, seed)?
        .into_iter()
        .enumerate()
        .map(|(k, s)| {
            let atoms = s.num_atoms();
            let spin: Vec<i32> = (0..atoms).map(|a| a as i32 - k as i32).collect();
            let tag: Vec<u8> = (0..atoms).map(|a| (a * 37 + k) as u8).collect();
            let half: Vec<f16> = (0..atoms).map(|a| f16::from_f32(a as f32 * 0.25 - 1.0)).collect();
            s.with_pbc([k % 2 == 0, k % 3 == 0, true])
                .with_custom("temperature", Level::System, vec![1, 1], vec![300.0 + k as f64 * 0.123_456_789_012])?
                .with_custom("spin", Level::Atom, vec![atoms], spin)?
                .with_custom("tag", Level::Atom, vec![atoms], tag)?
                .with_custom("half", Level::Atom, vec![atoms], half)
        })
        .collect()
}

/// One field of a batch as the device should hold it.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// Float fields, as f32.
    Float(Vec<f32>),
    /// Integer fields, as i32.
    Int(Vec<i32>),
    /// Bool fields.
    Bool(Vec<bool>),
}

impl Want {
    /// The values as f64 (what `AtomicBatch::to_host_f64` returns).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            Want::Float(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Want::Int(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Want::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        }
    }

    /// The kind's name, for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Want::Float(_) => "float",
            Want::Int(_) => "int",
            Want::Bool(_) => "bool",
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Want::Float(v) => v.len(),
            Want::Int(v) => v.len(),
            Want::Bool(v) => v.len(),
        }
    }
}

/// A batch as the device should hold it: every field, `graph_index`,
/// `atoms_ptr` and `edges_ptr`.
pub struct Expected {
    /// Fields by name.
    pub fields: BTreeMap<String, Want>,
    /// `[V]` graph of each atom.
    pub graph_index: Vec<i32>,
    /// `[B+1]` atom offsets.
    pub atoms_ptr: Vec<i32>,
    /// `[B+1]` edge offsets.
    pub edges_ptr: Vec<i32>,
}

/// The batch of samples `idx` of `all`: fields concatenated in batch order,
/// neighbor indices moved by each sample's atom offset, values in the
/// device's types (float f32, int i32).
pub fn expected(all: &[AtomicData], idx: &[usize]) -> Result<Expected, String> {
    let mut fields: BTreeMap<String, Want> = BTreeMap::new();
    let (mut atoms_ptr, mut edges_ptr, mut graph_index) = (vec![0i32], vec![0i32], vec![]);
    for (g, &i) in idx.iter().enumerate() {
        let s = all.get(i).ok_or_else(|| format!("sample {i} not written"))?;
        let base = atoms_ptr.last().copied().unwrap_or(0);
        for (name, f) in &s.fields {
            let want = match &f.data {
                HostData::Bool(v) => Want::Bool(v.clone()),
                HostData::Float16(_) | HostData::BFloat16(_) | HostData::Float32(_) | HostData::Float64(_) => {
                    Want::Float(f.data.to_f64_vec().iter().map(|&x| x as f32).collect())
                }
                other => {
                    let shift = if name == "neighbor_list" { i64::from(base) } else { 0 };
                    let v = other.to_i64_vec().ok_or_else(|| format!("{name}: not an integer field"))?;
                    Want::Int(
                        v.iter()
                            .map(|&x| i32::try_from(x + shift).map_err(|_| format!("{name}: {x} beyond int32")))
                            .collect::<Result<_, _>>()?,
                    )
                }
            };
            match (
                fields.entry(name.clone()).or_insert_with(|| match want {
                    Want::Float(_) => Want::Float(vec![]),
                    Want::Int(_) => Want::Int(vec![]),
                    Want::Bool(_) => Want::Bool(vec![]),
                }),
                want,
            ) {
                (Want::Float(w), Want::Float(v)) => w.extend(v),
                (Want::Int(w), Want::Int(v)) => w.extend(v),
                (Want::Bool(w), Want::Bool(v)) => w.extend(v),
                _ => return Err(format!("{name}: kind differs between samples")),
            }
        }
        graph_index.extend(std::iter::repeat_n(g as i32, s.num_atoms()));
        atoms_ptr.push(base + s.num_atoms() as i32);
        edges_ptr.push(edges_ptr.last().copied().unwrap_or(0) + s.num_edges() as i32);
    }
    Ok(Expected { fields, graph_index, atoms_ptr, edges_ptr })
}

/// Reads one field back, its dtype checked against the device's for its kind.
pub fn read(name: &str, data: &BatchData, device: &Device) -> Result<Want, String> {
    let settings = device.settings();
    let e = |e| format!("{name}: read-back failed: {e:?}");
    let (got, want_dtype): (TensorData, DType) = match data {
        BatchData::Float(t) => (t.clone().try_into_data().map_err(e)?, settings.float_dtype.into()),
        BatchData::Int(t) => (t.clone().try_into_data().map_err(e)?, settings.int_dtype.into()),
        BatchData::Bool(t) => (t.clone().try_into_data().map_err(e)?, settings.bool_dtype.into()),
    };
    if got.dtype() != want_dtype {
        return Err(format!(
            "{name}: device tensor is {:?}, the device's dtype for its kind is {want_dtype:?}",
            got.dtype()
        ));
    }
    let e = |e| format!("{name}: {e:?}");
    Ok(match got.dtype() {
        DType::F32 => Want::Float(got.try_to_vec::<f32>().map_err(e)?),
        DType::I32 => Want::Int(got.try_to_vec::<i32>().map_err(e)?),
        DType::Bool(BoolStore::U32) => {
            Want::Bool(got.try_to_vec::<u32>().map_err(e)?.iter().map(|&x| x == 1).collect())
        }
        DType::Bool(BoolStore::U8) => Want::Bool(got.try_to_vec::<u8>().map_err(e)?.iter().map(|&x| x == 1).collect()),
        DType::Bool(BoolStore::Native) => Want::Bool(got.try_to_vec::<bool>().map_err(e)?),
        other => return Err(format!("{name}: device dtype {other:?} not checked here")),
    })
}

fn ints(name: &str, t: &Tensor<1, Int>) -> Result<Vec<i32>, String> {
    let d = t.clone().try_into_data().map_err(|e| format!("{name}: read-back failed: {e:?}"))?;
    if d.dtype() != DType::I32 {
        return Err(format!("{name}: {:?}, not int32", d.dtype()));
    }
    d.try_to_vec::<i32>().map_err(|e| format!("{name}: {e:?}"))
}

/// Values compared per kind: (fields, values) of each kind checked.
pub type Counts = BTreeMap<&'static str, (usize, usize)>;

/// Every field of `batch` (typed and dtype-checked, and through
/// `to_host_f64`) and its index tensors equal the samples'.
pub fn check_batch(batch: &AtomicBatch, all: &[AtomicData], device: &Device) -> Result<Counts, String> {
    let want = expected(all, &batch.indices)?;
    let names: Vec<&String> = batch.fields.keys().collect();
    if names != want.fields.keys().collect::<Vec<_>>() {
        return Err(format!("fields {names:?}, the samples have {:?}", want.fields.keys().collect::<Vec<_>>()));
    }
    let host = batch.to_host_f64().map_err(|e| e.to_string())?;
    let mut counts = Counts::new();
    for (name, f) in &batch.fields {
        let (got, w) = (read(name, &f.data, device)?, &want.fields[name]);
        if &got != w {
            return Err(format!("{name}: device holds {got:?}, the samples {w:?}"));
        }
        let (shape, values) = host.get(name).ok_or_else(|| format!("{name}: not in to_host_f64"))?;
        if values != &w.to_f64() || shape != &f.shape {
            return Err(format!(
                "{name}: to_host_f64 gives {shape:?} {values:?}, the samples {:?} {:?}",
                f.shape,
                w.to_f64()
            ));
        }
        let c = counts.entry(w.kind()).or_default();
        *c = (c.0 + 1, c.1 + w.len());
    }
    for (name, t, w) in [
        ("graph_index", &batch.graph_index, &want.graph_index),
        ("atoms_ptr", &batch.atoms_ptr, &want.atoms_ptr),
        ("edges_ptr", &batch.edges_ptr, &want.edges_ptr),
    ] {
        let got = ints(name, t)?;
        if &got != w {
            return Err(format!("{name}: device holds {got:?}, the samples give {w:?}"));
        }
    }
    Ok(counts)
}

//! Host buffers to numpy arrays and back. Arrays handed to Python own the
//! Rust buffers they view (`PyArray1::from_vec` moves the `Vec`; the reshape
//! is a view): no second copy. A batch's field arrays view buffers of the
//! reader's batch buffer pool through a [`LentBuffer`] base object, which
//! gives the buffer back when Python frees the last view of it.

use atomzarr::data::{BufferHome, StringField};
use atomzarr::store::format::default_level;
use atomzarr::{AtomicData, CollatedBatch, Field, HostData, Level};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::errors::to_py;

/// `data` as a numpy array of `shape`, owning the buffer. bfloat16 (which
/// numpy lacks) becomes float32.
pub fn array<'py>(py: Python<'py>, data: HostData, shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    macro_rules! own {
        ($v:expr) => {
            PyArray1::from_vec(py, $v).reshape(shape.to_vec())?.into_any()
        };
    }
    Ok(match data {
        HostData::Bool(v) => own!(v),
        HostData::Int8(v) => own!(v),
        HostData::Int16(v) => own!(v),
        HostData::Int32(v) => own!(v),
        HostData::Int64(v) => own!(v),
        HostData::UInt8(v) => own!(v),
        HostData::UInt16(v) => own!(v),
        HostData::UInt32(v) => own!(v),
        HostData::UInt64(v) => own!(v),
        HostData::Float16(v) => own!(v),
        HostData::BFloat16(v) => own!(v.into_iter().map(f32::from).collect::<Vec<f32>>()),
        HostData::Float32(v) => own!(v),
        HostData::Float64(v) => own!(v),
    })
}

/// A batch buffer lent to numpy: the base object of the arrays that view
/// it. Dropped when the last view is freed, it gives the buffer back to the
/// batch buffers it came from, where a later batch takes it.
#[pyclass(frozen)]
pub struct LentBuffer {
    data: Option<HostData>,
    home: BufferHome,
}

impl Drop for LentBuffer {
    fn drop(&mut self) {
        if let Some(data) = self.data.take() {
            self.home.give(data);
        }
    }
}

/// `data` as a numpy array of `shape` viewing the buffer in place, the
/// buffer given back to `home` when the array (and every view of it) is
/// freed. bfloat16 becomes a new float32 array, as in [`array`].
pub fn lent_array<'py>(
    py: Python<'py>,
    data: HostData,
    shape: &[usize],
    home: &BufferHome,
) -> PyResult<Bound<'py, PyAny>> {
    if matches!(data, HostData::BFloat16(_)) || home.get().is_none() {
        return array(py, data, shape);
    }
    let owner = Bound::new(py, LentBuffer { data: Some(data), home: home.clone() })?;
    let held = owner.get();
    macro_rules! lend {
        ($v:expr) => {{
            let view = numpy::ndarray::ArrayView1::from($v.as_slice());
            // SAFETY: `owner` keeps the buffer alive and unmoved (a frozen
            // pyclass never hands out `&mut`; the Vec's heap block does not
            // move with the object) for as long as the array, whose base it
            // becomes, or any view of the array lives.
            unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) }.reshape(shape.to_vec())?.into_any()
        }};
    }
    Ok(match &held.data {
        Some(HostData::Bool(v)) => lend!(v),
        Some(HostData::Int8(v)) => lend!(v),
        Some(HostData::Int16(v)) => lend!(v),
        Some(HostData::Int32(v)) => lend!(v),
        Some(HostData::Int64(v)) => lend!(v),
        Some(HostData::UInt8(v)) => lend!(v),
        Some(HostData::UInt16(v)) => lend!(v),
        Some(HostData::UInt32(v)) => lend!(v),
        Some(HostData::UInt64(v)) => lend!(v),
        Some(HostData::Float16(v)) => lend!(v),
        Some(HostData::Float32(v)) => lend!(v),
        Some(HostData::Float64(v)) => lend!(v),
        // Handled above: bfloat16 is converted, and the buffer was just put in.
        Some(HostData::BFloat16(_)) | None => return Err(PyValueError::new_err("a batch buffer went missing")),
    })
}

/// A string label: one `str` (system level) or a list of them (atom level).
fn strings<'py>(py: Python<'py>, s: StringField) -> PyResult<Bound<'py, PyAny>> {
    match s.level {
        Level::System => Ok(PyString::new(py, s.values.first().map_or("", String::as_str)).into_any()),
        _ => Ok(PyList::new(py, s.values)?.into_any()),
    }
}

/// One sample as `{field: array}` with its string labels as `str`.
pub fn sample_dict<'py>(py: Python<'py>, s: AtomicData) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, f) in s.fields {
        d.set_item(name, array(py, f.data, &f.shape)?)?;
    }
    for (name, l) in s.strings {
        d.set_item(name, strings(py, l)?)?;
    }
    Ok(d)
}

/// A collated batch as `{field: array}` plus `atoms_ptr`, `edges_ptr`,
/// `graph_index` (the graph of every atom), `indices` (the samples' logical
/// indices) and `num_graphs`; string labels as `str` lists.
pub fn batch_dict<'py>(py: Python<'py>, b: CollatedBatch) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let n = b.num_graphs();
    let mut graph_index = Vec::with_capacity(b.atoms_ptr.last().copied().unwrap_or(0).max(0) as usize);
    for (k, w) in b.atoms_ptr.windows(2).enumerate() {
        graph_index.extend(std::iter::repeat_n(k as i64, (w[1] - w[0]).max(0) as usize));
    }
    for (name, f) in b.fields {
        let mut shape = vec![f.rows()];
        shape.extend(&f.trailing_shape);
        d.set_item(name, lent_array(py, f.data, &shape, &b.buffers)?)?;
    }
    for (name, s) in b.strings {
        d.set_item(name, PyList::new(py, s.values)?)?;
    }
    let len = graph_index.len();
    d.set_item("graph_index", array(py, HostData::Int64(graph_index), &[len])?)?;
    d.set_item("atoms_ptr", array(py, HostData::Int64(b.atoms_ptr), &[n + 1])?)?;
    d.set_item("edges_ptr", array(py, HostData::Int64(b.edges_ptr), &[n + 1])?)?;
    let indices: Vec<i64> = b.indices.iter().map(|&i| i as i64).collect();
    d.set_item("indices", array(py, HostData::Int64(indices), &[n])?)?;
    d.set_item("num_graphs", n)?;
    Ok(d)
}

/// A numpy array's elements (any layout) and shape.
fn host_data(obj: &Bound<'_, PyAny>) -> PyResult<(HostData, Vec<usize>)> {
    macro_rules! try_dtype {
        ($t:ty, $var:ident) => {
            if let Ok(a) = obj.extract::<PyReadonlyArrayDyn<'_, $t>>() {
                let shape = a.shape().to_vec();
                return Ok((HostData::$var(a.as_array().iter().copied().collect()), shape));
            }
        };
    }
    try_dtype!(f32, Float32);
    try_dtype!(f64, Float64);
    try_dtype!(i64, Int64);
    try_dtype!(i32, Int32);
    try_dtype!(bool, Bool);
    try_dtype!(i16, Int16);
    try_dtype!(i8, Int8);
    try_dtype!(u8, UInt8);
    try_dtype!(u16, UInt16);
    try_dtype!(u32, UInt32);
    try_dtype!(u64, UInt64);
    try_dtype!(half::f16, Float16);
    Err(PyTypeError::new_err(format!(
        "expected a numpy array of bool, int, uint or float, got {}",
        obj.get_type().name()?
    )))
}

/// A sample from `{name: numpy array | str | list[str]}`. Levels: `levels`
/// first, then the toolkit's table for its own field names, then the
/// rows: the atom count (from `atomic_numbers`), the edge count (from
/// `neighbor_list`), or one row for a system field.
pub fn sample_from_dict(d: &Bound<'_, PyDict>, levels: Option<&Bound<'_, PyDict>>) -> PyResult<AtomicData> {
    let rows_of = |name: &str| -> PyResult<Option<usize>> {
        match d.get_item(name)? {
            Some(v) => Ok(Some(host_data(&v)?.1.first().copied().unwrap_or(0))),
            None => Ok(None),
        }
    };
    let atoms = rows_of("atomic_numbers")?
        .ok_or_else(|| PyValueError::new_err("a sample needs atomic_numbers (and positions)"))?;
    let edges = rows_of("neighbor_list")?;
    let mut s = AtomicData::default();
    for (k, v) in d.iter() {
        let name: String = k.extract()?;
        if let Ok(text) = v.extract::<String>() {
            s = s.with_string(name, text);
            continue;
        }
        if v.is_instance_of::<PyList>() {
            let values: Vec<String> = v
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("field {name}: a list must hold strings (atom labels)")))?;
            s.strings.insert(name, StringField::atoms(values));
            continue;
        }
        let (data, shape) = host_data(&v).map_err(|e| PyTypeError::new_err(format!("field {name}: {e}")))?;
        let rows = shape.first().copied().unwrap_or(0);
        let given = match levels {
            Some(l) => l.get_item(&name)?.map(|x| x.extract::<String>()).transpose()?,
            None => None,
        };
        let level = match given.as_deref() {
            Some("atom") => Level::Atom,
            Some("edge") => Level::Edge,
            Some("system") => Level::System,
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "field {name}: level {other:?} is not one of atom, edge, system"
                )));
            }
            None if atomzarr::store::format::CORE_FIELDS.contains(&name.as_str()) => default_level(&name),
            None if rows == atoms && Some(rows) != edges => Level::Atom,
            None if Some(rows) == edges && rows != atoms => Level::Edge,
            None if rows == 1 && atoms != 1 && edges != Some(1) => Level::System,
            None => {
                return Err(PyValueError::new_err(format!(
                    "field {name}: its level (atom, edge or system) is ambiguous from its {rows} rows; pass levels={{{name:?}: ...}}"
                )));
            }
        };
        s = s.with_field(name, Field::new(level, shape, data).map_err(to_py)?);
    }
    Ok(s)
}

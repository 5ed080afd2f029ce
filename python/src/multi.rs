//! `atomzarr.MultiDataset`: several opened stores behind one global index
//! space (the Rust `MultiReader`), read sample by sample, in batches, or
//! through `atomzarr.DataLoader` with a mixing sampler.

use std::sync::Arc;

use atomzarr::source::ChunkedReader;
use atomzarr::{DType, Dataset, MultiReader, MultiReaderOptions, Reader as _, ReaderExt as _};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert::{batch_dict, sample_dict};
use crate::errors::{AtomzarrError, to_py};
use crate::reader::Reader;

/// The dataset a loader over a `MultiDataset` reads through. Validation is
/// the children's: each child is its Reader's dataset, with the
/// `skip_validation` it was opened with.
pub type MultiDs = Dataset<Arc<MultiReader>>;

/// Several stores behind one global index space: child `d` owns global
/// indices `offsets[d]..offsets[d + 1]`, in the order the readers are given.
///
/// `readers`: `atomzarr.open(...)` Readers, in global index order; each
/// keeps its own `skip_validation`. `output_strict`: every non-empty
/// child must have the same field names and levels (a ValueError names
/// the difference); off, the fields are the union of the children's: a
/// sample reads a field its child lacks as absent (NaN for floats, the
/// integer type's extreme, false; zeros for `cell`, `pbc` and `shifts`: no
/// periodic image), and each label a sample may lack gets a bool system
/// field `<name>_present`, false where the graph lacks it.
/// `dataset_index`: every sample and batch carries the int64 system field
/// `dataset_index`, the child it came from. `loss_weights`: one weight per
/// child; every sample and batch carries the float32 system field
/// `loss_weight`, its child's weight.
/// `cache_bytes`: the decoded-chunk budget the children share (default
/// 1,280 MiB): split by what each child needs (room for its resident
/// arrays first, then equal parts, a child taking no more than it needs
/// to be cached whole); each child reader's cache is set to its share,
/// replacing the budget it was opened with.
#[pyclass(name = "MultiDataset", module = "atomzarr", frozen)]
pub struct MultiDataset {
    pub(crate) multi: Arc<MultiReader>,
    pub(crate) ds: MultiDs,
    readers: Vec<Py<Reader>>,
}

impl MultiDataset {
    /// Child lengths as of construction or the last `refresh`.
    pub(crate) fn child_lens(&self) -> Vec<usize> {
        self.multi.child_lens()
    }
}

/// `index` counted from the end when negative, checked against `len`.
fn wrap_index(index: isize, len: usize, what: impl FnOnce() -> String) -> PyResult<usize> {
    let i = if index < 0 { index + len as isize } else { index };
    if i < 0 || i as usize >= len {
        return Err(PyIndexError::new_err(format!("{}: index {index} out of range for {len}", what())));
    }
    Ok(i as usize)
}

#[pymethods]
impl MultiDataset {
    #[new]
    #[pyo3(signature = (*readers, output_strict=true, dataset_index=false, cache_bytes=None, loss_weights=None))]
    fn new(
        py: Python<'_>,
        readers: &Bound<'_, PyTuple>,
        output_strict: bool,
        dataset_index: bool,
        cache_bytes: Option<u64>,
        loss_weights: Option<Vec<f32>>,
    ) -> PyResult<Self> {
        if readers.is_empty() {
            return Err(PyValueError::new_err("MultiDataset needs at least one Reader (atomzarr.open)"));
        }
        let mut kept = Vec::with_capacity(readers.len());
        let mut children: Vec<Arc<dyn atomzarr::Reader>> = Vec::with_capacity(readers.len());
        for (k, r) in readers.iter().enumerate() {
            let r = r.cast_into::<Reader>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "readers[{k}]: an atomzarr.Reader (from atomzarr.open), not {}",
                    e.into_inner().get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
                ))
            })?;
            children.push(Arc::new(r.get().ds.clone()));
            kept.push(r.unbind());
        }
        let mut options =
            MultiReaderOptions::default().with_output_strict(output_strict).with_dataset_index(dataset_index);
        if let Some(b) = cache_bytes {
            options = options.with_cache_bytes(b);
        }
        let build = || match loss_weights {
            Some(w) => MultiReader::with_options(children, options)?.with_loss_weights(w),
            None => MultiReader::with_options(children, options),
        };
        let multi = py.detach(build).map_err(|e| match e {
            // Children that do not fit together are a bad argument.
            atomzarr::Error::InvalidInput { .. } | atomzarr::Error::Config(_) => PyValueError::new_err(e.to_string()),
            e => to_py(e),
        })?;
        let multi = Arc::new(multi);
        // The children validate (or not) as their readers were opened; the
        // mixture's own dataset takes their batches as they come.
        let ds = Dataset::new(Arc::clone(&multi)).with_skip_validation(true);
        Ok(MultiDataset { multi, ds, readers: kept })
    }

    fn __len__(&self) -> usize {
        self.multi.len()
    }

    /// Sample `index` of the global index space (negative counts from the
    /// end) as `{field: array}`, validated by its child unless that reader
    /// skips validation.
    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyDict>> {
        let i = wrap_index(index, self.multi.len(), || self.multi.name().to_string())?;
        let s = py.detach(|| self.ds.get_sample(i)).map_err(to_py)?;
        sample_dict(py, s)
    }

    /// The samples at global `indices` collated into one batch, as
    /// `Reader.read_many` (its `indices` are the global ones).
    fn read_many<'py>(&self, py: Python<'py>, indices: Vec<usize>) -> PyResult<Bound<'py, PyDict>> {
        let mut batches = py.detach(|| self.ds.load_batches(&[indices])).map_err(to_py)?;
        let b = batches.pop().ok_or_else(|| AtomzarrError::new_err("no batch read"))?;
        batch_dict(py, b)
    }

    /// The child Readers, in global index order.
    #[getter]
    fn datasets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.readers.iter().map(|r| r.clone_ref(py)))
    }

    /// The children's lengths.
    #[getter]
    fn lengths(&self) -> Vec<usize> {
        self.multi.child_lens()
    }

    /// Running offsets, one more than the children: child `d` owns global
    /// indices `offsets[d]..offsets[d + 1]`.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.multi.offsets())
    }

    /// Whether non-empty children must share field names and levels.
    #[getter]
    fn output_strict(&self) -> bool {
        self.multi.output_strict()
    }

    /// `(child, local index)` of a global index (negative counts from the end).
    fn to_local_index(&self, index: isize) -> PyResult<(usize, usize)> {
        let i = wrap_index(index, self.multi.len(), || self.multi.name().to_string())?;
        self.multi.to_local_index(i).map_err(to_py)
    }

    /// The global index of sample `local_index` of child `dataset_index`
    /// (either negative counts from the end).
    fn to_global_index(&self, dataset_index: isize, local_index: isize) -> PyResult<usize> {
        let lengths = self.multi.child_lens();
        let d = wrap_index(dataset_index, lengths.len(), || format!("{}: dataset_index", self.multi.name()))?;
        let l = wrap_index(local_index, lengths[d], || format!("{}: local_index of dataset {d}", self.multi.name()))?;
        self.multi.to_global_index(d, l).map_err(to_py)
    }

    /// `{field: (level, dtype, trailing shape)}` of the mixture's fields:
    /// the children's (their union when `output_strict` is off), the
    /// `<name>_present` flags, and `dataset_index` and `loss_weight` when
    /// the samples carry them.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let schemas: Vec<_> = self.readers.iter().map(|r| r.get().reader.field_schema()).collect();
        let d = PyDict::new(py);
        for (name, level) in self.multi.schema().fields {
            let none: Vec<usize> = Vec::new();
            let added = |dtype: DType| (level.to_string(), dtype.to_string(), none.clone());
            let spec = match schemas.iter().find_map(|s| s.get(&name)) {
                Some((level, dtype, trailing)) => (level.to_string(), dtype.to_string(), trailing.clone()),
                None if name == atomzarr::source::DATASET_INDEX => added(DType::Int64),
                None if name == atomzarr::source::LOSS_WEIGHT => added(DType::Float32),
                None => added(DType::Bool),
            };
            d.set_item(name, spec)?;
        }
        Ok(d)
    }

    /// Bytes decoded, bytes of samples read and chunks decoded so far by the
    /// children's readers, summed.
    fn decode_counters(&self) -> (u64, u64, u64) {
        let c = ChunkedReader::decode_counters(&*self.multi);
        (c.decoded_bytes, c.sample_bytes, c.chunks_decoded)
    }

    /// Bytes the children's chunk caches hold now, summed (at most the
    /// mixture's one budget).
    fn cache_bytes_held(&self) -> u64 {
        ChunkedReader::cache_bytes_held(&*self.multi)
    }

    /// Re-reads every child's metadata and the offsets (after appends).
    /// Samplers built before keep the lengths they were built with.
    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.multi.refresh()).map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("atomzarr.MultiDataset({:?}, lengths {:?})", self.multi.name(), self.multi.child_lens())
    }
}

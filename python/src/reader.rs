//! `atomzarr.open(...)`: a store's samples by index, and collated batches.

use std::sync::Arc;

use atomzarr::source::ChunkedReader;
use atomzarr::{AtomicDataZarrReader, Dataset, Location, ReaderExt as _, ReaderOptions};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::{batch_dict, sample_dict};
use crate::errors::to_py;

/// The dataset every Python reader and loader reads through.
pub type Ds = Dataset<Arc<AtomicDataZarrReader>>;

/// A store opened for reading (`atomzarr.open`). `len(r)`, `r[i]` (a dict
/// of numpy arrays, the toolkit's field names and dtypes), `r.read_many(...)`.
#[pyclass(name = "Reader", module = "atomzarr", frozen)]
pub struct Reader {
    pub(crate) ds: Ds,
    pub(crate) reader: Arc<AtomicDataZarrReader>,
}

/// Opens a store: a local path or a URL (`s3://`, `gs://`, `az://`,
/// `http(s)://`). `cache_bytes`: the decoded-chunk cache budget (default
/// 1,280 MiB; 0 turns it off). `skip_validation`: return samples without
/// checking them (faster; the toolkit's default is to check).
#[pyfunction]
#[pyo3(signature = (path_or_url, cache_bytes=None, skip_validation=false))]
pub fn open(py: Python<'_>, path_or_url: &str, cache_bytes: Option<u64>, skip_validation: bool) -> PyResult<Reader> {
    let mut options = ReaderOptions::default();
    if let Some(b) = cache_bytes {
        options = options.with_cache_bytes(b);
    }
    let location = Location::parse(path_or_url);
    let reader = py.detach(|| AtomicDataZarrReader::open_opt(location, options)).map_err(to_py)?;
    let reader = Arc::new(reader);
    // Batches of both paths (validated or not) recycle into the reader's
    // free buffers, which `batch_buffer_bytes` reports.
    let ds = Dataset::new(Arc::clone(&reader))
        .with_skip_validation(skip_validation)
        .with_batch_buffers(reader.batch_buffers().clone());
    Ok(Reader { ds, reader })
}

#[pymethods]
impl Reader {
    fn __len__(&self) -> usize {
        self.ds.len()
    }

    /// Sample `index` (negative counts from the end) as `{field: array}`,
    /// string labels as `str`.
    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyDict>> {
        let n = self.ds.len();
        let i = if index < 0 { index + n as isize } else { index };
        if i < 0 || i as usize >= n {
            return Err(PyIndexError::new_err(format!(
                "{}: index {index} out of range for {n} samples",
                self.reader.location()
            )));
        }
        let s = py.detach(|| self.ds.get_sample(i as usize)).map_err(to_py)?;
        sample_dict(py, s)
    }

    /// The samples `indices` collated into one batch: `{field: array}` with
    /// every sample's rows concatenated, `neighbor_list` rebased to the
    /// batch's atoms, and `atoms_ptr`, `edges_ptr`, `graph_index`,
    /// `indices`, `num_graphs`.
    fn read_many<'py>(&self, py: Python<'py>, indices: Vec<usize>) -> PyResult<Bound<'py, PyDict>> {
        let mut batches = py.detach(|| self.ds.load_batches(&[indices])).map_err(to_py)?;
        let b = batches.pop().ok_or_else(|| crate::errors::AtomzarrError::new_err("no batch read"))?;
        batch_dict(py, b)
    }

    /// `{field: (level, dtype, trailing shape)}` of the store.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, (level, dtype, trailing)) in self.reader.field_schema() {
            d.set_item(name, (level.to_string(), dtype.to_string(), trailing))?;
        }
        Ok(d)
    }

    /// The store's path or URL.
    #[getter]
    fn path(&self) -> String {
        self.reader.location().to_string()
    }

    /// Bytes decoded and chunks decoded so far by this reader.
    fn decode_counters(&self) -> (u64, u64, u64) {
        let c = self.reader.decode_counters();
        (c.decoded_bytes, c.sample_bytes, c.chunks_decoded)
    }

    /// Bytes the reader's chunk cache holds now (cached chunks as kept,
    /// compact forms included; at most its budget): what a process holds
    /// beyond it is the reader's own memory.
    fn cache_bytes_held(&self) -> u64 {
        atomzarr::source::ChunkedReader::cache_bytes_held(&*self.reader)
    }

    /// Bytes of pointer-array pages the reader holds now (outside the
    /// chunk cache): the pages of the samples read so far, compact.
    fn pointer_bytes_held(&self) -> u64 {
        self.reader.pointer_bytes_held()
    }

    /// Bytes of free batch buffers the reader's pool holds: buffers of
    /// batches whose arrays Python has freed, ready for later batches.
    fn batch_buffer_bytes(&self) -> usize {
        self.reader.batch_buffers().held_bytes()
    }

    /// Checks the whole store, every chunk of every array read once
    /// (checksums, pointers, masks, neighbor indices, shapes and dtypes
    /// against the format; see `atomzarr verify`). Returns the list of
    /// faults found, each a dict with keys `store`, `array`, `chunk`,
    /// `sample` (None where the fault has none) and `reason`; an empty list
    /// for a clean store. Faults of the store are never raised: it raises
    /// (`StoreNotFoundError`, `AtomzarrError`) only when the store is gone
    /// or cannot be reached.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let location = self.reader.location().clone();
        let options = atomzarr::store::verify::VerifyOptions::default();
        let report = py.detach(|| atomzarr::store::verify::verify(location, &options)).map_err(to_py)?;
        let out = PyList::empty(py);
        for f in report.faults {
            let d = PyDict::new(py);
            d.set_item("store", f.store.to_string())?;
            d.set_item("array", f.array)?;
            d.set_item("chunk", f.chunk)?;
            d.set_item("sample", f.sample)?;
            d.set_item("reason", f.reason)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Re-reads the store's metadata (after another process appended).
    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.reader.refresh()).map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("atomzarr.Reader({:?}, {} samples)", self.reader.location().to_string(), self.ds.len())
    }
}

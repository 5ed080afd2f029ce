//! `atomzarr.Writer`: create a store or open one to append, write samples
//! from numpy arrays, soft-delete. The store's lock is held until `close()`.

use std::sync::Mutex;

use atomzarr::{AtomicData, AtomicDataZarrWriter, ZarrWriteConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert::sample_from_dict;
use crate::errors::{AtomzarrError, to_py};

/// A write configuration from a dict or a JSON string (the serialized
/// `ZarrWriteConfig`: `{"core": {"codec": ..., "chunk_size": ...}, ...}`).
pub fn write_config(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<ZarrWriteConfig> {
    let Some(c) = config else { return Ok(ZarrWriteConfig::default()) };
    let json: String = if let Ok(s) = c.extract::<String>() {
        s
    } else {
        py.import("json")?.call_method1("dumps", (c,))?.extract()?
    };
    serde_json::from_str(&json).map_err(|e| PyValueError::new_err(format!("write config: {e}")))
}

/// The writer of one store.
#[pyclass(name = "_Writer", module = "atomzarr", frozen)]
pub struct Writer {
    inner: Mutex<Option<AtomicDataZarrWriter>>,
    path: String,
}

fn samples(list: &Bound<'_, PyList>, levels: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<AtomicData>> {
    list.iter()
        .enumerate()
        .map(|(k, item)| {
            let d = item.cast_into::<PyDict>().map_err(|_| PyValueError::new_err(format!("sample {k}: not a dict")))?;
            sample_from_dict(&d, levels)
                .map_err(|e| PyValueError::new_err(format!("sample {k}: {}", e.value(list.py()))))
        })
        .collect()
}

impl Writer {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut AtomicDataZarrWriter) -> atomzarr::Result<T> + Send,
    ) -> PyResult<T> {
        let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let w = g.as_mut().ok_or_else(|| AtomzarrError::new_err(format!("{}: writer closed", self.path)))?;
        py.detach(|| f(w)).map_err(to_py)
    }
}

#[pymethods]
impl Writer {
    /// Opens `path` to append when a store is there, else creates it.
    #[new]
    #[pyo3(signature = (path, config=None))]
    fn new(py: Python<'_>, path: &str, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let config = write_config(py, config)?;
        let p = std::path::PathBuf::from(path);
        let w = py
            .detach(|| {
                if p.exists() {
                    AtomicDataZarrWriter::open(&p, config)
                } else {
                    AtomicDataZarrWriter::create(&p, config)
                }
            })
            .map_err(to_py)?;
        Ok(Writer { inner: Mutex::new(Some(w)), path: path.to_string() })
    }

    /// Writes the first samples of a new store.
    #[pyo3(signature = (samples, levels=None))]
    fn write(&self, py: Python<'_>, samples: &Bound<'_, PyList>, levels: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let s = self::samples(samples, levels)?;
        self.with(py, |w| w.write(&s))
    }

    /// Appends samples (a store with samples already).
    #[pyo3(signature = (samples, levels=None))]
    fn append(&self, py: Python<'_>, samples: &Bound<'_, PyList>, levels: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let s = self::samples(samples, levels)?;
        self.with(py, |w| w.append(&s))
    }

    /// Soft-deletes samples by physical index (their position among all
    /// samples written, deleted ones included, as in the toolkit). One call
    /// rewrites each chunk its samples touch once, and commits all their
    /// masks together: pass every index in one call.
    fn delete(&self, py: Python<'_>, indices: Vec<usize>) -> PyResult<()> {
        self.with(py, |w| w.delete(&indices))
    }

    /// Releases the store's lock; later calls fail.
    fn close(&self) {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }

    #[getter]
    fn path(&self) -> &str {
        &self.path
    }
}

//! `import_files`, `split` and `stats`: the command line's `import`,
//! `split` and `stats`, with the same behaviour, returning what `--json`
//! prints.

use atomzarr::formats::import::{ImportOptions, import_files as import};
use atomzarr::prep::split::{Split, SplitRule};
use atomzarr::prep::stats::{StatsOptions, dataset_stats, subset_stats};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, ZarrWriteConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::writer::write_config;

fn json_to_py<'py>(py: Python<'py>, v: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let s = serde_json::to_string(v).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (s,))
}

/// Imports files of any supported format (extxyz, ASE db, .aselmdb, HDF5,
/// npz, MPtrj JSON) into `store` (created, or appended to). `cutoff`:
/// neighbor lists at this cutoff (Å). Returns the import report.
#[pyfunction]
#[pyo3(signature = (paths, store, cutoff=None, batch_frames=None, progress=false, config=None))]
pub fn import_files<'py>(
    py: Python<'py>,
    paths: Vec<String>,
    store: &str,
    cutoff: Option<f64>,
    batch_frames: Option<usize>,
    progress: bool,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut options = ImportOptions::default().with_progress(progress).with_write_config(write_config(py, config)?);
    if let Some(c) = cutoff {
        options = options.with_cutoff(c).map_err(to_py)?;
    }
    if let Some(n) = batch_frames {
        options = options.with_batch_frames(n);
    }
    let report = py.detach(|| import(&paths, store, &options)).map_err(to_py)?;
    json_to_py(py, &report)
}

/// Splits the samples into parts by a hash of (seed, group key) (as `atomzarr
/// split --json`): `{"splits": {part: [indices]}, "rule": ..., "parts": ...}`.
/// `save`: keep the rule in the store under this name.
#[pyfunction]
#[pyo3(signature = (store, by=None, fractions="train=0.8,val=0.1,test=0.1", seed=0, save=None))]
pub fn split<'py>(
    py: Python<'py>,
    store: &str,
    by: Option<String>,
    fractions: &str,
    seed: u64,
    save: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let rule = SplitRule::parse(fractions).map_err(to_py)?.with_by(by).with_seed(seed);
    let out = py
        .detach(|| -> atomzarr::Result<serde_json::Value> {
            let reader = AtomicDataZarrReader::open(store)?;
            let split = Split::compute(&reader, &rule)?;
            if let Some(name) = &save {
                AtomicDataZarrWriter::open(store, ZarrWriteConfig::default())?.save_split(name, &split, &reader)?;
            }
            Ok(split.to_json())
        })
        .map_err(to_py)?;
    json_to_py(py, &out)
}

/// Dataset statistics (as `atomzarr stats --json`): of the whole store, or
/// of a part of a saved split. `save`: keep them in the store.
#[pyfunction]
#[pyo3(signature = (store, split=None, part="train", save=false))]
pub fn stats<'py>(
    py: Python<'py>,
    store: &str,
    split: Option<String>,
    part: &str,
    save: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let s = py
        .detach(|| -> atomzarr::Result<_> {
            let reader = AtomicDataZarrReader::open(store)?;
            let options = StatsOptions::default();
            let s = match &split {
                Some(name) => subset_stats(&reader, Split::from_store(&reader, name)?.indices(part)?, &options)?,
                None => dataset_stats(&reader, &options)?,
            };
            if save {
                let scope = split.as_deref().map(|n| (n, part));
                AtomicDataZarrWriter::open(store, ZarrWriteConfig::default())?.save_stats(&s, scope, &reader)?;
            }
            Ok(s)
        })
        .map_err(to_py)?;
    json_to_py(py, &s)
}

//! The `atomzarr` Python package's native module (`atomzarr._atomzarr`):
//! the reader, loader, writer, import, split and stats of the Rust crate,
//! with samples and batches as numpy arrays that own the Rust buffers.
//! `MultiDataset` and the mixing samplers put several stores behind one
//! index space. The Python side (`python/atomzarr/`) adds `ase.Atoms` input and
//! `atomzarr.torch.to_torch`.

mod batch_sampler;
mod convert;
mod errors;
mod loader;
mod mixing;
mod multi;
mod reader;
mod tools;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _atomzarr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(reader::open, m)?)?;
    m.add_function(wrap_pyfunction!(tools::import_files, m)?)?;
    m.add_function(wrap_pyfunction!(tools::split, m)?)?;
    m.add_function(wrap_pyfunction!(tools::stats, m)?)?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<multi::MultiDataset>()?;
    m.add_class::<mixing::MultiDatasetSampler>()?;
    m.add_class::<batch_sampler::MultiDatasetBatchSampler>()?;
    m.add_class::<loader::DataLoader>()?;
    m.add_class::<loader::LoaderIter>()?;
    m.add_class::<writer::Writer>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! `atomzarr.DataLoader`: the crate's DataLoader (same plan, fused windows
//! read ahead on Rust threads, resumable state) yielding host batches as
//! numpy arrays. Reads run with the GIL released.

use std::sync::{Arc, Mutex};

use atomzarr::pipeline::HostIter;
use atomzarr::sampler::{ChunkShuffleSampler, RandomSampler};
use atomzarr::{AtomicDataZarrReader, LoaderState};
use burn::backend::Flex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::batch_dict;
use crate::errors::to_py;
use crate::reader::Reader;

type Inner = atomzarr::DataLoader<Flex, Arc<AtomicDataZarrReader>>;

/// Batches of a reader's samples, read ahead in the background.
#[pyclass(name = "DataLoader", module = "atomzarr", frozen)]
pub struct DataLoader {
    inner: Inner,
}

#[pymethods]
impl DataLoader {
    /// `shuffle`: a new order every epoch, from `seed`: a full permutation
    /// when the decoded store fits the reader's cache, else the block pool
    /// (the store's chunk blocks permuted, batches drawn from a pool of
    /// blocks sized from the cache: each chunk decoded about once per
    /// epoch); the choice is logged. `sampler`: "random" (a full
    /// permutation per epoch, whatever the store), "sequential", or
    /// "chunk-shuffle" (the block pool with 16 blocks). Default: as
    /// `shuffle` says. `prefetch_factor` batches are read in
    /// one fused read, two reads kept in flight. `rank`/`world_size`: this
    /// process's part of every epoch. `cutoff`: build `neighbor_list` and
    /// `shifts` at this cutoff (Å) while loading, replacing stored edges.
    #[new]
    #[pyo3(signature = (reader, batch_size=1, shuffle=false, seed=0, prefetch_factor=2, sampler=None,
                        rank=0, world_size=1, cutoff=None, drop_last=false, num_workers=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        reader: &Reader,
        batch_size: usize,
        shuffle: bool,
        seed: u64,
        prefetch_factor: usize,
        sampler: Option<&str>,
        rank: usize,
        world_size: usize,
        cutoff: Option<f64>,
        drop_last: bool,
        num_workers: usize,
    ) -> PyResult<Self> {
        let mut ds = reader.ds.clone();
        if let Some(c) = cutoff {
            ds = ds.with_cutoff(c).map_err(to_py)?;
        }
        let mut b = Inner::builder(ds)
            .with_batch_size(batch_size)
            .with_seed(seed)
            .with_prefetch_factor(prefetch_factor)
            .with_rank(rank, world_size)
            .with_drop_last(drop_last)
            .with_num_workers(num_workers)
            .with_int64(true);
        match (sampler, shuffle) {
            (None, s) => b = b.with_shuffle(s),
            // A full permutation on any store, as asked (`shuffle=True`
            // alone picks the block pool on a store larger than the cache).
            (Some("random"), _) => b = b.with_sampler(RandomSampler::new(reader.ds.len(), seed)),
            (Some("sequential"), false) => {}
            (Some("sequential"), true) => {
                return Err(PyValueError::new_err("sampler=\"sequential\" with shuffle=True: choose one"));
            }
            (Some("chunk-shuffle"), _) => {
                let s = ChunkShuffleSampler::for_reader(&*reader.reader, batch_size).map_err(to_py)?.with_seed(seed);
                b = b.with_sampler(s);
            }
            (Some(other), _) => {
                return Err(PyValueError::new_err(format!(
                    "sampler {other:?} is not one of \"random\", \"sequential\", \"chunk-shuffle\""
                )));
            }
        }
        let inner = b.build(&Default::default()).map_err(to_py)?;
        Ok(DataLoader { inner })
    }

    /// Batches in the next epoch (of this rank).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// One epoch: batches as dicts of numpy arrays (see `Reader.read_many`).
    fn __iter__(&self) -> LoaderIter {
        LoaderIter { inner: Mutex::new(Some(self.inner.iter_host())) }
    }

    /// Makes the next epoch `epoch` (its shuffle), from its start.
    fn set_epoch(&self, epoch: u64) {
        self.inner.set_epoch(epoch);
    }

    /// The epoch the next iteration runs.
    #[getter]
    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// Where the loader is (epoch, position; and the order it describes), as
    /// a dict to save with a checkpoint.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = serde_json::to_string(&self.inner.state()).map_err(|e| PyValueError::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (json,))
    }

    /// Makes the next iteration resume at `state` (from `state_dict`).
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let json: String = py.import("json")?.call_method1("dumps", (state,))?.extract()?;
        let state: LoaderState =
            serde_json::from_str(&json).map_err(|e| PyValueError::new_err(format!("loader state: {e}")))?;
        self.inner.load_state(&state).map_err(to_py)
    }
}

/// One epoch of a `DataLoader`.
#[pyclass(module = "atomzarr", frozen)]
pub struct LoaderIter {
    inner: Mutex<Option<HostIter<Flex, Arc<AtomicDataZarrReader>>>>,
}

#[pymethods]
impl LoaderIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let next = py.detach(|| {
            let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let item = g.as_mut().and_then(Iterator::next);
            if item.is_none() {
                // The epoch ended: release its reads now, not at garbage collection.
                *g = None;
            }
            item
        });
        match next {
            Some(Ok(b)) => Ok(Some(batch_dict(py, b)?)),
            Some(Err(e)) => Err(to_py(e)),
            None => Ok(None),
        }
    }

    /// Batches yielded so far and in total this epoch.
    fn progress(&self) -> (usize, usize) {
        let g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.as_ref().map_or((0, 0), HostIter::progress)
    }
}

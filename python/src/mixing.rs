//! `atomzarr.MultiDatasetSampler`, the crate's mixing sampler over a
//! `MultiDataset` with the reference toolkit's names and arguments, and
//! what it shares with `atomzarr.MultiDatasetBatchSampler`
//! (`batch_sampler`). Each is a torch-style sampler on its own (`len`,
//! iteration over the current epoch, `set_epoch`) and is what
//! `atomzarr.DataLoader` takes as `sampler=` / `batch_sampler=`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use atomzarr::sampler::{self as rs, Sampler as _};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList};

use crate::multi::MultiDataset;

/// The epoch a Python sampler was last set to, shared with the loaders
/// built over it: `generation` counts `set_epoch` calls, so that a loader
/// can tell a new setting from one it has already taken.
#[derive(Debug, Default)]
pub(crate) struct EpochCell {
    epoch: AtomicU64,
    generation: AtomicU64,
}

impl EpochCell {
    pub(crate) fn set(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// Which order iterating a mixing sampler yields, and a DataLoader given
/// it reads (`order=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SamplerOrder {
    /// `"loader"`: the order a DataLoader fitted to the MultiDataset reads
    /// (each rank its region of each store, block pools for stores larger
    /// than their cache share), which iterating the sampler yields too.
    Loader,
    /// `"toolkit"`: the toolkit's order (every `num_replicas`-th index of
    /// the epoch, padded), which a DataLoader then reads as it stands.
    Toolkit,
}

impl SamplerOrder {
    pub(crate) fn parse(order: &str) -> PyResult<SamplerOrder> {
        match order {
            "loader" => Ok(SamplerOrder::Loader),
            "toolkit" => Ok(SamplerOrder::Toolkit),
            other => Err(PyValueError::new_err(format!("order {other:?} is not one of \"loader\", \"toolkit\""))),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SamplerOrder::Loader => "loader",
            SamplerOrder::Toolkit => "toolkit",
        }
    }
}

/// What a DataLoader takes from a Python mixing sampler: its order (without
/// ranks when the loader splits the epoch among ranks itself), the ranks it
/// was given, and what describes its order in a saved loader state.
pub(crate) struct ForLoader<S> {
    pub sampler: S,
    pub lengths: Vec<usize>,
    /// `(rank, num_replicas)`.
    pub ranks: (usize, usize),
    /// Whether the loader cuts `sampler`'s epoch among the ranks (`false`:
    /// `sampler` is this rank's part already, read as it stands).
    pub split_by_loader: bool,
    pub describe: serde_json::Value,
    pub epoch: Arc<EpochCell>,
}

/// A builder error of the Rust samplers (a bad combination of arguments,
/// each named in the message) as a ValueError.
pub(crate) fn config_error(e: atomzarr::Error) -> PyErr {
    match e {
        atomzarr::Error::Config(m) => PyValueError::new_err(m),
        e => crate::errors::to_py(e),
    }
}

/// A non-negative integer argument, refused with a ValueError naming it.
pub(crate) fn count(name: &str, v: i64, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(PyValueError::new_err(format!("{name} must be >= {min}, got {v}")));
    }
    usize::try_from(v).map_err(|_| PyValueError::new_err(format!("{name}: {v} is too large")))
}

/// `(rank, num_replicas)` from the arguments, as the toolkit resolves them:
/// an initialized `distributed_manager` gives both, then the arguments,
/// then rank 0 of 1.
pub(crate) fn ranks(
    num_replicas: Option<i64>,
    rank: Option<i64>,
    distributed_manager: Option<&Bound<'_, PyAny>>,
) -> PyResult<(usize, usize)> {
    let (mut world, mut rank) = (num_replicas, rank);
    if let Some(m) = distributed_manager.filter(|m| !m.is_none())
        && m.call_method0("is_initialized")?.is_truthy()?
    {
        world = Some(m.getattr("world_size")?.extract()?);
        rank = Some(m.getattr("rank")?.extract()?);
    }
    let world = count("num_replicas", world.unwrap_or(1), 1)?;
    let r = rank.unwrap_or(0);
    if r < 0 || r as u64 >= world as u64 {
        return Err(PyValueError::new_err(format!("rank must be in the range [0, {world}), got {r}")));
    }
    Ok((r as usize, world))
}

/// Refuses a torch generator: these samplers draw from `(seed, epoch)`.
pub(crate) fn no_generator(generator: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match generator {
        Some(g) if !g.is_none() => Err(PyValueError::new_err(
            "generator: atomzarr's samplers draw every epoch from (seed, epoch) with their own generator; pass seed=",
        )),
        _ => Ok(()),
    }
}

/// The rates `weights` (or the lengths) normalised to sum 1 and tempered,
/// for display; the Rust builder has checked them.
pub(crate) fn normalised(weights: Option<&[f64]>, lengths: &[usize], temperature: Option<f64>) -> PyResult<Vec<f64>> {
    rs::mixture_rates(weights, lengths, temperature).map_err(config_error)
}

pub(crate) fn epoch_list<'py>(
    py: Python<'py>,
    items: impl IntoIterator<Item = impl IntoPyObject<'py>>,
) -> PyResult<Bound<'py, PyIterator>> {
    PyList::new(py, items)?.try_iter()
}

// ---------------------------------------------------------------------------

/// Global indices of a `MultiDataset`, mixing its children sample by
/// sample at per-dataset rates (`DataLoader(..., sampler=...)`).
///
/// Each epoch draws exactly `counts[d]` samples of child `d`:
/// `num_samples` (default: the dataset's length) split by `weights`
/// (default: the child lengths) by largest remainder; `temperature=T`
/// tempers those rates (each raised to `1/T`, normalised: with the
/// default weights `(D_i / D)^(1/T)`, `T=1` proportional, a large `T`
/// uniform). Each child is
/// walked in a permutation, a new one for each further pass
/// (`replacement`, default on: a child's samples repeat only after all
/// of it was used; off: a count above a child's length is a
/// ValueError). `shuffle` (default on): the interleaving of the
/// children and each child's order, reproducible per `(seed, epoch)`.
/// `num_replicas` / `rank` (or an initialized `distributed_manager`):
/// this rank's share of the epoch. `generator` is not supported (pass
/// `seed`).
///
/// Iterating the sampler yields what a DataLoader given it reads, in
/// order (its batches laid end to end, before the loader's own
/// `drop_last`). With `order="loader"` (the default) that is the order
/// the loader fits to the MultiDataset: the epoch read rank by rank, each
/// store's draws dealt to the ranks, each rank drawing from its own region
/// of each store (with `drop_last`, the epoch first cut to a multiple of
/// `num_replicas`), a store larger than its share of the MultiDataset's
/// cache drawn through a block pool (the counts stay exact); every rank
/// gets as many batches, the last ones possibly short or empty. On one
/// rank, with every store fitting its share, it is the mixing order
/// itself. With `order="toolkit"` it is the toolkit's order (every
/// `num_replicas`-th index of the epoch, padded from its start, or its
/// tail dropped with `drop_last`, to a multiple of `num_replicas`), and a
/// DataLoader reads that as it stands (each rank then decodes most of
/// every store).
#[pyclass(name = "MultiDatasetSampler", module = "atomzarr", frozen)]
pub struct MultiDatasetSampler {
    dataset: Py<MultiDataset>,
    /// The whole epoch.
    global: rs::MultiDatasetSampler,
    /// What a DataLoader splits among the ranks: the whole epoch, or with
    /// `drop_last` and ranks, the epoch cut to a multiple of the ranks
    /// (the reason when nothing is left).
    loader: Result<rs::MultiDatasetSampler, String>,
    /// This rank's part, what iterating the sampler yields.
    local: rs::MultiDatasetSampler,
    lengths: Vec<usize>,
    weights: Vec<f64>,
    num_samples: usize,
    replacement: bool,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    rank: usize,
    num_replicas: usize,
    order: SamplerOrder,
    epoch: Arc<EpochCell>,
}

impl MultiDatasetSampler {
    pub(crate) fn for_loader(&self) -> PyResult<ForLoader<rs::MultiDatasetSampler>> {
        let whole = self.loader.clone().map_err(PyValueError::new_err)?;
        let mut describe = serde_json::json!({
            "kind": "MultiDatasetSampler",
            "lengths": self.lengths,
            "counts": whole.counts(),
            "replacement": self.replacement,
            "shuffle": self.shuffle,
            "seed": self.seed,
        });
        let split_by_loader = self.order == SamplerOrder::Loader;
        if !split_by_loader {
            describe["order"] = self.order.name().into();
        }
        Ok(ForLoader {
            lengths: self.lengths.clone(),
            ranks: (self.rank, self.num_replicas),
            split_by_loader,
            describe,
            sampler: if split_by_loader { whole } else { self.local.clone() },
            epoch: Arc::clone(&self.epoch),
        })
    }
}

/// The epoch cut to a multiple of `world` ranks, or why nothing is left.
pub(crate) fn cut(n: usize, world: usize, what: &str) -> Result<usize, String> {
    match n / world * world {
        0 => Err(format!("drop_last: {n} {what} leave none for each of {world} replicas")),
        m => Ok(m),
    }
}

#[pymethods]
impl MultiDatasetSampler {
    #[new]
    #[pyo3(signature = (dataset, *, weights=None, num_samples=None, replacement=true, shuffle=true, generator=None,
                        num_replicas=None, rank=None, distributed_manager=None, seed=0, drop_last=false,
                        order="loader", temperature=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dataset: Bound<'_, MultiDataset>,
        weights: Option<Vec<f64>>,
        num_samples: Option<i64>,
        replacement: bool,
        shuffle: bool,
        generator: Option<&Bound<'_, PyAny>>,
        num_replicas: Option<i64>,
        rank: Option<i64>,
        distributed_manager: Option<&Bound<'_, PyAny>>,
        seed: u64,
        drop_last: bool,
        order: &str,
        temperature: Option<f64>,
    ) -> PyResult<Self> {
        no_generator(generator)?;
        let order = SamplerOrder::parse(order)?;
        let (rank, num_replicas) = ranks(num_replicas, rank, distributed_manager)?;
        let multi = &dataset.get().multi;
        let lengths = multi.child_lens();
        let mut b = rs::MultiDatasetSampler::builder(multi)
            .with_replacement(replacement)
            .with_shuffle(shuffle)
            .with_seed(seed)
            .with_drop_last(drop_last);
        if let Some(w) = &weights {
            b = b.with_weights(w.clone());
        }
        if let Some(t) = temperature {
            b = b.with_temperature(t);
        }
        if let Some(n) = num_samples {
            b = b.with_num_samples(count("num_samples", n, 1)?);
        }
        let global = b.clone().build().map_err(config_error)?;
        let local = b.clone().with_rank(rank, num_replicas).build().map_err(config_error)?;
        let loader = if drop_last && num_replicas > 1 {
            let n = global.counts().iter().sum::<usize>();
            cut(n, num_replicas, "samples").and_then(|m| b.with_num_samples(m).build().map_err(|e| e.to_string()))
        } else {
            Ok(global.clone())
        };
        Ok(MultiDatasetSampler {
            loader,
            num_samples: global.counts().iter().sum(),
            weights: normalised(weights.as_deref(), &lengths, temperature)?,
            dataset: dataset.unbind(),
            global,
            local,
            lengths,
            replacement,
            shuffle,
            seed,
            drop_last,
            rank,
            num_replicas,
            order,
            epoch: Arc::new(EpochCell::default()),
        })
    }

    /// Indices this rank yields per epoch.
    fn __len__(&self) -> usize {
        match (self.order, &self.loader) {
            (SamplerOrder::Loader, Ok(whole)) => whole.rank_len(self.rank, self.num_replicas),
            (SamplerOrder::Loader, Err(_)) => 0,
            (SamplerOrder::Toolkit, _) => self.local.len(),
        }
    }

    /// The current epoch's global indices (this rank's), in the order a
    /// DataLoader given this sampler reads them.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let epoch = self.epoch.epoch();
        let idx = match self.order {
            SamplerOrder::Toolkit => py.detach(|| self.local.indices(epoch)),
            SamplerOrder::Loader => {
                let whole = self.loader.as_ref().map_err(|why| PyValueError::new_err(why.clone()))?;
                let multi = Arc::clone(&self.dataset.get().multi);
                py.detach(|| whole.loader_indices(&*multi, epoch, self.rank, self.num_replicas))
                    .map_err(crate::errors::to_py)?
            }
        };
        epoch_list(py, idx)
    }

    /// `"loader"` or `"toolkit"`: which order iterating yields (and a
    /// DataLoader reads).
    #[getter]
    fn order(&self) -> &'static str {
        self.order.name()
    }

    /// Makes `epoch` the current epoch (its order); a DataLoader over this
    /// sampler runs it next, from its start (unless the loader is in that
    /// epoch already, as after `load_state_dict`).
    fn set_epoch(&self, epoch: u64) {
        self.epoch.set(epoch);
    }

    /// The current epoch.
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch.epoch()
    }

    /// The MultiDataset the indices address.
    #[getter]
    fn dataset(&self, py: Python<'_>) -> Py<MultiDataset> {
        self.dataset.clone_ref(py)
    }

    /// Samples of each child per epoch (all ranks together).
    #[getter]
    fn counts(&self) -> Vec<usize> {
        self.global.counts().to_vec()
    }

    /// Per-child rates, normalised to sum 1.
    #[getter]
    fn weights(&self) -> Vec<f64> {
        self.weights.clone()
    }

    /// The children's lengths.
    #[getter]
    fn lengths(&self) -> Vec<usize> {
        self.lengths.clone()
    }

    /// Global indices per epoch (all ranks together).
    #[getter]
    fn num_samples(&self) -> usize {
        self.num_samples
    }

    #[getter]
    fn replacement(&self) -> bool {
        self.replacement
    }

    #[getter]
    fn shuffle(&self) -> bool {
        self.shuffle
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    #[getter]
    fn drop_last(&self) -> bool {
        self.drop_last
    }

    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    #[getter]
    fn num_replicas(&self) -> usize {
        self.num_replicas
    }

    fn __repr__(&self) -> String {
        format!(
            "atomzarr.MultiDatasetSampler(counts {:?}, replacement={}, shuffle={}, seed={}, rank {} of {})",
            self.global.counts(),
            self.replacement,
            self.shuffle,
            self.seed,
            self.rank,
            self.num_replicas
        )
    }
}

//! `atomzarr.MultiDatasetBatchSampler`: the crate's mixing batch sampler
//! over a `MultiDataset` (exact counts of each store per batch), with the
//! reference toolkit's names and arguments; the sample-level sampler and
//! what both share are in `mixing`.

use std::sync::Arc;

use atomzarr::sampler::{self as rs, BatchSampler as _, EpochPolicy, SamplesPerDataset};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyIterator, PyType};

use crate::mixing::{EpochCell, ForLoader, SamplerOrder, config_error, count, cut, epoch_list, no_generator, ranks};
use crate::multi::MultiDataset;

/// `samples_per_dataset` as the toolkit reads it: ratios when any entry is
/// a float, else exact integer counts.
fn samples_per_dataset(v: &Bound<'_, PyAny>, n: usize) -> PyResult<SamplesPerDataset> {
    let items: Vec<Bound<'_, PyAny>> = v
        .try_iter()
        .map_err(|_| PyTypeError::new_err("samples_per_dataset: a sequence of counts (int) or ratios (float)"))?
        .collect::<PyResult<_>>()?;
    if items.len() != n {
        return Err(PyValueError::new_err(format!(
            "samples_per_dataset: expected {n} per-dataset counts, got {}",
            items.len()
        )));
    }
    let np_floating = v.py().import("numpy").and_then(|np| np.getattr("floating")).ok();
    let is_float = |x: &Bound<'_, PyAny>| {
        x.is_instance_of::<PyFloat>() || np_floating.as_ref().is_some_and(|t| x.is_instance(t).unwrap_or(false))
    };
    if items.iter().any(is_float) {
        let ratios = items
            .iter()
            .map(|x| x.extract::<f64>())
            .collect::<PyResult<Vec<f64>>>()
            .map_err(|_| PyTypeError::new_err("samples_per_dataset: ratios must all be numbers"))?;
        return Ok(SamplesPerDataset::Ratios(ratios));
    }
    let mut counts = Vec::with_capacity(n);
    for x in &items {
        let c: i64 = if x.is_instance_of::<PyBool>() { None } else { x.extract::<i64>().ok() }.ok_or_else(|| {
            PyTypeError::new_err(format!("samples_per_dataset: integer entries must be integral counts, got {x}"))
        })?;
        counts.push(usize::try_from(c).map_err(|_| {
            PyValueError::new_err(format!("samples_per_dataset: counts must be non-negative, got {c}"))
        })?);
    }
    Ok(SamplesPerDataset::Counts(counts))
}

fn epoch_policy(s: &str) -> PyResult<EpochPolicy> {
    match s {
        "dataset_size" => Ok(EpochPolicy::DatasetSize),
        "min_size" => Ok(EpochPolicy::MinSize),
        "max_size" => Ok(EpochPolicy::MaxSize),
        other => Err(PyValueError::new_err(format!(
            "epoch_policy must be one of 'dataset_size', 'min_size' or 'max_size', got {other:?}"
        ))),
    }
}

/// Batches of global indices of a `MultiDataset`, each holding a fixed
/// number of samples of each child (`DataLoader(..., batch_sampler=...)`).
///
/// Every batch holds exactly `samples_per_dataset[d]` samples of child
/// `d`: integer counts summing to `batch_size`, or (when any entry is a
/// float) ratios allocated over `batch_size` by largest remainder; or
/// `weights` split the same way (default: the child lengths), tempered by
/// `temperature=T` when given (rates raised to `1/T`, normalised); the
/// two are exclusive. `num_batches` per epoch, or from `epoch_policy`:
/// "dataset_size" (`ceil(len(dataset) / batch_size)` with replacement,
/// else as "min_size"), "min_size" (until the first contributing child
/// is used up), "max_size" (until the largest is, oversampling the
/// others: with `replacement=False` a ValueError when that is more
/// batches than "min_size" gives). Without `replacement`, more batches
/// than the children hold is a ValueError. `shuffle`: each child's
/// order and the order inside each batch, reproducible per `(seed,
/// epoch)`. `num_replicas` / `rank` (or an initialized
/// `distributed_manager`): this rank's share of the batches. `generator`
/// is not supported (pass `seed`).
///
/// Iterating the sampler yields the batches a DataLoader given it reads.
/// With `order="loader"` (the default), the loader fits the sampler to
/// the MultiDataset: the epoch's batches dealt to the ranks (a rank may
/// get one more than another; with `drop_last` the epoch is first cut to
/// a multiple of `num_replicas`, so that every rank gets as many), each
/// rank drawing from its own region of each store, a store larger than
/// its share of the MultiDataset's cache drawn through a block pool
/// (every batch still holds exactly its counts); on one rank, with every
/// store fitting its share, these are the mixing batches themselves. With
/// `order="toolkit"` they are the toolkit's (every `num_replicas`-th
/// batch, the epoch padded from its start or, with `drop_last`, cut to a
/// multiple of `num_replicas`), which a DataLoader reads as they stand.
#[pyclass(name = "MultiDatasetBatchSampler", module = "atomzarr", frozen)]
pub struct MultiDatasetBatchSampler {
    dataset: Py<MultiDataset>,
    /// The whole epoch.
    global: rs::MultiDatasetBatchSampler,
    /// What a DataLoader splits among the ranks (see `MultiDatasetSampler`).
    loader: Result<rs::MultiDatasetBatchSampler, String>,
    local: rs::MultiDatasetBatchSampler,
    lengths: Vec<usize>,
    batch_size: usize,
    epoch_policy: String,
    replacement: bool,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    rank: usize,
    num_replicas: usize,
    order: SamplerOrder,
    epoch: Arc<EpochCell>,
}

impl MultiDatasetBatchSampler {
    pub(crate) fn for_loader(&self) -> PyResult<ForLoader<rs::MultiDatasetBatchSampler>> {
        let whole = self.loader.clone().map_err(PyValueError::new_err)?;
        let mut describe = serde_json::json!({
            "kind": "MultiDatasetBatchSampler",
            "lengths": self.lengths,
            "samples_per_dataset": whole.samples_per_dataset(),
            "num_batches": whole.num_batches(),
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

    #[allow(clippy::too_many_arguments)]
    fn build(
        dataset: Bound<'_, MultiDataset>,
        batch_size: i64,
        weights: Option<Vec<f64>>,
        per_dataset: Option<&Bound<'_, PyAny>>,
        num_batches: Option<i64>,
        policy: &str,
        replacement: bool,
        shuffle: bool,
        generator: Option<&Bound<'_, PyAny>>,
        ranks: (usize, usize),
        seed: u64,
        drop_last: bool,
        order: &str,
        temperature: Option<f64>,
    ) -> PyResult<Self> {
        no_generator(generator)?;
        let order = SamplerOrder::parse(order)?;
        let batch_size = count("batch_size", batch_size, 1)?;
        let per_dataset = per_dataset.filter(|v| !v.is_none());
        if weights.is_some() && per_dataset.is_some() {
            return Err(PyValueError::new_err("weights and samples_per_dataset are mutually exclusive"));
        }
        let multi = &dataset.get().multi;
        let lengths = multi.child_lens();
        let mut b = rs::MultiDatasetBatchSampler::builder(multi, batch_size)
            .with_epoch_policy(epoch_policy(policy)?)
            .with_replacement(replacement)
            .with_shuffle(shuffle)
            .with_seed(seed)
            .with_drop_last(drop_last);
        if let Some(w) = weights {
            b = b.with_weights(w);
        }
        if let Some(t) = temperature {
            b = b.with_temperature(t);
        }
        if let Some(v) = per_dataset {
            b = b.with_samples_per_dataset(samples_per_dataset(v, lengths.len())?);
        }
        if let Some(n) = num_batches {
            b = b.with_num_batches(count("num_batches", n, 1)?);
        }
        let global = b.clone().build().map_err(config_error)?;
        let local = b.clone().with_rank(ranks.0, ranks.1).build().map_err(config_error)?;
        let loader = if drop_last && ranks.1 > 1 {
            cut(global.num_batches(), ranks.1, "batches")
                .and_then(|m| b.with_num_batches(m).build().map_err(|e| e.to_string()))
        } else {
            Ok(global.clone())
        };
        Ok(MultiDatasetBatchSampler {
            loader,
            dataset: dataset.unbind(),
            global,
            local,
            lengths,
            batch_size,
            epoch_policy: policy.to_string(),
            replacement,
            shuffle,
            seed,
            drop_last,
            rank: ranks.0,
            num_replicas: ranks.1,
            order,
            epoch: Arc::new(EpochCell::default()),
        })
    }
}

#[pymethods]
impl MultiDatasetBatchSampler {
    #[new]
    #[pyo3(signature = (dataset, batch_size, *, weights=None, samples_per_dataset=None, num_batches=None,
                        epoch_policy="dataset_size", replacement=true, shuffle=true, generator=None,
                        num_replicas=None, rank=None, distributed_manager=None, seed=0, drop_last=false,
                        order="loader", temperature=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dataset: Bound<'_, MultiDataset>,
        batch_size: i64,
        weights: Option<Vec<f64>>,
        samples_per_dataset: Option<&Bound<'_, PyAny>>,
        num_batches: Option<i64>,
        epoch_policy: &str,
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
        let ranks = ranks(num_replicas, rank, distributed_manager)?;
        Self::build(
            dataset,
            batch_size,
            weights,
            samples_per_dataset,
            num_batches,
            epoch_policy,
            replacement,
            shuffle,
            generator,
            ranks,
            seed,
            drop_last,
            order,
            temperature,
        )
    }

    /// A batch sampler with equal rates for every child (`weights` all 1).
    #[classmethod]
    #[pyo3(signature = (dataset, batch_size, *, num_batches=None, epoch_policy="dataset_size", replacement=true,
                        shuffle=true, generator=None, num_replicas=None, rank=None, distributed_manager=None,
                        seed=0, drop_last=false, order="loader"))]
    #[allow(clippy::too_many_arguments)]
    fn balanced(
        _cls: &Bound<'_, PyType>,
        dataset: Bound<'_, MultiDataset>,
        batch_size: i64,
        num_batches: Option<i64>,
        epoch_policy: &str,
        replacement: bool,
        shuffle: bool,
        generator: Option<&Bound<'_, PyAny>>,
        num_replicas: Option<i64>,
        rank: Option<i64>,
        distributed_manager: Option<&Bound<'_, PyAny>>,
        seed: u64,
        drop_last: bool,
        order: &str,
    ) -> PyResult<Self> {
        let ranks = ranks(num_replicas, rank, distributed_manager)?;
        let n = dataset.get().child_lens().len();
        Self::build(
            dataset,
            batch_size,
            Some(vec![1.0; n]),
            None,
            num_batches,
            epoch_policy,
            replacement,
            shuffle,
            generator,
            ranks,
            seed,
            drop_last,
            order,
            None,
        )
    }

    /// Batches this rank yields per epoch.
    fn __len__(&self) -> usize {
        match (self.order, &self.loader) {
            (SamplerOrder::Loader, Ok(whole)) => whole.rank_len(self.rank, self.num_replicas),
            (SamplerOrder::Loader, Err(_)) => 0,
            (SamplerOrder::Toolkit, _) => self.local.len(),
        }
    }

    /// The current epoch's batches (this rank's), lists of global indices,
    /// as a DataLoader given this sampler reads them.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        let epoch = self.epoch.epoch();
        let batches = match self.order {
            SamplerOrder::Toolkit => py.detach(|| self.local.batches(epoch)),
            SamplerOrder::Loader => {
                let whole = self.loader.as_ref().map_err(|why| PyValueError::new_err(why.clone()))?;
                let multi = Arc::clone(&self.dataset.get().multi);
                py.detach(|| whole.loader_batches(&*multi, epoch, self.rank, self.num_replicas))
                    .map_err(crate::errors::to_py)?
            }
        };
        epoch_list(py, batches)
    }

    /// `"loader"` or `"toolkit"`: which batches iterating yields (and a
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

    /// Samples of each child in every batch.
    #[getter]
    fn samples_per_dataset(&self) -> Vec<usize> {
        self.global.samples_per_dataset().to_vec()
    }

    /// Batches per epoch (all ranks together).
    #[getter]
    fn num_batches(&self) -> usize {
        self.global.num_batches()
    }

    #[getter]
    fn batch_size(&self) -> usize {
        self.batch_size
    }

    #[getter]
    fn epoch_policy(&self) -> &str {
        &self.epoch_policy
    }

    /// The children's lengths.
    #[getter]
    fn lengths(&self) -> Vec<usize> {
        self.lengths.clone()
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
            "atomzarr.MultiDatasetBatchSampler(samples_per_dataset {:?}, {} batches, replacement={}, \
             shuffle={}, seed={}, rank {} of {})",
            self.global.samples_per_dataset(),
            self.global.num_batches(),
            self.replacement,
            self.shuffle,
            self.seed,
            self.rank,
            self.num_replicas
        )
    }
}

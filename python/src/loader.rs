//! `atomzarr.DataLoader`: the crate's DataLoader (same plan, fused windows
//! read ahead on Rust threads, resumable state) yielding host batches as
//! numpy arrays, over one store (a `Reader`) or a mixture (a
//! `MultiDataset`, optionally with a mixing sampler). Reads run with the
//! GIL released.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use atomzarr::pipeline::HostIter;
use atomzarr::sampler::{ChunkShuffleSampler, RandomSampler};
use atomzarr::{AtomicDataZarrReader, Dataset, LoaderState, MultiReader};
use burn::tensor::Device;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::batch_sampler::MultiDatasetBatchSampler;
use crate::convert::batch_dict;
use crate::errors::{AtomzarrError, to_py};
use crate::mixing::{EpochCell, ForLoader, MultiDatasetSampler};
use crate::multi::MultiDataset;
use crate::reader::Reader;

type StoreLoader = atomzarr::DataLoader<Arc<AtomicDataZarrReader>>;
type MultiLoader = atomzarr::DataLoader<Arc<MultiReader>>;

/// The loader over one store or over a mixture: two concrete loaders, so
/// that the one-store path stays as it is (no dynamic reader in between).
enum Inner {
    Store(StoreLoader),
    Multi(MultiLoader),
}

/// One epoch of either loader.
enum Iter {
    Store(HostIter<Arc<AtomicDataZarrReader>>),
    Multi(HostIter<Arc<MultiReader>>),
}

/// `$body` with `$l` bound to whichever loader (or iterator) `$v` holds.
macro_rules! each {
    ($t:ident, $v:expr, $l:ident => $body:expr) => {
        match $v {
            $t::Store($l) => $body,
            $t::Multi($l) => $body,
        }
    };
}

/// What orders the epoch, from the `sampler` / `batch_sampler` arguments.
enum Order {
    /// `shuffle` alone decides (the loader's default order).
    Default,
    /// `sampler="random" | "sequential" | "sequential-interleaved" | "chunk-shuffle"`.
    Named(String),
    /// A `MultiDatasetSampler`.
    Mixing(ForLoader<atomzarr::sampler::MultiDatasetSampler>),
    /// A `MultiDatasetBatchSampler`.
    Batches(ForLoader<atomzarr::sampler::MultiDatasetBatchSampler>),
}

/// The loader's own arguments.
struct Args {
    batch_size: usize,
    shuffle: bool,
    seed: u64,
    prefetch_factor: usize,
    rank: usize,
    world_size: usize,
    cutoff: Option<f64>,
    drop_last: bool,
    num_workers: usize,
}

/// The loader over `ds` as `args` and `order` say.
fn build<R: atomzarr::Reader + 'static>(
    ds: Dataset<R>,
    args: &Args,
    order: Order,
) -> PyResult<atomzarr::DataLoader<R>> {
    let ds = match args.cutoff {
        Some(c) => ds.with_cutoff(c).map_err(to_py)?,
        None => ds,
    };
    let len = ds.len();
    let reader = Arc::clone(ds.reader());
    let mut b = atomzarr::DataLoader::<R>::builder(ds)
        .with_seed(args.seed)
        .with_prefetch_factor(args.prefetch_factor)
        .with_rank(args.rank, args.world_size)
        .with_num_workers(args.num_workers)
        .with_int64(true);
    if let Order::Batches(f) = order {
        b = b.with_batch_sampler(f.sampler);
        return b.build(&Device::flex()).map_err(to_py);
    }
    b = b.with_batch_size(args.batch_size).with_drop_last(args.drop_last);
    match (order, args.shuffle) {
        (Order::Default, s) => b = b.with_shuffle(s),
        (Order::Mixing(f), _) => b = b.with_sampler(f.sampler),
        // A full permutation on any store, as asked (`shuffle=True`
        // alone picks the block pool on a store larger than the cache).
        (Order::Named(n), _) if n == "random" => b = b.with_sampler(RandomSampler::new(len, args.seed)),
        (Order::Named(n), false) if n == "sequential" => {}
        (Order::Named(n), false) if n == "sequential-interleaved" => {
            b = b.with_rank_split(atomzarr::RankSplit::Interleaved);
        }
        (Order::Named(n), true) if n.starts_with("sequential") => {
            return Err(PyValueError::new_err(format!("sampler={n:?} with shuffle=True: choose one")));
        }
        (Order::Named(n), _) if n == "chunk-shuffle" => {
            let s = ChunkShuffleSampler::for_reader(&*reader, args.batch_size).map_err(to_py)?.with_seed(args.seed);
            b = b.with_sampler(s);
        }
        (Order::Named(other), _) => {
            return Err(PyValueError::new_err(format!(
                "sampler {other:?} is not one of \"random\", \"sequential\", \"sequential-interleaved\", \"chunk-shuffle\""
            )));
        }
        (Order::Batches(_), _) => {}
    }
    b.build(&Device::flex()).map_err(to_py)
}

/// The order the `sampler` and `batch_sampler` arguments ask for, checked
/// against the loader's other arguments.
fn order(sampler: Option<&Bound<'_, PyAny>>, batch_sampler: Option<&Bound<'_, PyAny>>, args: &Args) -> PyResult<Order> {
    let sampler = sampler.filter(|s| !s.is_none());
    let batch_sampler = batch_sampler.filter(|s| !s.is_none());
    if let Some(bs) = batch_sampler {
        let bs = bs.cast::<MultiDatasetBatchSampler>().map_err(|_| {
            PyTypeError::new_err(format!("batch_sampler: an atomzarr.MultiDatasetBatchSampler, not {}", type_name(bs)))
        })?;
        if sampler.is_some() {
            return Err(PyValueError::new_err("batch_sampler is mutually exclusive with sampler"));
        }
        if args.shuffle {
            return Err(PyValueError::new_err("batch_sampler is mutually exclusive with shuffle=True"));
        }
        if args.batch_size != 1 {
            return Err(PyValueError::new_err("batch_size: a batch_sampler makes the batches; leave batch_size at 1"));
        }
        if args.drop_last {
            return Err(PyValueError::new_err(
                "drop_last: a batch_sampler makes the batches (its own drop_last applies to ranks)",
            ));
        }
        return Ok(Order::Batches(bs.get().for_loader()?));
    }
    let Some(s) = sampler else { return Ok(Order::Default) };
    if let Ok(m) = s.cast::<MultiDatasetSampler>() {
        if args.shuffle {
            return Err(PyValueError::new_err(
                "sampler=MultiDatasetSampler with shuffle=True: the sampler orders the epoch (its own shuffle)",
            ));
        }
        return Ok(Order::Mixing(m.get().for_loader()?));
    }
    if s.cast::<MultiDatasetBatchSampler>().is_ok() {
        return Err(PyTypeError::new_err("sampler: a MultiDatasetBatchSampler is passed as batch_sampler="));
    }
    match s.extract::<String>() {
        Ok(name) => Ok(Order::Named(name)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "sampler: \"random\", \"sequential\", \"chunk-shuffle\" or an atomzarr.MultiDatasetSampler, not {}",
            type_name(s)
        ))),
    }
}

fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// A mixing sampler's ranks become the loader's (the loader reads each
/// rank's part of the whole epoch, or with `split_by_loader` off the
/// sampler's part as it stands, on one rank); the loader's own `rank` /
/// `world_size` may repeat them but not differ.
fn sampler_ranks(ranks: (usize, usize), split_by_loader: bool, args: &mut Args) -> PyResult<()> {
    let (rank, world) = ranks;
    if world == 1 {
        return Ok(());
    }
    let own = (args.rank, args.world_size);
    if own != (0, 1) && own != (rank, world) {
        return Err(PyValueError::new_err(format!(
            "rank/world_size ({}, {}) differ from the sampler's rank {rank} of num_replicas {world}",
            own.0, own.1
        )));
    }
    (args.rank, args.world_size) = if split_by_loader { (rank, world) } else { (0, 1) };
    Ok(())
}

/// The Python sampler's epoch, which the loader follows: a `set_epoch` on
/// the sampler makes that epoch the loader's next one.
struct Follow {
    cell: Arc<EpochCell>,
    /// The sampler's `set_epoch` generation last taken.
    seen: AtomicU64,
}

/// Batches of a reader's (or a mixture's) samples, read ahead in the background.
///
/// `reader`: a `Reader` (one store) or a `MultiDataset` (several).
/// `shuffle`: a new order every epoch, from `seed`: a full permutation
/// when the decoded store fits the reader's cache, else the block pool
/// (the store's chunk blocks permuted, batches drawn from a pool of
/// blocks sized from the cache: each chunk decoded about once per
/// epoch); the choice is logged. `sampler`: "random" (a full
/// permutation per epoch, whatever the store), "sequential" (index
/// order; with ranks, a contiguous range each, so the ranks together
/// decode the store once), "sequential-interleaved" (index order split
/// as the toolkit splits it: rounds of `world_size * batch_size`, every
/// rank decoding the whole store), "chunk-shuffle" (the block pool with
/// 16 blocks), or, over a
/// MultiDataset, a `MultiDatasetSampler` (batches of `batch_size` of its
/// order). `batch_sampler`: a `MultiDatasetBatchSampler` over the
/// MultiDataset (it makes the batches: `batch_size`, `shuffle` and
/// `drop_last` stay at their defaults). Default order: as `shuffle`
/// says. `prefetch_factor` batches are read in one fused read, two reads
/// kept in flight. `rank`/`world_size`: this process's part of every
/// epoch; a mixing sampler built with `num_replicas`/`rank` gives them
/// (the loader then reads this rank's part of the sampler's whole epoch).
/// A mixing sampler's `set_epoch(e)` makes `e` the loader's next epoch,
/// as the loader's own `set_epoch` does. `cutoff`: build `neighbor_list`
/// and `shifts` at this cutoff (Å) while loading, replacing stored edges.
#[pyclass(name = "DataLoader", module = "atomzarr", frozen)]
pub struct DataLoader {
    inner: Inner,
    follow: Option<Follow>,
    /// The mixing sampler's description, saved with the state and checked
    /// when a state is loaded.
    mixing: Option<serde_json::Value>,
}

/// The key of the state dict that describes a mixing sampler.
const MIXING_KEY: &str = "mixing_sampler";

impl DataLoader {
    /// Takes a `set_epoch` made on the sampler since the last look, unless
    /// the loader is in that epoch already (as after `load_state_dict`).
    fn follow_sampler(&self) {
        let Some(f) = &self.follow else { return };
        let g = f.cell.generation();
        if f.seen.swap(g, Ordering::SeqCst) != g {
            let e = f.cell.epoch();
            each!(Inner, &self.inner, l => if l.epoch() != e {
                l.set_epoch(e);
            });
        }
    }

    /// Marks every sampler setting made so far as taken (the loader's own
    /// setting comes after it).
    fn overrule_sampler(&self) {
        if let Some(f) = &self.follow {
            f.seen.store(f.cell.generation(), Ordering::SeqCst);
        }
    }
}

#[pymethods]
impl DataLoader {
    #[new]
    #[pyo3(signature = (reader, batch_size=1, shuffle=false, seed=0, prefetch_factor=2, sampler=None,
                        rank=0, world_size=1, cutoff=None, drop_last=false, num_workers=1, batch_sampler=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        reader: &Bound<'_, PyAny>,
        batch_size: usize,
        shuffle: bool,
        seed: u64,
        prefetch_factor: usize,
        sampler: Option<&Bound<'_, PyAny>>,
        rank: usize,
        world_size: usize,
        cutoff: Option<f64>,
        drop_last: bool,
        num_workers: usize,
        batch_sampler: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut args =
            Args { batch_size, shuffle, seed, prefetch_factor, rank, world_size, cutoff, drop_last, num_workers };
        let order = order(sampler, batch_sampler, &args)?;
        if let Ok(r) = reader.cast::<Reader>() {
            if matches!(order, Order::Mixing(_) | Order::Batches(_)) {
                return Err(PyValueError::new_err(
                    "a mixing sampler reads a MultiDataset: pass the MultiDataset it was built on as the loader's \
                     dataset",
                ));
            }
            let inner = Inner::Store(build(r.get().ds.clone(), &args, order)?);
            return Ok(DataLoader { inner, follow: None, mixing: None });
        }
        let Ok(m) = reader.cast::<MultiDataset>() else {
            return Err(PyTypeError::new_err(format!(
                "reader: an atomzarr.Reader or atomzarr.MultiDataset, not {}",
                type_name(reader)
            )));
        };
        let m = m.get();
        let (follow, mixing) = match &order {
            Order::Mixing(ForLoader { lengths, ranks, split_by_loader, describe, epoch, .. })
            | Order::Batches(ForLoader { lengths, ranks, split_by_loader, describe, epoch, .. }) => {
                if *lengths != m.child_lens() {
                    return Err(PyValueError::new_err(format!(
                        "the sampler was built for datasets of lengths {lengths:?}, this MultiDataset's are {:?}",
                        m.child_lens()
                    )));
                }
                sampler_ranks(*ranks, *split_by_loader, &mut args)?;
                // A setting made before the loader was built is taken too.
                let follow = Follow { cell: Arc::clone(epoch), seen: AtomicU64::new(0) };
                (Some(follow), Some(describe.clone()))
            }
            _ => (None, None),
        };
        let inner = Inner::Multi(build(m.ds.clone(), &args, order)?);
        Ok(DataLoader { inner, follow, mixing })
    }

    /// Batches in the next epoch (of this rank).
    fn __len__(&self) -> usize {
        self.follow_sampler();
        each!(Inner, &self.inner, l => l.len())
    }

    /// One epoch: batches as dicts of numpy arrays (see `Reader.read_many`).
    fn __iter__(&self) -> LoaderIter {
        self.follow_sampler();
        let it = match &self.inner {
            Inner::Store(l) => Iter::Store(l.iter_host()),
            Inner::Multi(l) => Iter::Multi(l.iter_host()),
        };
        LoaderIter { inner: Mutex::new(Some(it)) }
    }

    /// Makes the next epoch `epoch` (its shuffle), from its start.
    fn set_epoch(&self, epoch: u64) {
        self.overrule_sampler();
        each!(Inner, &self.inner, l => l.set_epoch(epoch));
    }

    /// The epoch the next iteration runs.
    #[getter]
    fn epoch(&self) -> u64 {
        self.follow_sampler();
        each!(Inner, &self.inner, l => l.epoch())
    }

    /// Where the loader is (epoch, position; and the order it describes,
    /// a mixing sampler's included), as a dict to save with a checkpoint.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.follow_sampler();
        let state = each!(Inner, &self.inner, l => l.state());
        let mut v = serde_json::to_value(state).map_err(|e| PyValueError::new_err(e.to_string()))?;
        if let (Some(m), Some(obj)) = (&self.mixing, v.as_object_mut()) {
            obj.insert(MIXING_KEY.to_string(), m.clone());
        }
        py.import("json")?.call_method1("loads", (v.to_string(),))
    }

    /// Makes the next iteration resume at `state` (from `state_dict`): the
    /// rest of that epoch, batch for batch. A state of another order (seed,
    /// sampler, its rates or counts, batch size) is an AtomzarrError.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let json: String = py.import("json")?.call_method1("dumps", (state,))?.extract()?;
        let mut v: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| PyValueError::new_err(format!("loader state: {e}")))?;
        let saved = v.as_object_mut().and_then(|o| o.remove(MIXING_KEY));
        if saved != self.mixing {
            let show = |m: &Option<serde_json::Value>| m.as_ref().map_or_else(|| "none".to_string(), |m| m.to_string());
            return Err(AtomzarrError::new_err(format!(
                "loader state: saved with mixing sampler {}, this loader's is {}",
                show(&saved),
                show(&self.mixing)
            )));
        }
        let state: LoaderState =
            serde_json::from_value(v).map_err(|e| PyValueError::new_err(format!("loader state: {e}")))?;
        self.overrule_sampler();
        each!(Inner, &self.inner, l => l.load_state(&state)).map_err(to_py)
    }
}

/// One epoch of a `DataLoader`.
#[pyclass(module = "atomzarr", frozen)]
pub struct LoaderIter {
    inner: Mutex<Option<Iter>>,
}

#[pymethods]
impl LoaderIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let next = py.detach(|| {
            let mut g = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let item = g.as_mut().and_then(|it| each!(Iter, it, i => i.next()));
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
        g.as_ref().map_or((0, 0), |it| each!(Iter, it, i => i.progress()))
    }
}

//! Saving and loading a [`DataLoader`]'s place in its epochs
//! ([`LoaderState`]), and the resumes on other numbers of ranks a loaded
//! state brings (see [`ranked`](super::ranked)).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::pipeline::DataLoader;
use crate::pipeline::in_order::RankSplit;
use crate::pipeline::ranked::Resume;
use crate::pipeline::schedule::Clock;
use crate::pipeline::shuffle::ShuffleKind;
use crate::source::Reader;
use crate::threads::lock;

impl<R: Reader + 'static> DataLoader<R> {
    /// Where this loader is: the epoch being iterated and how much of it all
    /// ranks consumed (counted from the batches this handle's iterator
    /// yielded), or the next epoch's start once an epoch ended. Save it with
    /// a checkpoint; [`load_state`](Self::load_state) resumes there. A
    /// slice made by Burn's `slice` reports its epoch's start while the
    /// epoch runs (burn-train checkpoints between epochs).
    pub fn state(&self) -> LoaderState {
        let clock = *lock(&self.clock);
        let (epoch, position, step) = {
            let mut c = lock(&self.cursor);
            c.sync(&clock);
            match c.live {
                Some(l) if l.yielded < l.total && self.view.slice.is_none() => {
                    (l.epoch, self.order.advance(self.view, l.start, l.yielded), l.yielded)
                }
                Some(l) if l.yielded < l.total => (l.epoch, l.start, 0),
                Some(l) => (l.epoch + 1, 0, 0),
                None => (c.next_epoch, c.next_position, 0),
            }
        };
        let resume = self.resume_of(epoch);
        LoaderState {
            epoch,
            position,
            step,
            seed: self.seed,
            sampler: self.order.name().to_string(),
            pool_blocks: self.order.shuffle().and_then(|s| s.pool_blocks()),
            child_pool_blocks: self.order.mixture().map(|m| m.pools()),
            child_pool_runs: None,
            order_world_size: self
                .order
                .is_ranked()
                .then(|| resume.as_ref().map_or(self.view.world_size, |r| r.base_world)),
            resumed: resume.map(|r| r.cuts).unwrap_or_default(),
            epoch_len: self.order.global_len(),
            batch_size: self.order.batch_size(),
            world_size: self.view.world_size,
            rank: self.view.rank,
        }
    }

    /// Makes the next `iter()` (of this loader and its clones, copies and
    /// slices) resume at `state`: its epoch, from its position. The state
    /// may come from a run with another number of ranks; it must describe
    /// the same order (sampler, seed, epoch length, batch size).
    ///
    /// Where each rank reads its own part of the data (the block pool of
    /// `with_shuffle(true)`, a fitted mixing sampler: the state's
    /// [`order_world_size`](LoaderState::order_world_size)), a state saved on
    /// `W` ranks after every rank took `s` batches and loaded on `W'` ranks
    /// goes on with the rest of the `W` ranks' orders, laid end to end in
    /// rank order and cut into `W'` contiguous parts of equal length: each
    /// new rank reads whole stretches of a few old ranks' orders as they
    /// were drawn, so it decodes only those ranks' regions, and no sample is
    /// read twice or skipped. The default shuffle's block pool cuts the
    /// samples each old rank had left, in storage order, and each new rank
    /// draws its part through a pool of its own (a new rank then decodes
    /// the rests it takes over about once, where continuing several old
    /// pools decoded a pool per stretch). The pool sizes in the state are
    /// followed, whatever this loader's cache.
    ///
    /// # Errors
    /// [`Error::Config`] naming what differs when `state` describes another
    /// order (sampler, seed, epoch length or batch size).
    pub fn load_state(&self, state: &LoaderState) -> Result<()> {
        let here = self.state();
        // A state from before the loader fitted mixtures, between epochs:
        // the next epoch is planned as this loader plans it.
        let lenient = LoaderState {
            child_pool_blocks: state
                .child_pool_blocks
                .clone()
                .or_else(|| state.child_pool_runs.as_ref().map(|runs| crate::sampler::runs_as_chunk_blocks(runs)))
                .or_else(|| here.child_pool_blocks.clone().filter(|_| state.position == 0)),
            child_pool_runs: None,
            // Between epochs, an in-order epoch is split as this loader
            // splits it (the next epoch is planned anew).
            sampler: match self.order.in_order() {
                Some(_) if state.position == 0 && RankSplit::from_name(&state.sampler).is_some() => {
                    here.sampler.clone()
                }
                _ => state.sampler.clone(),
            },
            ..state.clone()
        };
        let state = &lenient;
        // The default shuffle, an in-order split and a mixture follow the
        // saved kind and pool sizes; the rest must match.
        let followed = LoaderState {
            sampler: state.sampler.clone(),
            pool_blocks: state.pool_blocks,
            child_pool_blocks: state.child_pool_blocks.clone(),
            ..here.clone()
        };
        if state.check_same_order(&followed).is_ok() {
            if let Some(s) = self.order.shuffle()
                && !ShuffleKind::from_name(&state.sampler).is_some_and(|k| s.adopt(k, state.pool_blocks))
            {
                return Err(Error::StateMismatch {
                    what: "sampler".into(),
                    saved: state.sampler.clone(),
                    here: here.sampler,
                });
            }
            if let Some(s) = self.order.in_order()
                && !s.adopt(&state.sampler)
            {
                return Err(Error::StateMismatch {
                    what: "sampler".into(),
                    saved: state.sampler.clone(),
                    here: here.sampler,
                });
            }
            if let (Some(m), Some(pools)) = (self.order.mixture(), &state.child_pool_blocks)
                && !m.adopt(pools)
            {
                return Err(Error::StateMismatch {
                    what: "pool blocks per dataset".into(),
                    saved: format!("{pools:?}"),
                    here: format!("{:?}", here.child_pool_blocks),
                });
            }
        }
        state.check_same_order(&self.state())?;
        // A ranked order saved mid-epoch on other ranks: the new ranks take
        // over the old ranks' parts (see `ranked`). A new epoch (position 0)
        // is planned for this run's ranks.
        let world = self.view.world_size;
        let resume = state.order_world_size.filter(|_| state.position > 0 && self.order.is_ranked()).and_then(|w0| {
            let mut cuts = state.resumed.clone();
            if cuts.last().map_or(w0, |c| c.1) != world {
                cuts.push((state.position, world));
            }
            (!cuts.is_empty()).then_some(Resume { epoch: state.epoch, base_world: w0, cuts })
        });
        *lock(&self.resume) = resume;
        *lock(&self.schedule_cache) = None;
        let mut clock = lock(&self.clock);
        *clock = Clock { epoch: state.epoch(), position: state.position(), generation: clock.generation + 1 };
        Ok(())
    }

    /// The resumes with other numbers of ranks that apply to `epoch`.
    pub(super) fn resume_of(&self, epoch: u64) -> Option<Resume> {
        lock(&self.resume).clone().filter(|r| r.epoch == epoch)
    }
}

/// Where a [`DataLoader`](crate::DataLoader) is in its epochs, saved with a
/// checkpoint and restored with
/// [`DataLoader::load_state`](crate::DataLoader::load_state). Serializes with
/// serde (JSON in the examples).
///
/// `position` counts what *all ranks together* consumed of the epoch's global
/// order (samples with `batch_size`, batches with a `batch_sampler`), so a
/// state taken on one rank of `world_size` ranks, at a step every rank
/// reached (as a data-parallel checkpoint is), resumes with any number of
/// ranks: the rest of the epoch is split among the new ranks, no sample read
/// twice or skipped. `seed`, `sampler`, `epoch_len` and `batch_size` describe
/// the order; loading a state into a loader whose order differs is an error.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use burn::tensor::Device;
/// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, LoaderState, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("r.zarr");
/// let samples: Vec<AtomicData> = (1..=10).map(|n| AtomicData::new(vec![1; n], vec![[0.0; 3]; n]).unwrap()).collect();
/// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
/// let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
/// let build = || DataLoader::builder(ds.clone()).with_batch_size(3).with_shuffle(true).with_seed(4).build(&Device::flex());
/// let a = build()?;
/// let mut it = a.iter();
/// let first = it.next().unwrap()?.indices;
/// let saved = serde_json::to_string(&a.state())?;
/// let b = build()?;
/// b.load_state(&serde_json::from_str::<LoaderState>(&saved)?)?;
/// let rest: Vec<Vec<usize>> = b.iter().map(|x| x.map(|x| x.indices)).collect::<atomzarr::Result<_>>()?;
/// let whole: Vec<Vec<usize>> = build()?.iter().map(|x| x.map(|x| x.indices)).collect::<atomzarr::Result<_>>()?;
/// assert_eq!([vec![first], rest].concat(), whole);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    pub(crate) epoch: u64,
    pub(crate) position: usize,
    pub(crate) step: usize,
    pub(crate) seed: Option<u64>,
    pub(crate) sampler: String,
    pub(crate) epoch_len: usize,
    pub(crate) batch_size: Option<usize>,
    pub(crate) world_size: usize,
    pub(crate) rank: usize,
    /// Blocks in the pool of the block-pool shuffle.
    #[serde(default)]
    pub(crate) pool_blocks: Option<usize>,
    /// A mixing sampler's pool size per dataset, in chunk blocks (`None`
    /// for a dataset walked in a permutation).
    #[serde(default, rename = "child_pool_chunk_blocks", skip_serializing_if = "Option::is_none")]
    pub(crate) child_pool_blocks: Option<Vec<Option<usize>>>,
    /// The same counted in runs of four chunk blocks, as the key
    /// `child_pool_blocks` holds them: read, never written.
    #[serde(default, rename = "child_pool_blocks", skip_serializing)]
    pub(crate) child_pool_runs: Option<Vec<Option<usize>>>,
    /// The number of ranks the epoch's order was planned for, when each
    /// rank reads its own part of the data (the block pool, a mixture).
    #[serde(default)]
    pub(crate) order_world_size: Option<usize>,
    /// Resumes within this epoch on other numbers of ranks: `(position,
    /// ranks)`, in order (see [`DataLoader::load_state`](crate::DataLoader::load_state)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) resumed: Vec<(usize, usize)>,
}

impl LoaderState {
    /// The epoch the loader is in (or starts next, at position 0).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    /// Global position in the epoch: samples (fixed-size batches) or
    /// batches (a batch sampler) consumed by all ranks together.
    pub fn position(&self) -> usize {
        self.position
    }
    /// Batches the saving rank had taken in this epoch.
    pub fn step(&self) -> usize {
        self.step
    }
    /// The shuffle seed, `None` when the order is not shuffled by the loader.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }
    /// What ordered the epoch: `sequential_ranges` (index order, a
    /// contiguous range per rank), `sequential` (index order in the
    /// toolkit's interleaved rounds), `random`, `block-pool`, `sampler`,
    /// `batch_sampler`.
    pub fn sampler(&self) -> &str {
        &self.sampler
    }
    /// Global epoch length in position units.
    pub fn epoch_len(&self) -> usize {
        self.epoch_len
    }
    /// Samples per batch (`None` with a batch sampler).
    pub fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }
    /// Ranks of the run that saved it.
    pub fn world_size(&self) -> usize {
        self.world_size
    }
    /// Rank that saved it.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Blocks in the pool of the block-pool shuffle (`None` for any other
    /// order).
    pub fn pool_blocks(&self) -> Option<usize> {
        self.pool_blocks
    }
    /// The number of ranks the epoch's order was planned for, when each
    /// rank reads its own part of the data (the block pool, a mixture); a
    /// resume with another number of ranks hands those parts to the new
    /// ranks (see [`DataLoader::load_state`](crate::DataLoader::load_state)).
    pub fn order_world_size(&self) -> Option<usize> {
        self.order_world_size
    }

    /// A mixing sampler's pool size per dataset in chunk blocks (`None`
    /// for a dataset walked in a permutation), when a loader fitted one to
    /// its reader.
    pub fn child_pool_blocks(&self) -> Option<&[Option<usize>]> {
        self.child_pool_blocks.as_deref()
    }

    /// The resumes within this epoch on other numbers of ranks before this
    /// state: `(position, ranks)`, in order.
    pub fn resumed(&self) -> &[(usize, usize)] {
        &self.resumed
    }

    /// Errors ([`Error::StateMismatch`]) unless `self` describes the same epoch
    /// order as `other` (world size and rank may differ).
    pub(crate) fn check_same_order(&self, other: &LoaderState) -> Result<()> {
        let mismatch =
            |what: &str, saved: String, here: String| Err(Error::StateMismatch { what: what.to_string(), saved, here });
        if self.sampler != other.sampler {
            return mismatch("sampler", self.sampler.clone(), other.sampler.clone());
        }
        if self.seed != other.seed {
            return mismatch("seed", format!("{:?}", self.seed), format!("{:?}", other.seed));
        }
        if self.epoch_len != other.epoch_len {
            return mismatch("epoch length", self.epoch_len.to_string(), other.epoch_len.to_string());
        }
        if self.pool_blocks != other.pool_blocks {
            return mismatch("pool blocks", format!("{:?}", self.pool_blocks), format!("{:?}", other.pool_blocks));
        }
        if self.child_pool_blocks != other.child_pool_blocks {
            return mismatch(
                "pool blocks per dataset",
                format!("{:?}", self.child_pool_blocks),
                format!("{:?}", other.child_pool_blocks),
            );
        }
        if self.batch_size != other.batch_size {
            return mismatch("batch size", format!("{:?}", self.batch_size), format!("{:?}", other.batch_size));
        }
        if self.position > self.epoch_len {
            return mismatch("position", self.position.to_string(), format!("at most {}", self.epoch_len));
        }
        Ok(())
    }
}

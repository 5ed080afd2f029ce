//! Saving and loading a [`DataLoader`]'s place in its epochs
//! ([`LoaderState`]), and the resumes on other numbers of ranks a loaded
//! state brings (see [`ranked`](super::ranked)).

use crate::error::{Error, Result};
use crate::pipeline::plan::{Batching, Clock, lock};
use crate::pipeline::ranked::Resume;
use crate::pipeline::shuffle::ShuffleKind;
use crate::pipeline::{DataLoader, LoaderState};
use crate::source::Reader;

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
                    (l.epoch, self.batching.advance(self.view, l.start, l.yielded), l.yielded)
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
            pool_blocks: self.order.shuffle().and_then(|s| s.pool()),
            child_pool_blocks: self.mixture.as_ref().map(|m| m.pools()),
            order_world_size: self
                .batching
                .is_ranked()
                .then(|| resume.as_ref().map_or(self.view.world_size, |r| r.base_world)),
            resumed: resume.map(|r| r.cuts).unwrap_or_default(),
            epoch_len: self.batching.global_len(),
            batch_size: match &self.batching {
                Batching::Fixed { batch_size, .. } => Some(*batch_size),
                Batching::Lists(..) => None,
            },
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
                .or_else(|| here.child_pool_blocks.clone().filter(|_| state.position == 0)),
            ..state.clone()
        };
        let state = &lenient;
        // The default shuffle and a mixture follow the saved kind and pool
        // sizes; the rest must match.
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
            if let (Some(m), Some(pools)) = (&self.mixture, &state.child_pool_blocks)
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
        let resume =
            state.order_world_size.filter(|_| state.position > 0 && self.batching.is_ranked()).and_then(|w0| {
                let mut cuts = state.resumed.clone();
                if cuts.last().map_or(w0, |c| c.1) != world {
                    cuts.push((state.position, world));
                }
                (!cuts.is_empty()).then_some(Resume { epoch: state.epoch, base_world: w0, cuts })
            });
        *lock(&self.resume) = resume;
        *lock(&self.plan_cache) = None;
        let mut clock = lock(&self.clock);
        *clock = Clock { epoch: state.epoch(), position: state.position(), generation: clock.generation + 1 };
        Ok(())
    }

    /// The resumes with other numbers of ranks that apply to `epoch`.
    pub(super) fn resume_of(&self, epoch: u64) -> Option<Resume> {
        lock(&self.resume).clone().filter(|r| r.epoch == epoch)
    }
}

//! [`ReadPlan`]: a window's read, planned before it is read.
//!
//! A collated read has two steps. [`ReaderExt::plan`](crate::ReaderExt::plan)
//! checks the window's indices (the one place they are checked) and lets a
//! reader with the [`PlannedReader`](crate::source::PlannedReader)
//! capability prepare what the read will need (the Zarr reader finds each
//! sample's rows and the chunks each array must decode, and keeps those
//! chunks in its cache); [`ReaderExt::read_plan`](crate::ReaderExt::read_plan)
//! then reads it. The plan is a value: the caller that plans a window ahead
//! (the [`DataLoader`](crate::DataLoader) on its own thread, while a read
//! thread is busy with the window before) hands it to the read with the
//! window, and a read that was not planned ahead plans first
//! ([`ReaderExt::load_collated_opt`](crate::ReaderExt::load_collated_opt)).
//!
//! A plan belongs to the reader that made it, as that reader was when it
//! made it: read by another reader, or after its reader's
//! [`refresh`](crate::ReaderExt::refresh), it is an [`Error::PlanMismatch`].

use std::ops::Range;
use std::sync::Arc;

use crate::data::CollateOptions;
use crate::error::{Error, Result};

/// A window of batches (logical indices, checked against the reader that
/// planned it), the layout they are read in, and what that reader prepared
/// for the read.
///
/// Made by [`ReaderExt::plan`](crate::ReaderExt::plan), consumed by
/// [`ReaderExt::read_plan`](crate::ReaderExt::read_plan) of the same reader.
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use atomzarr::{Error, InMemoryReader, ReaderExt};
/// use atomzarr::data::CollateOptions;
/// let mem = InMemoryReader::from_samples(&atomzarr::data::synth::generate(4, 2, 5, 0)?, "mem")?;
/// let plan = mem.plan(vec![vec![3, 1], vec![0]], CollateOptions::default())?;
/// assert_eq!((plan.batches().len(), plan.num_samples()), (2, 3));
/// let mut out = Vec::new();
/// mem.read_plan(plan, &mut out)?;
/// assert_eq!(out[0].indices, [3, 1]);
/// // Indices are checked when the plan is made.
/// assert!(matches!(mem.plan(vec![vec![4]], CollateOptions::default()), Err(Error::IndexOutOfRange { .. })));
/// # Ok(()) }
/// ```
pub struct ReadPlan {
    batches: Vec<Vec<usize>>,
    options: CollateOptions,
    /// The planning reader's length when it checked the indices.
    len: usize,
    prepared: Prepared,
}

/// What a reader prepared for a plan's read: one variant per kind of
/// preparation.
pub(crate) enum Prepared {
    /// Nothing: the read does all of its work.
    Nothing,
    /// A window of rows copied from stored chunks (the Zarr reader's).
    Rows(RowWindow),
    /// A [`MultiReader`](crate::MultiReader)'s split of the window among its children.
    Mixed(Box<MixedPlan>),
}

/// A window prepared by a reader that copies rows out of stored chunks
/// (the Zarr reader): each sample's rows, the batches as ranges of the
/// samples, the chunks each array must decode, and the state it was
/// prepared against.
pub(crate) struct RowWindow {
    /// The reader state the window was prepared against, compared by
    /// address (held, so no other state takes its address meanwhile).
    pub(crate) snapshot: Arc<dyn Send + Sync>,
    /// Each sample's physical index, in window order.
    pub(crate) physical: Vec<usize>,
    /// Each sample's atom rows.
    pub(crate) atoms: Vec<Range<u64>>,
    /// Each sample's edge rows.
    pub(crate) edges: Vec<Range<u64>>,
    /// Each batch as a range of the window's samples.
    pub(crate) bounds: Vec<Range<usize>>,
    /// Per array, the sorted chunk ids to decode.
    pub(crate) chunks: Vec<Vec<u64>>,
    /// Per array, whether it is read narrowed to int32.
    pub(crate) narrowed: Vec<bool>,
    /// Decoded bytes past which the window is read a group of batches at a time.
    pub(crate) decode_bound: u64,
    /// Keeps the window's chunks in the reader's cache until the read
    /// starts: a guard that only needs dropping.
    pub(crate) kept: Option<Box<dyn Send>>,
}

impl RowWindow {
    /// Whether the window was prepared against `state`.
    pub(crate) fn prepared_against<S: Send + Sync>(&self, state: &Arc<S>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.snapshot), Arc::as_ptr(state))
    }
}

/// A [`MultiReader`](crate::MultiReader)'s preparation of a window: the
/// offsets it was split against, each child's plan of its share, and where
/// each output batch's samples come from.
pub(crate) struct MixedPlan {
    pub(crate) offsets: Arc<Vec<usize>>,
    pub(crate) children: Vec<Option<ReadPlan>>,
    pub(crate) sources: Vec<BatchSource>,
}

/// Where one output batch of a [`MixedPlan`] takes its samples from.
pub(crate) enum BatchSource {
    /// Every sample from one child sub-batch `(child, j)`, in order.
    Single(usize, usize),
    /// Per sample: `(source slot, graph)` into the list of sub-batches used.
    Mixed(Vec<(usize, usize)>, Vec<(usize, usize)>),
}

impl std::fmt::Debug for ReadPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prepared = match self.prepared {
            Prepared::Nothing => "nothing",
            Prepared::Rows(_) => "rows",
            Prepared::Mixed(_) => "mixed",
        };
        f.debug_struct("ReadPlan")
            .field("batches", &self.batches.len())
            .field("samples", &self.num_samples())
            .field("options", &self.options)
            .field("prepared", &prepared)
            .finish()
    }
}

impl ReadPlan {
    /// The plan of `batches` for the reader named `name` of length `len`:
    /// every index checked against `len`, nothing prepared yet.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] naming the reader for an index not below `len`.
    pub(crate) fn checked(
        name: &str,
        len: usize,
        batches: Vec<Vec<usize>>,
        options: CollateOptions,
    ) -> Result<ReadPlan> {
        Error::check_indices(|| name.to_string(), batches.iter().flatten(), len)?;
        Ok(ReadPlan { batches, options, len, prepared: Prepared::Nothing })
    }

    /// A part of a checked plan for a reader of length `len` (a
    /// [`MultiReader`](crate::MultiReader) child's share of a window, its
    /// indices mapped into the child's range by the split).
    pub(crate) fn part(len: usize, batches: Vec<Vec<usize>>, options: CollateOptions) -> ReadPlan {
        ReadPlan { batches, options, len, prepared: Prepared::Nothing }
    }

    /// The batches, logical indices.
    pub fn batches(&self) -> &[Vec<usize>] {
        &self.batches
    }

    /// The layout the batches are read in.
    pub fn options(&self) -> CollateOptions {
        self.options
    }

    /// Samples over all batches.
    pub fn num_samples(&self) -> usize {
        self.batches.iter().map(Vec::len).sum()
    }

    /// The batches and the layout (what was prepared is dropped).
    pub fn into_parts(self) -> (Vec<Vec<usize>>, CollateOptions) {
        (self.batches, self.options)
    }

    /// Sets the layout (a reader that reads its window otherwise than asked,
    /// such as a [`Dataset`](crate::Dataset) building edges at a cutoff).
    pub(crate) fn set_options(&mut self, options: CollateOptions) {
        self.options = options;
    }

    /// Attaches the reader's preparation (replacing any).
    pub(crate) fn set_prepared(&mut self, prepared: Prepared) {
        self.prepared = prepared;
    }

    /// The reader's preparation, taken out.
    pub(crate) fn take_prepared(&mut self) -> Prepared {
        std::mem::replace(&mut self.prepared, Prepared::Nothing)
    }

    /// `Ok` when a reader named `name` of length `len` can read the plan
    /// though it prepared nothing for it: it was planned at that length.
    ///
    /// # Errors
    /// [`Error::PlanMismatch`] naming the reader otherwise.
    pub(crate) fn check_length(&self, name: &str, len: usize) -> Result<()> {
        if self.len == len {
            return Ok(());
        }
        Err(Error::plan_mismatch(name, format!("the plan was made for {} samples, the reader has {len}", self.len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_checked_when_made_and_knows_its_length() {
        assert!(ReadPlan::checked("r", 3, vec![vec![3]], CollateOptions::default()).is_err());
        let plan = ReadPlan::checked("r", 3, vec![vec![2, 0]], CollateOptions::default()).unwrap();
        assert!(plan.check_length("r", 3).is_ok());
        assert!(matches!(plan.check_length("r", 4), Err(Error::PlanMismatch { .. })));
        assert_eq!(plan.into_parts().0, [vec![2, 0]]);
    }
}

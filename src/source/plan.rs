//! [`ReadPlan`]: a window's read, planned before it is read.
//!
//! A collated read has two steps. [`Reader::plan`](crate::Reader::plan)
//! checks the window's indices and lets the backend prepare what the read
//! will need (the Zarr reader finds each sample's rows and the chunks each
//! array must decode, and keeps those chunks in its cache);
//! [`Reader::read_plan`](crate::Reader::read_plan) then reads it. The plan is
//! a value: the caller that plans a window ahead (the
//! [`DataLoader`](crate::DataLoader) on its own thread, while a read thread
//! is busy with the window before) hands it to the read with the window, and
//! a read that was not planned ahead plans first
//! ([`ReaderExt::load_collated_opt`](crate::ReaderExt::load_collated_opt)).

use std::any::Any;

use crate::data::CollateOptions;

/// A window of batches (logical indices, checked against the reader), the
/// layout they are read in, and what the backend prepared for the read.
///
/// Made by [`Reader::plan`](crate::Reader::plan), consumed by
/// [`Reader::read_plan`](crate::Reader::read_plan) of the same reader. A
/// backend that prepares nothing returns [`ReadPlan::new`]'s plan; one that
/// does attaches its own value with [`ReadPlan::with_prepared`] and finds it
/// again with [`ReadPlan::take_prepared`].
///
/// ```
/// use atomzarr::ReadPlan;
/// use atomzarr::data::CollateOptions;
/// struct Rows(Vec<u64>);
/// let plan = ReadPlan::new(vec![vec![0, 1], vec![2]], CollateOptions::default()).with_prepared(Rows(vec![0, 5, 9]));
/// assert_eq!(plan.num_samples(), 3);
/// let (batches, _, rows) = plan.into_parts::<Rows>();
/// assert_eq!(batches, [vec![0, 1], vec![2]]);
/// assert_eq!(rows.unwrap().0, [0, 5, 9]);
/// ```
pub struct ReadPlan {
    batches: Vec<Vec<usize>>,
    options: CollateOptions,
    prepared: Option<Box<dyn Any + Send>>,
}

impl std::fmt::Debug for ReadPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPlan")
            .field("batches", &self.batches.len())
            .field("samples", &self.num_samples())
            .field("options", &self.options)
            .field("prepared", &self.prepared.is_some())
            .finish()
    }
}

impl ReadPlan {
    /// A plan with nothing prepared: the read does all of its work.
    pub fn new(batches: Vec<Vec<usize>>, options: CollateOptions) -> ReadPlan {
        ReadPlan { batches, options, prepared: None }
    }

    /// The plan with the backend's own preparation attached (replacing any).
    pub fn with_prepared<T: Any + Send>(mut self, prepared: T) -> ReadPlan {
        self.prepared = Some(Box::new(prepared));
        self
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

    /// Whether the backend attached a preparation of type `T`.
    pub fn is_prepared_as<T: Any + Send>(&self) -> bool {
        self.prepared.as_ref().is_some_and(|p| p.is::<T>())
    }

    /// The backend's preparation, taken out, if it is a `T`.
    pub fn take_prepared<T: Any + Send>(&mut self) -> Option<T> {
        let p = self.prepared.take()?;
        match p.downcast::<T>() {
            Ok(t) => Some(*t),
            Err(other) => {
                self.prepared = Some(other);
                None
            }
        }
    }

    /// The batches, the layout and the preparation if it is a `T`.
    pub fn into_parts<T: Any + Send>(mut self) -> (Vec<Vec<usize>>, CollateOptions, Option<T>) {
        let prepared = self.take_prepared::<T>();
        (self.batches, self.options, prepared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preparation_of_another_type_is_kept_not_lost() {
        let mut plan = ReadPlan::new(vec![vec![3]], CollateOptions::default()).with_prepared(7u32);
        assert!(plan.take_prepared::<u64>().is_none());
        assert!(plan.is_prepared_as::<u32>());
        assert_eq!(plan.take_prepared::<u32>(), Some(7));
        assert!(!plan.is_prepared_as::<u32>());
    }
}

//! What orders a [`DataLoader`](crate::DataLoader)'s epochs, as one value:
//! [`Order`] owns the loader's sampler (or batch sampler) and says how its
//! order is cut into batches; [`ShuffleKind`] names what `with_shuffle(true)`
//! reads. Their names are those a [`LoaderState`](crate::LoaderState) saves
//! (`sampler`). The schedule of an epoch, the batches each rank reads, is
//! `schedule`'s.

use std::sync::Arc;

use super::in_order::InOrder;
use super::ranked::{RankedBatches, RankedSamples};
use super::shuffle::DefaultShuffle;
use crate::sampler::{BatchSampler, ChildPools, FittedMix, MultiDatasetBatchSampler, MultiDatasetSampler, Sampler};

/// What orders a loader's epochs, and how the order is cut into batches.
#[derive(Clone)]
pub(crate) enum Order {
    /// Fixed-size batches over a sample order; positions count samples.
    Samples { samples: SampleOrder, batch_size: usize, drop_last: bool },
    /// A batch sampler's batches; positions count batches.
    Batches(BatchOrder),
}

/// The sample order of [`Order::Samples`].
#[derive(Clone)]
pub(crate) enum SampleOrder {
    /// The dataset in index order, split among ranks by a
    /// [`RankSplit`](super::in_order::RankSplit).
    Sequential(Arc<InOrder>),
    /// The user's sampler, read as it stands.
    Sampler(Arc<dyn Sampler>),
    /// `with_shuffle(true)`: the default shuffle, which a loaded state
    /// steers (its [`ShuffleKind`](super::shuffle::ShuffleKind) and pool size).
    Shuffle(Arc<DefaultShuffle>),
    /// A mixing sampler fitted to the reader: each rank reads its own
    /// region of each child (see [`ranked`](super::ranked)).
    Mixture(Arc<FittedMix<MultiDatasetSampler>>),
}

/// The batch order of [`Order::Batches`].
#[derive(Clone)]
pub(crate) enum BatchOrder {
    /// The user's batch sampler, read as it stands.
    Sampler(Arc<dyn BatchSampler>),
    /// A mixing batch sampler fitted to the reader.
    Mixture(Arc<FittedMix<MultiDatasetBatchSampler>>),
}

impl SampleOrder {
    /// The sampler behind the order.
    pub(crate) fn sampler(&self) -> &dyn Sampler {
        match self {
            SampleOrder::Sequential(s) => s.sampler(),
            SampleOrder::Sampler(s) => s.as_ref(),
            SampleOrder::Shuffle(s) => s.as_ref(),
            SampleOrder::Mixture(m) => m.as_ref(),
        }
    }

    /// The order drawn rank by rank, where it can be (whether an epoch is,
    /// its [`RankedSamples::is_ranked`] says).
    pub(crate) fn ranked(&self) -> Option<Arc<dyn RankedSamples>> {
        match self {
            SampleOrder::Sequential(s) => Some(s.clone()),
            SampleOrder::Shuffle(s) => Some(s.clone()),
            SampleOrder::Mixture(m) => Some(m.clone()),
            SampleOrder::Sampler(_) => None,
        }
    }
}

impl BatchOrder {
    /// The batch sampler behind the order.
    pub(crate) fn sampler(&self) -> &dyn BatchSampler {
        match self {
            BatchOrder::Sampler(s) => s.as_ref(),
            BatchOrder::Mixture(m) => m.as_ref(),
        }
    }

    /// The batches drawn rank by rank (a fitted mixture's).
    pub(crate) fn ranked(&self) -> Option<Arc<dyn RankedBatches>> {
        match self {
            BatchOrder::Mixture(m) => Some(m.clone()),
            BatchOrder::Sampler(_) => None,
        }
    }
}

impl Order {
    /// The name a saved state gives it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Order::Samples { samples: SampleOrder::Sequential(s), .. } => s.split().name(),
            Order::Samples { samples: SampleOrder::Shuffle(s), .. } => s.kind().name(),
            Order::Samples { .. } => "sampler",
            Order::Batches(_) => "batch_sampler",
        }
    }

    /// The default shuffle, when it orders the epochs.
    pub(crate) fn shuffle(&self) -> Option<&DefaultShuffle> {
        match self {
            Order::Samples { samples: SampleOrder::Shuffle(s), .. } => Some(s),
            _ => None,
        }
    }

    /// The in-order epoch, when no sampler or shuffle orders it.
    pub(crate) fn in_order(&self) -> Option<&InOrder> {
        match self {
            Order::Samples { samples: SampleOrder::Sequential(s), .. } => Some(s),
            _ => None,
        }
    }

    /// The fitted mixture's pools, when a mixing sampler orders the epochs.
    pub(crate) fn mixture(&self) -> Option<&dyn ChildPools> {
        match self {
            Order::Samples { samples: SampleOrder::Mixture(m), .. } => Some(m.as_ref()),
            Order::Batches(BatchOrder::Mixture(m)) => Some(m.as_ref()),
            _ => None,
        }
    }

    /// The batch size of fixed-size batches (`None` for a batch sampler).
    pub(crate) fn batch_size(&self) -> Option<usize> {
        match self {
            Order::Samples { batch_size, .. } => Some(*batch_size),
            Order::Batches(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::in_order::RankSplit;
    use crate::pipeline::shuffle::ShuffleKind;

    #[test]
    fn saved_names_round_trip_and_stay_what_states_hold() {
        for k in [ShuffleKind::Permutation, ShuffleKind::SamplerPermutation, ShuffleKind::BlockPool] {
            assert_eq!(ShuffleKind::from_name(k.name()), Some(k));
        }
        // Names in states saved by earlier versions.
        assert_eq!(ShuffleKind::from_name("block-pool"), Some(ShuffleKind::BlockPool));
        assert_eq!(ShuffleKind::from_name("random"), Some(ShuffleKind::Permutation));
        assert_eq!(ShuffleKind::from_name("sequential"), None);
        let lists = crate::sampler::ListBatchSampler::new(vec![vec![0]]);
        assert_eq!(Order::Batches(BatchOrder::Sampler(Arc::new(lists))).name(), "batch_sampler");
        let seq = |split| Order::Samples {
            samples: SampleOrder::Sequential(Arc::new(InOrder::new(3, split))),
            batch_size: 2,
            drop_last: false,
        };
        assert_eq!(
            (seq(RankSplit::Interleaved).name(), seq(RankSplit::Interleaved).batch_size()),
            ("sequential", Some(2))
        );
        assert_eq!(seq(RankSplit::Ranges).name(), "sequential_ranges");
    }
}

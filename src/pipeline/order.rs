//! What orders a [`DataLoader`](crate::DataLoader)'s epochs, as a type:
//! [`OrderKind`], and for `with_shuffle(true)` the [`ShuffleKind`] the
//! default shuffle reads. Their names are those a
//! [`LoaderState`](crate::LoaderState) saves (`sampler`).

use std::sync::Arc;

use super::shuffle::DefaultShuffle;

/// What orders a loader's epochs.
#[derive(Clone)]
pub(crate) enum OrderKind {
    /// The dataset in index order.
    Sequential,
    /// The user's sampler (a fitted mixing sampler included).
    Sampler,
    /// The user's batch sampler.
    BatchSampler,
    /// `with_shuffle(true)`: the default shuffle, which a loaded state
    /// steers (its [`ShuffleKind`] and pool size).
    Shuffle(Arc<DefaultShuffle>),
}

impl OrderKind {
    /// The name a saved state gives it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            OrderKind::Sequential => "sequential",
            OrderKind::Sampler => "sampler",
            OrderKind::BatchSampler => "batch_sampler",
            OrderKind::Shuffle(s) => s.kind().name(),
        }
    }

    /// The default shuffle, when it orders the epochs.
    pub(crate) fn shuffle(&self) -> Option<&Arc<DefaultShuffle>> {
        match self {
            OrderKind::Shuffle(s) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(OrderKind::BatchSampler.name(), "batch_sampler");
    }
}

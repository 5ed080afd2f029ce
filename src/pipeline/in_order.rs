//! What a [`DataLoader`](crate::DataLoader) reads with no sampler and no
//! shuffle: the dataset in index order, split among ranks by a
//! [`RankSplit`].
//!
//! Split in contiguous ranges, rank `r` of `W` reads samples
//! `len * r / W .. len * (r + 1) / W`: each chunk is decoded by one rank
//! (the chunk at a seam by two), so `W` ranks together decode the store
//! once. Split the toolkit's way (interleaved rounds of `W * batch_size`
//! samples), every rank decodes nearly every chunk: `W` times the store.

use std::ops::Range;
use std::sync::Mutex;

use super::ranked::{Items, RankedSamples};
use crate::sampler::{Sampler, SequentialSampler};
use crate::threads::lock;

/// How ranks ([`with_rank`](crate::DataLoaderBuilder::with_rank)) split an
/// epoch read in index order (a loader with no sampler and no shuffle:
/// validation and test epochs, a [`MultiReader`](crate::MultiReader) read
/// store after store).
///
/// ```
/// # fn main() -> atomzarr::Result<()> {
/// use burn::tensor::Device;
/// use atomzarr::{AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, RankSplit, ZarrWriteConfig};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("v.zarr");
/// let samples: Vec<AtomicData> = (0..10).map(|_| AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap()).collect();
/// AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?.write(&samples)?;
/// let ds = Dataset::new(AtomicDataZarrReader::open(&path)?);
/// let epoch = |split| -> atomzarr::Result<Vec<Vec<usize>>> {
///     let l = DataLoader::builder(ds.clone()).with_batch_size(2).with_rank(1, 2).with_rank_split(split).build(&Device::flex())?;
///     l.iter().map(|b| b.map(|b| b.indices)).collect()
/// };
/// // Rank 1 of 2: the second half of the store, or every other batch.
/// assert_eq!(epoch(RankSplit::Ranges)?, vec![vec![5, 6], vec![7, 8], vec![9]]);
/// assert_eq!(epoch(RankSplit::Interleaved)?, vec![vec![2, 3], vec![6, 7], vec![9]]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RankSplit {
    /// Each rank reads one contiguous range of the dataset, the ranges'
    /// lengths within one sample of each other (the default): every chunk
    /// is decoded once across the ranks. Saved in a
    /// [`LoaderState`](crate::LoaderState) as `sequential_ranges`.
    #[default]
    Ranges,
    /// The toolkit's split: rounds of `world_size * batch_size` samples,
    /// rank `r` taking the `r`-th part of each (the order
    /// `torch.utils.data.DistributedSampler(shuffle=False)` gives, batch by
    /// batch). Every rank decodes nearly every chunk. Saved as `sequential`.
    Interleaved,
}

impl RankSplit {
    /// The name a [`LoaderState`](crate::LoaderState) saves.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RankSplit::Ranges => "sequential_ranges",
            RankSplit::Interleaved => "sequential",
        }
    }

    /// The split a saved name stands for.
    pub(crate) fn from_name(name: &str) -> Option<RankSplit> {
        [RankSplit::Ranges, RankSplit::Interleaved].into_iter().find(|s| s.name() == name)
    }
}

/// Rank `rank` of `world`'s contiguous range of `len` items: lengths within
/// one of each other, the longer ones last.
pub(crate) fn rank_range(len: usize, rank: usize, world: usize) -> Range<usize> {
    let w = world.max(1);
    let bound = |q: usize| (len as u128 * q as u128 / w as u128) as usize;
    bound(rank.min(w))..bound((rank + 1).min(w))
}

/// The dataset in index order and how ranks split it; a loaded state may
/// switch the split ([`adopt`](Self::adopt)).
pub(crate) struct InOrder {
    sampler: SequentialSampler,
    split: Mutex<RankSplit>,
}

impl InOrder {
    pub(crate) fn new(len: usize, split: RankSplit) -> InOrder {
        InOrder { sampler: SequentialSampler::new(len), split: Mutex::new(split) }
    }

    pub(crate) fn sampler(&self) -> &SequentialSampler {
        &self.sampler
    }

    pub(crate) fn split(&self) -> RankSplit {
        *lock(&self.split)
    }

    /// Follows a state saved under `name` from now on; `false` when `name`
    /// is not an in-order split.
    pub(crate) fn adopt(&self, name: &str) -> bool {
        RankSplit::from_name(name).map(|s| *lock(&self.split) = s).is_some()
    }
}

impl RankedSamples for InOrder {
    fn is_ranked(&self) -> bool {
        self.split() == RankSplit::Ranges
    }
    fn rank_iter(&self, _epoch: u64, rank: usize, world: usize) -> Option<Items<usize>> {
        self.is_ranked().then(|| Box::new(rank_range(self.sampler.len(), rank, world)) as Items<usize>)
    }
    fn rank_len(&self, rank: usize, world: usize) -> Option<usize> {
        self.is_ranked().then(|| rank_range(self.sampler.len(), rank, world).len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_dataset_once_within_one_of_each_other() {
        for len in 0..40 {
            for world in 1..9 {
                let parts: Vec<Range<usize>> = (0..world).map(|r| rank_range(len, r, world)).collect();
                assert_eq!(parts.iter().flat_map(Clone::clone).collect::<Vec<_>>(), (0..len).collect::<Vec<_>>());
                let lens: Vec<usize> = parts.iter().map(ExactSizeIterator::len).collect();
                assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1, "{len} over {world}: {lens:?}");
            }
        }
        assert_eq!(rank_range(usize::MAX, 7, 8).end, usize::MAX);
    }

    #[test]
    fn names_round_trip_and_the_old_name_stays_interleaved() {
        for s in [RankSplit::Ranges, RankSplit::Interleaved] {
            assert_eq!(RankSplit::from_name(s.name()), Some(s));
        }
        // States saved before ranges existed hold "sequential": rounds.
        assert_eq!(RankSplit::from_name("sequential"), Some(RankSplit::Interleaved));
        assert_eq!(RankSplit::from_name("block_pool"), None);
    }
}

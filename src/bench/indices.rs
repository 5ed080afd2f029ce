//! The samples one rank's timed read takes, in order: a range for an
//! in-order read (never held, whatever the store's size) or a list.

use std::borrow::Cow;
use std::ops::Range;

use super::options::{ReadOptions, ReadOrder};

/// A rank's samples of an epoch, in the order they are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Indices {
    /// Samples `start..end` in index order.
    Range(Range<usize>),
    /// Any other order.
    List(Vec<usize>),
}

impl Indices {
    /// Rank `opts.rank`'s part of an in-order epoch of `n` samples: the
    /// contiguous range a loader with `with_rank` reads.
    pub(super) fn in_order(n: usize, opts: &ReadOptions) -> Indices {
        debug_assert_eq!(opts.order, ReadOrder::Sequential);
        Indices::Range(crate::pipeline::in_order::rank_range(n, opts.rank, opts.world_size))
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Indices::Range(r) => r.len(),
            Indices::List(l) => l.len(),
        }
    }

    /// The `k`-th sample read.
    pub(super) fn get(&self, k: usize) -> Option<usize> {
        match self {
            Indices::Range(r) => (k < r.len()).then(|| r.start + k),
            Indices::List(l) => l.get(k).copied(),
        }
    }

    /// Only the first `m` samples.
    pub(super) fn truncate(&mut self, m: usize) {
        match self {
            Indices::Range(r) => r.end = r.end.min(r.start + m),
            Indices::List(l) => l.truncate(m),
        }
    }

    /// The samples read at positions `at` (a window of the read).
    pub(super) fn slice(&self, at: Range<usize>) -> Cow<'_, [usize]> {
        match self {
            Indices::Range(r) => Cow::Owned((r.start + at.start..r.start + at.end).collect()),
            Indices::List(l) => Cow::Borrowed(&l[at]),
        }
    }

    /// Positions `0..len` in windows of `size` (at least 1).
    pub(super) fn windows(&self, size: usize) -> Vec<Range<usize>> {
        let (n, size) = (self.len(), size.max(1));
        (0..n.div_ceil(size)).map(|w| w * size..((w + 1) * size).min(n)).collect()
    }

    /// Every sample, in order.
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            Indices::Range(r) => Box::new(r.clone()),
            Indices::List(l) => Box::new(l.iter().copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_reads_as_its_list_would() {
        let list = Indices::List((5..17).collect());
        let mut range = Indices::Range(5..17);
        assert_eq!(range.windows(5), list.windows(5));
        for w in range.windows(5) {
            assert_eq!(range.slice(w.clone()), list.slice(w));
        }
        assert_eq!(range.iter().collect::<Vec<_>>(), list.iter().collect::<Vec<_>>());
        assert_eq!((range.get(11), range.get(12)), (Some(16), None));
        range.truncate(3);
        assert_eq!(range, Indices::Range(5..8));
    }
}

//! Epoch schedules of a [`DataLoader`](crate::DataLoader): which batches one
//! rank (or one device slice) reads in an epoch, from a resume position
//! (the state that records it, [`LoaderState`](crate::LoaderState), is
//! `resume`'s).
//!
//! Positions are global: they count what all ranks together consumed of the
//! epoch's order, so a state saved with one number of ranks resumes with
//! another. An order drawn rank by rank (index order in ranges, the block
//! pool, a fitted mixture: see [`ranked`](super::ranked)) gives each rank its
//! own part. Any other order with fixed-size batches (`batch_size` over a
//! sampler) is read in *rounds* of `world_size * batch_size` samples of the
//! global order; round `k` gives rank `r` its `r`-th part. After every rank
//! took `s` batches, exactly the first `s * world_size * batch_size` samples
//! of the order were consumed, whatever the world size was.

use super::order::Order;
use super::ranked::{Items, Resume, ResumeAt, rest_lens, schedule_iter};

/// This loader's place among ranks and device slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub world_size: usize,
    pub rank: usize,
    /// Items `start..end` of this rank's epoch (Burn's `slice`).
    pub slice: Option<(usize, usize)>,
}

/// The part `[lo, hi)` of a round of `len` samples that rank `r` of `w` reads:
/// equal parts, the remainder spread so that no rank gets two more than another.
fn part(len: usize, w: usize, r: usize) -> (usize, usize) {
    (len * r / w, len * (r + 1) / w)
}

impl Order {
    /// The global length of an epoch in position units (samples or batches),
    /// without planning it where the sampler knows its length.
    pub fn global_len(&self) -> usize {
        match self {
            Order::Samples { samples, .. } => samples.sampler().len(),
            Order::Batches(b) => b.sampler().len(),
        }
    }

    /// Whether `epoch`'s order is planned rank by rank.
    pub fn is_ranked(&self) -> bool {
        match self {
            Order::Samples { samples, .. } => samples.ranked().is_some_and(|r| r.is_ranked()),
            Order::Batches(b) => b.ranked().is_some(),
        }
    }

    /// Batches and items of this view's epoch starting at global `pos`
    /// (`resume`: the epoch's resumes, for a ranked order); arithmetic only
    /// for fixed-size batches (`None` for batch samplers, whose batch sizes
    /// are only known from a plan).
    pub fn counts(&self, view: View, pos: usize, resume: Option<&Resume>) -> Option<(usize, usize)> {
        let Order::Samples { samples, batch_size: b, drop_last } = self else { return None };
        let (w, b) = (view.world_size, *b);
        let sampler = samples.sampler();
        let (batches, items) = match samples.ranked().filter(|_| self.is_ranked()) {
            Some(r) => {
                let lens = rest_lens(resume, (w, pos, b), |q, w| r.rank_len(q, w).unwrap_or(0));
                let n = equal_batches(&lens, b, *drop_last);
                let mine = lens.get(view.rank).copied().unwrap_or(0);
                (n, mine.min(n * b))
            }
            None => {
                let left = sampler.len().saturating_sub(pos);
                let (full, rem) = (left / (w * b), left % (w * b));
                let tail = if rem > 0 && !drop_last {
                    let (lo, hi) = part(rem, w, view.rank);
                    Some(hi - lo)
                } else {
                    None
                };
                (full + usize::from(tail.is_some()), full * b + tail.unwrap_or(0))
            }
        };
        Some(match view.slice {
            None => (batches, items),
            Some((s, e)) => {
                let n = e.min(items).saturating_sub(s);
                (n.div_ceil(b), n)
            }
        })
    }

    /// The batches this view reads in `epoch` from global position `pos`
    /// (`resume`: the epoch's resumes with other numbers of ranks, for a
    /// ranked order).
    pub fn schedule(&self, view: View, epoch: u64, pos: usize, resume: Option<&Resume>) -> Vec<Vec<usize>> {
        self.schedule_lazy(view, epoch, pos, resume).1.collect()
    }

    /// [`schedule`](Self::schedule) as the number of batches and the
    /// batches drawn as they are taken: a ranked order's epoch is never held
    /// whole (only its samplers' state), so scheduling costs nothing up front.
    pub fn schedule_lazy(
        &self,
        view: View,
        epoch: u64,
        pos: usize,
        resume: Option<&Resume>,
    ) -> (usize, Items<Vec<usize>>) {
        let w = view.world_size;
        let ranked_fixed = match self {
            Order::Samples { samples, .. } if self.is_ranked() => samples.ranked(),
            _ => None,
        };
        let lazy: (usize, Items<Vec<usize>>) = match (self, ranked_fixed) {
            (Order::Samples { batch_size: b, drop_last, .. }, Some(r)) => {
                let b = *b;
                let r2 = r.clone();
                let own = resume
                    .filter(|res| !res.cuts.is_empty())
                    .and_then(|res| r.resumed_iter(epoch, res, ResumeAt { rank: view.rank, world: w, pos, unit: b }));
                let (items, lens) = match own {
                    Some(items) => (items, rest_lens(resume, (w, pos, b), |q, w| r.rank_len(q, w).unwrap_or(0))),
                    None => schedule_iter(
                        resume,
                        (view.rank, w, pos, b),
                        |q, w| r.rank_len(q, w).unwrap_or(0),
                        move |q, w| r2.rank_iter(epoch, q, w).unwrap_or_else(|| Box::new(std::iter::empty())),
                    ),
                };
                // Every rank the same number of batches: short ones padded
                // with empty batches, as the rounds below do.
                let n = equal_batches(&lens, b, *drop_last);
                (n, Box::new(Chunks { items, b }.chain(std::iter::repeat_with(Vec::new)).take(n)))
            }
            (Order::Samples { samples, batch_size: b, drop_last }, None) => {
                let sampler = samples.sampler();
                // Rounds of `w * b` items from `pos`, each split among the
                // ranks; this rank's part of each is cut as it is taken. An
                // in-order sampler's epoch is the range itself, never held.
                let n = sampler.len();
                let order: Option<Vec<usize>> = (!sampler.in_order()).then(|| sampler.indices(epoch));
                let n = order.as_ref().map_or(n, Vec::len);
                let (round, rank, first) = ((w * b).max(1), view.rank, pos.min(n));
                let left = n - first;
                let count = left / round + usize::from(!left.is_multiple_of(round) && !*drop_last);
                let batches = (0..count).map(move |k| {
                    let start = first + k * round;
                    let (lo, hi) = part(round.min(n - start), w, rank);
                    match &order {
                        Some(o) => o[start + lo..start + hi].to_vec(),
                        None => (start + lo..start + hi).collect(),
                    }
                });
                (count, Box::new(batches))
            }
            (Order::Batches(bo), _) => match bo.ranked() {
                Some(r) => {
                    let r2 = r.clone();
                    let (items, lens) = schedule_iter(
                        resume,
                        (view.rank, w, pos, 1),
                        |q, w| r.rank_len(q, w),
                        move |q, w| r2.rank_iter(epoch, q, w),
                    );
                    (lens.get(view.rank).copied().unwrap_or(0), items)
                }
                None => {
                    let all = bo.sampler().batches(epoch);
                    let mine: Vec<Vec<usize>> = all
                        .into_iter()
                        .skip(pos)
                        .enumerate()
                        .filter(|(j, _)| j % w == view.rank)
                        .map(|(_, b)| b)
                        .collect();
                    (mine.len(), Box::new(mine.into_iter()))
                }
            },
        };
        match view.slice {
            None => lazy,
            Some(range) => self.sliced(lazy.1, range),
        }
    }

    /// Items `s..e` of a rank's batches (Burn's `slice`), as batches.
    fn sliced(&self, batches: Items<Vec<usize>>, (s, e): (usize, usize)) -> (usize, Items<Vec<usize>>) {
        let out: Vec<Vec<usize>> = match self {
            // Burn's contract: the slice's items re-batched at the batch
            // size, so only its last batch may be short.
            Order::Samples { batch_size: b, .. } => {
                let flat: Vec<usize> = batches.flatten().collect();
                let (s, e) = (s.min(flat.len()), e.min(flat.len()));
                flat[s..e.max(s)].chunks(*b).map(<[usize]>::to_vec).collect()
            }
            // Whole batches (a size-aware batch stays within its budgets):
            // those whose first item lies in the range.
            Order::Batches(_) => {
                let mut at = 0;
                let mut out = Vec::new();
                for b in batches {
                    let len = b.len();
                    if at >= s && at < e {
                        out.push(b);
                    }
                    at += len;
                }
                out
            }
        };
        (out.len(), Box::new(out.into_iter()))
    }

    /// The global position after every rank took `steps` batches from `pos`.
    pub fn advance(&self, view: View, pos: usize, steps: usize) -> usize {
        let len = self.global_len();
        match self {
            Order::Samples { batch_size, .. } => (pos + steps * view.world_size * batch_size).min(len),
            Order::Batches(_) => (pos + steps * view.world_size).min(len),
        }
    }
}

/// Items in batches of `b`, the last one short.
struct Chunks {
    items: Items<usize>,
    b: usize,
}

impl Iterator for Chunks {
    type Item = Vec<usize>;
    fn next(&mut self) -> Option<Vec<usize>> {
        let batch: Vec<usize> = self.items.by_ref().take(self.b).collect();
        (!batch.is_empty()).then_some(batch)
    }
}

/// Batches every rank reads when the ranks' rests are `lens` samples long:
/// the most any rank needs (shorter ranks get empty batches at the end),
/// or with `drop_last` the full batches every rank has.
fn equal_batches(lens: &[usize], b: usize, drop_last: bool) -> usize {
    if drop_last {
        lens.iter().map(|l| l / b).min().unwrap_or(0)
    } else {
        lens.iter().map(|l| l.div_ceil(b)).max().unwrap_or(0)
    }
}

/// The epoch a handle last set ([`DataLoader::set_epoch`](crate::DataLoader::set_epoch),
/// [`DataLoader::load_state`](crate::DataLoader::load_state)), shared by every clone, device copy and slice
/// of a loader: burn-train iterates a copy made by `to_device` (or slices of
/// it), so a setting on the user's handle must reach them. `generation`
/// tells each cursor that a new setting is there.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Clock {
    pub(crate) epoch: u64,
    pub(crate) position: usize,
    pub(crate) generation: u64,
}

/// Progress of one stream of epochs: shared by a loader's clones and its
/// `to_device` copies (the same stream on another device), fresh for each
/// slice (a slice is a part of every epoch, iterated beside the others).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    pub(crate) generation: u64,
    pub(crate) next_epoch: u64,
    pub(crate) next_position: usize,
    /// Iterators started, to know whether a yield is the live epoch's.
    pub(crate) iters: u64,
    pub(crate) live: Option<Live>,
}

/// The epoch being iterated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live {
    pub(crate) id: u64,
    pub(crate) epoch: u64,
    pub(crate) start: usize,
    pub(crate) yielded: usize,
    pub(crate) total: usize,
}

impl Cursor {
    /// Takes a newer setting of the clock.
    pub(crate) fn sync(&mut self, clock: &Clock) {
        if self.generation != clock.generation {
            self.generation = clock.generation;
            self.next_epoch = clock.epoch;
            self.next_position = clock.position;
            self.live = None;
        }
    }
}

/// The size of an epoch planned from `(epoch, position)`: what the loader
/// caches so that `len()` plans a batch sampler's epoch once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScheduleCounts {
    pub(crate) epoch: u64,
    pub(crate) position: usize,
    pub(crate) batches: usize,
    pub(crate) items: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::in_order::InOrder;
    use crate::pipeline::order::{BatchOrder, SampleOrder};
    use crate::sampler::ListBatchSampler;
    use std::sync::Arc;

    fn fixed(n: usize, b: usize, drop_last: bool) -> Order {
        // The toolkit's rounds: what a held list sampler is cut into too.
        let split = crate::pipeline::in_order::RankSplit::Interleaved;
        Order::Samples { samples: SampleOrder::Sequential(Arc::new(InOrder::new(n, split))), batch_size: b, drop_last }
    }

    #[test]
    fn rounds_split_the_tail_evenly_and_counts_match_plans() {
        // 11 samples, 2 ranks, batch 3: a full round of 6, then 5 split 2 / 3.
        let f = fixed(11, 3, false);
        let v = |rank| View { world_size: 2, rank, slice: None };
        assert_eq!(f.schedule(v(0), 0, 0, None), vec![vec![0, 1, 2], vec![6, 7]]);
        assert_eq!(f.schedule(v(1), 0, 0, None), vec![vec![3, 4, 5], vec![8, 9, 10]]);
        for n in 0..14 {
            for w in 1..4 {
                for drop_last in [false, true] {
                    for pos in [0, 1, 5] {
                        let f = fixed(n, 3, drop_last);
                        for rank in 0..w {
                            let view = View { world_size: w, rank, slice: None };
                            let p = f.schedule(view, 0, pos, None);
                            let items = p.iter().map(Vec::len).sum();
                            assert_eq!(f.counts(view, pos, None), Some((p.len(), items)), "n {n} w {w} pos {pos}");
                            // A sampler that holds its order: the same cuts of
                            // its list (the in-order one cuts the range).
                            let rev: Vec<usize> = (0..n).rev().collect();
                            let held = Order::Samples {
                                samples: SampleOrder::Sampler(Arc::new(crate::sampler::ListSampler::new(rev))),
                                batch_size: 3,
                                drop_last,
                            };
                            let mapped: Vec<Vec<usize>> =
                                p.iter().map(|b| b.iter().map(|&i| n - 1 - i).collect()).collect();
                            assert_eq!(held.schedule(view, 0, pos, None), mapped, "n {n} w {w} pos {pos}");
                            let sl = View { slice: Some((1, 4)), ..view };
                            let ps = f.schedule(sl, 0, pos, None);
                            assert_eq!(f.counts(sl, pos, None), Some((ps.len(), ps.iter().map(Vec::len).sum())));
                        }
                    }
                }
            }
        }
        let lists = ListBatchSampler::new(vec![vec![0], vec![1, 2], vec![3], vec![4]]);
        let l = Order::Batches(BatchOrder::Sampler(Arc::new(lists)));
        assert_eq!(l.schedule(View { world_size: 2, rank: 1, slice: None }, 0, 1, None), vec![vec![3]]);
        assert_eq!(
            l.schedule(View { world_size: 1, rank: 0, slice: Some((1, 4)) }, 0, 0, None),
            vec![vec![1, 2], vec![3]]
        );
    }
}

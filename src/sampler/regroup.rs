//! A block-pool epoch resumed on another number of ranks: the samples each
//! old rank had left, cut among the new ranks in storage order and drawn
//! through fresh pools ([`ChunkShuffleSampler::resumed_draws`]).
//!
//! Why not the old ranks' orders as they were drawn: a new rank then
//! continues several old ranks' pools, each full of blocks the old rank had
//! half drawn, and two new ranks splitting one old rank's rest draw from
//! the same pool. Each decodes a whole pool's chunks per stretch it takes,
//! however short: on a 1M-structure store resumed from 8 ranks onto 3 that
//! was 1.15-1.55 times the bytes of the samples left, and the rest of the
//! epoch read at 0.35-0.73 of an unbroken one's speed. Cut in storage order,
//! a new rank's samples lie in a few stretches of the store (the rests of
//! the old regions it takes over) and share a block with another rank's
//! only where a cut falls inside one.

use std::sync::Arc;

use super::block_pool::PoolDraws;
use super::piece_set::PieceSet;
use super::{ChunkShuffleSampler, epoch_rng, shuffle};

/// One rank's share of a generation of a resumed epoch: its samples and
/// how it draws them.
struct Share {
    set: PieceSet,
    /// Generation 0 draws its region with the epoch's own pool (`None`).
    regrouped: Option<u64>,
}

impl ChunkShuffleSampler {
    /// Rank `rank`'s positions after `cuts` (each a global position and
    /// the new number of ranks) of an epoch planned for `base_world` ranks,
    /// from global position `pos` (`unit`: samples per step). At each cut,
    /// every rank's samples not yet drawn (all ranks took the same whole
    /// steps) are laid end to end, rank after rank, each rank's in storage
    /// order, and cut into equal contiguous parts, one per new rank (the
    /// remainder one each to the first ones); a new rank draws its part
    /// through a pool of its own, seeded by the cut and the rank.
    pub(crate) fn resumed_draws(
        &self,
        epoch: u64,
        (base_world, cuts): (usize, &[(usize, usize)]),
        unit: usize,
        (rank, pos): (usize, usize),
    ) -> Box<dyn Iterator<Item = usize> + Send> {
        let unit = unit.max(1);
        let mut world = base_world.max(1);
        let mut shares: Vec<Share> = (0..world)
            .map(|r| {
                let (lo, hi) = self.rank_region(epoch, r, world);
                Share { set: PieceSet::range(lo, hi), regrouped: None }
            })
            .collect();
        let mut at = 0;
        for (g, &(cut, new_world)) in cuts.iter().enumerate() {
            let taken = (cut.saturating_sub(at) / (world * unit)) * unit;
            let rests: Vec<PieceSet> =
                shares.iter().enumerate().map(|(r, s)| self.rest(epoch, r, world, s, taken)).collect();
            let total: usize = rests.iter().map(PieceSet::count).sum();
            let w = new_world.max(1);
            let mut left = rests.into_iter();
            let mut carry = PieceSet::default();
            shares = (0..w)
                .map(|r| {
                    let mut need = total * (r + 1) / w - total * r / w;
                    let mut mine = PieceSet::default();
                    while need > 0 {
                        let next = if carry.count() == 0 { left.next() } else { Some(std::mem::take(&mut carry)) };
                        let Some(next) = next else { break };
                        let n = next.count();
                        if n == 0 {
                            // An old rank with nothing left (or a used-up tail).
                            continue;
                        }
                        let (head, tail) = next.split(need.min(n));
                        need -= need.min(n);
                        mine.extend(head);
                        carry = tail;
                    }
                    Share { set: mine, regrouped: Some(g as u64) }
                })
                .collect();
            (world, at) = (w, cut);
        }
        let taken = (pos.saturating_sub(at) / (world * unit)) * unit;
        let Some(share) = shares.get(rank) else { return Box::new(std::iter::empty()) };
        let draws = self.share_draws(epoch, rank, world, share);
        let items = self.items.clone();
        Box::new(draws.skip(taken).map(move |p| items.as_ref().map_or(p, |it| it[p])))
    }

    /// The positions rank `r` of `world` draws from `share`, in order.
    fn share_draws(&self, epoch: u64, r: usize, world: usize, share: &Share) -> PoolDraws {
        let Some(g) = share.regrouped else { return self.rank_draws(epoch, r, world).positions() };
        let set = Arc::new(share.set.clone());
        let mut runs: Vec<(usize, usize)> = share
            .set
            .stretches()
            .flat_map(|(lo, hi)| self.runs(epoch, lo, hi))
            .filter(|&(a, b)| set.count_in(a, b) > 0)
            .collect();
        let seed = self.seed
            ^ (g + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ (r as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
        let mut rng = epoch_rng(seed, epoch);
        shuffle(&mut runs, &mut rng);
        PoolDraws::new(None, (self.pool_blocks, self.batch_size()), runs, rng).only(set)
    }

    /// What rank `r` of `world` has left of `share` after drawing `taken`.
    fn rest(&self, epoch: u64, r: usize, world: usize, share: &Share, taken: usize) -> PieceSet {
        let mut set = share.set.clone();
        for p in self.share_draws(epoch, r, world, share).take(taken) {
            set.remove(p);
        }
        set
    }
}

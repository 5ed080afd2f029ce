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
use super::{ChunkShuffleSampler, epoch_rng, shuffle};

/// Positions (of a sampler's items) as bitmaps over stretches, the
/// stretches disjoint and in ascending order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PieceSet {
    pieces: Vec<Piece>,
}

/// The members of positions `lo..hi`: bit `i` of `bits` stands for `lo + i`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    lo: usize,
    hi: usize,
    bits: Vec<u64>,
}

impl Piece {
    fn full(lo: usize, hi: usize) -> Piece {
        let len = hi - lo;
        let mut bits = vec![!0u64; len.div_ceil(64)];
        if !len.is_multiple_of(64)
            && let Some(last) = bits.last_mut()
        {
            *last = (1u64 << (len % 64)) - 1;
        }
        Piece { lo, hi, bits }
    }

    fn has(&self, p: usize) -> bool {
        let i = p - self.lo;
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }

    /// Members in `a..b` (clamped to the piece).
    fn count_in(&self, a: usize, b: usize) -> usize {
        let (a, b) = (a.max(self.lo), b.min(self.hi));
        (a..b).filter(|&p| self.has(p)).count()
    }

    /// The piece's members in `a..b` only, as a piece over `a..b`.
    fn sub(&self, a: usize, b: usize) -> Piece {
        let mut out = Piece { lo: a, hi: b, bits: vec![0; (b - a).div_ceil(64)] };
        for p in (a..b).filter(|&p| self.has(p)) {
            let i = p - a;
            out.bits[i / 64] |= 1 << (i % 64);
        }
        out
    }

    /// The position of member `k` (0-based, ascending): the first `k`
    /// members lie before it (`hi` when there are no more).
    fn after(&self, k: usize) -> usize {
        if k == 0 {
            return self.lo;
        }
        let mut left = k;
        for (w, &word) in self.bits.iter().enumerate() {
            let ones = word.count_ones() as usize;
            if left < ones {
                let mut word = word;
                for _ in 0..left {
                    word &= word - 1;
                }
                return self.lo + w * 64 + word.trailing_zeros() as usize;
            }
            left -= ones;
        }
        self.hi
    }
}

impl PieceSet {
    /// Every position in `lo..hi`.
    pub(crate) fn range(lo: usize, hi: usize) -> PieceSet {
        PieceSet { pieces: if lo < hi { vec![Piece::full(lo, hi)] } else { Vec::new() } }
    }

    /// Members.
    pub(crate) fn count(&self) -> usize {
        self.pieces.iter().map(|p| p.bits.iter().map(|w| w.count_ones() as usize).sum::<usize>()).sum()
    }

    /// Members in `a..b`.
    pub(crate) fn count_in(&self, a: usize, b: usize) -> usize {
        self.pieces.iter().filter(|p| p.lo < b && a < p.hi).map(|p| p.count_in(a, b)).sum()
    }

    /// The members in `a..b`, ascending.
    pub(crate) fn members(&self, a: usize, b: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for p in self.pieces.iter().filter(|p| p.lo < b && a < p.hi) {
            out.extend((a.max(p.lo)..b.min(p.hi)).filter(|&x| p.has(x)));
        }
        out
    }

    /// Removes position `x` (if a member).
    fn remove(&mut self, x: usize) {
        let at = self.pieces.partition_point(|p| p.hi <= x);
        if let Some(p) = self.pieces.get_mut(at).filter(|p| p.lo <= x) {
            let i = x - p.lo;
            p.bits[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The first `k` members (in ascending order) and the rest.
    fn split(mut self, k: usize) -> (PieceSet, PieceSet) {
        let mut head = PieceSet::default();
        let mut left = k;
        while left > 0 && !self.pieces.is_empty() {
            let p = self.pieces.remove(0);
            let n = p.count_in(p.lo, p.hi);
            if n <= left {
                left -= n;
                head.pieces.push(p);
            } else {
                let x = p.after(left);
                head.pieces.push(p.sub(p.lo, x));
                self.pieces.insert(0, p.sub(x, p.hi));
                left = 0;
            }
        }
        (head, self)
    }

    fn extend(&mut self, other: PieceSet) {
        self.pieces.extend(other.pieces);
        self.pieces.sort_by_key(|p| p.lo);
    }
}

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
                        let next = if carry.pieces.is_empty() { left.next() } else { Some(std::mem::take(&mut carry)) };
                        let Some(next) = next else { break };
                        let n = next.count();
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
            .pieces
            .iter()
            .flat_map(|p| self.runs(epoch, p.lo, p.hi))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_keep_every_member_once() {
        let mut s = PieceSet::range(10, 300);
        for x in (10..300).step_by(3) {
            s.remove(x);
        }
        let want: Vec<usize> = (10..300).filter(|x| (x - 10) % 3 != 0).collect();
        assert_eq!(s.members(0, 1000), want);
        for k in [0, 1, 63, 64, 65, want.len()] {
            let (a, b) = s.clone().split(k);
            assert_eq!(a.members(0, 1000), want[..k], "k {k}");
            assert_eq!(b.members(0, 1000), want[k..], "k {k}");
            assert_eq!(a.count() + b.count(), want.len());
        }
    }
}

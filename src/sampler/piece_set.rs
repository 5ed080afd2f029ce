//! Sets of sample positions as bitmaps over stretches of the store
//! ([`PieceSet`]): what each rank has left of an epoch when it is resumed on
//! another number of ranks (see `regroup`), and what a pool draws from then.

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
        if a >= b {
            return 0;
        }
        // A word at a time: a pool counts every block it draws from, and a
        // cut counts whole regions.
        let (i, j) = (a - self.lo, b - self.lo);
        let (first, last) = (i / 64, (j - 1) / 64);
        (first..=last)
            .map(|w| {
                let mut word = self.bits[w];
                if w == first {
                    word &= !0u64 << (i % 64);
                }
                if w == last && j % 64 != 0 {
                    word &= (1u64 << (j % 64)) - 1;
                }
                word.count_ones() as usize
            })
            .sum()
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

    /// The stretches `lo..hi` the set's bitmaps cover, ascending.
    pub(crate) fn stretches(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.pieces.iter().map(|p| (p.lo, p.hi))
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
    pub(crate) fn remove(&mut self, x: usize) {
        let at = self.pieces.partition_point(|p| p.hi <= x);
        if let Some(p) = self.pieces.get_mut(at).filter(|p| p.lo <= x) {
            let i = x - p.lo;
            p.bits[i / 64] &= !(1 << (i % 64));
        }
    }

    /// The first `k` members (in ascending order) and the rest.
    pub(crate) fn split(mut self, k: usize) -> (PieceSet, PieceSet) {
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

    pub(crate) fn extend(&mut self, other: PieceSet) {
        self.pieces.extend(other.pieces);
        self.pieces.sort_by_key(|p| p.lo);
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
        for (a, b) in [(0, 1000), (10, 11), (11, 75), (64, 128), (70, 299), (299, 300), (150, 140)] {
            let count = want.iter().filter(|&&x| a <= x && x < b).count();
            assert_eq!(s.count_in(a, b), count, "{a}..{b}");
        }
        for k in [0, 1, 63, 64, 65, want.len()] {
            let (a, b) = s.clone().split(k);
            assert_eq!(a.members(0, 1000), want[..k], "k {k}");
            assert_eq!(b.members(0, 1000), want[k..], "k {k}");
            assert_eq!(a.count() + b.count(), want.len());
        }
    }
}

//! The samples a soft delete left ([`Active`]): a bitmap of the sample mask
//! with a select index, so that a reader of a store with deleted samples
//! holds about a quarter of a byte per structure for them, where a list of
//! the active samples' indices held eight.

/// Which physical samples are active, and the physical index of the `i`-th
/// active one (its logical index `i`).
///
/// Held as one bit per physical sample and the physical index of every
/// 64th active sample: `physical(i)` starts at the mark before `i` and
/// counts set bits from there (a few words when deletes are rare, more
/// when most samples are deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Active {
    bits: Vec<u64>,
    /// Physical index of active samples 0, 64, 128, ...
    marks: Vec<usize>,
    /// Active samples.
    len: usize,
    /// Physical samples.
    num_physical: usize,
}

impl Active {
    /// The active samples of `mask` (nonzero: active); `None` when every
    /// sample is active.
    #[cfg(test)]
    pub(crate) fn from_mask(mask: &[u8]) -> Option<Active> {
        if mask.iter().all(|&b| b != 0) {
            return None;
        }
        Some(Active::from_bits(flag_bits(mask), mask.len()))
    }

    /// The active samples of `bits` (bit `p % 64` of word `p / 64` set:
    /// sample `p` active) over `num_physical` samples (bits past it clear).
    pub(crate) fn from_bits(bits: Vec<u64>, num_physical: usize) -> Active {
        let mut marks = Vec::new();
        let mut len = 0usize;
        for (w, &word) in bits.iter().enumerate() {
            let ones = word.count_ones() as usize;
            // Active samples 0, 64, 128, ... that fall in this word.
            let mut next = len.div_ceil(64) * 64;
            while next < len + ones {
                let mut rest = word;
                for _ in 0..next - len {
                    rest &= rest - 1;
                }
                marks.push(w * 64 + rest.trailing_zeros() as usize);
                next += 64;
            }
            len += ones;
        }
        Active { bits, marks, len, num_physical }
    }

    /// Active samples.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The physical indices of the active samples, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut word = word;
            std::iter::from_fn(move || {
                (word != 0).then(|| {
                    let p = w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    p
                })
            })
        })
    }

    /// For each of `positions` (physical, ascending), the active samples
    /// before it: the logical index of the first active sample from there.
    pub(crate) fn counts_before(&self, positions: impl Iterator<Item = usize>) -> Vec<usize> {
        let (mut word, mut count) = (0usize, 0usize);
        positions
            .map(|p| {
                while word < p / 64 && word < self.bits.len() {
                    count += self.bits[word].count_ones() as usize;
                    word += 1;
                }
                let partial = self
                    .bits
                    .get(p / 64)
                    .filter(|_| word == p / 64)
                    .map_or(0, |&w| (w & ((1u64 << (p % 64)) - 1)).count_ones() as usize);
                count + partial
            })
            .collect()
    }

    /// Whether physical sample `p` is active.
    pub(crate) fn contains(&self, p: usize) -> bool {
        self.bits.get(p / 64).is_some_and(|w| w >> (p % 64) & 1 == 1)
    }

    /// The physical index of active sample `logical`; the physical count
    /// (an index no sample has) for `logical >= len()`.
    pub(crate) fn physical(&self, logical: usize) -> usize {
        let Some(&start) = self.marks.get(logical / 64) else { return self.num_physical };
        if logical >= self.len {
            return self.num_physical;
        }
        // Set bits still to pass from `start` (the mark's own included).
        let mut skip = logical % 64;
        let mut w = start / 64;
        let mut word = self.bits.get(w).map_or(0, |&x| x & (!0u64 << (start % 64)));
        loop {
            let ones = word.count_ones() as usize;
            if skip < ones {
                for _ in 0..skip {
                    word &= word - 1;
                }
                return w * 64 + word.trailing_zeros() as usize;
            }
            skip -= ones;
            w += 1;
            match self.bits.get(w) {
                Some(&x) => word = x,
                None => return self.num_physical,
            }
        }
    }
}

/// One bit per flag of `flags` (nonzero: set).
pub(crate) fn flag_bits(flags: &[u8]) -> Vec<u64> {
    let mut bits = vec![0u64; flags.len().div_ceil(64)];
    for (i, &b) in flags.iter().enumerate() {
        bits[i / 64] |= u64::from(b != 0) << (i % 64);
    }
    bits
}

/// Sets bits `lo..hi` of `bits`, a word at a time.
pub(crate) fn set_bits(bits: &mut [u64], lo: usize, hi: usize) {
    let mut p = lo;
    while p < hi {
        let (w, b) = (p / 64, p % 64);
        let n = (64 - b).min(hi - p);
        let ones = if n == 64 { !0 } else { ((1u64 << n) - 1) << b };
        if let Some(word) = bits.get_mut(w) {
            *word |= ones;
        }
        p += n;
    }
}

/// ORs `part` (bits of samples from `lo` on) into `bits`.
pub(crate) fn or_bits_at(bits: &mut [u64], lo: usize, part: &[u64]) {
    let (w0, s) = (lo / 64, lo % 64);
    for (j, &word) in part.iter().enumerate() {
        if let Some(x) = bits.get_mut(w0 + j) {
            *x |= word << s;
        }
        if s > 0
            && let Some(x) = bits.get_mut(w0 + j + 1)
        {
            *x |= word >> (64 - s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn select_and_membership_equal_the_list_of_active_samples() {
        let mut rng = StdRng::seed_from_u64(5);
        for (n, keep) in [(0usize, 0.5), (1, 0.0), (63, 0.5), (64, 0.99), (1000, 0.01), (5000, 0.5), (5000, 0.97)] {
            let mask: Vec<u8> = (0..n).map(|_| u8::from(rng.random::<f64>() < keep)).collect();
            let list: Vec<usize> = (0..n).filter(|&p| mask[p] != 0).collect();
            let Some(a) = Active::from_mask(&mask) else {
                assert_eq!(list.len(), n, "None only when every sample is active");
                continue;
            };
            assert_eq!(a.len(), list.len());
            for (i, &p) in list.iter().enumerate() {
                assert_eq!(a.physical(i), p, "n {n} keep {keep}: active sample {i}");
            }
            assert_eq!(a.physical(list.len()), n, "past the end: the physical count");
            assert_eq!(a.iter().collect::<Vec<_>>(), list);
            // The same, assembled from chunks of 61 flags (as open reads the mask).
            let mut bits = vec![0u64; n.div_ceil(64)];
            for (c, part) in mask.chunks(61).enumerate() {
                if part.iter().all(|&b| b != 0) {
                    set_bits(&mut bits, c * 61, c * 61 + part.len());
                } else {
                    or_bits_at(&mut bits, c * 61, &flag_bits(part));
                }
            }
            assert_eq!(Active::from_bits(bits, n), a, "assembled from chunks");
            let at: Vec<usize> = (0..n + 70).step_by(7).collect();
            let want: Vec<usize> = at.iter().map(|&p| list.partition_point(|&q| q < p)).collect();
            assert_eq!(a.counts_before(at.iter().copied()), want, "active samples before");
            for p in 0..n + 70 {
                assert_eq!(a.contains(p), mask.get(p).is_some_and(|&b| b != 0));
            }
        }
    }
}

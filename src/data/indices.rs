//! Neighbor-index arithmetic on host buffers: offsets between sample-local,
//! store-global and batch-local atom indices, range checks fused into the
//! copies, and int64 to int32 narrowing.

use crate::data::HostData;
use crate::error::{Error, Result};

/// The field whose values are atom indices (`[n_edges, 2]`, sender and
/// receiver): the one field every layer rebases by atom offsets, checks
/// against its sample's atoms, and the toolkit's append bug corrupts. Code
/// names it through this constant only.
pub const NEIGHBOR_LIST: &str = "neighbor_list";

impl HostData {
    /// Appends int64 values given as native-endian bytes, each plus `offset`
    /// (wrapping, as [`HostData::add_offset_from`]). Fusing the offset into the
    /// copy saves a second pass over neighbor lists.
    fn extend_i64_offset(dst: &mut Vec<i64>, bytes: &[u8], offset: i64) {
        match bytemuck::try_cast_slice::<u8, i64>(bytes) {
            Ok(src) => dst.extend(src.iter().map(|&x| x.wrapping_add(offset))),
            Err(_) => dst.extend(bytes.chunks_exact(8).map(|c| i64_ne(c).wrapping_add(offset))),
        }
    }

    /// As [`HostData::extend_i64_offset`] for int32 values.
    fn extend_i32_offset(dst: &mut Vec<i32>, bytes: &[u8], offset: i64) {
        let offset = offset as i32;
        match bytemuck::try_cast_slice::<u8, i32>(bytes) {
            Ok(src) => dst.extend(src.iter().map(|&x| x.wrapping_add(offset))),
            Err(_) => dst.extend(bytes.chunks_exact(4).map(|c| (i64_ne(c) as i32).wrapping_add(offset))),
        }
    }

    /// Appends integer values given as native-endian bytes of this buffer's
    /// dtype, each moved by `offset` (wrapping, as [`HostData::add_offset_from`]):
    /// the one unchecked rebasing copy of neighbor indices, between
    /// sample-local, store-global and batch-local numbering. int64 and int32
    /// add the offset during the copy (a second pass over the neighbor list
    /// measured ~5% of a warm epoch); the rare unsigned dtypes take two.
    pub(crate) fn extend_rebased(&mut self, bytes: &[u8], offset: i64) -> Result<()> {
        match self {
            HostData::Int64(v) => HostData::extend_i64_offset(v, bytes, offset),
            HostData::Int32(v) => HostData::extend_i32_offset(v, bytes, offset),
            _ => {
                let start = self.len();
                self.extend_from_bytes(bytes);
                self.add_offset_from(start, offset)?;
            }
        }
        Ok(())
    }

    /// Appends sample-local int16 neighbor indices, each plus `offset`: the
    /// row copy of a neighbor chunk held in the reader's compact form
    /// (wrapping, as [`HostData::add_offset_from`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a buffer other than int64 or int32.
    pub(crate) fn extend_local16(&mut self, local: &[i16], offset: i64) -> Result<()> {
        match self {
            HostData::Int64(v) => v.extend(local.iter().map(|&x| i64::from(x).wrapping_add(offset))),
            HostData::Int32(v) => {
                let offset = offset as i32;
                v.extend(local.iter().map(|&x| i32::from(x).wrapping_add(offset)));
            }
            // The reader keeps the compact form for int64 arrays only, read
            // as int64 or narrowed to int32.
            other => {
                return Err(Error::invalid(
                    NEIGHBOR_LIST,
                    format!("sample-local int16 indices cannot be copied into {} rows", other.dtype()),
                ));
            }
        }
        Ok(())
    }

    /// Appends neighbor pairs given as sample-local int16 receivers, one per
    /// pair, and runs of equal senders, `(sender, pairs)` in order, each
    /// index moved by `offset` (wrapping, as [`HostData::extend_local16`]).
    /// Runs past `receivers` are ignored; pairs past the runs are left out.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a buffer other than int64 or int32.
    // Not inlined: its copy loops would grow the row-copy closures of every
    // store (and stop their inlining) for a form only bulk lists take.
    #[inline(never)]
    pub(crate) fn extend_pairs16(
        &mut self,
        receivers: &[i16],
        senders: impl Iterator<Item = (i16, usize)>,
        offset: i64,
    ) -> Result<()> {
        match self {
            HostData::Int64(v) => write_pairs(v, receivers, senders, |x| i64::from(x).wrapping_add(offset)),
            HostData::Int32(v) => {
                let offset = offset as i32;
                write_pairs(v, receivers, senders, |x| i32::from(x).wrapping_add(offset));
            }
            other => {
                return Err(Error::invalid(
                    NEIGHBOR_LIST,
                    format!("sample-local int16 pairs cannot be copied into {} rows", other.dtype()),
                ));
            }
        }
        Ok(())
    }

    /// Appends neighbor indices given as native-endian bytes of this
    /// buffer's dtype, each moved by `r.offset`, and checks each against its
    /// sample's atoms (`r.lo..r.lo + r.n` in the source's numbering) in the
    /// same pass. Returns whether every value was in range; the values are
    /// appended either way (the caller turns a `false` into an error, see
    /// [`HostData::index_report`]). Offsets wrap, as [`HostData::add_offset_from`]:
    /// a wrapped value is out of range and reported, never a panic.
    ///
    /// Used where samples are collated one by one (the generic and the
    /// validated batch paths, mixed MultiReader batches); the Zarr reader
    /// checks each neighbor chunk once, when it decodes it.
    pub(crate) fn extend_indices_checked(&mut self, bytes: &[u8], r: IndexRange) -> Result<bool> {
        Ok(match self {
            HostData::Int64(v) => extend_i64_checked(v, bytes, r),
            HostData::Int32(v) => extend_i32_checked(v, bytes, r),
            HostData::UInt64(_) | HostData::UInt32(_) => {
                // Rare dtypes: copy, move, then check (a second pass).
                let start = self.len();
                self.extend_from_bytes(bytes);
                self.add_offset_from(start, r.offset)?;
                self.index_report(start..self.len(), r.lo.wrapping_add(r.offset), r.n).is_none()
            }
            other => {
                return Err(Error::invalid(
                    NEIGHBOR_LIST,
                    format!("dtype {} is not an index type (int32/int64/uint32/uint64)", other.dtype()),
                ));
            }
        })
    }

    /// For the indices `range` of this buffer, of a sample whose atoms are
    /// `base..base + n` here: `None` when all lie in range, else the first
    /// value outside and the smallest and largest value, all relative to
    /// `base` (sample-local, as `read` returns them).
    pub(crate) fn index_report(&self, range: std::ops::Range<usize>, base: i64, n: u64) -> Option<IndexReport> {
        let vals = self.to_i64_in(range)?;
        let local = |x: i64| x.wrapping_sub(base);
        let value = vals.iter().map(|&x| local(x)).find(|&x| x < 0 || x as u64 >= n)?;
        let min = vals.iter().map(|&x| local(x)).min().unwrap_or(value);
        let max = vals.iter().map(|&x| local(x)).max().unwrap_or(value);
        Some(IndexReport { value, num_atoms: n as usize, min, max })
    }

    /// Elements `range` as i64 (integer buffers; `None` otherwise or when
    /// the range is out of bounds).
    fn to_i64_in(&self, range: std::ops::Range<usize>) -> Option<Vec<i64>> {
        Some(match self {
            HostData::Int64(v) => v.get(range)?.to_vec(),
            HostData::Int32(v) => v.get(range)?.iter().map(|&x| i64::from(x)).collect(),
            // Values above i64::MAX wrap, as in `to_i64_vec`.
            HostData::UInt64(v) => v.get(range)?.iter().map(|&x| x as i64).collect(),
            HostData::UInt32(v) => v.get(range)?.iter().map(|&x| i64::from(x)).collect(),
            _ => return None,
        })
    }

    /// Writes the native-endian int64 values of `bytes` narrowed to int32
    /// into `out` (half as long); `false` when a value does not fit (`out`
    /// then holds garbage) or the lengths do not match.
    pub(crate) fn narrow_i64_into(bytes: &[u8], out: &mut [u8]) -> bool {
        if !bytes.len().is_multiple_of(8) || out.len() * 2 != bytes.len() {
            return false;
        }
        // One branch-free pass (it vectorizes): every value is written
        // truncated and checked; the check decides at the end.
        let mut fits = true;
        match (bytemuck::try_cast_slice::<u8, i64>(bytes), bytemuck::try_cast_slice_mut::<u8, i32>(out)) {
            (Ok(wide), Ok(narrow)) => {
                for (n, &w) in narrow.iter_mut().zip(wide) {
                    *n = w as i32;
                    fits &= i64::from(*n) == w;
                }
            }
            _ => {
                for (n, w) in out.chunks_exact_mut(4).zip(bytes.chunks_exact(8)) {
                    let w = i64_ne(w);
                    n.copy_from_slice(&(w as i32).to_ne_bytes());
                    fits &= i64::from(w as i32) == w;
                }
            }
        }
        fits
    }

    /// Adds `offset` to elements `start..` of an integer buffer (wrapping).
    pub(crate) fn add_offset_from(&mut self, start: usize, offset: i64) -> Result<()> {
        if offset == 0
            && matches!(self, HostData::Int64(_) | HostData::Int32(_) | HostData::UInt64(_) | HostData::UInt32(_))
        {
            return Ok(());
        }
        // Wrapping: stored values come from disk and may be anything; a bad
        // value must come out as a bad index (which validation reports), not
        // as an overflow panic.
        if start > self.len() {
            return Err(Error::invalid(NEIGHBOR_LIST, format!("offset start {start} past {} elements", self.len())));
        }
        match self {
            HostData::Int64(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add(offset)),
            HostData::Int32(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add(offset as i32)),
            HostData::UInt64(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add_signed(offset)),
            HostData::UInt32(v) => v[start..].iter_mut().for_each(|x| *x = x.wrapping_add_signed(offset as i32)),
            other => {
                return Err(Error::invalid(
                    NEIGHBOR_LIST,
                    format!("dtype {} is not an index type (int32/int64/uint32/uint64)", other.dtype()),
                ));
            }
        }
        Ok(())
    }
}

/// `v` as int32 when every value fits, else `None`: typed values through
/// [`HostData::narrow_i64_into`], the one rule every narrowing path follows
/// (see `CollateOptions::narrow_int64`).
pub(crate) fn narrow_i64(v: &[i64]) -> Option<Vec<i32>> {
    let mut out = vec![0i32; v.len()];
    HostData::narrow_i64_into(bytemuck::cast_slice(v), bytemuck::cast_slice_mut(&mut out)).then_some(out)
}

/// An i64 from up to 8 native-endian bytes (zero-padded, so 4 bytes read
/// as a little-endian i32's bit pattern on little-endian hosts; callers pass
/// `chunks_exact`).
fn i64_ne(c: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    let n = c.len().min(8);
    a[..n].copy_from_slice(&c[..n]);
    i64::from_ne_bytes(a)
}

/// Where one sample's neighbor indices must point while they are copied into
/// a batch: its atoms are `lo..lo + n` in the source's numbering (store-global
/// for a store, batch-local for a batch), and `offset` moves a value into the
/// destination's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexRange {
    pub lo: i64,
    pub n: u64,
    pub offset: i64,
}

/// An out-of-range neighbor index of one sample, sample-local: the first bad
/// value, the sample's atom count and the smallest and largest index (what
/// the append-bug diagnosis needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexReport {
    pub value: i64,
    pub num_atoms: usize,
    pub min: i64,
    pub max: i64,
}

/// Folds index `x` of a sample whose atoms are `lo..=lo + last` into `acc`:
/// `acc` turns negative once any `x` lies outside. `d = x - lo` and
/// `last - d` are both non-negative exactly when `x` is in range, so the
/// sign bit of their OR says it; no wrapping value aliases into range
/// while `lo + last < 2^63` (any store of fewer than 2^62 atoms).
/// Subtractions and ORs vectorize on baseline x86-64, where a 64-bit
/// compare does not.
#[inline(always)]
pub(crate) fn fold_index(acc: i64, x: i64, lo: i64, last: i64) -> i64 {
    let d = x.wrapping_sub(lo);
    acc | d | last.wrapping_sub(d)
}

/// [`HostData::extend_indices_checked`] for int64.
fn extend_i64_checked(dst: &mut Vec<i64>, bytes: &[u8], r: IndexRange) -> bool {
    let last = (r.n as i64).wrapping_sub(1);
    let mut acc = if r.n > i64::MAX as u64 { -1 } else { 0 };
    let mut step = |x: i64| {
        acc = fold_index(acc, x, r.lo, last);
        x.wrapping_add(r.offset)
    };
    match bytemuck::try_cast_slice::<u8, i64>(bytes) {
        Ok(src) => dst.extend(src.iter().map(|&x| step(x))),
        Err(_) => dst.extend(bytes.chunks_exact(8).map(|c| step(i64_ne(c)))),
    }
    acc >= 0
}

/// [`HostData::extend_indices_checked`] for int32 (the range check in
/// i64, so no value can alias into range by wrapping).
fn extend_i32_checked(dst: &mut Vec<i32>, bytes: &[u8], r: IndexRange) -> bool {
    let offset = r.offset as i32;
    let last = (r.n as i64).wrapping_sub(1);
    let mut acc = if r.n > i64::MAX as u64 { -1 } else { 0 };
    let mut step = |x: i32| {
        acc = fold_index(acc, i64::from(x), r.lo, last);
        x.wrapping_add(offset)
    };
    match bytemuck::try_cast_slice::<u8, i32>(bytes) {
        Ok(src) => dst.extend(src.iter().map(|&x| step(x))),
        Err(_) => dst.extend(bytes.chunks_exact(4).map(|c| step(i64_ne(c) as i32))),
    }
    // The int32 offset must be the int64 one, or a value moved by a
    // truncated offset would be wrong though in range.
    acc >= 0 && i64::from(offset) == r.offset
}

/// The signature of nvalchemi-toolkit's append bug (which the reader's
/// error message names and `store::repair` fixes): the atom offsets
/// `K = atoms_ptr[q]`, `1 <= q <= p`, `K > 0`, that move
/// every index of physical sample `p` (smallest `min`, largest `max`,
/// sample-local) into `[0, n)`, ascending and distinct. `atoms_ptr` may be
/// the pointers' entries up to the first one past `n` (the candidates).
pub(crate) fn append_shifts(
    atoms_ptr: &[i64],
    p: usize,
    min: i64,
    max: i64,
    n: usize,
) -> impl Iterator<Item = i64> + '_ {
    let lo = min.saturating_neg().max(1);
    let hi = (n as i64).saturating_sub(1).saturating_sub(max);
    // A prefix of the pointers will do: the candidates are the leading ones.
    let bounds = atoms_ptr.get(1..).map_or(&[][..], |b| &b[..p.min(b.len())]);
    let first = bounds.partition_point(|&a| a < lo);
    let mut last = None;
    bounds[first..].iter().copied().take_while(move |&a| a <= hi).filter(move |&a| last.replace(a) != Some(a))
}

/// Appends `(sender, receiver)` pairs to `v`, each index through `moved`:
/// the receivers one per pair, the senders as `(value, pairs)` runs.
/// Pairs are laid out 64 at a time in a stack buffer and appended with one
/// copy each: pushed pair by pair the loop did not vectorize, and sizing the
/// output first cost a pass of its own (warm bulk epochs 8-20% slower).
fn write_pairs<T: Copy + Default>(
    v: &mut Vec<T>,
    receivers: &[i16],
    senders: impl Iterator<Item = (i16, usize)>,
    moved: impl Fn(i16) -> T,
) {
    const STEP: usize = 64;
    let mut buf = [T::default(); 2 * STEP];
    let mut rest = receivers;
    v.reserve(2 * receivers.len());
    for (s, n) in senders {
        let (run, tail) = rest.split_at(n.min(rest.len()));
        rest = tail;
        let s = moved(s);
        for part in run.chunks(STEP) {
            for (o, &j) in buf.chunks_exact_mut(2).zip(part) {
                o[0] = s;
                o[1] = moved(j);
            }
            v.extend_from_slice(buf.get(..2 * part.len()).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::append_shifts;

    #[test]
    fn narrowing_bytes_agrees_with_the_typed_rule_aligned_or_not() {
        use crate::data::HostData;
        let values: Vec<i64> = vec![0, -1, 7, i32::MAX as i64, i32::MIN as i64, 123_456];
        let wide: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let expected: Vec<u8> = values.iter().flat_map(|&v| (v as i32).to_ne_bytes()).collect();
        // The same bytes at an odd offset take the unaligned path.
        let mut shifted = vec![0u8; wide.len() + 1];
        shifted[1..].copy_from_slice(&wide);
        for src in [&wide[..], &shifted[1..]] {
            let mut out = vec![0u8; src.len() / 2];
            assert!(HostData::narrow_i64_into(src, &mut out));
            assert_eq!(out, expected);
        }
        for bad in [i32::MAX as i64 + 1, i32::MIN as i64 - 1, i64::MIN] {
            let src: Vec<u8> = [1i64, bad, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
            assert!(!HostData::narrow_i64_into(&src, &mut [0u8; 12]), "{bad} does not fit int32");
        }
        assert!(!HostData::narrow_i64_into(&wide, &mut [0u8; 4]), "output of the wrong length");
    }

    #[test]
    fn shifts_are_earlier_offsets_that_fit() {
        // Samples of 3, 2, 4 and 5 atoms.
        let ptr = [0, 3, 5, 9, 14];
        // Sample 3 (5 atoms) read back shifted by -5: indices -5..=-1.
        assert_eq!(append_shifts(&ptr, 3, -5, -1, 5).collect::<Vec<_>>(), vec![5]);
        // Sample 3 with indices -3..=-3: 3 and 5 both fit ([0, 5)), 9 does not exist before it.
        assert_eq!(append_shifts(&ptr, 3, -3, -3, 5).collect::<Vec<_>>(), vec![3, 5]);
        // Only offsets up to the sample's own start count.
        assert_eq!(append_shifts(&ptr, 1, -3, -2, 2).collect::<Vec<_>>(), vec![3]);
        assert_eq!(append_shifts(&ptr, 1, -5, -4, 2).count(), 0);
        // Too large, not negative: no shift.
        assert_eq!(append_shifts(&ptr, 3, 0, 7, 5).count(), 0);
        // Equal offsets (an empty sample) count once.
        assert_eq!(append_shifts(&[0, 2, 2, 6], 2, -2, -1, 4).collect::<Vec<_>>(), vec![2]);
    }
}

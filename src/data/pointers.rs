//! CSR pointers: which rows a sample owns on each axis.

use std::ops::Range;

use super::Level;

/// The `[N+1]` atom and edge offsets of `N` samples (a store's
/// `meta/*_ptr`, or a collated batch's): sample `p` owns atom rows
/// `atoms[p]..atoms[p+1]`, edge rows `edges[p]..edges[p+1]` and system row
/// `p`. The one place that maps a (level, sample) to rows.
///
/// ```
/// use atomzarr::Level;
/// use atomzarr::data::Pointers;
/// let (atoms, edges) = (vec![0, 3, 5], vec![0, 4, 4]);
/// let p = Pointers { atoms: &atoms, edges: &edges };
/// assert_eq!(p.rows(Level::Atom, 1), 3..5);
/// assert_eq!(p.rows(Level::Edge, 1), 4..4);
/// assert_eq!(p.rows(Level::System, 1), 1..2);
/// assert_eq!(p.total(Level::Atom, 2), 5);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Pointers<'a> {
    /// `[N+1]` atom offsets.
    pub atoms: &'a [i64],
    /// `[N+1]` edge offsets.
    pub edges: &'a [i64],
}

impl Pointers<'_> {
    /// Rows of sample `p` on `level`'s axis (`p < N`).
    #[inline]
    pub fn rows(&self, level: Level, p: usize) -> Range<u64> {
        match level {
            Level::Atom => self.atoms[p] as u64..self.atoms[p + 1] as u64,
            Level::Edge => self.edges[p] as u64..self.edges[p + 1] as u64,
            Level::System => p as u64..p as u64 + 1,
        }
    }

    /// As [`Pointers::rows`], checked: `None` when `p` is out of range or
    /// the pointers are negative or decreasing (pointers that did not come
    /// through the store reader's pointer checks, such
    /// as a collated batch's).
    ///
    /// ```
    /// use atomzarr::Level;
    /// use atomzarr::data::Pointers;
    /// let (atoms, edges) = (vec![0, 3, 2], vec![0, 1, 1]);
    /// let p = Pointers { atoms: &atoms, edges: &edges };
    /// assert_eq!(p.checked_rows(Level::Atom, 0), Some(0..3));
    /// assert_eq!(p.checked_rows(Level::Atom, 1), None); // decreasing
    /// assert_eq!(p.checked_rows(Level::Edge, 2), None); // no sample 2
    /// ```
    pub fn checked_rows(&self, level: Level, p: usize) -> Option<Range<usize>> {
        let n = self.atoms.len().min(self.edges.len()).checked_sub(1)?;
        if p >= n {
            return None;
        }
        let (lo, hi) = match level {
            Level::Atom => (self.atoms[p], self.atoms[p + 1]),
            Level::Edge => (self.edges[p], self.edges[p + 1]),
            Level::System => return Some(p..p + 1),
        };
        (lo >= 0 && hi >= lo).then_some(lo as usize..hi as usize)
    }

    /// Rows of the first `n` samples together on `level`'s axis (`n <= N`).
    #[inline]
    pub fn total(&self, level: Level, n: usize) -> u64 {
        level.pick(self.atoms[n] as u64, self.edges[n] as u64, n as u64)
    }
}

/// Chunk ids `[first, last]` covering `rows` with `chunk_rows` rows per chunk
/// (empty for an empty range). One division when the rows lie in one chunk,
/// as a sample's nearly always do (a multiplication tells): a shuffled read
/// calls this per sample and field, and the divisions were a third of its
/// planning.
#[inline]
pub(crate) fn chunks_of(rows: &std::ops::Range<u64>, chunk_rows: u64) -> std::ops::Range<u64> {
    if rows.is_empty() {
        return 0..0;
    }
    let first = rows.start / chunk_rows;
    let last = if rows.end <= (first + 1).saturating_mul(chunk_rows) { first } else { (rows.end - 1) / chunk_rows };
    first..last + 1
}

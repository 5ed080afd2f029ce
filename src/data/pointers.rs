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

    /// Rows of the first `n` samples together on `level`'s axis (`n <= N`).
    #[inline]
    pub fn total(&self, level: Level, n: usize) -> u64 {
        level.pick(self.atoms[n] as u64, self.edges[n] as u64, n as u64)
    }
}

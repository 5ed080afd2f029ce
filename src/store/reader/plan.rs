//! Read planning: which rows and which (inner) chunks a request touches.
//!
//! A request is a list of physical sample indices. For each array the plan
//! lists the sorted, de-duplicated chunk ids covering the rows of those
//! samples on the array's own axis (atoms, edges or samples), so that every
//! needed chunk is decoded exactly once per call however many samples share it.

use std::ops::Range;
use std::sync::Arc;

use super::cache::Width;
use crate::data::{Level, chunks_of};

/// The rows a window's samples own on the atom and edge axes, read from
/// the pointer arrays once for the whole window: in a shuffled window each
/// pointer read is a cache miss, and the plan, the copy of every field and
/// the request count all need the same rows.
pub(super) struct WindowRows {
    pub(super) physical: Vec<usize>,
    pub(super) atoms: Vec<Range<u64>>,
    pub(super) edges: Vec<Range<u64>>,
}

impl WindowRows {
    /// The rows of physical samples `physical` (in order), from the
    /// pointer pages `st` holds or decodes through `src`.
    pub(super) fn new(
        src: &super::ChunkSource,
        st: &super::State,
        physical: Vec<usize>,
    ) -> crate::error::Result<WindowRows> {
        let a = st.pointers.page_set(src, Level::Atom, &physical)?;
        let e = st.pointers.page_set(src, Level::Edge, &physical)?;
        let mut atoms = Vec::with_capacity(physical.len());
        let mut edges = Vec::with_capacity(physical.len());
        for &p in &physical {
            atoms.push(a.rows(src, &st.pointers, p)?);
            edges.push(e.rows(src, &st.pointers, p)?);
        }
        Ok(WindowRows { physical, atoms, edges })
    }

    /// All of the window's samples.
    pub(super) fn all(&self) -> BatchRows<'_> {
        self.part(0..self.physical.len())
    }

    /// The window's samples `at` (a batch of it).
    pub(super) fn part(&self, at: Range<usize>) -> BatchRows<'_> {
        BatchRows { physical: &self.physical[at.clone()], atoms: &self.atoms[at.clone()], edges: &self.edges[at] }
    }
}

/// Samples of a [`WindowRows`] with their rows on each axis.
#[derive(Clone, Copy)]
pub(super) struct BatchRows<'a> {
    pub(super) physical: &'a [usize],
    pub(super) atoms: &'a [Range<u64>],
    pub(super) edges: &'a [Range<u64>],
}

impl BatchRows<'_> {
    pub(super) fn len(&self) -> usize {
        self.physical.len()
    }

    /// Sample `k`'s rows on `level`'s axis.
    #[inline]
    pub(super) fn rows(&self, level: Level, k: usize) -> Range<u64> {
        match level {
            Level::Atom => self.atoms[k].clone(),
            Level::Edge => self.edges[k].clone(),
            Level::System => self.physical[k] as u64..self.physical[k] as u64 + 1,
        }
    }

    /// Bytes of field data (stored dtypes) of these samples.
    pub(super) fn sample_bytes(&self, st: &super::State) -> u64 {
        let per =
            |level: Level| -> u64 { st.fields.iter().filter(|f| f.level == level).map(|f| f.row_bytes as u64).sum() };
        let span = |rows: &[Range<u64>]| rows.iter().map(|r| r.end - r.start).sum::<u64>();
        span(self.atoms) * per(Level::Atom)
            + span(self.edges) * per(Level::Edge)
            + self.len() as u64 * per(Level::System)
    }
}

/// The sorted unique chunk ids of every field of `st` that `wanted` keeps (an empty
/// list for the others), in field order. Fields on one axis with one chunk
/// size (positions and forces, say) share a plan.
pub(super) fn needed_chunks_per_field(
    st: &super::State,
    rows: &BatchRows<'_>,
    wanted: impl Fn(&super::FieldArray) -> bool,
) -> Vec<Vec<u64>> {
    let mut plans: Vec<((Level, u64), Vec<u64>)> = Vec::new();
    st.fields
        .iter()
        .map(|f| {
            if !wanted(f) {
                return Vec::new();
            }
            let key = (f.level, f.chunk_rows);
            if let Some((_, p)) = plans.iter().find(|(k, _)| *k == key) {
                return p.clone();
            }
            let p = match f.level {
                Level::Atom => chunks_of_rows(rows.atoms.iter().cloned(), f.chunk_rows),
                Level::Edge => chunks_of_rows(rows.edges.iter().cloned(), f.chunk_rows),
                Level::System => chunks_of_rows(rows.physical.iter().map(|&p| p as u64..p as u64 + 1), f.chunk_rows),
            };
            plans.push((key, p.clone()));
            p
        })
        .collect()
}

/// The sorted unique chunk ids of `chunk_rows`-row chunks that `rows` touch.
fn chunks_of_rows(rows: impl ExactSizeIterator<Item = Range<u64>>, chunk_rows: u64) -> Vec<u64> {
    let mut ids: Vec<u64> = Vec::with_capacity(rows.len());
    let chunk_rows = chunk_rows.max(1);
    for r in rows {
        for c in chunks_of(&r, chunk_rows) {
            // Consecutive samples usually share a chunk; skip the obvious repeats.
            if ids.last() != Some(&c) {
                ids.push(c);
            }
        }
    }
    let (Some(&lo), Some(&hi)) = (ids.iter().min(), ids.iter().max()) else { return ids };
    let span = hi - lo + 1;
    if span <= 64 * ids.len() as u64 {
        // A shuffled window's ids are dense in a small range: a bitmap
        // sorts and dedups them in one pass (the sort was most of the plan).
        let mut bits = vec![0u64; span.div_ceil(64) as usize];
        for &c in &ids {
            let at = c - lo;
            bits[(at / 64) as usize] |= 1 << (at % 64);
        }
        ids.clear();
        for (w, &word) in bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                ids.push(lo + w as u64 * 64 + u64::from(word.trailing_zeros()));
                word &= word - 1;
            }
        }
        return ids;
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The chunks a request needs: per field, its sorted chunk ids (empty for
/// a field the request does not read) and the width it reads them in.
pub(super) struct Needed {
    pub(super) chunks: Vec<Vec<u64>>,
    pub(super) widths: Vec<Width>,
}

impl Needed {
    /// The chunks of the samples of `rows`, laid out as `opts` says.
    pub(super) fn of(st: &super::State, rows: &BatchRows<'_>, opts: crate::data::CollateOptions) -> Needed {
        Needed { chunks: needed_chunks_per_field(st, rows, |f| f.wanted(opts)), widths: widths(st, opts) }
    }
}

/// The width each field of `st` is read in for a request laid out as `opts`.
pub(super) fn widths(st: &super::State, opts: crate::data::CollateOptions) -> Vec<Width> {
    st.fields.iter().map(|f| if f.narrowed(opts) { Width::Int32 } else { Width::Stored }).collect()
}

/// The Zarr reader's preparation of a window, made by `prepare` and carried
/// in a [`ReadPlan`](crate::ReadPlan) to `read_prepared` in the contract's
/// terms (a `RowWindow`): the snapshot
/// it was planned against, the rows of its samples, its batches as ranges
/// of those rows, the chunks each array must decode and in which width, and
/// how many decoded bytes beyond the cache the read may hold at once.
pub(super) struct WindowPlan {
    pub(super) state: Arc<super::State>,
    pub(super) rows: WindowRows,
    pub(super) bounds: Vec<Range<usize>>,
    pub(super) need: Needed,
    /// Past this (and the cache's free room) the window is decoded and
    /// copied a group of batches at a time
    /// ([`ReaderOptions::with_window_decode_bytes`](crate::ReaderOptions::with_window_decode_bytes));
    /// no bound for a window of one batch.
    pub(super) decode_bound: u64,
    /// Keeps the window's chunks in the cache until its read starts.
    pub(super) kept: Option<super::cache::Protection>,
}

impl WindowPlan {
    /// The plan of `batches` (logical indices, checked against `state`),
    /// laid out as `opts`, its pointer pages read through `src`, decoded
    /// `window_decode_bytes` at a time.
    pub(super) fn new(
        src: &super::ChunkSource,
        window_decode_bytes: u64,
        state: Arc<super::State>,
        batches: &[Vec<usize>],
        opts: crate::data::CollateOptions,
    ) -> crate::error::Result<WindowPlan> {
        let rows = WindowRows::new(src, &state, batches.iter().flatten().map(|&i| state.physical(i)).collect())?;
        let need = Needed::of(&state, &rows.all(), opts);
        let mut bounds = Vec::with_capacity(batches.len());
        let mut at = 0;
        for b in batches {
            bounds.push(at..at + b.len());
            at += b.len();
        }
        let decode_bound = if batches.len() <= 1 { u64::MAX } else { window_decode_bytes };
        Ok(WindowPlan { state, rows, bounds, need, decode_bound, kept: None })
    }

    /// `(array id, chunk)` of every chunk the window needs.
    pub(super) fn chunk_keys(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.state.fields.iter().zip(&self.need.chunks).flat_map(|(f, ids)| ids.iter().map(move |&c| (f.id, c)))
    }

    /// Consecutive groups of the window's batches whose chunks each decode
    /// to at most the decode bound (a single batch over it is a group of
    /// its own): a window whose chunks are over the bound is decoded and
    /// copied one group at a time, so what it holds decoded at once stays
    /// bounded however scattered its samples are.
    pub(super) fn groups(&self) -> Vec<Range<usize>> {
        let st = &self.state;
        let mut groups = Vec::new();
        let (mut start, mut bytes) = (0, 0u64);
        for (k, b) in self.bounds.iter().enumerate() {
            // Per batch, so a chunk two batches share counts twice: the groups
            // come out smaller than the bound, never larger.
            let own = plan_bytes(st, &needed_chunks_per_field(st, &self.rows.part(b.clone()), |_| true));
            if k > start && bytes + own > self.decode_bound {
                groups.push(start..k);
                (start, bytes) = (k, 0);
            }
            bytes += own;
        }
        groups.push(start..self.bounds.len());
        groups
    }

    /// The samples of batches `group`, as rows of the window.
    pub(super) fn rows_of(&self, group: &Range<usize>) -> BatchRows<'_> {
        match (self.bounds.get(group.start), group.end.checked_sub(1).and_then(|e| self.bounds.get(e))) {
            (Some(first), Some(last)) => self.rows.part(first.start..last.end),
            _ => self.rows.part(0..0),
        }
    }
}

/// Decoded bytes of the chunks of `plans` (per field, as
/// [`needed_chunks_per_field`] gives them).
fn plan_bytes(st: &super::State, plans: &[Vec<u64>]) -> u64 {
    st.fields.iter().zip(plans).map(|(f, ids)| ids.len() as u64 * f.chunk_bytes()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ranges() {
        assert_eq!(chunks_of(&(0..10), 10), 0..1);
        assert_eq!(chunks_of(&(5..15), 10), 0..2);
        assert_eq!(chunks_of(&(10..10), 10), 0..0);
        assert_eq!(chunks_of(&(19..21), 10), 1..3);
        assert_eq!(chunks_of(&(10..20), 10), 1..2); // ends on a chunk boundary
        assert_eq!(chunks_of(&(35..61), 10), 3..7);
    }

    #[test]
    fn chunk_ids_dedup_across_samples() {
        // Samples 3, 0, 1, 0 of atom offsets [0, 5, 12, 30, 31].
        let ids = |rows: &[Range<u64>], c| chunks_of_rows(rows.iter().cloned(), c);
        assert_eq!(ids(&[30..31, 0..5, 5..12, 0..5], 10), vec![0, 1, 3]);
        assert_eq!(ids(&[0..0, 0..0], 10), Vec::<u64>::new());
        assert_eq!(ids(&[3..4, 0..1], 2), vec![0, 1]);
        // A sample ending on a chunk boundary, one spanning three chunks.
        assert_eq!(ids(&[10..20, 35..61], 10), vec![1, 3, 4, 5, 6]);
    }
}

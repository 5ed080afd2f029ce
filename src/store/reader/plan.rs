//! Read planning: which rows and which (inner) chunks a request touches.
//!
//! A request is a list of physical sample indices. For each array the plan
//! lists the sorted, de-duplicated chunk ids covering the rows of those
//! samples on the array's own axis (atoms, edges or samples), so that every
//! needed chunk is decoded exactly once per call however many samples share it.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::data::{Level, chunks_of};

/// The rows a window's samples own on the atom and edge axes, read from
/// the pointer arrays once for the whole window: in a shuffled window each
/// pointer read is a cache miss, and the plan, the copy of every field and
/// the request count all need the same rows.
pub(super) struct WindowRows {
    pub(super) physical: Vec<usize>,
    atoms: Vec<Range<u64>>,
    edges: Vec<Range<u64>>,
}

impl WindowRows {
    /// The rows of physical samples `physical` (in order).
    pub(super) fn new(st: &super::State, physical: Vec<usize>) -> WindowRows {
        let ptrs = st.ptrs();
        let mut atoms = Vec::with_capacity(physical.len());
        let mut edges = Vec::with_capacity(physical.len());
        for &p in &physical {
            atoms.push(ptrs.rows(Level::Atom, p));
            edges.push(ptrs.rows(Level::Edge, p));
        }
        WindowRows { physical, atoms, edges }
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

/// Plans of the windows announced with `Reader::announce_next`, kept for
/// their reads: the DataLoader announces a window on its own thread just
/// before a read thread takes it, and that read then neither reads the
/// pointer arrays nor plans again.
#[derive(Default)]
pub(super) struct Announced(Mutex<VecDeque<AnnouncedWindow>>);

/// One announced window: its logical samples, their rows and the chunk
/// plan of every field, against the snapshot `state`.
pub(super) struct AnnouncedWindow {
    pub(super) state: Arc<super::State>,
    pub(super) logical: Vec<usize>,
    pub(super) rows: WindowRows,
    pub(super) plans: Vec<Vec<u64>>,
}

/// Announced windows kept: the loader has two reads in flight.
const ANNOUNCED_KEPT: usize = 4;

impl Announced {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AnnouncedWindow>> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn put(&self, w: AnnouncedWindow) {
        let mut q = self.lock();
        q.push_back(w);
        while q.len() > ANNOUNCED_KEPT {
            q.pop_front();
        }
    }

    /// The announced window holding exactly `batches` (flattened) against
    /// the snapshot `st`, taken out.
    pub(super) fn take(&self, st: &Arc<super::State>, batches: &[Vec<usize>]) -> Option<AnnouncedWindow> {
        let n: usize = batches.iter().map(Vec::len).sum();
        let mut q = self.lock();
        let at = q.iter().position(|w| {
            Arc::ptr_eq(&w.state, st) && w.logical.len() == n && w.logical.iter().eq(batches.iter().flatten())
        })?;
        q.remove(at)
    }

    pub(super) fn clear(&self) {
        self.lock().clear();
    }
}

/// Decoded bytes of the chunks of `plans` (per field, as
/// [`needed_chunks_per_field`] gives them).
pub(super) fn plan_bytes(st: &super::State, plans: &[Vec<u64>]) -> u64 {
    st.fields.iter().zip(plans).map(|(f, ids)| ids.len() as u64 * f.chunk_bytes()).sum()
}

/// Consecutive groups of `batches` whose chunks each decode to at most
/// `limit` bytes (a single batch over it is a group of its own): a window
/// whose whole plan is over the limit is decoded and copied one group at a
/// time, so what it holds decoded at once stays bounded however scattered
/// its samples are.
/// `batches` are the window's batches as ranges of `rows`.
pub(super) fn decode_groups(
    st: &super::State,
    rows: &WindowRows,
    batches: &[Range<usize>],
    limit: u64,
) -> Vec<Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (k, b) in batches.iter().enumerate() {
        // Per batch, so a chunk two batches share counts twice: the groups
        // come out smaller than the limit, never larger.
        let own = plan_bytes(st, &needed_chunks_per_field(st, &rows.part(b.clone()), |_| true));
        if k > start && bytes + own > limit {
            groups.push(start..k);
            (start, bytes) = (k, 0);
        }
        bytes += own;
    }
    groups.push(start..batches.len());
    groups
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

//! Read planning: which rows and which (inner) chunks a request touches.
//!
//! A request is a list of physical sample indices. For each array the plan
//! lists the sorted, de-duplicated chunk ids covering the rows of those
//! samples on the array's own axis (atoms, edges or samples), so that every
//! needed chunk is decoded exactly once per call however many samples share it.

use crate::data::Level;

use crate::data::{Pointers, chunks_of};

/// The sorted unique chunk ids of an array that `physical` samples touch.
pub fn needed_chunks(ptrs: Pointers<'_>, level: Level, chunk_rows: u64, physical: &[usize]) -> Vec<u64> {
    let mut ids: Vec<u64> = Vec::with_capacity(physical.len());
    for &p in physical {
        let r = chunks_of(&ptrs.rows(level, p), chunk_rows);
        // Consecutive samples usually share a chunk; skip the obvious repeats
        // before the sort so the vector stays small.
        for c in r {
            if ids.last() != Some(&c) {
                ids.push(c);
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// [`needed_chunks`] of every field of `st` that `wanted` keeps (an empty
/// list for the others), in field order. Fields on one axis with one chunk
/// size (positions and forces, say) share a plan, computed once: a shuffled
/// window's pointer reads are cache misses, so they are made once per axis
/// and chunk size rather than once per field.
pub(super) fn needed_chunks_per_field(
    st: &super::State,
    physical: &[usize],
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
            let p = needed_chunks(st.ptrs(), f.level, f.chunk_rows, physical);
            plans.push((key, p.clone()));
            p
        })
        .collect()
}

/// Decoded bytes of the chunks `physical` needs, over every field array.
pub(super) fn planned_bytes(st: &super::State, physical: &[usize]) -> u64 {
    st.fields
        .iter()
        .zip(needed_chunks_per_field(st, physical, |_| true))
        .map(|(f, ids)| ids.len() as u64 * f.chunk_rows * f.row_bytes as u64)
        .sum()
}

/// An upper bound of [`planned_bytes`] for the samples of `batches`,
/// without sorting chunk ids: per array, no more chunks than it has, nor
/// than the samples' rows can touch (`rows / chunk_rows + 2` each). Lets a
/// window that cannot exceed the limit (any window of a store smaller than
/// it) skip the exact plan.
fn upper_bound_bytes(st: &super::State, batches: &[Vec<usize>]) -> u64 {
    let ptrs = st.ptrs();
    let n = st.num_samples;
    st.fields
        .iter()
        .map(|f| {
            let rows = |p: usize| {
                let r = ptrs.rows(f.level, p);
                r.end - r.start
            };
            let all = rows_on(st, f.level, n).div_ceil(f.chunk_rows.max(1));
            let touched: u64 = batches.iter().flatten().map(|&i| rows(st.physical(i)) / f.chunk_rows.max(1) + 2).sum();
            all.min(touched) * f.chunk_rows * f.row_bytes as u64
        })
        .sum()
}

/// Rows of the first `n` physical samples on `level`'s axis.
fn rows_on(st: &super::State, level: Level, n: usize) -> u64 {
    match level {
        Level::Atom => st.atoms_ptr[n] as u64,
        Level::Edge => st.edges_ptr[n] as u64,
        Level::System => n as u64,
    }
}

/// Consecutive groups of `batches` whose chunks each decode to at most
/// `limit` bytes (a single batch over it is a group of its own): a window is
/// decoded and copied one group at a time, so what it holds decoded at once
/// stays bounded however scattered its samples are. One group when the whole
/// window fits.
pub(super) fn decode_groups(st: &super::State, batches: &[Vec<usize>], limit: u64) -> Vec<std::ops::Range<usize>> {
    let physical = |b: &[Vec<usize>]| -> Vec<usize> { b.iter().flatten().map(|&i| st.physical(i)).collect() };
    if batches.len() <= 1 || upper_bound_bytes(st, batches) <= limit || planned_bytes(st, &physical(batches)) <= limit {
        return vec![0..batches.len()];
    }
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (k, b) in batches.iter().enumerate() {
        // Per batch, so a chunk two batches share counts twice: the groups
        // come out smaller than the limit, never larger.
        let own = planned_bytes(st, &physical(std::slice::from_ref(b)));
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
    }

    #[test]
    fn needed_chunks_dedup_across_samples() {
        let atoms = [0, 5, 12, 30, 31];
        let edges = [0, 0, 0, 0, 0];
        let p = Pointers { atoms: &atoms, edges: &edges };
        assert_eq!(needed_chunks(p, Level::Atom, 10, &[3, 0, 1, 0]), vec![0, 1, 3]);
        assert_eq!(needed_chunks(p, Level::Edge, 10, &[0, 1, 2, 3]), Vec::<u64>::new());
        assert_eq!(needed_chunks(p, Level::System, 2, &[3, 0]), vec![0, 1]);
    }
}

//! Read planning: which rows and which (inner) chunks a request touches.
//!
//! A request is a list of physical sample indices. For each array the plan
//! lists the sorted, de-duplicated chunk ids covering the rows of those
//! samples on the array's own axis (atoms, edges or samples), so that every
//! needed chunk is decoded exactly once per call however many samples share it.

use crate::data::Level;

use crate::data::chunks_of;

/// The sorted unique chunk ids of every field of `st` that `wanted` keeps (an empty
/// list for the others), in field order. A shuffled window's pointer reads
/// are cache misses, so each axis's rows are read once for all its fields,
/// and fields on one axis with one chunk size (positions and forces, say)
/// share a plan.
pub(super) fn needed_chunks_per_field(
    st: &super::State,
    physical: &[usize],
    wanted: impl Fn(&super::FieldArray) -> bool,
) -> Vec<Vec<u64>> {
    let ptrs = st.ptrs();
    let mut rows: Vec<(Level, Vec<std::ops::Range<u64>>)> = Vec::new();
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
            let r = match rows.iter().position(|(l, _)| *l == f.level) {
                Some(at) => &rows[at].1,
                None => {
                    rows.push((f.level, physical.iter().map(|&p| ptrs.rows(f.level, p)).collect()));
                    // Just pushed.
                    &rows[rows.len() - 1].1
                }
            };
            let p = chunks_of_rows(r, f.chunk_rows);
            plans.push((key, p.clone()));
            p
        })
        .collect()
}

/// The sorted unique chunk ids of `chunk_rows`-row chunks that `rows` touch.
fn chunks_of_rows(rows: &[std::ops::Range<u64>], chunk_rows: u64) -> Vec<u64> {
    let mut ids: Vec<u64> = Vec::with_capacity(rows.len());
    // Consecutive samples usually share a chunk; skip the obvious repeats.
    for r in rows {
        for c in chunks_of(r, chunk_rows) {
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

/// Decoded bytes of the chunks of `plans` (per field, as
/// [`needed_chunks_per_field`] gives them).
pub(super) fn plan_bytes(st: &super::State, plans: &[Vec<u64>]) -> u64 {
    st.fields.iter().zip(plans).map(|(f, ids)| ids.len() as u64 * f.chunk_rows * f.row_bytes as u64).sum()
}

/// Decoded bytes of the chunks `physical` needs, over every field array.
pub(super) fn planned_bytes(st: &super::State, physical: &[usize]) -> u64 {
    plan_bytes(st, &needed_chunks_per_field(st, physical, |_| true))
}

/// Consecutive groups of `batches` whose chunks each decode to at most
/// `limit` bytes (a single batch over it is a group of its own): a window
/// whose whole plan is over the limit is decoded and copied one group at a
/// time, so what it holds decoded at once stays bounded however scattered
/// its samples are.
pub(super) fn decode_groups(st: &super::State, batches: &[Vec<usize>], limit: u64) -> Vec<std::ops::Range<usize>> {
    let physical = |b: &[Vec<usize>]| -> Vec<usize> { b.iter().flatten().map(|&i| st.physical(i)).collect() };
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
    fn chunk_ids_dedup_across_samples() {
        // Samples 3, 0, 1, 0 of atom offsets [0, 5, 12, 30, 31].
        assert_eq!(chunks_of_rows(&[30..31, 0..5, 5..12, 0..5], 10), vec![0, 1, 3]);
        assert_eq!(chunks_of_rows(&[0..0, 0..0], 10), Vec::<u64>::new());
        assert_eq!(chunks_of_rows(&[3..4, 0..1], 2), vec![0, 1]);
    }
}

//! Neighbor-index checks: each decoded `neighbor_list` chunk checked once
//! against the atoms of the samples it holds, and batches refusing the
//! samples found bad (with the append-bug diagnosis in their error).

use super::ChunkSource;
use super::pointers::EdgeRun;
use super::{FieldArray, State};
use crate::data::NEIGHBOR_LIST;
use crate::data::{DType, HostData, IndexReport};
use crate::error::Error;

/// For `neighbor_list`: checks every row of decoded (wide) `chunk`
/// against the atoms of the active sample it belongs to, and records the
/// samples with an index outside in `f.bad_samples`. Runs once per
/// decode, so a warm epoch checks nothing again: a check fused into each
/// batch's row copy measured ~10% of a warm shuffled epoch on the
/// reference layout (the neighbor list is a third of its bytes), this
/// one well under 1% (a pass over a freshly decoded chunk, beside zstd).
pub(super) fn verify_neighbors(st: &State, f: &FieldArray, runs: &[EdgeRun], wide: &[u8]) {
    if f.name != NEIGHBOR_LIST || f.row_elems == 0 {
        return;
    }
    let owned;
    let vals: &[i64] = match (f.dtype, bytemuck::try_cast_slice::<u8, i64>(wide)) {
        (DType::Int64, Ok(v)) => v,
        _ => {
            owned = HostData::from_bytes(f.dtype, wide).ok().and_then(|d| d.to_i64_vec()).unwrap_or_default();
            &owned
        }
    };
    let active = |p: usize| st.active.as_ref().is_none_or(|a| a.contains(p));
    let mut bad = Vec::new();
    for EdgeRun { sample: p, rows, atoms } in runs.iter().cloned() {
        if !rows.is_empty() && active(p) {
            let (lo, last) = (atoms.start as i64, (atoms.end - atoms.start) as i64 - 1);
            let (a, b) = (rows.start * f.row_elems, rows.end * f.row_elems);
            let vals = vals.get(a..b).unwrap_or_default();
            // A short chunk (corrupt) counts as bad rather than unchecked.
            let short = vals.len() != b - a;
            if short || vals.iter().fold(0, |acc, &x| crate::data::fold_index(acc, x, lo, last)) < 0 {
                bad.push(p);
            }
        }
    }
    if !bad.is_empty() {
        // A set of sample ids stays valid whatever a panicking writer did.
        f.bad_samples.write().unwrap_or_else(std::sync::PoisonError::into_inner).extend(bad);
        f.any_bad.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// The error of logical sample `index` whose neighbor list points
/// outside it, against the snapshot `st`, with the diagnosis of
/// nvalchemi-toolkit's append bug (it needs the store's atom offsets).
pub(super) fn range_error_in(src: &ChunkSource, st: &State, index: usize, r: IndexReport) -> Error {
    let physical_index = if index < st.len() { st.physical(index) } else { index };
    // The candidate offsets are at most `num_atoms - 1 - max`: the
    // leading atom pointers (an error reading them leaves no diagnosis).
    let most = (r.num_atoms as i64).saturating_sub(1).saturating_sub(r.max);
    let append_shift = (physical_index < st.num_samples)
        .then(|| st.pointers.leading_atom_pointers(src, physical_index, most).ok())
        .flatten()
        .and_then(|lead| crate::data::append_shifts(&lead, physical_index, r.min, r.max, r.num_atoms).next());
    Error::NeighborIndex {
        source_name: src.name.to_string(),
        index,
        physical_index,
        value: r.value,
        num_atoms: r.num_atoms,
        append_shift,
    }
}

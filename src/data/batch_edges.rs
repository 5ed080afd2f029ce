//! Neighbor lists built into a collated batch: `neighbor_list` and `shifts`
//! of every structure, at a cutoff, from the batch's own float32 geometry,
//! in parallel over structures, written straight into the batch's buffers.
//!
//! The lists are the ones [`neighbors`](crate::data::neighbors) gives a
//! stored structure (the same algorithm on the same float32 values), so a
//! loader that builds them equals a store whose lists were built at import
//! with the same cutoff: same pairs, same images, same order.

use rayon::prelude::*;

use crate::data::neighbors::{NeighborList, SHIFTS, Scratch, flags, foreign_edge_field, is_float, neighbor_list_into};
use crate::data::{CollatedBatch, CollatedField, HostData, Level, NEIGHBOR_LIST};
use crate::error::{Error, Result};

/// Replaces `batch`'s edges with the neighbor lists of its structures at
/// `cutoff` Å: `neighbor_list` (batch-local indices, int32 when `int32`,
/// else int64), `shifts` (float32 `S·cell`) and `edges_ptr`.
/// `sample_error(k, e)` names structure `k` of the batch in the error of
/// its list (a singular periodic cell, non-finite positions, too many
/// neighbors).
///
/// # Errors
/// [`Error::InvalidInput`] when the batch has no float `[n, 3]` positions,
/// a malformed `cell` or `pbc`, or an edge field other than
/// `neighbor_list` and `shifts` (its rows could not follow the new edges);
/// `sample_error`'s error for a structure whose list fails.
pub(crate) fn build_edges(
    batch: &mut CollatedBatch,
    cutoff: f64,
    int32: bool,
    sample_error: &(dyn Fn(usize, Error) -> Error + Sync),
) -> Result<()> {
    if let Some(name) = foreign_edge_field(batch.fields.iter().map(|(n, f)| (n, f.level))) {
        return Err(Error::invalid(
            "neighbor list",
            format!("edge field {name} cannot follow neighbor lists built while loading"),
        ));
    }
    let geometry = BatchGeometry::of(batch)?;
    let b = batch.num_graphs();
    let lists: Vec<NeighborList> = (0..b)
        .into_par_iter()
        .map_init(Scratch::default, |scratch, k| {
            let (positions, cell, pbc) = geometry.structure(k);
            let mut nl = NeighborList::default();
            neighbor_list_into(&positions, &cell, pbc, cutoff, scratch, &mut nl).map_err(|e| sample_error(k, e))?;
            Ok(nl)
        })
        .collect::<Result<_>>()?;
    let mut edges_ptr = Vec::with_capacity(b + 1);
    edges_ptr.push(0i64);
    for nl in &lists {
        edges_ptr.push(edges_ptr[edges_ptr.len() - 1] + nl.len() as i64);
    }
    let total = edges_ptr[b] as usize;
    let mut shifts = vec![0f32; 3 * total];
    let data = if int32 {
        if batch.atoms_ptr.last().is_some_and(|&n| n > i64::from(i32::MAX)) {
            return Err(Error::invalid("neighbor list", "a batch of more than 2^31 atoms cannot take int32 indices"));
        }
        let mut pairs = vec![0i32; 2 * total];
        // In range: batch-local indices below the batch's atom count (checked above).
        write_lists(&mut pairs, &mut shifts, &edges_ptr, &lists, &batch.atoms_ptr, |x| x as i32);
        HostData::Int32(pairs)
    } else {
        let mut pairs = vec![0i64; 2 * total];
        write_lists(&mut pairs, &mut shifts, &edges_ptr, &lists, &batch.atoms_ptr, |x| x);
        HostData::Int64(pairs)
    };
    batch.fields.insert(NEIGHBOR_LIST.into(), CollatedField { level: Level::Edge, trailing_shape: vec![2], data });
    batch.fields.insert(
        SHIFTS.into(),
        CollatedField { level: Level::Edge, trailing_shape: vec![3], data: HostData::Float32(shifts) },
    );
    batch.edges_ptr = edges_ptr;
    Ok(())
}

/// `v` cut into one slice per structure: rows `ptr[k]..ptr[k + 1]` of
/// `width` elements.
fn split_by<'a, T>(mut v: &'a mut [T], ptr: &[i64], width: usize) -> Vec<&'a mut [T]> {
    let mut parts = Vec::with_capacity(ptr.len().saturating_sub(1));
    for w in ptr.windows(2) {
        let (head, tail) = v.split_at_mut((w[1] - w[0]) as usize * width);
        parts.push(head);
        v = tail;
    }
    parts
}

/// Writes each structure's pairs (moved to batch-local indices by its
/// first atom `offsets[k]`, converted by `conv`) and shifts into its own
/// rows of `pairs` and `shifts`, one task per structure.
fn write_lists<T: Send>(
    pairs: &mut [T],
    shifts: &mut [f32],
    edges_ptr: &[i64],
    lists: &[NeighborList],
    offsets: &[i64],
    conv: impl Fn(i64) -> T + Sync,
) {
    let pair_parts = split_by(pairs, edges_ptr, 2);
    let shift_parts = split_by(shifts, edges_ptr, 3);
    pair_parts.into_par_iter().zip(shift_parts).enumerate().for_each(|(k, (p, s))| {
        let (nl, off) = (&lists[k], offsets[k]);
        for (o, pr) in p.chunks_exact_mut(2).zip(&nl.pairs) {
            o[0] = conv(pr[0] + off);
            o[1] = conv(pr[1] + off);
        }
        for (o, sh) in s.chunks_exact_mut(3).zip(&nl.shifts) {
            o.copy_from_slice(&sh.map(|x| x as f32));
        }
    });
}

/// A batch's positions, cells and periodicity, widened to f64 once.
struct BatchGeometry<'a> {
    positions: Vec<f64>,
    cells: Option<Vec<f64>>,
    pbc: Option<Vec<bool>>,
    atoms_ptr: &'a [i64],
}

impl<'a> BatchGeometry<'a> {
    fn of(batch: &'a CollatedBatch) -> Result<BatchGeometry<'a>> {
        let b = batch.num_graphs();
        let pos = batch
            .fields
            .get("positions")
            .ok_or_else(|| Error::invalid("neighbor list", "the batch has no positions field"))?;
        if pos.level != Level::Atom || pos.trailing_shape != [3] || !is_float(pos.data.dtype()) {
            return Err(Error::invalid(
                "neighbor list",
                format!("positions are {} {:?} rows, expected float [3]", pos.data.dtype(), pos.trailing_shape),
            ));
        }
        let system = |name: &str, trailing: &[usize]| -> Result<Option<&CollatedField>> {
            match batch.fields.get(name) {
                None => Ok(None),
                Some(f)
                    if f.level == Level::System
                        && f.trailing_shape == trailing
                        && f.data.len() == b * trailing.iter().product::<usize>() =>
                {
                    Ok(Some(f))
                }
                Some(f) => Err(Error::invalid(
                    "neighbor list",
                    format!("{name} is {:?} {:?} rows, expected system {trailing:?}", f.level, f.trailing_shape),
                )),
            }
        };
        let cells = system("cell", &[3, 3])?.map(|f| f.data.to_f64_vec());
        let pbc = system("pbc", &[3])?.map(|f| flags(&f.data));
        Ok(BatchGeometry { positions: pos.data.to_f64_vec(), cells, pbc, atoms_ptr: &batch.atoms_ptr })
    }

    /// Structure `k`: positions, cell rows (zero without a cell) and pbc
    /// (non-periodic without one).
    fn structure(&self, k: usize) -> (Vec<[f64; 3]>, [[f64; 3]; 3], [bool; 3]) {
        let (a0, a1) = (self.atoms_ptr[k] as usize, self.atoms_ptr[k + 1] as usize);
        let positions = self.positions[3 * a0..3 * a1].chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        let cell = self
            .cells
            .as_ref()
            .map_or([[0.0; 3]; 3], |c| std::array::from_fn(|r| std::array::from_fn(|i| c[9 * k + 3 * r + i])));
        let pbc = self.pbc.as_ref().map_or([false; 3], |p| [p[3 * k], p[3 * k + 1], p[3 * k + 2]]);
        (positions, cell, pbc)
    }
}

//! Neighbor lists built into a collated batch: `neighbor_list` and `shifts`
//! of every structure, at a cutoff, from the batch's own float32 geometry,
//! in parallel over structures, written straight into the batch's buffers.
//!
//! The lists are the ones [`neighbors`](crate::data::neighbors) gives a
//! stored structure (the same algorithm on the same float32 values), so a
//! loader that builds them equals a store whose lists were built at import
//! with the same cutoff: same pairs, same images, same order.

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use crate::data::cell_list::{EdgeSink, Scratch, append_neighbors};
use crate::data::neighbors::{SHIFTS, flags, foreign_edge_field, is_float};
use crate::data::{CollatedBatch, CollatedField, DType, HostData, Level, NEIGHBOR_LIST};
use crate::error::{Error, Result};

/// Replaces `batch`'s edges with the neighbor lists of its structures at
/// `cutoff` Å: `neighbor_list` (batch-local indices, int32 when `int32`,
/// else int64), `shifts` (float32 `S·cell`) and `edges_ptr`.
/// `sample_error(i, e)` names the structure of logical index `i` (its
/// entry in the batch's `indices`) in the error of its list (a singular
/// periodic cell, non-finite positions, too many neighbors).
///
/// # Errors
/// [`Error::InvalidInput`] when the batch has no float `[n, 3]` positions,
/// a malformed `cell` or `pbc`, or an edge field other than
/// `neighbor_list` and `shifts` (its rows could not follow the new edges);
/// `sample_error`'s error for a structure whose list fails.
fn build_edges(
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
    let indices = &batch.indices;
    let b = batch.num_graphs();
    // A few groups of neighboring structures per thread: enough to balance
    // cells of different sizes, few enough that each group's buffers grow
    // once and are then reused.
    let per = b.div_ceil(4 * rayon::current_num_threads()).max(1);
    let ranges: Vec<Range<usize>> = (0..b).step_by(per).map(|s| s..(s + per).min(b)).collect();
    let groups: Vec<Group> = ranges
        .par_iter()
        .map(|r| {
            let mut g = Group::take();
            let mut positions = Vec::new();
            for k in r.clone() {
                let (cell, pbc) = geometry.structure_into(k, &mut positions);
                let before = g.edges.edges();
                append_neighbors(&positions, &cell, pbc, cutoff, &mut g.scratch, &mut g.edges)
                    .map_err(|e| sample_error(indices.get(k).copied().unwrap_or(k), e))?;
                g.counts.push(g.edges.edges() - before);
            }
            Ok(g)
        })
        .collect::<Result<_>>()?;
    let mut edges_ptr = Vec::with_capacity(b + 1);
    edges_ptr.push(0i64);
    for c in groups.iter().flat_map(|g| &g.counts) {
        edges_ptr.push(edges_ptr[edges_ptr.len() - 1] + *c as i64);
    }
    let total = edges_ptr[b] as usize;
    let home = &batch.buffers;
    let mut shifts = match home.take(DType::Float32, 3 * total) {
        HostData::Float32(v) => v,
        // `take` gives the dtype asked for; this arm only satisfies the match.
        _ => Vec::new(),
    };
    for g in &groups {
        shifts.extend_from_slice(g.edges.shifts.as_flattened());
    }
    let data = if int32 {
        if batch.atoms_ptr.last().is_some_and(|&n| n > i64::from(i32::MAX)) {
            return Err(Error::invalid("neighbor list", "a batch of more than 2^31 atoms cannot take int32 indices"));
        }
        let mut pairs = match home.take(DType::Int32, 2 * total) {
            HostData::Int32(v) => v,
            _ => Vec::new(),
        };
        // In range: batch-local indices below the batch's atom count (checked above).
        write_pairs(&mut pairs, &groups, &ranges, &batch.atoms_ptr, |x| x as i32);
        HostData::Int32(pairs)
    } else {
        let mut pairs = match home.take(DType::Int64, 2 * total) {
            HostData::Int64(v) => v,
            _ => Vec::new(),
        };
        write_pairs(&mut pairs, &groups, &ranges, &batch.atoms_ptr, |x| x);
        HostData::Int64(pairs)
    };
    Group::give_all(groups);
    let lists = CollatedField { level: Level::Edge, trailing_shape: vec![2], data };
    let shifts = CollatedField { level: Level::Edge, trailing_shape: vec![3], data: HostData::Float32(shifts) };
    for (name, field) in [(NEIGHBOR_LIST, lists), (SHIFTS, shifts)] {
        if let Some(old) = batch.fields.insert(name.into(), field) {
            batch.buffers.give(old.data);
        }
    }
    batch.edges_ptr = edges_ptr;
    Ok(())
}

/// [`build_edges`] for every batch of a read window, in parallel over the
/// batches as well as within each: a batch's groups alone leave a core
/// idle at the end of every batch (~17% of an epoch building lists on two
/// cores). Results are gathered in batch order, so the error returned is
/// the first failing batch's.
///
/// # Errors
/// As [`build_edges`].
pub(crate) fn build_edges_all(
    batches: &mut [CollatedBatch],
    cutoff: f64,
    int32: bool,
    sample_error: &(dyn Fn(usize, Error) -> Error + Sync),
) -> Result<()> {
    let done: Vec<Result<()>> = batches.par_iter_mut().map(|b| build_edges(b, cutoff, int32, sample_error)).collect();
    done.into_iter().collect()
}

/// One task's structures' edges as a batch stores them (sample-local
/// pairs, float32 shifts: 20 bytes an edge), each structure's edge count,
/// and the builder's scratch.
#[derive(Default)]
struct Group {
    counts: Vec<usize>,
    edges: Edges,
    scratch: Scratch,
}

#[derive(Default)]
struct Edges {
    pairs: Vec<[u32; 2]>,
    shifts: Vec<[f32; 3]>,
}

/// Groups kept between batches, so lists are built into memory already
/// touched: fresh buffers for every batch cost a page fault every 4 KiB,
/// about a quarter of a loader's list time. Process-wide because the
/// loader and the benchmark build lists from any thread; the kept groups'
/// edge buffers hold at most [`KEPT_BYTES`] in all.
static FREE_GROUPS: Mutex<Vec<Group>> = Mutex::new(Vec::new());
const KEPT_BYTES: usize = 256 << 20;

impl Group {
    fn take() -> Group {
        // A list of cleared groups: nothing a panic could leave half-done.
        FREE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner).pop().unwrap_or_default()
    }

    /// Bytes of its edge buffers.
    fn bytes(&self) -> usize {
        8 * self.edges.pairs.capacity() + 12 * self.edges.shifts.capacity()
    }

    fn give_all(groups: Vec<Group>) {
        let mut free = FREE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held: usize = free.iter().map(Group::bytes).sum();
        for mut g in groups {
            if held + g.bytes() <= KEPT_BYTES {
                held += g.bytes();
                g.counts.clear();
                g.edges.pairs.clear();
                g.edges.shifts.clear();
                free.push(g);
            }
        }
    }
}

impl EdgeSink for Edges {
    fn edges(&self) -> usize {
        self.pairs.len()
    }
    fn push(&mut self, i: u32, j: u32, _image: [i32; 3], shift: [f64; 3]) {
        self.pairs.push([i, j]);
        self.shifts.push(shift.map(|x| x as f32));
    }
}

/// Appends each group's pairs to `pairs` in order, moved to batch-local
/// indices by each structure's first atom `offsets[k]` and converted by
/// `conv`. Appended: a buffer zero-filled first and then overwritten
/// would cost one more pass over every edge. One batch's copy runs on one
/// thread; the batches of a window are built in parallel
/// (`build_edges_all`).
fn write_pairs<T>(
    pairs: &mut Vec<T>,
    groups: &[Group],
    ranges: &[Range<usize>],
    offsets: &[i64],
    conv: impl Fn(i64) -> T,
) {
    for (g, range) in groups.iter().zip(ranges) {
        let mut rest = g.edges.pairs.as_flattened();
        for (k, &count) in range.clone().zip(&g.counts) {
            // In range: `counts` are the group's edges per structure, in
            // order, so they add up to its pairs.
            let (rows, tail) = rest.split_at(2 * count);
            let off = offsets[k];
            pairs.extend(rows.iter().map(|&x| conv(i64::from(x) + off)));
            rest = tail;
        }
    }
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

    /// Structure `k`: its positions into `positions`; its cell rows (zero
    /// without a cell) and pbc (non-periodic without one).
    fn structure_into(&self, k: usize, positions: &mut Vec<[f64; 3]>) -> ([[f64; 3]; 3], [bool; 3]) {
        let (a0, a1) = (self.atoms_ptr[k] as usize, self.atoms_ptr[k + 1] as usize);
        positions.clear();
        positions.extend(self.positions[3 * a0..3 * a1].chunks_exact(3).map(|c| [c[0], c[1], c[2]]));
        let cell = self
            .cells
            .as_ref()
            .map_or([[0.0; 3]; 3], |c| std::array::from_fn(|r| std::array::from_fn(|i| c[9 * k + 3 * r + i])));
        let pbc = self.pbc.as_ref().map_or([false; 3], |p| [p[3 * k], p[3 * k + 1], p[3 * k + 2]]);
        (cell, pbc)
    }
}

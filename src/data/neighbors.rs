//! Periodic neighbor lists: every directed pair `(i, j, S)` with
//! `|r_j - r_i + S·cell| < cutoff`, except an atom with itself at `S = 0`,
//! as ASE's `neighbor_list('ijS', atoms, cutoff)` returns them.
//!
//! The store's convention is `neighbor_list` `[E, 2]` (int64, sample-local)
//! and `shifts` `[E, 3]` (float32, Å, `S·cell`), so that
//! `r_ij = r_j - r_i + shift`.
//!
//! The algorithm is a cell list over the atoms and their periodic images:
//! positions are wrapped into the cell along periodic directions, every image
//! that can lie within the cutoff of the cell is generated (several per atom
//! when the cutoff exceeds the cell), all of them are binned in cubes of edge
//! `cutoff`, and each atom of the cell scans the 27 bins around its own.
//! Work is linear in the atoms and their neighbors, for any cell shape.
//! Non-periodic directions get no images and need no cell vector (a zero
//! vector, as molecules and slabs often have, is fine).
//!
//! No crate on crates.io builds ASE-compatible lists with integer shifts for
//! triclinic, mixed-periodicity cells at this speed without pulling in a
//! chemistry stack, hence this module.

use rayon::prelude::*;

use crate::data::cell_list::{EdgeSink, Scratch, append_neighbors};
use crate::data::{AtomicData, DType, Field, HostData, Level, NEIGHBOR_LIST};
use crate::error::{Error, Result};

/// The name of the per-edge shift field (`[E, 3]`, Å).
pub const SHIFTS: &str = "shifts";

pub use crate::data::cell_list::MAX_NEIGHBORS_PER_ATOM;

/// One structure's geometry, the input of [`neighbor_lists`].
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    /// Positions, Å (need not be wrapped into the cell).
    pub positions: Vec<[f64; 3]>,
    /// Cell rows (lattice vectors), Å; only the periodic ones are used.
    pub cell: [[f64; 3]; 3],
    /// Periodicity per direction.
    pub pbc: [bool; 3],
}

/// A neighbor list of one structure.
///
/// Edges are ordered by `i`, then `j`, then image.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NeighborList {
    /// `[i, j]` pairs (sample-local atom indices).
    pub pairs: Vec<[i64; 2]>,
    /// Integer image offsets `S` (zero along non-periodic directions).
    pub images: Vec<[i32; 3]>,
    /// `S·cell`, Å.
    pub shifts: Vec<[f64; 3]>,
}

impl NeighborList {
    /// Number of edges.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there is no edge.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// The neighbor list of one structure.
///
/// `cell` rows are the lattice vectors (Å); only the rows of periodic
/// directions are used. Positions need not be wrapped: shifts refer to the
/// positions as given. Pairs at exactly `cutoff` are excluded, as in ASE.
///
/// ```
/// use atomzarr::data::neighbors::neighbor_list;
/// // One atom in a 2 Å cubic cell, periodic in x only: images at ±2 Å.
/// let cell = [[2.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]];
/// let nl = neighbor_list(&[[0.0; 3]], &cell, [true, false, false], 2.5).unwrap();
/// assert_eq!(nl.images, vec![[-1, 0, 0], [1, 0, 0]]);
/// assert_eq!(nl.shifts[1], [2.0, 0.0, 0.0]);
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] when `cutoff` is not a positive finite number, a
/// position is not finite, the periodic cell vectors are zero or linearly
/// dependent, or the search would need more cells or images than it indexes.
pub fn neighbor_list(
    positions: &[[f64; 3]],
    cell: &[[f64; 3]; 3],
    pbc: [bool; 3],
    cutoff: f64,
) -> Result<NeighborList> {
    let mut out = NeighborList::default();
    neighbor_list_into(positions, cell, pbc, cutoff, &mut Scratch::default(), &mut out)?;
    Ok(out)
}

pub(crate) fn neighbor_list_into(
    positions: &[[f64; 3]],
    cell: &[[f64; 3]; 3],
    pbc: [bool; 3],
    cutoff: f64,
    s: &mut Scratch,
    out: &mut NeighborList,
) -> Result<()> {
    out.pairs.clear();
    out.images.clear();
    out.shifts.clear();
    append_neighbors(positions, cell, pbc, cutoff, s, out)
}

impl EdgeSink for NeighborList {
    fn edges(&self) -> usize {
        self.pairs.len()
    }
    fn push(&mut self, i: u32, j: u32, image: [i32; 3], shift: [f64; 3]) {
        self.pairs.push([i64::from(i), i64::from(j)]);
        self.images.push(image);
        self.shifts.push(shift);
    }
}

/// Refuses a cutoff (a user's setting) that is not a positive finite
/// number of Å, as every entry point that takes one does.
pub(crate) fn check_cutoff(cutoff: f64) -> Result<()> {
    if cutoff.is_finite() && cutoff > 0.0 {
        Ok(())
    } else {
        Err(Error::Config(format!("cutoff must be a positive finite number of Å, got {cutoff}")))
    }
}

/// The first edge field among `fields` (name, level) other than
/// `neighbor_list` and `shifts`: one whose rows could not follow rebuilt
/// edges.
pub(crate) fn foreign_edge_field<'a>(fields: impl IntoIterator<Item = (&'a String, Level)>) -> Option<&'a String> {
    fields.into_iter().find(|(n, l)| *l == Level::Edge && *n != NEIGHBOR_LIST && *n != SHIFTS).map(|(n, _)| n)
}

/// A `pbc` field's values as flags: bool as they are, numbers non-zero.
pub(crate) fn flags(data: &HostData) -> Vec<bool> {
    match data {
        HostData::Bool(b) => b.clone(),
        other => other.to_f64_vec().iter().map(|&x| x != 0.0).collect(),
    }
}

/// Whether positions of `dtype` can feed the builder.
pub(crate) fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64)
}

/// Reads a structure's geometry from its fields: `positions` (any float
/// dtype), `cell` (`[1, 3, 3]`, absent: zero) and `pbc` (`[1, 3]`, absent:
/// non-periodic).
fn geometry(sample: &AtomicData) -> Result<Geometry> {
    let pos =
        sample.field("positions").ok_or_else(|| Error::invalid("neighbor list", "sample has no positions field"))?;
    if pos.trailing_shape() != [3] || !is_float(pos.dtype()) {
        return Err(Error::invalid(
            "neighbor list",
            format!("positions are {} {:?}, expected float [n, 3]", pos.dtype(), pos.shape),
        ));
    }
    let flat = pos.data.to_f64_vec();
    let positions: Vec<[f64; 3]> = flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let mut cell = [[0.0; 3]; 3];
    if let Some(c) = sample.field("cell") {
        let v = c.data.to_f64_vec();
        if v.len() != 9 {
            return Err(Error::invalid("neighbor list", format!("cell has shape {:?}, expected [1, 3, 3]", c.shape)));
        }
        for (k, row) in cell.iter_mut().enumerate() {
            row.copy_from_slice(&v[3 * k..3 * k + 3]);
        }
    }
    let mut pbc = [false; 3];
    if let Some(p) = sample.field("pbc") {
        let v = flags(&p.data);
        if v.len() != 3 {
            return Err(Error::invalid("neighbor list", format!("pbc has shape {:?}, expected [1, 3]", p.shape)));
        }
        pbc.copy_from_slice(&v);
    }
    Ok(Geometry { positions, cell, pbc })
}

/// `sample` with its `neighbor_list` (`[E, 2]` int64) and `shifts`
/// (`[E, 3]` float32, Å) rebuilt for `cutoff` from its positions, cell and
/// pbc. Other edge fields cannot follow new edges: a sample that has any is
/// refused rather than returned with stale rows.
///
/// ```
/// use atomzarr::AtomicData;
/// use atomzarr::data::neighbors::with_neighbors;
/// let s = AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.0, 0.0, 0.74]]).unwrap();
/// let s = with_neighbors(s, 1.0).unwrap();
/// assert_eq!(s.num_edges(), 2);
/// ```
///
/// # Errors
/// [`Error::InvalidInput`] when the sample has an edge field other than
/// `neighbor_list` and `shifts`, lacks float `[n, 3]` positions, has a
/// malformed `cell` or `pbc`, or as [`neighbor_list`].
pub fn with_neighbors(sample: AtomicData, cutoff: f64) -> Result<AtomicData> {
    let mut out = NeighborList::default();
    with_neighbors_using(sample, cutoff, &mut Scratch::default(), &mut out)
}

fn with_neighbors_using(
    mut sample: AtomicData,
    cutoff: f64,
    scratch: &mut Scratch,
    nl: &mut NeighborList,
) -> Result<AtomicData> {
    if let Some(name) = foreign_edge_field(sample.fields.iter().map(|(n, f)| (n, f.level))) {
        return Err(Error::invalid(
            "neighbor list",
            format!("edge field {name} cannot be kept when the neighbor list is rebuilt"),
        ));
    }
    let g = geometry(&sample)?;
    neighbor_list_into(&g.positions, &g.cell, g.pbc, cutoff, scratch, nl)?;
    let e = nl.len();
    let pairs: Vec<i64> = nl.pairs.iter().flatten().copied().collect();
    let shifts: Vec<f32> = nl.shifts.iter().flatten().map(|&x| x as f32).collect();
    sample.fields.insert(NEIGHBOR_LIST.into(), Field::new(Level::Edge, vec![e, 2], pairs)?);
    sample.fields.insert(SHIFTS.into(), Field::new(Level::Edge, vec![e, 3], shifts)?);
    Ok(sample)
}

/// [`with_neighbors`] on every sample, in parallel (rayon); the first
/// failing sample's error, naming its index.
///
/// # Errors
/// [`Error::InvalidInput`] naming the first failing sample's index, with the
/// error of [`with_neighbors`] as its reason.
pub fn add_neighbors(samples: Vec<AtomicData>, cutoff: f64) -> Result<Vec<AtomicData>> {
    samples
        .into_par_iter()
        .enumerate()
        .map_init(
            || (Scratch::default(), NeighborList::default()),
            |(scratch, nl), (i, s)| {
                with_neighbors_using(s, cutoff, scratch, nl)
                    .map_err(|e| Error::invalid(format!("sample {i}"), e.to_string()))
            },
        )
        .collect()
}

/// Neighbor lists of many structures, in parallel.
///
/// # Errors
/// As [`neighbor_list`], for the first failing structure.
pub fn neighbor_lists(structures: &[Geometry], cutoff: f64) -> Result<Vec<NeighborList>> {
    structures
        .par_iter()
        .map_init(Scratch::default, |scratch, g| {
            let mut out = NeighborList::default();
            neighbor_list_into(&g.positions, &g.cell, g.pbc, cutoff, scratch, &mut out)?;
            Ok(out)
        })
        .collect()
}

/// A [`Dataset`](crate::Dataset) transform that builds edges on the fly for
/// `cutoff` (for stores without neighbor lists, or with another cutoff):
/// `dataset.with_transform(neighbor_transform(5.0))`. The transform returns
/// the errors of [`with_neighbors`].
///
/// ```
/// use atomzarr::AtomicData;
/// use atomzarr::data::neighbors::neighbor_transform;
/// let t = neighbor_transform(1.0);
/// let s = t(AtomicData::new(vec![1, 1], vec![[0.0; 3], [0.0, 0.0, 0.74]]).unwrap()).unwrap();
/// assert_eq!(s.field("neighbor_list").unwrap().shape, vec![2, 2]);
/// ```
pub fn neighbor_transform(cutoff: f64) -> impl Fn(AtomicData) -> Result<AtomicData> + Send + Sync + Clone + 'static {
    move |s| with_neighbors(s, cutoff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::cell_list::dot;

    /// Brute force over a generous image range: the model the cell list must equal.
    fn brute(positions: &[[f64; 3]], cell: &[[f64; 3]; 3], pbc: [bool; 3], cutoff: f64) -> Vec<(i64, i64, [i32; 3])> {
        // Enough images for cutoff + span over the smallest height in the tests.
        let r = |k: usize| if pbc[k] { 12 } else { 0 };
        let mut out = Vec::new();
        for i in 0..positions.len() {
            for j in 0..positions.len() {
                for a in -r(0)..=r(0) {
                    for b in -r(1)..=r(1) {
                        for c in -r(2)..=r(2) {
                            if i == j && (a, b, c) == (0, 0, 0) {
                                continue;
                            }
                            let s = [0, 1, 2].map(|x| {
                                f64::from(a) * cell[0][x] + f64::from(b) * cell[1][x] + f64::from(c) * cell[2][x]
                            });
                            let d = [0, 1, 2].map(|x| positions[j][x] - positions[i][x] + s[x]);
                            if dot(d, d) < cutoff * cutoff {
                                out.push((i as i64, j as i64, [a, b, c]));
                            }
                        }
                    }
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn images_hundreds_of_cells_away_keep_their_order() {
        // Atoms ~600 cells apart: image offsets in the hundreds, far past
        // the few images the search itself makes.
        let cell = [[3.0, 0.0, 0.0], [0.0, 3.2, 0.0], [0.0, 0.0, 2.9]];
        let positions = [[0.1, 0.2, 0.3], [1800.4, 1.1, 0.4], [-1799.0, 2.0, 1.5]];
        let nl = neighbor_list(&positions, &cell, [true; 3], 3.5).unwrap();
        assert!(nl.images.iter().any(|s| s[0].abs() > 511));
        let got: Vec<_> = (0..nl.len()).map(|e| (nl.pairs[e][0], nl.pairs[e][1], nl.images[e])).collect();
        // Reference: brute force on the positions moved into the cell by
        // whole cell vectors `w`, its images moved back by `w_j - w_i`.
        let w = [0, -600, 600];
        let wrapped = [[0.1, 0.2, 0.3], [0.4, 1.1, 0.4], [1.0, 2.0, 1.5]];
        let mut want: Vec<_> = brute(&wrapped, &cell, [true; 3], 3.5)
            .into_iter()
            .map(|(i, j, s)| (i, j, [s[0] + w[j as usize] - w[i as usize], s[1], s[2]]))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn equals_brute_force_on_skewed_cells() {
        let cell = [[3.0, 0.0, 0.0], [2.2, 2.5, 0.0], [-1.1, 0.7, 2.8]];
        let positions = [[0.1, 0.2, 0.3], [1.9, 1.1, 0.4], [-2.5, 3.0, 4.4], [7.0, -1.0, 1.0]];
        for pbc in [[true; 3], [true, true, false], [false, true, false], [false; 3]] {
            let nl = neighbor_list(&positions, &cell, pbc, 4.1).unwrap();
            let got: Vec<_> = (0..nl.len()).map(|e| (nl.pairs[e][0], nl.pairs[e][1], nl.images[e])).collect();
            assert_eq!(got, brute(&positions, &cell, pbc, 4.1), "pbc {pbc:?}");
        }
    }

    /// Random cells (skewed, small and large against the cutoff), random
    /// positions (some far outside the cell), every periodicity.
    #[test]
    fn equals_brute_force_on_random_structures() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for case in 0..60 {
            let l = 1.5 + 4.0 * rnd();
            let cell = [
                [l, 0.0, 0.0],
                [(rnd() - 0.5) * l, l * (0.6 + 0.8 * rnd()), 0.0],
                [(rnd() - 0.5) * l, (rnd() - 0.5) * l, l * (0.6 + 0.8 * rnd())],
            ];
            let n = 1 + (rnd() * 6.0) as usize;
            let positions: Vec<[f64; 3]> = (0..n).map(|_| [0, 1, 2].map(|_| (rnd() * 3.0 - 1.0) * l)).collect();
            let pbc = [case % 2 == 0, case % 3 != 1, case % 5 < 3];
            let cutoff = 0.5 + 4.0 * rnd();
            let nl = neighbor_list(&positions, &cell, pbc, cutoff).unwrap();
            let got: Vec<_> = (0..nl.len()).map(|e| (nl.pairs[e][0], nl.pairs[e][1], nl.images[e])).collect();
            assert_eq!(got, brute(&positions, &cell, pbc, cutoff), "case {case}: pbc {pbc:?} cutoff {cutoff}");
        }
    }

    #[test]
    fn refuses_bad_input() {
        let cell = [[0.0; 3]; 3];
        assert!(neighbor_list(&[[0.0; 3]], &cell, [true, false, false], 2.0).is_err());
        assert!(neighbor_list(&[[0.0; 3]], &cell, [false; 3], -1.0).is_err());
        assert!(neighbor_list(&[[f64::NAN, 0.0, 0.0]], &cell, [false; 3], 1.0).is_err());
        let s = AtomicData::new(vec![1], vec![[0.0; 3]])
            .unwrap()
            .with_custom("edge_embeddings", Level::Edge, vec![0, 4], Vec::<f32>::new())
            .unwrap();
        assert!(with_neighbors(s, 1.0).is_err());
    }
}

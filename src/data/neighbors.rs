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

use crate::data::{AtomicData, DType, Field, HostData, Level, NEIGHBOR_LIST};
use crate::error::{Error, Result};

/// The name of the per-edge shift field (`[E, 3]`, Å).
pub const SHIFTS: &str = "shifts";

/// The most neighbors per atom (on average over a structure) a list may
/// have: a larger cutoff is refused before its lists are built, so a typo
/// (50 Å for 5 Å) is an error rather than gigabytes of edges. Dense
/// solids at 6 Å have ~100; 1,024 is about 12 Å in a metal.
pub const MAX_NEIGHBORS_PER_ATOM: usize = 1024;

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

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

fn norm(a: [f64; 3]) -> f64 {
    dot(a, a).sqrt()
}

fn scale(a: [f64; 3], s: f64) -> [f64; 3] {
    [a[0] * s, a[1] * s, a[2] * s]
}

fn add(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// Unit vectors completing the periodic cell vectors to a basis. Their
/// length does not matter: no image is ever taken along them.
fn effective_cell(cell: &[[f64; 3]; 3], pbc: [bool; 3]) -> Result<[[f64; 3]; 3]> {
    let periodic: Vec<usize> = (0..3).filter(|&k| pbc[k]).collect();
    let mut eff = *cell;
    let unit = |v: [f64; 3]| -> Option<[f64; 3]> {
        let n = norm(v);
        (n > 1e-12).then(|| scale(v, 1.0 / n))
    };
    match periodic.len() {
        3 => {}
        2 => {
            let (a, b) = (periodic[0], periodic[1]);
            let c = 3 - a - b;
            eff[c] = unit(cross(cell[a], cell[b]))
                .ok_or_else(|| Error::invalid("neighbor list", "periodic cell vectors are parallel or zero"))?;
        }
        1 => {
            let a = periodic[0];
            let u = unit(cell[a]).ok_or_else(|| Error::invalid("neighbor list", "periodic cell vector is zero"))?;
            // Any vector not parallel to u, then two orthonormal completions.
            let probe = if u[0].abs() < 0.9 { [1.0, 0.0, 0.0] } else { [0.0, 1.0, 0.0] };
            let v = unit(cross(u, probe)).unwrap_or([0.0, 0.0, 1.0]);
            let w = cross(u, v);
            let (b, c) = ((a + 1) % 3, (a + 2) % 3);
            eff[b] = v;
            eff[c] = w;
        }
        _ => eff = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    }
    let vol = dot(eff[0], cross(eff[1], eff[2]));
    let scale_ref = norm(eff[0]) * norm(eff[1]) * norm(eff[2]);
    if !vol.is_finite() || vol.abs() <= 1e-12 * scale_ref.max(1e-300) {
        return Err(Error::invalid("neighbor list", "periodic cell vectors are linearly dependent (zero volume)"));
    }
    Ok(eff)
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

/// Buffers reused between structures.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Image atoms: position, source atom, image offset (relative to the wrapped atom).
    img_pos: Vec<[f64; 3]>,
    img_atom: Vec<u32>,
    img_shift: Vec<[i32; 3]>,
    /// Per atom: the wrap offset `w` with `wrapped = r + w·cell`.
    wrap: Vec<[i32; 3]>,
    wrapped: Vec<[f64; 3]>,
    /// Counting-sorted bins (CSR).
    bin_of: Vec<u32>,
    bin_start: Vec<u32>,
    sorted: Vec<u32>,
    /// The central (S = 0) image of each atom.
    central: Vec<u32>,
    /// One atom's edges before sorting.
    row: Vec<(u32, [i32; 3])>,
    /// The same edges as sortable keys (see [`pack`]).
    keys: Vec<u64>,
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

/// Where the builder writes a structure's edges, in order: by `i`, then
/// `j`, then image. A loader's sink keeps only what a batch stores (20
/// bytes an edge); [`NeighborList`] keeps images and float64 shifts too.
pub(crate) trait EdgeSink {
    /// Edges written so far.
    fn edges(&self) -> usize;
    /// Edge `i -> j` through `image`, with `shift = image·cell`.
    fn push(&mut self, i: u32, j: u32, image: [i32; 3], shift: [f64; 3]);
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

/// Appends the neighbor list of one structure to `out` (see
/// [`neighbor_list`]).
pub(crate) fn append_neighbors(
    positions: &[[f64; 3]],
    cell: &[[f64; 3]; 3],
    pbc: [bool; 3],
    cutoff: f64,
    s: &mut Scratch,
    out: &mut impl EdgeSink,
) -> Result<()> {
    check_input(positions, cutoff)?;
    if positions.is_empty() {
        return Ok(());
    }
    let lattice = Lattice::new(cell, pbc, cutoff)?;
    lattice.wrap(positions, s)?;
    lattice.images(s)?;
    let bins = Bins::sort(s, cutoff);
    lattice.scan(&bins, cutoff, s, out)
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

fn too_many_neighbors(cutoff: f64) -> Error {
    Error::invalid(
        "neighbor list",
        format!(
            "cutoff {cutoff} Å gives more than {MAX_NEIGHBORS_PER_ATOM} neighbors per atom (MAX_NEIGHBORS_PER_ATOM)"
        ),
    )
}

/// Refuses a cutoff that is not a positive finite number, more atoms than
/// the `u32` indices hold, and non-finite positions.
fn check_input(positions: &[[f64; 3]], cutoff: f64) -> Result<()> {
    if !(cutoff.is_finite() && cutoff > 0.0) {
        return Err(Error::invalid("neighbor list", format!("cutoff {cutoff} is not a positive finite number")));
    }
    let n = positions.len();
    if n > u32::MAX as usize / 2 {
        return Err(Error::invalid("neighbor list", format!("{n} atoms is more than this builder indexes")));
    }
    if let Some(p) = positions.iter().find(|p| p.iter().any(|x| !x.is_finite())) {
        return Err(Error::invalid("neighbor list", format!("non-finite position {p:?}")));
    }
    Ok(())
}

/// The cell as the search sees it: reciprocal vectors, and how many images
/// each periodic direction needs for the cutoff.
struct Lattice {
    cell: [[f64; 3]; 3],
    pbc: [bool; 3],
    /// Fractional coordinate k of p is `dot(p, recip[k])`.
    recip: [[f64; 3]; 3],
    /// Images per direction (0 along non-periodic ones).
    reach: [i32; 3],
    /// The cutoff in fractional units per direction.
    margin: [f64; 3],
    cutoff: f64,
}

impl Lattice {
    fn new(cell: &[[f64; 3]; 3], pbc: [bool; 3], cutoff: f64) -> Result<Lattice> {
        let eff = effective_cell(cell, pbc)?;
        let vol = dot(eff[0], cross(eff[1], eff[2]));
        let recip = [
            scale(cross(eff[1], eff[2]), 1.0 / vol),
            scale(cross(eff[2], eff[0]), 1.0 / vol),
            scale(cross(eff[0], eff[1]), 1.0 / vol),
        ];
        // The cell's height along k is 1/|recip_k|.
        let mut reach = [0i32; 3];
        let mut margin = [0f64; 3];
        for k in (0..3).filter(|&k| pbc[k]) {
            margin[k] = cutoff * norm(recip[k]);
            let r = margin[k].ceil() + 1.0;
            if r > 1e6 {
                return Err(Error::invalid(
                    "neighbor list",
                    format!("cutoff {cutoff} spans more than a million cells along direction {k}"),
                ));
            }
            reach[k] = r as i32;
        }
        Ok(Lattice { cell: *cell, pbc, recip, reach, margin, cutoff })
    }

    /// `p + S·cell` for integer image offsets `S`, one cell vector at a time.
    fn translate(&self, mut p: [f64; 3], image: [i32; 3]) -> [f64; 3] {
        for k in (0..3).filter(|&k| image[k] != 0) {
            p = add(p, scale(self.cell[k], f64::from(image[k])));
        }
        p
    }

    /// Wraps the positions into the cell along periodic directions
    /// (`s.wrapped`), remembering the offsets (`s.wrap`).
    fn wrap(&self, positions: &[[f64; 3]], s: &mut Scratch) -> Result<()> {
        s.wrap.clear();
        s.wrapped.clear();
        for &p in positions {
            let mut w = [0i32; 3];
            let mut q = p;
            for k in (0..3).filter(|&k| self.pbc[k]) {
                let fl = dot(p, self.recip[k]).floor();
                if fl.abs() > 1e9 {
                    return Err(Error::invalid("neighbor list", format!("position {p:?} is too far from the cell")));
                }
                w[k] = -(fl as i32);
                q = add(q, scale(self.cell[k], -fl));
            }
            s.wrap.push(w);
            s.wrapped.push(q);
        }
        Ok(())
    }

    /// The images that can be within the cutoff of some wrapped atom:
    /// fractional coordinate within (-margin, 1 + margin) along every
    /// periodic direction.
    fn images(&self, s: &mut Scratch) -> Result<()> {
        s.img_pos.clear();
        s.img_atom.clear();
        s.img_shift.clear();
        s.central.clear();
        s.central.resize(s.wrapped.len(), 0);
        let eps = 1e-9;
        let (reach, margin) = (self.reach, self.margin);
        let inside = |k: usize, f: f64| !self.pbc[k] || (f > -margin[k] - eps && f < 1.0 + margin[k] + eps);
        // Counted before any is made: far more images than neighbors mean a
        // cutoff far beyond MAX_NEIGHBORS_PER_ATOM (about half of an atom's
        // images lie within the cutoff once it spans several cells).
        let count = |f: f64, k: usize| (-reach[k]..=reach[k]).filter(|&i| inside(k, f + f64::from(i))).count();
        let images: usize = s
            .wrapped
            .iter()
            .map(|&q| {
                let f = self.recip.map(|r| dot(q, r));
                count(f[0], 0) * count(f[1], 1) * count(f[2], 2)
            })
            .sum();
        if images > s.wrapped.len() * (27 + 4 * MAX_NEIGHBORS_PER_ATOM) {
            return Err(too_many_neighbors(self.cutoff));
        }
        for (a, &q) in s.wrapped.iter().enumerate() {
            let f = self.recip.map(|r| dot(q, r));
            for i0 in (-reach[0]..=reach[0]).filter(|&i| inside(0, f[0] + f64::from(i))) {
                for i1 in (-reach[1]..=reach[1]).filter(|&i| inside(1, f[1] + f64::from(i))) {
                    for i2 in (-reach[2]..=reach[2]).filter(|&i| inside(2, f[2] + f64::from(i))) {
                        let sh = [i0, i1, i2];
                        if sh == [0, 0, 0] {
                            s.central[a] = s.img_pos.len() as u32;
                        }
                        s.img_pos.push(self.translate(q, sh));
                        s.img_atom.push(a as u32);
                        s.img_shift.push(sh);
                    }
                }
            }
        }
        let m = s.img_pos.len();
        if m > u32::MAX as usize / 2 {
            return Err(Error::invalid(
                "neighbor list",
                format!("{m} periodic images is more than this builder indexes"),
            ));
        }
        Ok(())
    }

    /// Each atom of the cell against the 27 bins around its central image;
    /// edges ordered by `i`, then `j`, then image.
    fn scan(&self, bins: &Bins, cutoff: f64, s: &mut Scratch, out: &mut impl EdgeSink) -> Result<()> {
        let c2 = cutoff * cutoff;
        let start = out.edges();
        let limit = s.wrapped.len().saturating_mul(MAX_NEIGHBORS_PER_ATOM);
        let dims = bins.dims;
        for i in 0..s.wrapped.len() {
            let ci = s.central[i] as usize;
            let pi = s.img_pos[ci];
            let c = bins.coord(pi);
            s.row.clear();
            for b0 in c[0].saturating_sub(1)..=(c[0] + 1).min(dims[0] - 1) {
                for b1 in c[1].saturating_sub(1)..=(c[1] + 1).min(dims[1] - 1) {
                    for b2 in c[2].saturating_sub(1)..=(c[2] + 1).min(dims[2] - 1) {
                        let b = (b0 * dims[1] + b1) * dims[2] + b2;
                        for &t in &s.sorted[s.bin_start[b] as usize..s.bin_start[b + 1] as usize] {
                            let t = t as usize;
                            let p = s.img_pos[t];
                            let d = [p[0] - pi[0], p[1] - pi[1], p[2] - pi[2]];
                            if t != ci && dot(d, d) < c2 {
                                let j = s.img_atom[t];
                                // Back to the positions as given: r_j - r_i + S·cell
                                // with S = image + w_j - w_i.
                                let (wi, wj, sh) = (s.wrap[i], s.wrap[j as usize], s.img_shift[t]);
                                s.row.push((j, [0, 1, 2].map(|k| sh[k] + wj[k] - wi[k])));
                            }
                        }
                    }
                }
            }
            if out.edges() - start + s.row.len() > limit {
                return Err(too_many_neighbors(cutoff));
            }
            // In range: `check_input` bounds the atom count below u32::MAX.
            let i = i as u32;
            s.keys.clear();
            s.keys.extend(s.row.iter().map_while(|&(j, img)| pack(j, img)));
            if s.keys.len() == s.row.len() {
                // Integers sort about twice as fast as tuples.
                s.keys.sort_unstable();
                for &key in &s.keys {
                    let (j, img) = unpack(key);
                    out.push(i, j, img, self.translate([0.0; 3], img));
                }
            } else {
                s.row.sort_unstable();
                for &(j, img) in &s.row {
                    out.push(i, j, img, self.translate([0.0; 3], img));
                }
            }
        }
        Ok(())
    }
}

/// Image components of at most `PACK_RANGE` in magnitude fit a key.
const PACK_RANGE: i32 = 511;

/// `(j, image)` as one integer ordered as the tuple is (`j`, then each
/// image component, each offset into 10 bits), when the image fits.
fn pack(j: u32, img: [i32; 3]) -> Option<u64> {
    if img.iter().any(|c| c.abs() > PACK_RANGE) {
        return None;
    }
    let c = img.map(|c| (c + PACK_RANGE + 1) as u64);
    Some((u64::from(j) << 30) | (c[0] << 20) | (c[1] << 10) | c[2])
}

fn unpack(key: u64) -> (u32, [i32; 3]) {
    let c = |shift: u32| ((key >> shift) & 0x3ff) as i32 - PACK_RANGE - 1;
    ((key >> 30) as u32, [c(20), c(10), c(0)])
}

/// Bins: cubes of edge >= cutoff over the images' bounding box, with no
/// more bins than a few per image (a sparse molecule gets bigger bins).
struct Bins {
    lo: [f64; 3],
    edge: f64,
    dims: [usize; 3],
}

impl Bins {
    /// The bins of `s.img_pos`, with the images counting-sorted by bin into
    /// `s.sorted` (CSR: `s.bin_start`).
    fn sort(s: &mut Scratch, cutoff: f64) -> Bins {
        let m = s.img_pos.len();
        let mut lo = [f64::INFINITY; 3];
        let mut hi = [f64::NEG_INFINITY; 3];
        for p in &s.img_pos {
            for k in 0..3 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        let mut edge = cutoff * (1.0 + 1e-9) + 1e-9;
        let dims = loop {
            let d = [0, 1, 2].map(|k| (((hi[k] - lo[k]) / edge).floor() as usize) + 1);
            if d[0].saturating_mul(d[1]).saturating_mul(d[2]) <= 4 * m + 64 {
                break d;
            }
            edge *= 1.5;
        };
        let bins = Bins { lo, edge, dims };
        let nbins = dims[0] * dims[1] * dims[2];
        s.bin_of.clear();
        s.bin_start.clear();
        s.bin_start.resize(nbins + 1, 0);
        for p in &s.img_pos {
            let c = bins.coord(*p);
            let b = (c[0] * dims[1] + c[1]) * dims[2] + c[2];
            s.bin_of.push(b as u32);
            s.bin_start[b + 1] += 1;
        }
        for b in 0..nbins {
            s.bin_start[b + 1] += s.bin_start[b];
        }
        s.sorted.clear();
        s.sorted.resize(m, 0);
        let mut fill: Vec<u32> = s.bin_start[..nbins].to_vec();
        for (idx, &b) in s.bin_of.iter().enumerate() {
            let slot = &mut fill[b as usize];
            s.sorted[*slot as usize] = idx as u32;
            *slot += 1;
        }
        bins
    }

    fn coord(&self, p: [f64; 3]) -> [usize; 3] {
        [0, 1, 2].map(|k| (((p[k] - self.lo[k]) / self.edge) as usize).min(self.dims[k] - 1))
    }
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
    fn images_too_large_to_pack_keep_their_order() {
        // Atoms ~600 cells apart: image offsets past the packed range, so
        // the rows sort as tuples; the result must not change.
        let cell = [[3.0, 0.0, 0.0], [0.0, 3.2, 0.0], [0.0, 0.0, 2.9]];
        let positions = [[0.1, 0.2, 0.3], [1800.4, 1.1, 0.4], [-1799.0, 2.0, 1.5]];
        assert!(pack(0, [512, 0, 0]).is_none() && pack(7, [-511, 3, 511]).map(unpack) == Some((7, [-511, 3, 511])));
        let nl = neighbor_list(&positions, &cell, [true; 3], 3.5).unwrap();
        assert!(nl.images.iter().any(|s| s[0].abs() > PACK_RANGE));
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

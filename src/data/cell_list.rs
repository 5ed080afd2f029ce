//! The cell-list search behind [`neighbors`](crate::data::neighbors): the
//! atoms and their periodic images binned in cubes of edge `cutoff / 2` or
//! more, each atom of the cell scanning the 5³ bins around its own, its row
//! of edges sorted by `j`, then image. Edges go to an [`EdgeSink`]: a
//! [`NeighborList`](crate::data::neighbors::NeighborList) for one
//! structure, or a loader's compact buffers for a batch.

use crate::error::{Error, Result};

/// The most neighbors per atom (on average over a structure) a list may
/// have: a larger cutoff is refused before its lists are built, so a typo
/// (50 Å for 5 Å) is an error rather than gigabytes of edges. Dense
/// solids at 6 Å have ~100; 1,024 is about 12 Å in a metal.
pub const MAX_NEIGHBORS_PER_ATOM: usize = 1024;

pub(super) fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
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
    /// The images' positions in `sorted`'s order, so a bin's candidates are
    /// read from contiguous memory.
    bin_pos: Vec<[f64; 3]>,
    /// The central (S = 0) image of each atom.
    central: Vec<u32>,
    /// One atom's candidates within the cutoff (positions in `sorted`);
    /// every candidate is written, so it has room for every image.
    hits: Vec<u32>,
    /// One atom's neighbors as image numbers, before sorting.
    row: Vec<u32>,
}

/// Where the builder writes a structure's edges, in order: by `i`, then
/// `j`, then image. A loader's sink keeps only what a batch stores (20
/// bytes an edge); a [`NeighborList`](crate::data::neighbors::NeighborList)
/// keeps images and float64 shifts too.
pub(crate) trait EdgeSink {
    /// Edges written so far.
    fn edges(&self) -> usize;
    /// Edge `i -> j` through `image`, with `shift = image·cell`.
    fn push(&mut self, i: u32, j: u32, image: [i32; 3], shift: [f64; 3]);
}

/// Appends the neighbor list of one structure to `out` (see
/// [`neighbor_list`](crate::data::neighbors::neighbor_list)).
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
        // Numbered by atom, then image offset in lexicographic order:
        // `scan` sorts rows by these numbers.
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

    /// Each atom of the cell against the bins around its central image;
    /// edges ordered by `i`, then `j`, then image.
    fn scan(&self, bins: &Bins, cutoff: f64, s: &mut Scratch, out: &mut impl EdgeSink) -> Result<()> {
        let c2 = cutoff * cutoff;
        let start = out.edges();
        let limit = s.wrapped.len().saturating_mul(MAX_NEIGHBORS_PER_ATOM);
        let dims = bins.dims;
        // An atom's candidates are distinct images: room for every image
        // holds them all.
        if s.hits.len() < s.bin_pos.len() {
            s.hits.resize(s.bin_pos.len(), 0);
        }
        for i in 0..s.wrapped.len() {
            let ci = s.central[i] as usize;
            let pi = s.img_pos[ci];
            let c = bins.coord(pi);
            // The bins along the last axis are consecutive in the sorted
            // order: one contiguous run of candidates per (b0, b1).
            let near = |k: usize| c[k].saturating_sub(SPAN)..=(c[k] + SPAN).min(dims[k] - 1);
            let (b2_lo, b2_hi) = (c[2].saturating_sub(SPAN), (c[2] + SPAN).min(dims[2] - 1));
            // Every candidate is written and the count moves only on a hit:
            // no branch on the distance test, which a third to a half of
            // the candidates pass, so a branch would be mispredicted often.
            let mut n = 0;
            for b0 in near(0) {
                for b1 in near(1) {
                    let b = (b0 * dims[1] + b1) * dims[2];
                    let (lo, hi) = (s.bin_start[b + b2_lo] as usize, s.bin_start[b + b2_hi + 1] as usize);
                    for (k, p) in s.bin_pos[lo..hi].iter().enumerate() {
                        let d = [p[0] - pi[0], p[1] - pi[1], p[2] - pi[2]];
                        s.hits[n] = (lo + k) as u32;
                        n += usize::from(dot(d, d) < c2);
                    }
                }
            }
            // Images are numbered by atom, then image offset (see
            // `images`), and `w_j - w_i` is the same for every image of
            // `j`: sorting image numbers orders the row by `j`, then image.
            s.row.clear();
            s.row.extend(s.hits[..n].iter().map(|&h| s.sorted[h as usize]).filter(|&t| t as usize != ci));
            if out.edges() - start + s.row.len() > limit {
                return Err(too_many_neighbors(cutoff));
            }
            s.row.sort_unstable();
            let wi = s.wrap[i];
            // In range: `check_input` bounds the atom count below u32::MAX.
            let i = i as u32;
            for &t in &s.row {
                let j = s.img_atom[t as usize];
                // Back to the positions as given: r_j - r_i + S·cell with
                // S = image + w_j - w_i.
                let (wj, sh) = (s.wrap[j as usize], s.img_shift[t as usize]);
                let img = [0, 1, 2].map(|k| sh[k] + wj[k] - wi[k]);
                out.push(i, j, img, self.translate([0.0; 3], img));
            }
        }
        Ok(())
    }
}

/// Bins: cubes of edge >= cutoff / [`SPAN`] over the images' bounding box,
/// with no more bins than a few per image (a sparse molecule gets bigger
/// bins). An atom's candidates are the images in the bins up to `SPAN`
/// away along each axis.
struct Bins {
    lo: [f64; 3],
    edge: f64,
    dims: [usize; 3],
}

/// Bins per cutoff along an axis. With 2, the candidates of an atom fill
/// 5³ bins of (cutoff/2)³, 15.6 cutoff³ in all, against 27 cutoff³ with bins
/// of the cutoff: 40% fewer distance tests for the same neighbors.
const SPAN: usize = 2;

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
        let mut edge = cutoff / SPAN as f64 * (1.0 + 1e-9) + 1e-9;
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
        s.bin_pos.clear();
        let img_pos = &s.img_pos;
        s.bin_pos.extend(s.sorted.iter().map(|&t| img_pos[t as usize]));
        bins
    }

    fn coord(&self, p: [f64; 3]) -> [usize; 3] {
        [0, 1, 2].map(|k| (((p[k] - self.lo[k]) / self.edge) as usize).min(self.dims[k] - 1))
    }
}

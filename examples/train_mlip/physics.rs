//! Labels from a real potential: a binary argon/krypton Lennard-Jones mixture
//! with a smooth (C2) cutoff, evaluated in f64 with exact analytic forces.
//!
//! Units: Å, eV, amu, fs, K. Structures are small clusters (no periodicity)
//! and periodic FCC boxes (possibly sheared, so cells are triclinic), sampled
//! from short thermostatted molecular dynamics runs started from thermally
//! displaced lattices. Every labelled structure carries its neighbor list
//! (both directions of each pair within [`CUTOFF`]) with per-edge periodic
//! shifts `shift_ij = n_ij · cell` so that `r_ij = r_j - r_i + shift_ij`.
//!
//! This file is shared by the example (`examples/train_mlip/main.rs`) and the
//! integration test (`tests/train_mlip.rs`, which `#[path]`-includes it).
#![allow(dead_code)]
// Index loops over xyz components read like the formulas they implement.
#![allow(clippy::needless_range_loop)]

use std::path::Path;

use atomzarr::{AtomicData, AtomicDataZarrWriter, ZarrArrayConfig, ZarrWriteConfig};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;

/// Interaction (and neighbor-list) cutoff, Å.
pub const CUTOFF: f64 = 7.0;
/// Where the smooth switching to zero starts, Å.
pub const R_ON: f64 = 5.5;
/// Boltzmann constant, eV/K.
pub const KB: f64 = 8.617_333e-5;
/// 1 eV/(Å·amu) in Å/fs².
pub const ACC: f64 = 9.648_533e-3;

/// One element of the mixture.
#[derive(Debug, Clone, Copy)]
pub struct Species {
    /// Atomic number.
    pub z: i64,
    /// Mass, amu.
    pub mass: f64,
    /// LJ size σ, Å.
    pub sigma: f64,
    /// LJ well depth ε, eV.
    pub epsilon: f64,
}

/// Argon and krypton (standard LJ parameters for the noble gases).
pub const SPECIES: [Species; 2] = [
    Species { z: 18, mass: 39.948, sigma: 3.405, epsilon: 0.010_33 },
    Species { z: 36, mass: 83.798, sigma: 3.636, epsilon: 0.014_12 },
];

fn species(z: i64) -> &'static Species {
    SPECIES.iter().find(|s| s.z == z).unwrap_or_else(|| panic!("no LJ parameters for Z={z}"))
}

/// C2 smoothstep switching: 1 below [`R_ON`], 0 above [`CUTOFF`]; returns (S, dS/dr).
fn switch(r: f64) -> (f64, f64) {
    if r <= R_ON {
        (1.0, 0.0)
    } else if r >= CUTOFF {
        (0.0, 0.0)
    } else {
        let w = CUTOFF - R_ON;
        let x = (r - R_ON) / w;
        let s = 1.0 - x * x * x * (10.0 - 15.0 * x + 6.0 * x * x);
        let ds = -30.0 * x * x * (1.0 - x) * (1.0 - x) / w;
        (s, ds)
    }
}

/// Pair energy φ(r) and dφ/dr for atomic numbers `zi`, `zj` (Lorentz–Berthelot
/// mixing), LJ times the smooth switch.
pub fn pair(zi: i64, zj: i64, r: f64) -> (f64, f64) {
    let (a, b) = (species(zi), species(zj));
    let sigma = 0.5 * (a.sigma + b.sigma);
    let eps = (a.epsilon * b.epsilon).sqrt();
    let sr6 = (sigma / r).powi(6);
    let sr12 = sr6 * sr6;
    let lj = 4.0 * eps * (sr12 - sr6);
    let dlj = 4.0 * eps * (-12.0 * sr12 + 6.0 * sr6) / r;
    let (s, ds) = switch(r);
    (lj * s, dlj * s + lj * ds)
}

/// A structure in f64. `cell` rows are the lattice vectors; for clusters the
/// cell is a box that only documents the extent and `pbc` is all false.
#[derive(Debug, Clone)]
pub struct Structure {
    /// Atomic numbers.
    pub numbers: Vec<i64>,
    /// Positions, Å.
    pub positions: Vec<[f64; 3]>,
    /// Lattice vectors (rows), Å.
    pub cell: [[f64; 3]; 3],
    /// Periodic along each lattice vector.
    pub pbc: [bool; 3],
}

/// Directed edges within the cutoff, both directions, with their image offsets.
#[derive(Debug, Clone, Default)]
pub struct NeighborList {
    /// `[i, j]` pairs.
    pub pairs: Vec<[i64; 2]>,
    /// Integer image offsets `n_ij` (zero for non-periodic directions).
    pub images: Vec<[i32; 3]>,
    /// `n_ij · cell`, Å.
    pub shifts: Vec<[f64; 3]>,
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

/// Fractional coordinates of `p` in `cell` (rows are lattice vectors).
fn fractional(cell: &[[f64; 3]; 3], p: [f64; 3]) -> [f64; 3] {
    // p = f · cell  =>  f_k = p · (a_l × a_m) / V
    let v = dot(cell[0], cross(cell[1], cell[2]));
    [dot(p, cross(cell[1], cell[2])) / v, dot(p, cross(cell[2], cell[0])) / v, dot(p, cross(cell[0], cell[1])) / v]
}

impl Structure {
    /// Number of atoms.
    pub fn len(&self) -> usize {
        self.numbers.len()
    }

    /// Wraps positions into the cell along periodic directions.
    pub fn wrap(&mut self) {
        if !self.pbc.iter().any(|&p| p) {
            return;
        }
        for p in &mut self.positions {
            let mut f = fractional(&self.cell, *p);
            for k in 0..3 {
                if self.pbc[k] {
                    f[k] -= f[k].floor();
                }
            }
            *p = [0, 1, 2].map(|c| (0..3).map(|k| f[k] * self.cell[k][c]).sum());
        }
    }

    /// Rounds positions (and the cell) to f32, as stored, so that labels are
    /// exact for the stored coordinates.
    pub fn round_to_f32(&mut self) {
        for p in &mut self.positions {
            *p = p.map(|x| f64::from(x as f32));
        }
        for r in &mut self.cell {
            *r = r.map(|x| f64::from(x as f32));
        }
    }

    /// All directed pairs `(i, j, n)` with `0 < |r_j - r_i + n·cell| < cutoff`,
    /// from the library's cell-list builder (`atomzarr::data::neighbors`,
    /// equal to ASE's `neighbor_list('ijS')`). Positions need not be wrapped.
    pub fn neighbor_list(&self, cutoff: f64) -> NeighborList {
        // The example's structures always have a full-rank cell and finite
        // positions, so the builder cannot refuse them.
        let nl = atomzarr::data::neighbors::neighbor_list(&self.positions, &self.cell, self.pbc, cutoff)
            .expect("example structures have valid cells");
        NeighborList { pairs: nl.pairs, images: nl.images, shifts: nl.shifts }
    }

    /// Total energy (eV) and forces (eV/Å) over a neighbor list of this structure.
    /// E = ½ Σ_edges φ(r_ij); F_i = Σ_j φ'(r_ij) (r_j − r_i + s_ij) / r_ij.
    pub fn energy_forces_with(&self, nl: &NeighborList) -> (f64, Vec<[f64; 3]>) {
        let mut e = 0.0;
        let mut f = vec![[0.0; 3]; self.len()];
        for (k, &[i, j]) in nl.pairs.iter().enumerate() {
            let (i, j) = (i as usize, j as usize);
            let s = nl.shifts[k];
            let d = [0, 1, 2].map(|c| self.positions[j][c] - self.positions[i][c] + s[c]);
            let r = norm(d);
            let (phi, dphi) = pair(self.numbers[i], self.numbers[j], r);
            e += 0.5 * phi;
            for c in 0..3 {
                f[i][c] += dphi * d[c] / r;
            }
        }
        (e, f)
    }

    /// Energy and forces, building the neighbor list.
    pub fn energy_forces(&self) -> (f64, Vec<[f64; 3]>) {
        self.energy_forces_with(&self.neighbor_list(CUTOFF))
    }

    /// Atomic masses, amu.
    pub fn masses(&self) -> Vec<f64> {
        self.numbers.iter().map(|&z| species(z).mass).collect()
    }
}

/// Standard normal deviate (Box–Muller).
fn gauss(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Maxwell-Boltzmann velocities at `temperature` K, Å/fs, with the
/// centre-of-mass momentum removed.
pub fn initial_velocities(s: &Structure, temperature: f64, rng: &mut StdRng) -> Vec<[f64; 3]> {
    let m = s.masses();
    let n = s.len();
    let mut v: Vec<[f64; 3]> =
        m.iter().map(|&mi| [0; 3].map(|_| gauss(rng) * (KB * temperature / mi * ACC).sqrt())).collect();
    let mt: f64 = m.iter().sum();
    let p = [0, 1, 2].map(|c| (0..n).map(|i| m[i] * v[i][c]).sum::<f64>() / mt);
    for vi in &mut v {
        for c in 0..3 {
            vi[c] -= p[c];
        }
    }
    v
}

/// Velocity-Verlet MD with a Berendsen thermostat (τ = 200 fs), `dt` fs.
/// Returns the frames taken every `every` steps after `equilibrate` steps.
pub fn run_md(
    mut s: Structure,
    temperature: f64,
    dt: f64,
    equilibrate: usize,
    frames: usize,
    every: usize,
    rng: &mut StdRng,
) -> Vec<Structure> {
    let m = s.masses();
    let n = s.len();
    let mut v = initial_velocities(&s, temperature, rng);
    let (_, mut f) = s.energy_forces();
    let mut out = Vec::with_capacity(frames);
    let total = equilibrate + frames * every;
    for step in 1..=total {
        for i in 0..n {
            for c in 0..3 {
                v[i][c] += 0.5 * dt * f[i][c] / m[i] * ACC;
                s.positions[i][c] += dt * v[i][c];
            }
        }
        f = s.energy_forces().1;
        let mut ke = 0.0;
        for i in 0..n {
            for c in 0..3 {
                v[i][c] += 0.5 * dt * f[i][c] / m[i] * ACC;
                ke += 0.5 * m[i] * v[i][c] * v[i][c] / ACC;
            }
        }
        let t_now = 2.0 * ke / (3.0 * n as f64 * KB);
        if t_now > 0.0 {
            let lambda = (1.0 + dt / 200.0 * (temperature / t_now - 1.0)).max(0.5).sqrt().min(1.5);
            v.iter_mut().for_each(|vi| vi.iter_mut().for_each(|x| *x *= lambda));
        }
        if step > equilibrate && (step - equilibrate).is_multiple_of(every) {
            let mut frame = s.clone();
            frame.wrap();
            out.push(frame);
        }
    }
    out
}

/// FCC lattice sites of `reps` conventional cells with lattice constant `a`.
fn fcc(a: f64, reps: [usize; 3]) -> Vec<[f64; 3]> {
    let basis = [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]];
    let mut out = Vec::new();
    for x in 0..reps[0] {
        for y in 0..reps[1] {
            for z in 0..reps[2] {
                for b in basis {
                    out.push([(x as f64 + b[0]) * a, (y as f64 + b[1]) * a, (z as f64 + b[2]) * a]);
                }
            }
        }
    }
    out
}

fn random_numbers(n: usize, rng: &mut StdRng) -> Vec<i64> {
    let kr_fraction: f64 = rng.random_range(0.0..0.5);
    (0..n).map(|_| if rng.random::<f64>() < kr_fraction { SPECIES[1].z } else { SPECIES[0].z }).collect()
}

/// A compact cluster: the `n` FCC sites nearest the origin, thermally displaced.
pub fn random_cluster(n: usize, rng: &mut StdRng) -> Structure {
    let a = 5.40 * rng.random_range(0.99..1.03);
    let mut sites = fcc(a, [6, 6, 6]);
    let centre = [3.0 * a, 3.0 * a, 3.0 * a]; // a lattice site: 1 + 12 + 6 + ... shells
    sites.sort_by(|p, q| {
        let dp = norm([0, 1, 2].map(|c| p[c] - centre[c]));
        let dq = norm([0, 1, 2].map(|c| q[c] - centre[c]));
        dp.total_cmp(&dq)
    });
    let positions: Vec<[f64; 3]> =
        sites[..n].iter().map(|p| [0, 1, 2].map(|c| p[c] - centre[c] + 0.08 * gauss(rng))).collect();
    let box_len = 30.0;
    Structure {
        numbers: random_numbers(n, rng),
        positions,
        cell: [[box_len, 0.0, 0.0], [0.0, box_len, 0.0], [0.0, 0.0, box_len]],
        pbc: [false; 3],
    }
}

/// A periodic FCC box (`reps` cells), strained by a random small symmetric
/// strain (shear included, so the cell is triclinic), thermally displaced.
pub fn random_box(reps: [usize; 3], rng: &mut StdRng) -> Structure {
    let a = 5.40 * rng.random_range(0.98..1.06);
    let mut positions = fcc(a, reps);
    let mut strain = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in i..3 {
            let e = if i == j { 0.02 } else { 0.03 } * (rng.random::<f64>() * 2.0 - 1.0);
            strain[i][j] = e;
            strain[j][i] = e;
        }
    }
    let deform = |p: [f64; 3]| [0, 1, 2].map(|c| p[c] + (0..3).map(|k| p[k] * strain[k][c]).sum::<f64>());
    let mut cell = [[0.0; 3]; 3];
    for k in 0..3 {
        let mut v = [0.0; 3];
        v[k] = a * reps[k] as f64;
        cell[k] = deform(v);
    }
    for p in &mut positions {
        *p = deform(*p);
        for x in p.iter_mut() {
            *x += 0.08 * gauss(rng);
        }
    }
    let n = positions.len();
    let mut s = Structure { numbers: random_numbers(n, rng), positions, cell, pbc: [true; 3] };
    s.wrap();
    s
}

/// A labelled structure, ready to store.
#[derive(Debug, Clone)]
pub struct Labelled {
    /// The structure (positions and cell already rounded to f32).
    pub structure: Structure,
    /// Its neighbor list at [`CUTOFF`].
    pub neighbors: NeighborList,
    /// Total energy, eV.
    pub energy: f64,
    /// Forces, eV/Å.
    pub forces: Vec<[f64; 3]>,
    /// The MD trajectory it is a frame of (the string label `trajectory`,
    /// what the example splits by, so that no trajectory is in two parts).
    pub trajectory: usize,
}

impl Labelled {
    /// Labels `s` exactly (after rounding its coordinates to f32).
    pub fn new(mut s: Structure) -> Labelled {
        s.round_to_f32();
        let neighbors = s.neighbor_list(CUTOFF);
        let (energy, forces) = s.energy_forces_with(&neighbors);
        Labelled { structure: s, neighbors, energy, forces, trajectory: 0 }
    }

    /// The sample as atomzarr stores it.
    pub fn to_atomic_data(&self) -> atomzarr::Result<AtomicData> {
        self.to_atomic_data_with(true)
    }

    /// The sample as atomzarr stores it, with its neighbor list or without
    /// (for a loader that builds lists itself).
    pub fn to_atomic_data_with(&self, edges: bool) -> atomzarr::Result<AtomicData> {
        let f32v = |v: &[[f64; 3]]| v.iter().map(|p| p.map(|x| x as f32)).collect::<Vec<_>>();
        let s = &self.structure;
        let mut d = AtomicData::new(s.numbers.clone(), f32v(&s.positions))?
            .with_forces(f32v(&self.forces))?
            .with_energy(self.energy as f32)
            .with_cell(s.cell.map(|r| r.map(|x| x as f32)))
            .with_pbc(s.pbc);
        if edges {
            d = d.with_neighbor_list(self.neighbors.pairs.clone(), Some(f32v(&self.neighbors.shifts)))?;
        }
        Ok(d.with_string("trajectory", format!("t{}", self.trajectory))
            .with_string("config_type", if s.pbc[0] { "box" } else { "cluster" }))
    }
}

/// How many structures and how big.
#[derive(Debug, Clone, Copy)]
pub struct DatasetSpec {
    /// Number of structures (rounded up to whole trajectories).
    pub structures: usize,
    /// Frames per MD trajectory (consecutive in the store).
    pub frames_per_trajectory: usize,
    /// Largest cluster size; boxes use up to 2×2×3 cells (48 atoms) when this is ≥ 40.
    pub max_atoms: usize,
    /// MD steps between frames.
    pub every: usize,
}

impl DatasetSpec {
    /// The default example dataset.
    pub fn standard(structures: usize) -> DatasetSpec {
        DatasetSpec { structures, frames_per_trajectory: 4, max_atoms: 48, every: 25 }
    }

    /// A tiny dataset for tests (small systems, short trajectories).
    pub fn tiny(structures: usize) -> DatasetSpec {
        DatasetSpec { structures, frames_per_trajectory: 2, max_atoms: 16, every: 10 }
    }
}

/// Generates the labelled structures: independent trajectories (half clusters,
/// half periodic boxes, temperatures 10–120 K), each contributing consecutive
/// frames. Deterministic for a given `seed` (each trajectory has its own RNG).
pub fn generate(spec: DatasetSpec, seed: u64) -> Vec<Labelled> {
    let trajectories = spec.structures.div_ceil(spec.frames_per_trajectory);
    let mut out: Vec<Labelled> = (0..trajectories)
        .into_par_iter()
        .flat_map_iter(|t| {
            let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(t as u64));
            let start = if rng.random::<bool>() {
                let n = rng.random_range(8..=spec.max_atoms.max(9));
                random_cluster(n, &mut rng)
            } else {
                let choices: &[[usize; 3]] = if spec.max_atoms >= 40 {
                    &[[2, 2, 2], [2, 2, 2], [2, 2, 3], [1, 2, 2], [1, 1, 2]]
                } else {
                    &[[1, 1, 2], [1, 1, 1], [1, 1, 3]]
                };
                random_box(choices[rng.random_range(0..choices.len())], &mut rng)
            };
            let temperature = if start.pbc[0] { rng.random_range(10.0..120.0) } else { rng.random_range(10.0..50.0) };
            let frames = run_md(start, temperature, 8.0, spec.every, spec.frames_per_trajectory, spec.every, &mut rng);
            frames.into_iter().map(|f| Labelled { trajectory: t, ..Labelled::new(f) }).collect::<Vec<_>>()
        })
        .collect();
    out.truncate(spec.structures);
    out
}

/// Generates and writes a store at `path` (which must not exist).
pub fn build_store(path: &Path, spec: DatasetSpec, seed: u64) -> atomzarr::Result<usize> {
    build_store_with(path, spec, seed, true, StoreLayout::default())
}

/// How a built store lays its structures out.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreLayout {
    /// Write the structures in order of energy per atom, lowest first (an
    /// adversarial order, as data sets sorted by composition or energy
    /// come), rather than trajectory by trajectory.
    pub sort_by_energy: bool,
    /// Rows per chunk of the core arrays (default: about 1 MiB decoded).
    pub chunk_rows: Option<u64>,
}

/// As [`build_store`], with the neighbor lists stored or not (`edges`),
/// laid out as `layout` says.
pub fn build_store_with(
    path: &Path,
    spec: DatasetSpec,
    seed: u64,
    edges: bool,
    layout: StoreLayout,
) -> atomzarr::Result<usize> {
    let mut labelled = generate(spec, seed);
    if layout.sort_by_energy {
        labelled
            .sort_by(|a, b| (a.energy / a.structure.len() as f64).total_cmp(&(b.energy / b.structure.len() as f64)));
    }
    let samples: Vec<AtomicData> =
        labelled.iter().map(|l| l.to_atomic_data_with(edges)).collect::<atomzarr::Result<_>>()?;
    let mut core = ZarrArrayConfig::default().with_codec(atomzarr::Codec::Zstd { level: 3 });
    if let Some(rows) = layout.chunk_rows {
        core = core.with_chunk_size(rows);
    }
    let config = ZarrWriteConfig::default().with_core(core);
    let mut writer = AtomicDataZarrWriter::create(path, config)?;
    writer.write(&samples)?;
    Ok(samples.len())
}

#[cfg(test)]
mod physics_tests {
    use super::*;

    /// Central finite differences of the energy against the analytic forces,
    /// on a small triclinic periodic box (several images inside the cutoff)
    /// and on a cluster, with the neighbor list rebuilt at every displacement.
    #[test]
    fn forces_match_finite_difference_of_energy() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut boxed = random_box([1, 1, 1], &mut rng);
        boxed.positions[0][0] -= 0.4; // a close pair: steep repulsion
        let cluster = random_cluster(13, &mut rng);
        for s in [boxed, cluster] {
            let (_, f) = s.energy_forces();
            let h = 1e-5;
            let mut worst: f64 = 0.0;
            let scale = f.iter().flatten().fold(0f64, |m, x| m.max(x.abs()));
            assert!(scale > 1e-3, "forces too small to test: {scale}");
            for i in 0..s.len() {
                for c in 0..3 {
                    let mut p = s.clone();
                    p.positions[i][c] += h;
                    let ep = p.energy_forces().0;
                    p.positions[i][c] -= 2.0 * h;
                    let em = p.energy_forces().0;
                    let fd = -(ep - em) / (2.0 * h);
                    worst = worst.max((fd - f[i][c]).abs());
                }
            }
            assert!(worst < 1e-6 * scale.max(1.0), "max |F_fd - F| = {worst:e} (max |F| {scale:e})");
        }
    }

    /// The switched pair potential is continuous with continuous derivative at
    /// both ends of the switching window, and its derivative is the derivative.
    #[test]
    fn pair_potential_is_smooth_and_consistent() {
        for r in [3.0, 3.8, 5.0, R_ON - 1e-9, R_ON + 1e-9, 6.2, CUTOFF - 1e-9] {
            let h = 1e-6;
            let fd = (pair(18, 36, r + h).0 - pair(18, 36, r - h).0) / (2.0 * h);
            let d = pair(18, 36, r).1;
            assert!((fd - d).abs() < 1e-7, "r={r}: fd {fd} vs {d}");
        }
        assert!(pair(18, 18, CUTOFF - 1e-9).0.abs() < 1e-12);
        assert!(pair(18, 18, CUTOFF - 1e-9).1.abs() < 1e-9);
        // The Ar–Ar minimum sits at 2^(1/6) σ with depth ε.
        let rmin = 2f64.powf(1.0 / 6.0) * SPECIES[0].sigma;
        assert!(pair(18, 18, rmin).1.abs() < 1e-9);
        assert!((pair(18, 18, rmin).0 + SPECIES[0].epsilon).abs() < 1e-9);
    }

    /// Periodic images are complete: a 1×1×1 cell (cutoff > half the cell, so
    /// atoms see several images of each other and of themselves) has exactly
    /// 1/8 of the energy of the same crystal as a 2×2×2 supercell, and forces
    /// on a perfect lattice vanish.
    #[test]
    fn periodic_images_are_complete() {
        let a = 5.3;
        let cell = |k: f64| [[a * k, 0.0, 0.0], [0.0, a * k, 0.0], [0.0, 0.0, a * k]];
        let one = Structure { numbers: vec![18; 4], positions: fcc(a, [1, 1, 1]), cell: cell(1.0), pbc: [true; 3] };
        let two = Structure { numbers: vec![18; 32], positions: fcc(a, [2, 2, 2]), cell: cell(2.0), pbc: [true; 3] };
        let (e1, f1) = one.energy_forces();
        let (e2, _) = two.energy_forces();
        assert!(e1 < 0.0);
        assert!((8.0 * e1 - e2).abs() < 1e-9 * e2.abs(), "{} vs {}", 8.0 * e1, e2);
        assert!(f1.iter().flatten().all(|x| x.abs() < 1e-10));
        // Shifts reproduce the edge vectors: every edge length is below the cutoff.
        let nl = one.neighbor_list(CUTOFF);
        assert_eq!(nl.pairs.len(), 4 * 42, "FCC shells within 7 Å: 12 + 6 + 24");
        for (k, &[i, j]) in nl.pairs.iter().enumerate() {
            let d = [0, 1, 2].map(|c| one.positions[j as usize][c] - one.positions[i as usize][c] + nl.shifts[k][c]);
            assert!(norm(d) < CUTOFF && norm(d) > 3.0);
        }
    }

    /// Newton's third law and a stable thermostat: MD frames keep zero net
    /// force and stay bound (no atom flies off a cluster).
    #[test]
    fn md_frames_are_physical() {
        let mut rng = StdRng::seed_from_u64(3);
        let frames = run_md(random_cluster(13, &mut rng), 30.0, 10.0, 20, 3, 10, &mut rng);
        assert_eq!(frames.len(), 3);
        for s in &frames {
            let (e, f) = s.energy_forces();
            assert!(e < -20.0 * SPECIES[0].epsilon, "cluster energy {e}");
            for c in 0..3 {
                assert!(f.iter().map(|x| x[c]).sum::<f64>().abs() < 1e-10);
            }
        }
    }
}

//! Synthetic structures, seeded so runs repeat, in two presets:
//!
//! - [`Preset::Reference`], as the reference benchmark generates them: atom
//!   counts uniform in `[min_atoms, max_atoms]`, edge counts uniform in
//!   `[1, 4 * atoms]` (random pairs), random positions.
//! - [`Preset::Bulk`], what bulk-materials data sets (OMat24, MPtrj, alloys)
//!   look like: rattled, strained fcc supercells of Cu, Ni, Al and their
//!   random binary alloys at their real densities, with the true periodic
//!   neighbor lists at a cutoff ([`neighbors`](crate::data::neighbors)),
//!   18-54 neighbors per atom at 5 Å (Al, whose third shell sits at 4.96 Å,
//!   to Ni), 41 on average. There the neighbor lists are
//!   most of a store's bytes.
//!
//! Both give the fields atomic_numbers, positions, forces, energy, cell, pbc,
//! neighbor_list and shifts.

use rand::{RngExt, SeedableRng};

/// Which kind of structures a [`Generator`] makes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Preset {
    /// The reference benchmark's: random atoms and random pairs.
    Reference,
    /// Periodic fcc metal cells with their neighbor lists at `cutoff` Å.
    Bulk {
        /// Neighbor-list cutoff, Å.
        cutoff: f64,
    },
}

impl Preset {
    /// The preset's usual atom range: 10-100 for the reference, 50-300 for bulk cells.
    pub fn default_atoms(self) -> (usize, usize) {
        match self {
            Preset::Reference => (10, 100),
            Preset::Bulk { .. } => (50, 300),
        }
    }
}

/// The synthetic data's generator: PCG-64, whose stream rand_pcg documents
/// as reproducible (the samplers use the same generator one layer up).
type SynthRng = rand_pcg::Pcg64Mcg;

use crate::data::AtomicData;
use crate::error::{Error, Result};

/// Generates `n` random structures.
///
/// ```
/// let s = atomzarr::data::synth::generate(3, 10, 20, 0).unwrap();
/// assert_eq!(s.len(), 3);
/// assert!(s.iter().all(|x| (10..=20).contains(&x.num_atoms()) && x.num_edges() >= 1));
/// assert_eq!(s, atomzarr::data::synth::generate(3, 10, 20, 0).unwrap());
/// ```
///
/// # Errors
/// [`Error::Config`] when `min_atoms` is 0 or above `max_atoms`.
pub fn generate(n: usize, min_atoms: usize, max_atoms: usize, seed: u64) -> Result<Vec<AtomicData>> {
    generate_with_progress(n, min_atoms, max_atoms, seed, |_| {})
}

/// As [`generate`], calling `progress(k)` after every 1024th structure and at
/// the end (k = structures done). Same output as [`generate`] for a seed.
///
/// # Errors
/// As [`generate`].
pub fn generate_with_progress(
    n: usize,
    min_atoms: usize,
    max_atoms: usize,
    seed: u64,
    mut progress: impl FnMut(usize),
) -> Result<Vec<AtomicData>> {
    let mut g = Generator::new(min_atoms, max_atoms, seed)?;
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        out.push(g.one()?);
        if (k + 1) % 1024 == 0 {
            progress(k + 1);
        }
    }
    progress(n);
    Ok(out)
}

/// The same structures as [`generate`], a batch at a time, so a large set can
/// be written without holding it all: the first `n` structures of a
/// generator equal `generate(n, ..)` with the same seed, however they are
/// split into batches.
///
/// ```
/// use atomzarr::data::synth::{Generator, generate};
/// let mut g = Generator::new(2, 6, 9).unwrap();
/// let mut streamed = g.batch(3).unwrap();
/// streamed.extend(g.batch(4).unwrap());
/// assert_eq!(streamed, generate(7, 2, 6, 9).unwrap());
/// ```
pub struct Generator {
    rng: SynthRng,
    min_atoms: usize,
    max_atoms: usize,
    preset: Preset,
}

impl Generator {
    /// A generator of structures with `min_atoms..=max_atoms` atoms.
    ///
    /// # Errors
    /// [`Error::Config`] when `min_atoms` is 0 or above `max_atoms`.
    pub fn new(min_atoms: usize, max_atoms: usize, seed: u64) -> Result<Generator> {
        Generator::with_preset(Preset::Reference, min_atoms, max_atoms, seed)
    }

    /// A generator of `preset` structures with `min_atoms..=max_atoms` atoms.
    ///
    /// ```
    /// use atomzarr::data::synth::{Generator, Preset};
    /// let mut g = Generator::with_preset(Preset::Bulk { cutoff: 5.0 }, 50, 300, 0).unwrap();
    /// let cells = g.batch(2).unwrap();
    /// for c in &cells {
    ///     assert!((50..=300).contains(&c.num_atoms()));
    ///     let per_atom = c.num_edges() as f64 / c.num_atoms() as f64;
    ///     // Al (third shell at 4.96 Å, half of it past 5 Å once strained) to Ni.
    ///     assert!((15.0..=60.0).contains(&per_atom), "{per_atom} neighbors per atom");
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when `min_atoms` is 0 or above `max_atoms`, or, for
    /// bulk cells, when the cutoff is not a positive finite number of at most
    /// 12 Å or `max_atoms` is below 32 (the smallest cell, 2×2×2 fcc).
    pub fn with_preset(preset: Preset, min_atoms: usize, max_atoms: usize, seed: u64) -> Result<Generator> {
        if min_atoms == 0 || min_atoms > max_atoms {
            return Err(Error::Config(format!(
                "atoms range [{min_atoms}, {max_atoms}] must be non-empty and start at 1 or more"
            )));
        }
        if let Preset::Bulk { cutoff } = preset {
            if !(cutoff > 0.0 && cutoff <= 12.0) {
                return Err(Error::Config(format!("bulk cutoff must be in (0, 12] Å, got {cutoff}")));
            }
            if max_atoms < 32 {
                return Err(Error::Config(format!(
                    "bulk cells have 32 atoms or more (2x2x2 fcc), max_atoms is {max_atoms}"
                )));
            }
        }
        Ok(Generator { rng: SynthRng::seed_from_u64(seed), min_atoms, max_atoms, preset })
    }

    /// The next structure.
    ///
    /// # Errors
    /// None in practice: the structure is built to pass [`AtomicData`]'s checks,
    /// whose [`Error::InvalidInput`] the `Result` carries.
    pub fn one(&mut self) -> Result<AtomicData> {
        match self.preset {
            Preset::Reference => one(&mut self.rng, self.min_atoms, self.max_atoms),
            Preset::Bulk { cutoff } => crate::data::neighbors::with_neighbors(self.bulk_cell()?, cutoff),
        }
    }

    /// The next `n` structures (bulk neighbor lists built in parallel).
    ///
    /// # Errors
    /// As [`Generator::one`].
    pub fn batch(&mut self, n: usize) -> Result<Vec<AtomicData>> {
        match self.preset {
            Preset::Reference => (0..n).map(|_| self.one()).collect(),
            Preset::Bulk { cutoff } => {
                let cells = (0..n).map(|_| self.bulk_cell()).collect::<Result<Vec<_>>>()?;
                crate::data::neighbors::add_neighbors(cells, cutoff)
            }
        }
    }

    /// One rattled, strained fcc supercell without edges: the supercell
    /// (2..=8 cells a side) with the fewest sites at or above a uniform draw
    /// from the atom range, random vacancies down to it.
    fn bulk_cell(&mut self) -> Result<AtomicData> {
        // (Z, fcc lattice constant Å, cohesive energy eV/atom)
        const METALS: [(i64, f32, f32); 3] = [(29, 3.615, -3.49), (28, 3.524, -4.44), (13, 4.050, -3.39)];
        let rng = &mut self.rng;
        let target = rng.random_range(self.min_atoms.max(32)..=self.max_atoms);
        let reps = (2..=8usize)
            .flat_map(|a| (a..=8).flat_map(move |b| (b..=8).map(move |c| [a, b, c])))
            .filter(|r| 4 * r[0] * r[1] * r[2] >= target)
            .min_by_key(|r| (4 * r[0] * r[1] * r[2], r[2] - r[0]))
            .unwrap_or([8, 8, 8]);
        let host = METALS[rng.random_range(0..3)];
        // Half the cells are pure, the rest a random binary alloy.
        let guest = if rng.random::<bool>() { METALS[rng.random_range(0..3)] } else { host };
        let x_guest: f32 = rng.random();
        let a = host.1 * (1.0 - x_guest) + guest.1 * x_guest;
        let basis = [[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]];
        let mut sites = Vec::with_capacity(4 * reps.iter().product::<usize>());
        for i in 0..reps[0] {
            for j in 0..reps[1] {
                for k in 0..reps[2] {
                    for b in basis {
                        sites.push([(i as f32 + b[0]) * a, (j as f32 + b[1]) * a, (k as f32 + b[2]) * a]);
                    }
                }
            }
        }
        while sites.len() > target {
            let v = rng.random_range(0..sites.len());
            sites.swap_remove(v);
        }
        // Strain up to ±2% per axis plus a small shear; rattle σ ≈ 0.08 Å.
        let strain: [[f32; 3]; 3] = std::array::from_fn(|r| {
            std::array::from_fn(|c| {
                if r == c { 1.0 + 0.04 * (rng.random::<f32>() - 0.5) } else { 0.01 * (rng.random::<f32>() - 0.5) }
            })
        });
        let apply = |p: [f32; 3]| -> [f32; 3] { std::array::from_fn(|c| (0..3).map(|r| p[r] * strain[r][c]).sum()) };
        let positions: Vec<[f32; 3]> = sites.iter().map(|&p| apply(p).map(|x| x + 0.08 * normal(rng))).collect();
        let forces: Vec<[f32; 3]> = (0..positions.len()).map(|_| std::array::from_fn(|_| 0.5 * normal(rng))).collect();
        let z: Vec<i64> =
            (0..positions.len()).map(|_| if rng.random::<f32>() < x_guest { guest.0 } else { host.0 }).collect();
        let e0 = host.2 * (1.0 - x_guest) + guest.2 * x_guest;
        let energy = e0 * positions.len() as f32 + 0.5 * normal(rng);
        let cell: [[f32; 3]; 3] =
            std::array::from_fn(|r| apply(std::array::from_fn(|c| if r == c { reps[r] as f32 * a } else { 0.0 })));
        Ok(AtomicData::new(z, positions)?.with_forces(forces)?.with_energy(energy).with_cell(cell).with_pbc([true; 3]))
    }
}

/// A standard normal draw (Box-Muller: rand_distr is not a dependency for
/// one Gaussian).
fn normal(rng: &mut SynthRng) -> f32 {
    let (u, v): (f32, f32) = (rng.random::<f32>().max(f32::MIN_POSITIVE), rng.random());
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

fn one(rng: &mut SynthRng, min_atoms: usize, max_atoms: usize) -> Result<AtomicData> {
    let n = rng.random_range(min_atoms..=max_atoms);
    let e = rng.random_range(1..=4 * n);
    let box_len = 5.0f32 + (n as f32).cbrt();
    let z: Vec<i64> = (0..n).map(|_| rng.random_range(1..=83)).collect();
    let pos: Vec<[f32; 3]> = (0..n).map(|_| std::array::from_fn(|_| rng.random::<f32>() * box_len)).collect();
    let forces: Vec<[f32; 3]> = (0..n).map(|_| std::array::from_fn(|_| rng.random::<f32>() * 2.0 - 1.0)).collect();
    let pairs: Vec<[i64; 2]> = (0..e).map(|_| [rng.random_range(0..n as i64), rng.random_range(0..n as i64)]).collect();
    let shifts: Vec<[f32; 3]> =
        (0..e).map(|_| std::array::from_fn(|_| f32::from(rng.random_range(-1i8..=1)) * box_len)).collect();
    AtomicData::new(z, pos)?
        .with_forces(forces)?
        .with_energy(rng.random::<f32>() * -10.0)
        .with_cell([[box_len, 0.0, 0.0], [0.0, box_len, 0.0], [0.0, 0.0, box_len]])
        .with_pbc([true, true, true])
        .with_neighbor_list(pairs, Some(shifts))
}

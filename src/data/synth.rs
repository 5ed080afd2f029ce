//! Synthetic structures, generated as the reference benchmark does: atom
//! counts uniform in `[min_atoms, max_atoms]`, edge counts uniform in
//! `[1, 4 * atoms]`, and the fields atomic_numbers, positions, forces,
//! energy, cell, pbc, neighbor_list and shifts. Seeded, so runs repeat.

use rand::{RngExt, SeedableRng};

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
}

impl Generator {
    /// A generator of structures with `min_atoms..=max_atoms` atoms.
    ///
    /// # Errors
    /// [`Error::Config`] when `min_atoms` is 0 or above `max_atoms`.
    pub fn new(min_atoms: usize, max_atoms: usize, seed: u64) -> Result<Generator> {
        if min_atoms == 0 || min_atoms > max_atoms {
            return Err(Error::Config(format!(
                "atoms range [{min_atoms}, {max_atoms}] must be non-empty and start at 1 or more"
            )));
        }
        Ok(Generator { rng: SynthRng::seed_from_u64(seed), min_atoms, max_atoms })
    }

    /// The next structure.
    ///
    /// # Errors
    /// None in practice: the structure is built to pass [`AtomicData`]'s checks,
    /// whose [`Error::InvalidInput`] the `Result` carries.
    pub fn one(&mut self) -> Result<AtomicData> {
        one(&mut self.rng, self.min_atoms, self.max_atoms)
    }

    /// The next `n` structures.
    ///
    /// # Errors
    /// As [`Generator::one`].
    pub fn batch(&mut self, n: usize) -> Result<Vec<AtomicData>> {
        (0..n).map(|_| self.one()).collect()
    }
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

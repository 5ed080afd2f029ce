//! NVE molecular dynamics with a trained model: the check that its forces
//! conserve its energy.
//!
//! Velocity Verlet in f64 (positions, velocities, the energy sum), the
//! model evaluated in f32 on a neighbor list rebuilt every step (the
//! model's cutoff function is smooth only inside the cutoff, so a stale
//! list would miss atoms coming in), positions wrapped into the cell. The
//! drift is the largest `|E_total(t) − E_total(0)|` per atom over the run.

use atomzarr::AtomicData;
use burn::tensor::{Device, Tensor, TensorData};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::model::{GraphBatch, Mlip};
use crate::physics::{ACC, KB, Structure, initial_velocities};

/// The temperature velocities are drawn at, K: the middle of the example
/// data's MD runs (10-120 K).
pub const MD_TEMPERATURE: f64 = 60.0;

/// The time step, fs.
pub const MD_DT: f64 = 1.0;

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct MdReport {
    /// Steps run.
    pub steps: usize,
    /// Atoms.
    pub atoms: usize,
    /// `E_total(0)`, eV.
    pub e0: f64,
    /// Largest `|E_total(t) − E_total(0)|` per atom, eV/atom.
    pub drift: f64,
    /// Kinetic temperature at the end, K.
    pub final_temperature: f64,
}

impl std::fmt::Display for MdReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "md: steps={} dt={MD_DT}fs atoms={} start={MD_TEMPERATURE}K end={:.1}K e_total0={:.5}eV drift={:.3e} eV/atom",
            self.steps, self.atoms, self.final_temperature, self.e0, self.drift
        )
    }
}

/// Velocity-Verlet NVE from `s` with velocities drawn at `temperature` K
/// (seeded by `seed`), `steps` steps of `dt` fs; `energy_forces` gives the
/// potential energy (eV) and forces (eV/Å) of a structure.
pub fn nve(
    mut s: Structure,
    mut energy_forces: impl FnMut(&Structure) -> (f64, Vec<[f64; 3]>),
    temperature: f64,
    steps: usize,
    dt: f64,
    seed: u64,
) -> MdReport {
    let m = s.masses();
    let n = s.len();
    let mut v = initial_velocities(&s, temperature, &mut StdRng::seed_from_u64(seed));
    let kinetic =
        |v: &[[f64; 3]]| -> f64 { (0..n).map(|i| 0.5 * m[i] * v[i].iter().map(|x| x * x).sum::<f64>() / ACC).sum() };
    let (e_pot, mut f) = energy_forces(&s);
    let e0 = e_pot + kinetic(&v);
    let mut drift = 0f64;
    for _ in 0..steps {
        for i in 0..n {
            for c in 0..3 {
                v[i][c] += 0.5 * dt * f[i][c] / m[i] * ACC;
                s.positions[i][c] += dt * v[i][c];
            }
        }
        s.wrap();
        let (e_pot, f_new) = energy_forces(&s);
        f = f_new;
        for i in 0..n {
            for c in 0..3 {
                v[i][c] += 0.5 * dt * f[i][c] / m[i] * ACC;
            }
        }
        drift = drift.max((e_pot + kinetic(&v) - e0).abs() / n as f64);
    }
    let final_temperature = 2.0 * kinetic(&v) / (3.0 * n as f64 * KB);
    MdReport { steps, atoms: n, e0, drift, final_temperature }
}

/// The model's energy (eV) and forces (eV/Å) for one structure, on a
/// neighbor list built for it at the model's cutoff.
pub fn model_energy_forces(model: &Mlip, cutoff: f64, s: &Structure, device: &Device) -> (f64, Vec<[f64; 3]>) {
    let batch = graph_batch(s, cutoff, device);
    let p = model.forward(&batch);
    let energy = p.energy.into_data().try_to_vec_as::<f64>().unwrap_or_default();
    let forces = p.forces.into_data().try_to_vec_as::<f64>().unwrap_or_default();
    (energy.first().copied().unwrap_or(f64::NAN), forces.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
}

/// A one-structure device batch of `s` with its neighbor list at `cutoff`
/// (no labels).
pub fn graph_batch(s: &Structure, cutoff: f64, device: &Device) -> GraphBatch {
    let nl = s.neighbor_list(cutoff);
    let (v, e) = (s.len(), nl.pairs.len());
    let flat = |x: &[[f64; 3]]| x.iter().flatten().map(|&c| c as f32).collect::<Vec<f32>>();
    let pairs: Vec<i64> = nl.pairs.iter().flatten().copied().collect();
    GraphBatch {
        num_graphs: 1,
        positions: Tensor::from_data(TensorData::new(flat(&s.positions), [v, 3]), device),
        atomic_numbers: Tensor::from_data(TensorData::new(s.numbers.clone(), [v]), device),
        graph_index: Tensor::zeros([v], device),
        edges: Tensor::from_data(TensorData::new(pairs, [e, 2]), device),
        shifts: Tensor::from_data(TensorData::new(flat(&nl.shifts), [e, 3]), device),
        num_atoms: Tensor::from_data(TensorData::new(vec![v as f32], [1, 1]), device),
        energy: Tensor::zeros([1, 1], device),
        forces: Tensor::zeros([v, 3], device),
        atoms_ptr: vec![0, v as i64],
        edges_ptr: vec![0, e as i64],
    }
}

/// A stored structure as the physics module holds it.
///
/// # Errors
/// A message when the sample lacks positions or atomic numbers.
pub fn structure_of(sample: &AtomicData) -> Result<Structure, String> {
    let field = |name: &str| sample.field(name).map(|f| &f.data).ok_or(format!("the sample has no `{name}`"));
    let positions: Vec<[f64; 3]> =
        field("positions")?.to_f64_vec().chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let numbers = field("atomic_numbers")?.to_i64_vec().ok_or("atomic_numbers are not integers")?;
    let cell = sample.field("cell").map(|f| f.data.to_f64_vec()).unwrap_or_else(|| vec![0.0; 9]);
    let pbc = sample.field("pbc").map(|f| f.data.to_f64_vec()).unwrap_or_else(|| vec![0.0; 3]);
    Ok(Structure {
        numbers,
        positions,
        cell: std::array::from_fn(|r| std::array::from_fn(|c| cell.get(3 * r + c).copied().unwrap_or(0.0))),
        pbc: std::array::from_fn(|k| pbc.get(k).is_some_and(|&x| x != 0.0)),
    })
}

/// `--md-steps`: NVE from the first validation structure of `store`
/// (index `val_indices[0]`) with `model`; prints and returns the report.
///
/// # Errors
/// When the store or the structure cannot be read.
pub fn after_training(
    model: &Mlip,
    cutoff: f64,
    store: &std::path::Path,
    val_indices: &[usize],
    steps: usize,
    seed: u64,
    device: &Device,
) -> Result<MdReport, Box<dyn std::error::Error + Send + Sync>> {
    use atomzarr::{AtomicDataZarrReader, ReaderExt};
    let first = *val_indices.first().ok_or("--md-steps: no validation structure")?;
    let sample = AtomicDataZarrReader::open(store)?.load_sample(first)?;
    let s = structure_of(&sample)?;
    let report = nve(s, |s| model_energy_forces(model, cutoff, s, device), MD_TEMPERATURE, steps, MD_DT, seed);
    println!("{report} forces={} structure={first}", model.forces());
    Ok(report)
}

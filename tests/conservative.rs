//! The `train_mlip` example's conservative model: its forces are the exact
//! negative gradient of its energy, checked three ways (Burn's own
//! first-order gradient, central finite differences, symmetry), and its MD
//! conserves energy. The example's modules are included as-is.

#[path = "../examples/train_mlip/conservative.rs"]
mod conservative;
#[path = "../examples/train_mlip/incidence.rs"]
mod incidence;
#[path = "../examples/train_mlip/md.rs"]
#[allow(dead_code)] // the run after training is the example's
mod md;
#[path = "../examples/train_mlip/model.rs"]
mod model;
#[path = "../examples/train_mlip/partitioned.rs"]
mod partitioned;
#[path = "../examples/train_mlip/physics.rs"]
mod physics;
#[path = "../examples/train_mlip/step.rs"]
mod step;

use burn::tensor::{Bytes, Device, Tensor};
use model::{Forces, Mlip, MlipConfig, Scatter};
use physics::{CUTOFF, Structure};
use rand::SeedableRng;
use rand::rngs::StdRng;

/// A structure's energy (eV) and forces (eV/Å).
type EnergyForces = (f64, Vec<[f64; 3]>);

/// A conservative model with random weights and data-like scales.
fn config() -> MlipConfig {
    MlipConfig::new()
        .with_forces(Forces::Conservative)
        .with_cutoff(CUTOFF)
        .with_energy_scale(0.02)
        .with_avg_neighbors(25.0)
        .with_hidden(16)
}

/// Random periodic boxes (skewed, rattled), random clusters, and a dimer
/// and a trimer with pairs just inside the cutoff.
fn structures() -> Vec<Structure> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut out = vec![
        physics::random_box([1, 1, 2], &mut rng),
        physics::random_box([1, 2, 2], &mut rng),
        physics::random_cluster(9, &mut rng),
        physics::random_cluster(14, &mut rng),
    ];
    let r = CUTOFF - 2e-2;
    out.push(Structure {
        numbers: vec![18, 36],
        positions: vec![[0.0; 3], [r, 0.0, 0.0]],
        cell: [[0.0; 3]; 3],
        pbc: [false; 3],
    });
    out.push(Structure {
        numbers: vec![36, 18, 18],
        positions: vec![[0.0; 3], [3.9, 0.3, 0.0], [0.2, CUTOFF - 3e-2, 0.4]],
        cell: [[0.0; 3]; 3],
        pbc: [false; 3],
    });
    out
}

fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().try_to_vec_as::<f64>().unwrap()
}

/// Largest absolute difference, and the largest magnitude of `a`.
fn worst(a: &[f64], b: &[f64]) -> (f64, f64) {
    assert_eq!(a.len(), b.len());
    let diff = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    (diff, a.iter().fold(0f64, |m, x| m.max(x.abs())))
}

/// The model with the weights of `bytes`, on `device`, in form `scatter`.
fn model_from(bytes: &Bytes, scatter: Scatter, device: &Device) -> Mlip {
    use burn::module::Module;
    let record = burn::store::ModuleRecord::from_bytes(bytes.clone()).unwrap();
    config().init(device).load_record(record).with_scatter(scatter)
}

fn weights() -> Bytes {
    use burn::module::Module;
    let device = Device::flex();
    device.seed(3);
    config().init(&device).into_record().into_bytes().unwrap()
}

/// Forces equal `-dE/dx` from Burn's first-order autodiff (positions with
/// `require_grad`), in every scatter form, on every structure.
#[test]
fn forces_equal_burns_gradient_of_the_energy() {
    let bytes = weights();
    let device = Device::flex().autodiff();
    for scatter in [Scatter::Select, Scatter::Incidence, Scatter::Partitioned] {
        let m = model_from(&bytes, scatter, &device);
        for (k, s) in structures().iter().enumerate() {
            let mut batch = md::graph_batch(s, CUTOFF, &device);
            batch.positions = batch.positions.require_grad();
            let p = m.forward(&batch);
            let grads = p.energy.clone().sum().backward();
            let grad = batch.positions.grad(&grads).expect("positions have a gradient");
            let minus_grad: Vec<f64> = to_vec(grad).into_iter().map(|g| -g).collect();
            let forces = to_vec(p.forces);
            let (diff, scale) = worst(&forces, &minus_grad);
            assert!(scale > 0.0, "structure {k}: forces are all zero");
            assert!(
                diff <= 1e-4 * scale + 1e-7,
                "{scatter:?} structure {k}: forces and -dE/dx differ by {diff} (max |F| {scale})"
            );
        }
    }
}

/// Forces equal central finite differences of the energy: step 5e-3 Å on
/// each coordinate of every atom; f32 energies, so agreement within 2% of
/// the largest force component (+1e-5 eV/Å).
#[test]
fn forces_equal_finite_differences_of_the_energy() {
    let device = Device::flex();
    let m = model_from(&weights(), Scatter::Select, &device);
    let h = 5e-3;
    for (k, s) in structures().iter().enumerate() {
        let (_, forces) = md::model_energy_forces(&m, CUTOFF, s, &device);
        let forces: Vec<f64> = forces.into_iter().flatten().collect();
        let mut fd = Vec::with_capacity(forces.len());
        for i in 0..s.len() {
            for c in 0..3 {
                let energy_at = |dx: f64| {
                    let mut t = s.clone();
                    t.positions[i][c] += dx;
                    md::model_energy_forces(&m, CUTOFF, &t, &device).0
                };
                fd.push(-(energy_at(h) - energy_at(-h)) / (2.0 * h));
            }
        }
        let (diff, scale) = worst(&forces, &fd);
        assert!(
            diff <= 0.02 * scale + 1e-5,
            "structure {k}: forces and finite differences differ by {diff} (max |F| {scale})"
        );
    }
}

/// Forces sum to zero per structure; rotating a structure (positions and
/// cell) leaves its energy and rotates its forces.
#[test]
fn forces_sum_to_zero_and_rotate_with_the_structure() {
    let device = Device::flex();
    let m = model_from(&weights(), Scatter::Select, &device);
    let (c, s) = (0.28f64, 0.96f64);
    let rot = [[c, -s, 0.0], [s * 0.6, c * 0.6, 0.8], [-s * 0.8, -c * 0.8, 0.6]];
    let apply = |p: [f64; 3]| [0, 1, 2].map(|j| (0..3).map(|k| p[k] * rot[k][j]).sum::<f64>());
    for (k, st) in structures().iter().enumerate() {
        let (e, f) = md::model_energy_forces(&m, CUTOFF, st, &device);
        let scale = f.iter().flatten().fold(0f64, |a, x| a.max(x.abs()));
        let net = [0, 1, 2].map(|j| f.iter().map(|fi| fi[j]).sum::<f64>());
        assert!(net.iter().all(|x| x.abs() <= 1e-4 * scale + 1e-7), "structure {k}: net force {net:?}");
        let mut turned = st.clone();
        turned.positions = st.positions.iter().map(|&p| apply(p)).collect();
        turned.cell = st.cell.map(apply);
        let (e2, f2) = md::model_energy_forces(&m, CUTOFF, &turned, &device);
        assert!((e - e2).abs() <= 1e-5 * e.abs().max(1.0), "structure {k}: energy {e} -> {e2} under rotation");
        let want: Vec<f64> = f.iter().flat_map(|&fi| apply(fi)).collect();
        let got: Vec<f64> = f2.into_iter().flatten().collect();
        let (diff, _) = worst(&got, &want);
        assert!(diff <= 1e-4 * scale + 1e-7, "structure {k}: forces do not rotate with the structure ({diff})");
    }
}

/// 1,000 steps of NVE (1 fs) with a fixed conservative model drift by at
/// most 2e-4 eV/atom; the exact Lennard-Jones forces of the data, through
/// the same integrator, too (the integrator's own check).
#[test]
fn md_with_the_conservative_model_conserves_energy() {
    let device = Device::flex();
    let m = model_from(&weights(), Scatter::Select, &device);
    let mut rng = StdRng::seed_from_u64(11);
    let start = physics::random_box([1, 2, 2], &mut rng);
    let run = |f: &mut dyn FnMut(&Structure) -> EnergyForces| {
        md::nve(start.clone(), f, md::MD_TEMPERATURE, 1000, md::MD_DT, 5)
    };
    let model = run(&mut |s: &Structure| md::model_energy_forces(&m, CUTOFF, s, &device));
    let lj = run(&mut |s: &Structure| s.energy_forces());
    assert!(model.drift.is_finite() && model.drift <= 2e-4, "conservative model: {model}");
    assert!(lj.drift <= 2e-4, "Lennard-Jones: {lj}");
    // The atoms moved: the run did not stand still.
    assert!(model.final_temperature > 1.0, "{model}");
}

/// The saved config names the force kind, so a model is rebuilt as what
/// it was; a config without one is the direct model.
#[test]
fn the_config_names_the_force_kind() {
    let c = config();
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains("\"forces\":\"Conservative\""), "{json}");
    let m = c.init(&Device::flex());
    assert_eq!(m.forces(), Forces::Conservative);
    assert_eq!(MlipConfig::new().init(&Device::flex()).forces(), Forces::Direct);
}

//! A small message-passing potential with one shared representation and
//! one energy head per data set, a direct force head and a direct stress
//! head (the forces and stresses are not derivatives of the energy:
//! Burn's autodiff is first order, and training on F = −dE/dx would need
//! the gradient of a gradient; `train_mlip`'s model.rs says more).

use std::f64::consts::PI;

use atomzarr::AtomicBatch;
use atomzarr::pipeline::loss::Predicted;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor};

/// Radial basis functions of each edge's length.
const NUM_RBF: usize = 16;
/// Neighbors within this distance (Å) interact; the stores' neighbor lists
/// are built with it.
pub const CUTOFF: f64 = 4.0;
/// The largest atomic number the embedding knows.
const MAX_Z: usize = 100;

/// The model: shared layers, `heads` energy heads.
#[derive(Module, Debug)]
pub struct MultiHead {
    embed: Embedding,
    radial: Linear,
    update1: Linear,
    update2: Linear,
    edge: Linear,
    heads: Vec<Linear>,
    force_out: Linear,
    stress_out: Linear,
    /// Each head's mean energy per atom on its training data (eV): the
    /// heads learn the rest.
    energy_per_atom: Vec<f64>,
}

/// Sums rows of `values` `[N,C]` into `rows` buckets by `index` `[N]`.
fn scatter_sum(values: Tensor<2>, index: Tensor<1, Int>, rows: usize) -> Tensor<2> {
    let [_, c] = values.dims();
    Tensor::zeros([rows, c], &values.device()).select_assign(0, index, values, IndexingUpdateOp::Add)
}

impl MultiHead {
    /// A fresh model with `hidden` features and one head per entry of
    /// `energy_per_atom`.
    pub fn new(hidden: usize, energy_per_atom: Vec<f64>, device: &Device) -> MultiHead {
        let lin = |i: usize, o: usize| LinearConfig::new(i, o).init(device);
        MultiHead {
            embed: EmbeddingConfig::new(MAX_Z, hidden).init(device),
            radial: lin(NUM_RBF, hidden),
            update1: lin(2 * hidden, hidden),
            update2: lin(hidden, hidden),
            edge: lin(2 * hidden + NUM_RBF, hidden),
            heads: energy_per_atom.iter().map(|_| lin(hidden, 1)).collect(),
            force_out: lin(hidden, 1),
            stress_out: lin(hidden, 1),
            energy_per_atom,
        }
    }

    /// Energies by head `head[g]` of each graph, forces, and stresses when
    /// the batch has cells (a graph without one, a molecule, gets a
    /// finite stress that the loss leaves out).
    pub fn forward(&self, b: &AtomicBatch, head: Tensor<1, Int>) -> Predicted {
        let dev = b.graph_index.device();
        let (v, e, g) = (b.num_atoms, b.num_edges, b.num_graphs);
        let positions = b.positions().expect("atomzarr batches carry positions");
        let pairs = b.neighbor_list().unwrap_or_else(|| Tensor::zeros([0, 2], &dev));
        let shifts = b.shifts().unwrap_or_else(|| Tensor::zeros([e, 3], &dev));
        let src = pairs.clone().narrow(1, 0, 1).reshape([e]);
        let dst = pairs.narrow(1, 1, 1).reshape([e]);
        let rvec = positions.clone().select(0, dst.clone()) - positions.select(0, src.clone()) + shifts;
        let r = (rvec.clone().powi_scalar(2).sum_dim(1) + 1e-9).sqrt(); // [E,1]
        let unit = rvec / r.clone();
        let envelope = ((r.clone() * (PI / CUTOFF)).cos() + 1.0) * 0.5;
        let width = CUTOFF / (NUM_RBF - 1) as f64;
        let centers: Vec<f32> = (0..NUM_RBF).map(|k| (width * k as f64) as f32).collect();
        let centers = Tensor::<1>::from_floats(centers.as_slice(), &dev).reshape([1, NUM_RBF]);
        let rbf = (r.clone() - centers).powi_scalar(2).mul_scalar(-1.0 / (width * width)).exp() * envelope.clone();

        // Shared representation: species, then one round of messages.
        let z = b.atomic_numbers().expect("atomzarr batches carry atomic numbers");
        let h0 = self.embed.forward(z.reshape([1, v])).reshape([v, self.embed.weight.dims()[1]]);
        let messages = silu(self.radial.forward(rbf.clone())) * h0.clone().select(0, dst.clone());
        let agg = scatter_sum(messages, src.clone(), v) / 8.0;
        let h = h0.clone() + silu(self.update2.forward(silu(self.update1.forward(Tensor::cat(vec![h0, agg], 1)))));

        // One energy per atom from each head; each graph keeps its head's sum.
        let per_atom: Vec<Tensor<2>> =
            self.heads.iter().zip(&self.energy_per_atom).map(|(l, e0)| l.forward(h.clone()) + *e0).collect();
        let graph_energies = scatter_sum(Tensor::cat(per_atom, 1), b.graph_index.clone(), g); // [G,H]
        let energy = graph_energies.gather(1, head.reshape([g, 1]));

        // Edge scalars, symmetric in i and j: forces along the edges, stress from their virial.
        let (hi, hj) = (h.clone().select(0, src.clone()), h.select(0, dst));
        let edge = silu(self.edge.forward(Tensor::cat(vec![hi.clone() + hj.clone(), hi * hj, rbf], 1)));
        let f = self.force_out.forward(edge.clone()) * envelope.clone();
        let forces = scatter_sum(unit.clone() * f, src.clone(), v);
        let stress = b.cell().map(|cell| {
            let s = self.stress_out.forward(edge) * envelope * r; // [E,1]
            let outer = unit.clone().reshape([e, 3, 1]) * unit.reshape([e, 1, 3]); // [E,3,3]
            let per_edge = (outer * s.reshape([e, 1, 1])).reshape([e, 9]);
            let edge_graph = b.graph_index.clone().select(0, src);
            let volume = volumes(cell);
            (scatter_sum(per_edge, edge_graph, g) / volume).reshape([g, 3, 3])
        });
        Predicted { energy, forces: Some(forces), stress }
    }
}

/// `[G,1]` cell volumes, 1 where a graph has no cell (zeros: a molecule),
/// so that its stress stays finite.
fn volumes(cell: Tensor<3>) -> Tensor<2> {
    let [g, _, _] = cell.dims();
    let row = |k: usize| cell.clone().narrow(1, k, 1).reshape([g, 3]);
    let col = |t: &Tensor<2>, k: usize| t.clone().narrow(1, k, 1);
    let (a, b, c) = (row(0), row(1), row(2));
    // a · (b × c)
    let cross = Tensor::cat(
        vec![
            col(&b, 1) * col(&c, 2) - col(&b, 2) * col(&c, 1),
            col(&b, 2) * col(&c, 0) - col(&b, 0) * col(&c, 2),
            col(&b, 0) * col(&c, 1) - col(&b, 1) * col(&c, 0),
        ],
        1,
    );
    let det = (a * cross).sum_dim(1).abs();
    let none = det.clone().lower_elem(1e-6);
    det.mask_fill(none, 1.0)
}

//! A small message-passing interatomic potential in Burn and its batch
//! inputs (the loss, training step and metrics are `step.rs`'s).
//!
//! ## Why a direct force head
//!
//! The physically clean route to forces is F = -dE/dx through autodiff, but
//! training on those forces needs the gradient of a gradient, and Burn's
//! autodiff is first-order only (tracel-ai/burn#1942; 0.22's
//! `Device::autodiff` says so too). So the model has
//! two heads that share one representation:
//!
//! * an energy head: E = Σ_i e_i, per-atom energies from the atom features and
//!   from pair terms over the atom's edges;
//! * a direct force head built from the edge vectors,
//!   F_i = Σ_j f(r_ij, h_i, h_j) · r_ij / |r_ij|,  r_ij = r_j − r_i + shift_ij,
//!   where f is a learned scalar of rotation-invariant inputs only (distance
//!   basis and atom features). The sum of scalars times edge vectors is
//!   rotation-equivariant by construction (rotate the structure and F rotates
//!   with it), translation-invariant, and f is symmetric in i, j, so f_ij = f_ji
//!   and the forces obey Newton's third law (they sum to zero). For a pair
//!   potential this form is exact: F_i = Σ_j φ'(r_ij) r̂_ij, so the head can
//!   represent the labels of `physics.rs` exactly.
//!
//! The price: forces are not guaranteed to be the gradient of the predicted
//! energy (not energy-conserving in MD). For pair potentials the alternative of
//! writing the radial derivatives out by hand would be conservative too, but it
//! does not extend to message passing without reimplementing backprop; the
//! direct head is what large direct-force models use, and it trains fast.
//!
//! Nothing names a backend: tensors live on a Burn `Device`, `Device::flex()`
//! on CPU, `Device::cuda(0)` / `Device::wgpu(..)` with `--features cuda` /
//! `wgpu`. Training runs on the device with autodiff (`device.autodiff()`),
//! validation on the model's `valid()` copy, which has none.
//!
//! ## Gathers and sums over the graph
//!
//! Message passing gathers atom features onto edges and sums edge terms back
//! into atoms (and atom energies into graphs). [`Scatter::Select`] does it
//! with Burn's `select` and `select_assign(.., IndexingUpdateOp::Add)`: little
//! arithmetic, fast on a CPU, but on CubeCL GPUs `select_assign` runs one
//! thread per column over all rows (and is `select`'s backward).
//! [`Scatter::Incidence`] does it with matmuls by block-diagonal one-hot
//! matrices (`incidence.rs`): more arithmetic (edges × atoms per block), all
//! of it parallel. [`Scatter::Partitioned`] cuts the rows into parts that
//! scatter-add side by side into partial sums (`partitioned.rs`): linear in
//! the edges and parallel, the form for real-sized batches on a GPU.
#![allow(dead_code)]
// Index loops over xyz components read like the formulas they implement.
#![allow(clippy::needless_range_loop)]

use std::f64::consts::PI;

use atomzarr::{AtomicBatch, CollatedBatch, HostData};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::silu;
use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};

use crate::conservative::Conservative;
use crate::incidence::Incidence;
use crate::partitioned::Partitioned;

/// How the model gathers over edges and sums into atoms and graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scatter {
    /// `select` and `select_assign` (scatter-add): the CPU's fast path.
    #[default]
    Select,
    /// Matmuls by block-diagonal one-hot matrices: parallel on a GPU, but
    /// edges × atoms-per-block work.
    Incidence,
    /// Scatter-add in parts, then a sum of the parts: parallel on a GPU and
    /// linear in the edges.
    Partitioned,
}

impl std::str::FromStr for Scatter {
    type Err = String;
    fn from_str(s: &str) -> Result<Scatter, String> {
        match s {
            "select" => Ok(Scatter::Select),
            "incidence" => Ok(Scatter::Incidence),
            "partitioned" => Ok(Scatter::Partitioned),
            other => Err(format!("unknown scatter `{other}` (select, incidence, partitioned)")),
        }
    }
}

/// Hyper-parameters and the data statistics the model normalises with. Saved
/// next to the weights (the weights alone do not say how to rebuild the model).
#[derive(Config, Debug)]
pub struct MlipConfig {
    /// Feature width.
    #[config(default = 32)]
    pub hidden: usize,
    /// Gaussian radial basis functions on [r_min, cutoff].
    #[config(default = 16)]
    pub num_rbf: usize,
    /// Smallest basis centre, Å (no pair in the data gets much closer).
    #[config(default = 2.5)]
    pub r_min: f64,
    /// Cutoff, Å; must match the store's neighbor lists.
    #[config(default = 7.0)]
    pub cutoff: f64,
    /// Embedding rows (indexed by atomic number).
    #[config(default = 119)]
    pub max_z: usize,
    /// Message-passing rounds before the heads.
    #[config(default = 1)]
    pub interactions: usize,
    /// Mean edges per atom in the training set (sums over edges are divided by it).
    #[config(default = 30.0)]
    pub avg_neighbors: f64,
    /// Mean training energy per atom, eV (the energy head predicts deviations from it).
    #[config(default = 0.0)]
    pub energy_per_atom: f64,
    /// Spread of the training energy per atom, eV (output scale of the energy head).
    #[config(default = 1.0)]
    pub energy_scale: f64,
    /// RMS training force component, eV/Å (output scale of the force head).
    #[config(default = 1.0)]
    pub force_scale: f64,
    /// How forces are predicted: the gradient of the energy or a direct head.
    #[config(default = "Forces::Direct")]
    pub forces: Forces,
}

/// How a model predicts forces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Forces {
    /// `F = −dE/dx`, written out analytically (`conservative.rs`).
    Conservative,
    /// A direct, rotation-equivariant head beside the energy head.
    Direct,
}

impl std::str::FromStr for Forces {
    type Err = String;
    fn from_str(s: &str) -> Result<Forces, String> {
        match s {
            "conservative" => Ok(Forces::Conservative),
            "direct" => Ok(Forces::Direct),
            other => Err(format!("unknown forces `{other}` (conservative, direct)")),
        }
    }
}

impl std::fmt::Display for Forces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Forces::Conservative => "conservative",
            Forces::Direct => "direct",
        })
    }
}

/// One interaction (message-passing) block.
#[derive(Module, Debug)]
pub struct Interaction {
    msg1: Linear,
    msg2: Linear,
    update: Linear,
}

/// The potential: one of the two models, and how it gathers and sums over
/// the graph.
#[derive(Module, Debug)]
pub struct Mlip {
    /// The message-passing model with a direct force head.
    pub direct: Option<Direct>,
    /// The conservative model.
    pub conservative: Option<Conservative>,
    /// How gathers and sums over the graph run (not part of the record).
    #[module(skip)]
    scatter: Scatter,
    // Loss scales (rebuilt from the config; not part of the record).
    pub energy_scale: f64,
    pub force_scale: f64,
}

/// The message-passing potential with a direct force head.
#[derive(Module, Debug)]
pub struct Direct {
    embed: Embedding,
    interactions: Vec<Interaction>,
    edge1: Linear,
    edge2: Linear,
    force_out: Linear,
    pair_out: Linear,
    atom1: Linear,
    atom_out: Linear,
    // Constants (rebuilt from the config; not part of the record).
    num_rbf: usize,
    r_min: f64,
    cutoff: f64,
    avg_neighbors: f64,
    energy_per_atom: f64,
    energy_scale: f64,
    force_scale: f64,
}

impl MlipConfig {
    /// A freshly initialised model (of kind `forces`).
    pub fn init(&self, device: &Device) -> Mlip {
        let (direct, conservative) = match self.forces {
            Forces::Direct => (Some(self.init_direct(device)), None),
            Forces::Conservative => (None, Some(Conservative::init(self, device))),
        };
        Mlip {
            direct,
            conservative,
            scatter: Scatter::default(),
            energy_scale: self.energy_scale,
            force_scale: self.force_scale,
        }
    }

    fn init_direct(&self, device: &Device) -> Direct {
        let (h, k) = (self.hidden, self.num_rbf);
        let lin = |i: usize, o: usize| LinearConfig::new(i, o).init(device);
        Direct {
            embed: EmbeddingConfig::new(self.max_z, h).init(device),
            interactions: (0..self.interactions)
                .map(|_| Interaction { msg1: lin(2 * h + k, h), msg2: lin(h, h), update: lin(2 * h, h) })
                .collect(),
            edge1: lin(2 * h + k, h),
            edge2: lin(h, h),
            force_out: lin(h, 1),
            pair_out: lin(h, 1),
            atom1: lin(h, h),
            atom_out: lin(h, 1),
            num_rbf: k,
            r_min: self.r_min,
            cutoff: self.cutoff,
            avg_neighbors: self.avg_neighbors,
            energy_per_atom: self.energy_per_atom,
            energy_scale: self.energy_scale,
            force_scale: self.force_scale,
        }
    }
}

/// A batch of graphs as the model consumes it (a disjoint union: atom indices
/// in `edges` are batch-local, `graph_index` maps atoms to graphs).
#[derive(Debug, Clone)]
pub struct GraphBatch {
    /// Number of graphs (structures).
    pub num_graphs: usize,
    /// `[V,3]` positions, Å.
    pub positions: Tensor<2>,
    /// `[V]` atomic numbers.
    pub atomic_numbers: Tensor<1, Int>,
    /// `[V]` graph of each atom.
    pub graph_index: Tensor<1, Int>,
    /// `[E,2]` directed edges (i, j), batch-local atom indices.
    pub edges: Tensor<2, Int>,
    /// `[E,3]` periodic shifts, Å: r_ij = r_j − r_i + shift_ij.
    pub shifts: Tensor<2>,
    /// `[B,1]` atoms per graph (float, for per-atom normalisation).
    pub num_atoms: Tensor<2>,
    /// `[B,1]` reference energies, eV.
    pub energy: Tensor<2>,
    /// `[V,3]` reference forces, eV/Å.
    pub forces: Tensor<2>,
    /// `[B+1]` atom offsets, on the host (for [`Incidence`]'s blocks).
    pub atoms_ptr: Vec<i64>,
    /// `[B+1]` edge offsets, on the host.
    pub edges_ptr: Vec<i64>,
}

fn floats(d: &HostData) -> Vec<f32> {
    match d {
        HostData::Float32(v) => v.clone(),
        other => other.to_f64_vec().into_iter().map(|x| x as f32).collect(),
    }
}

fn ints(d: &HostData) -> Vec<i64> {
    d.to_i64_vec().expect("integer field")
}

impl GraphBatch {
    /// Builds the device batch from a host-collated batch (the path used when
    /// batches come from `Reader::read_collated` rather than the DataLoader).
    pub fn from_collated(b: &CollatedBatch, device: &Device) -> GraphBatch {
        let field = |name: &str| &b.fields.get(name).unwrap_or_else(|| panic!("batch has no `{name}`")).data;
        let (v, e, g) = (b.num_atoms(), b.num_edges(), b.num_graphs());
        let graph_index: Vec<i64> = (0..g)
            .flat_map(|k| std::iter::repeat_n(k as i64, (b.atoms_ptr[k + 1] - b.atoms_ptr[k]) as usize))
            .collect();
        let counts: Vec<f32> = b.atoms_ptr.windows(2).map(|w| (w[1] - w[0]) as f32).collect();
        GraphBatch {
            num_graphs: g,
            positions: Tensor::from_data(TensorData::new(floats(field("positions")), [v, 3]), device),
            atomic_numbers: Tensor::from_data(TensorData::new(ints(field("atomic_numbers")), [v]), device),
            graph_index: Tensor::from_data(TensorData::new(graph_index, [v]), device),
            edges: Tensor::from_data(TensorData::new(ints(field("neighbor_list")), [e, 2]), device),
            shifts: Tensor::from_data(TensorData::new(floats(field("shifts")), [e, 3]), device),
            num_atoms: Tensor::from_data(TensorData::new(counts, [g, 1]), device),
            energy: Tensor::from_data(TensorData::new(floats(field("energy")), [g, 1]), device),
            forces: Tensor::from_data(TensorData::new(floats(field("forces")), [v, 3]), device),
            atoms_ptr: b.atoms_ptr.clone(),
            edges_ptr: b.edges_ptr.clone(),
        }
    }

    /// The model's view of a DataLoader batch (tensors are moved, not copied).
    pub fn from_atomic(b: AtomicBatch) -> Result<GraphBatch, String> {
        let need = |name: &str| {
            format!("batch has no `{name}` field (the store must hold energies, forces, neighbor lists and shifts)")
        };
        Ok(GraphBatch {
            num_graphs: b.num_graphs,
            positions: b.positions().ok_or_else(|| need("positions"))?,
            atomic_numbers: b.atomic_numbers().ok_or_else(|| need("atomic_numbers"))?,
            edges: b.neighbor_list().ok_or_else(|| need("neighbor_list"))?,
            shifts: b.shifts().ok_or_else(|| need("shifts"))?,
            energy: b.energy().ok_or_else(|| need("energy"))?,
            forces: b.forces().ok_or_else(|| need("forces"))?,
            num_atoms: Self::counts_from_ptr(b.atoms_ptr),
            graph_index: b.graph_index,
            atoms_ptr: b.host_atoms_ptr,
            edges_ptr: b.host_edges_ptr,
        })
    }

    /// Atoms per graph from CSR atom pointers `[B+1]`.
    pub fn counts_from_ptr(atoms_ptr: Tensor<1, Int>) -> Tensor<2> {
        let [n] = atoms_ptr.dims();
        (atoms_ptr.clone().narrow(0, 1, n - 1) - atoms_ptr.narrow(0, 0, n - 1)).float().reshape([n - 1, 1])
    }
}

/// Model outputs.
#[derive(Debug, Clone)]
pub struct Prediction {
    /// `[B,1]` total energies, eV.
    pub energy: Tensor<2>,
    /// `[V,3]` forces, eV/Å.
    pub forces: Tensor<2>,
}

/// Sums rows of `values` `[E,C]` into `rows` buckets by `index` `[E]` (scatter-add).
fn scatter_sum(values: Tensor<2>, index: Tensor<1, Int>, rows: usize) -> Tensor<2> {
    let [_, c] = values.dims();
    Tensor::zeros([rows, c], &values.device()).select_assign(0, index, values, IndexingUpdateOp::Add)
}

/// A batch's gathers over edges and sums into atoms and graphs, in one of
/// the two [`Scatter`] forms (equal up to float rounding).
pub enum GraphOps {
    /// `select` / `select_assign` by the edge endpoints and graph index.
    Select { src: Tensor<1, Int>, dst: Tensor<1, Int>, graph_index: Tensor<1, Int>, atoms: usize, graphs: usize },
    /// Block-diagonal one-hot matmuls.
    Incidence(Incidence),
    /// Partitioned scatter-add and gathers.
    Partitioned(Partitioned),
}

impl GraphOps {
    /// The ops of `batch` in form `scatter`.
    pub fn new(scatter: Scatter, batch: &GraphBatch) -> GraphOps {
        match scatter {
            Scatter::Select => {
                let [e, _] = batch.edges.dims();
                GraphOps::Select {
                    src: batch.edges.clone().narrow(1, 0, 1).reshape([e]),
                    dst: batch.edges.clone().narrow(1, 1, 1).reshape([e]),
                    graph_index: batch.graph_index.clone(),
                    atoms: batch.positions.dims()[0],
                    graphs: batch.num_graphs,
                }
            }
            Scatter::Incidence => GraphOps::Incidence(Incidence::new(&batch.edges, &batch.atoms_ptr, &batch.edges_ptr)),
            Scatter::Partitioned => {
                let [e, _] = batch.edges.dims();
                GraphOps::Partitioned(Partitioned::new(
                    batch.edges.clone().narrow(1, 0, 1).reshape([e]),
                    batch.edges.clone().narrow(1, 1, 1).reshape([e]),
                    batch.graph_index.clone(),
                    batch.positions.dims()[0],
                    batch.num_graphs,
                ))
            }
        }
    }

    /// `x[src]` `[E,C]` of atom rows `x` `[V,C]`.
    pub fn gather_src(&self, x: Tensor<2>) -> Tensor<2> {
        match self {
            GraphOps::Select { src, .. } => x.select(0, src.clone()),
            GraphOps::Incidence(i) => i.gather_src(x),
            GraphOps::Partitioned(p) => p.gather_src(x),
        }
    }

    /// `x[dst]` `[E,C]` of atom rows `x` `[V,C]`.
    pub fn gather_dst(&self, x: Tensor<2>) -> Tensor<2> {
        match self {
            GraphOps::Select { dst, .. } => x.select(0, dst.clone()),
            GraphOps::Incidence(i) => i.gather_dst(x),
            GraphOps::Partitioned(p) => p.gather_dst(x),
        }
    }

    /// Edge rows `m` `[E,C]` summed into their source atoms: `[V,C]`.
    pub fn sum_to_src(&self, m: Tensor<2>) -> Tensor<2> {
        match self {
            GraphOps::Select { src, atoms, .. } => scatter_sum(m, src.clone(), *atoms),
            GraphOps::Incidence(i) => i.sum_to_src(m),
            GraphOps::Partitioned(p) => p.sum_to_src(m),
        }
    }

    /// Edge rows `m` `[E,C]` summed into their destination atoms: `[V,C]`.
    pub fn sum_to_dst(&self, m: Tensor<2>) -> Tensor<2> {
        match self {
            GraphOps::Select { dst, atoms, .. } => scatter_sum(m, dst.clone(), *atoms),
            GraphOps::Incidence(i) => i.sum_to_dst(m),
            GraphOps::Partitioned(p) => p.sum_to_dst(m),
        }
    }

    /// Atom rows `a` `[V,C]` summed into their graphs: `[B,C]`.
    pub fn sum_to_graphs(&self, a: Tensor<2>) -> Tensor<2> {
        match self {
            GraphOps::Select { graph_index, graphs, .. } => scatter_sum(a, graph_index.clone(), *graphs),
            GraphOps::Incidence(i) => i.sum_to_graphs(a),
            GraphOps::Partitioned(p) => p.sum_to_graphs(a),
        }
    }
}

impl Mlip {
    /// The model with its gathers and sums done in form `scatter`.
    pub fn with_scatter(mut self, scatter: Scatter) -> Mlip {
        self.scatter = scatter;
        self
    }

    /// Energies and forces for a batch.
    pub fn forward(&self, batch: &GraphBatch) -> Prediction {
        let graph = GraphOps::new(self.scatter, batch);
        match (&self.conservative, &self.direct) {
            (Some(m), _) => m.forward(batch, &graph),
            (None, Some(m)) => m.forward(batch, &graph),
            // `MlipConfig::init` builds exactly one of the two.
            (None, None) => unreachable!("a model with neither force kind"),
        }
    }

    /// Which of the two models this is.
    pub fn forces(&self) -> Forces {
        if self.conservative.is_some() { Forces::Conservative } else { Forces::Direct }
    }
}

impl Direct {
    /// Energies and forces for a batch.
    pub fn forward(&self, batch: &GraphBatch, graph: &GraphOps) -> Prediction {
        let [v, _] = batch.positions.dims();
        let (unit, r) = edge_geometry(batch);
        // Cosine envelope: every edge term goes smoothly to zero at the cutoff.
        let env = cosine_cutoff(&r, self.cutoff); // [E,1]
        let rbf = gaussians(&r, self.r_min, self.cutoff, self.num_rbf).0 * env.clone(); // [E,K]

        // Atom features from the species; pair features symmetric in i, j.
        let z = batch.atomic_numbers.clone().reshape([1, v]);
        let mut h = self.embed.forward(z).reshape([v, self.embed.weight.dims()[1]]);
        let pair_features = |h: &Tensor<2>| {
            let hi = graph.gather_src(h.clone());
            let hj = graph.gather_dst(h.clone());
            Tensor::cat(vec![hi.clone() + hj.clone(), hi * hj, rbf.clone()], 1)
        };
        for block in &self.interactions {
            let m = silu(block.msg2.forward(silu(block.msg1.forward(pair_features(&h))))) * env.clone();
            let agg = graph.sum_to_src(m) / self.avg_neighbors;
            h = h.clone() + silu(block.update.forward(Tensor::cat(vec![h, agg], 1)));
        }

        // Shared edge representation for both heads.
        let g = silu(self.edge2.forward(silu(self.edge1.forward(pair_features(&h))))); // [E,H]
        // Direct force head: F_i = sum_j f(r_ij, h_i, h_j) r_ij/|r_ij|.
        let f = self.force_out.forward(g.clone()) * env.clone(); // [E,1]
        let forces = graph.sum_to_src(unit * f) * self.force_scale;
        // Energy head: per-atom energy = pair terms over the atom's edges + an atom term.
        let pair_e = self.pair_out.forward(g) * env; // [E,1]
        let atom_e = graph.sum_to_src(pair_e) / self.avg_neighbors + self.atom_out.forward(silu(self.atom1.forward(h)));
        let atom_e = atom_e * self.energy_scale + self.energy_per_atom;
        let energy = graph.sum_to_graphs(atom_e);
        Prediction { energy, forces }
    }
}

/// Each edge's `r_ij = r_j − r_i + shift_ij` as a unit vector `[E,3]` and
/// its length `[E,1]`.
pub fn edge_geometry(batch: &GraphBatch) -> (Tensor<2>, Tensor<2>) {
    let [e, _] = batch.edges.dims();
    let src = batch.edges.clone().narrow(1, 0, 1).reshape([e]);
    let dst = batch.edges.clone().narrow(1, 1, 1).reshape([e]);
    let rvec = batch.positions.clone().select(0, dst) - batch.positions.clone().select(0, src) + batch.shifts.clone();
    let r = rvec.clone().powi_scalar(2).sum_dim(1).sqrt();
    (rvec / r.clone(), r)
}

/// The cosine cutoff `½(cos(π r / r_c) + 1)` of lengths `r` `[E,1]`.
pub fn cosine_cutoff(r: &Tensor<2>, cutoff: f64) -> Tensor<2> {
    ((r.clone() * (PI / cutoff)).cos() + 1.0) * 0.5
}

/// `k` Gaussians `exp(−(r − μ_k)² / w²)` of lengths `r` `[E,1]`, centres
/// `μ_k` evenly on `[r_min, cutoff]` `w` apart: the Gaussians `[E,K]`,
/// `r − μ_k` `[E,K]` and `w`.
pub fn gaussians(r: &Tensor<2>, r_min: f64, cutoff: f64, k: usize) -> (Tensor<2>, Tensor<2>, f64) {
    let w = (cutoff - r_min) / (k - 1) as f64;
    let centers: Vec<f32> = (0..k).map(|i| (r_min + w * i as f64) as f32).collect();
    let centers = Tensor::<1>::from_floats(centers.as_slice(), &r.device()).reshape([1, k]);
    let dr = r.clone() - centers;
    (dr.clone().powi_scalar(2).mul_scalar(-1.0 / (w * w)).exp(), dr, w)
}

#[cfg(test)]
pub mod model_tests {
    use super::*;
    use crate::step::{LossWeights, loss};

    /// A random 2-graph batch: one periodic-looking graph with shifts, one cluster.
    fn toy_batch(device: &Device) -> GraphBatch {
        let positions = vec![[0.0f32, 0.0, 0.0], [3.7, 0.2, 0.1], [0.3, 3.6, 0.0], [10.0, 0.0, 0.0], [13.8, 0.0, 0.4]];
        let edges: Vec<i64> = vec![0, 1, 1, 0, 0, 2, 2, 0, 1, 2, 2, 1, 0, 0, 0, 0, 3, 4, 4, 3];
        let mut shifts = vec![[0.0f32; 3]; 10];
        shifts[6] = [5.0, 0.0, 0.0];
        shifts[7] = [-5.0, 0.0, 0.0];
        let flat = |v: Vec<[f32; 3]>| v.into_iter().flatten().collect::<Vec<_>>();
        GraphBatch {
            num_graphs: 2,
            positions: Tensor::from_data(TensorData::new(flat(positions), [5, 3]), device),
            atomic_numbers: Tensor::from_data(TensorData::new(vec![18i64, 36, 18, 18, 36], [5]), device),
            graph_index: Tensor::from_data(TensorData::new(vec![0i64, 0, 0, 1, 1], [5]), device),
            edges: Tensor::from_data(TensorData::new(edges, [10, 2]), device),
            shifts: Tensor::from_data(TensorData::new(flat(shifts), [10, 3]), device),
            num_atoms: Tensor::from_data(TensorData::new(vec![3.0f32, 2.0], [2, 1]), device),
            energy: Tensor::zeros([2, 1], device),
            forces: Tensor::zeros([5, 3], device),
            atoms_ptr: vec![0, 3, 5],
            edges_ptr: vec![0, 8, 10],
        }
    }

    /// The incidence and partitioned forms compute what the select form
    /// does, forward and backward: same energies and forces, same parameter
    /// gradients.
    #[test]
    fn incidence_partitioned_and_select_forms_agree() {
        let device = Device::flex().autodiff();
        let mut batch = toy_batch(&device);
        batch.energy = Tensor::from_data(TensorData::new(vec![-1.0f32, -0.5], [2, 1]), &device);
        let config = MlipConfig::new().with_interactions(2);
        // Each form gets its own copy of the same weights, made through
        // bytes: on Flex a model that ran forward and backward once does not
        // compute the same again through a clone that shares its tensors
        // (and reseeding the global RNG races with tests on other threads).
        let bytes = config.init(&device).into_record().into_bytes().unwrap();
        let run = |scatter: Scatter| {
            let record = burn::store::ModuleRecord::from_bytes(bytes.clone()).unwrap();
            let m = config.init(&device).load_record(record).with_scatter(scatter);
            let p = m.forward(&batch);
            let l = loss(&m, &p, &batch, LossWeights::default());
            let grads = l.backward();
            let g =
                |w: &burn::module::Param<Tensor<2>>| w.grad(&grads).unwrap().into_data().try_to_vec::<f32>().unwrap();
            (p.energy.into_data().try_to_vec::<f32>().unwrap(), p.forces.into_data().try_to_vec::<f32>().unwrap(), {
                let d = m.direct.as_ref().unwrap();
                [g(&d.edge1.weight), g(&d.interactions[0].msg1.weight), g(&d.embed.weight)]
            })
        };
        let (e1, f1, g1) = run(Scatter::Select);
        let close = |a: &[f32], b: &[f32], what: &str| {
            let scale = a.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
            let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(a.len() == b.len() && worst <= 1e-5 * scale.max(1.0), "{what}: differ by {worst} (scale {scale})");
        };
        for form in [Scatter::Incidence, Scatter::Partitioned] {
            let (e2, f2, g2) = run(form);
            close(&e1, &e2, &format!("{form:?} energies"));
            close(&f1, &f2, &format!("{form:?} forces"));
            for (k, (a, b)) in g1.iter().zip(&g2).enumerate() {
                close(a, b, &format!("{form:?} gradient {k}"));
            }
        }
    }

    /// The partitioned form on `device` against plain loops on the host:
    /// `rows` rows of `c` columns (small integers, so that the sums are
    /// exact in f32) summed into `targets` rows by `index(row)`, and the
    /// gather of `targets` rows back; an error naming what differs.
    pub fn partitioned_against_loops(
        rows: usize,
        targets: usize,
        c: usize,
        index: impl Fn(usize) -> usize,
        device: &Device,
    ) -> Result<(), String> {
        use crate::partitioned::PartIndex;
        let idx: Vec<i64> = (0..rows).map(|i| (index(i) % targets) as i64).collect();
        let vals: Vec<f32> = (0..rows * c).map(|k| (k % 13) as f32 - 6.0).collect();
        let x: Vec<f32> = (0..targets * c).map(|k| (k % 101) as f32 * 0.5).collect();
        let mut want_sum = vec![0f32; targets * c];
        for (i, &t) in idx.iter().enumerate() {
            for j in 0..c {
                want_sum[t as usize * c + j] += vals[i * c + j];
            }
        }
        let want_gather: Vec<f32> =
            idx.iter().flat_map(|&t| x[t as usize * c..(t as usize + 1) * c].to_vec()).collect();
        let pi = PartIndex::new(Tensor::from_data(TensorData::new(idx, [rows]), device), targets);
        let sum = pi.sum(Tensor::from_data(TensorData::new(vals, [rows, c]), device));
        let gathered = pi.gather(Tensor::from_data(TensorData::new(x, [targets, c]), device));
        if sum.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))? != want_sum {
            return Err(format!("the sum of {rows} rows into {targets} differs from the loops'"));
        }
        if gathered.into_data().try_to_vec::<f32>().map_err(|e| format!("{e:?}"))? != want_gather {
            return Err(format!("the gather of {rows} rows from {targets} differs from the loops'"));
        }
        Ok(())
    }

    /// The partitioned form's sums and gathers equal plain loops, and its
    /// parts cover the rows: many parts, padding, and a part per row.
    #[test]
    fn partitioned_sums_and_gathers_equal_loops() {
        use crate::partitioned::{MAX_PART_ROWS, parts};
        for (rows, targets, c) in [(1000usize, 37usize, 3usize), (5, 4, 2), (257 * 3, 1, 1), (0, 3, 2)] {
            partitioned_against_loops(rows, targets, c, |i| i * 7919, &Device::flex()).unwrap();
            let (p, per) = parts(rows, targets);
            assert!(p >= 1 && p * per >= rows && (p - 1) * per < rows.max(1), "parts({rows}, {targets}) = {p} x {per}");
            assert!(per <= MAX_PART_ROWS);
        }
    }

    /// Graphs group into blocks of bounded atoms × edges, whole and in order.
    #[test]
    fn incidence_blocks_cover_the_graphs_in_order() {
        let atoms = [0i64, 3, 5, 9, 10];
        let edges = [0i64, 8, 10, 30, 30];
        assert_eq!(crate::incidence::blocks(&atoms, &edges, 1 << 20), vec![(0, 4)]);
        // 5 atoms × 10 edges fit 50; adding graph 2 (9 × 30) does not.
        assert_eq!(crate::incidence::blocks(&atoms, &edges, 50), vec![(0, 2), (2, 3), (3, 4)]);
        // A graph bigger than the budget is a block of its own.
        assert_eq!(crate::incidence::blocks(&atoms, &edges, 1), vec![(0, 1), (1, 2), (2, 3), (3, 4)]);
        assert!(crate::incidence::blocks(&[0], &[0], 1).is_empty());
    }

    /// Rotating the positions and shifts rotates the forces and leaves the
    /// energies unchanged; forces sum to zero per graph (f_ij = f_ji).
    #[test]
    fn force_head_is_equivariant_and_momentum_conserving() {
        let device = Device::flex();
        let model = MlipConfig::new().init(&device);
        let batch = toy_batch(&device);
        let p = model.forward(&batch);
        let (c, s) = (0.6f32, 0.8f32);
        let rot = Tensor::<2>::from_data(TensorData::new(vec![c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0], [3, 3]), &device);
        let mut rotated = batch.clone();
        rotated.positions = batch.positions.clone().matmul(rot.clone());
        rotated.shifts = batch.shifts.clone().matmul(rot.clone());
        let q = model.forward(&rotated);
        let de = (p.energy.clone() - q.energy).abs().max().into_scalar::<f32>();
        let df = (p.forces.clone().matmul(rot) - q.forces).abs().max().into_scalar::<f32>();
        assert!(de < 1e-4, "energy changed under rotation by {de}");
        assert!(df < 1e-5, "forces not equivariant: {df}");
        let net = scatter_sum(p.forces.clone(), batch.graph_index.clone(), 2).abs().max().into_scalar::<f32>();
        let scale = p.forces.abs().max().into_scalar::<f32>();
        assert!(scale > 0.0 && net < 1e-5 * scale.max(1.0), "net force {net} (max {scale})");
    }
}

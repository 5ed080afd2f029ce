//! A conservative potential: forces that are exactly −dE/dx, trained with
//! first-order autodiff only.
//!
//! ## The model
//!
//! Each atom's energy is an MLP of a smooth descriptor of its neighborhood
//! (Behler–Parrinello / embedded-atom style; many-body through the MLP):
//!
//! ```text
//! r_e   = |r_ij|,  r_ij = r_j − r_i + shift_ij          (edge e = i → j)
//! b_k(r) = exp(−(r − μ_k)² / w²) · fc(r),  fc(r) = ½(cos(π r / r_c) + 1)
//! G_i[c,k] = (1/n̄) Σ_{e: i → j} a_c(Z_j) · b_k(r_e)     (a: learned species channels)
//! e_i   = MLP([G_i, s(Z_i)])                            (s: learned center species)
//! E     = Σ_i (σ_E · e_i + ē)
//! ```
//!
//! ## Why no double backward is needed
//!
//! Training on forces needs the gradient of the loss with respect to the
//! weights, and the loss contains the forces, themselves a gradient. With
//! autodiff forces that is a gradient of a gradient, which Burn does not
//! have (its autodiff is first-order only). Here the force is *written out* as ordinary tensor operations:
//!
//! 1. `∂e_i/∂x` through the MLP by hand: with `u1 = x W1 + b1`, `h1 =
//!    silu(u1)`, `u2 = h1 W2 + b2`, `h2 = silu(u2)`, `e = h2 W3 + b3`:
//!    `δ2 = W3ᵀ ⊙ silu'(u2)`, `δ1 = (δ2 W2ᵀ) ⊙ silu'(u1)`, `∂e/∂x = δ1 W1ᵀ`,
//!    with `silu'(u) = σ(u)(1 + u(1 − σ(u)))`. The `G` columns of it are
//!    `D_i = σ_E ∂e_i/∂G_i`.
//! 2. The chain rule through the descriptor: edge `e = i → j` enters only
//!    `G_i`, through `r_e`, so `∂E/∂r_e = s_e = (1/n̄) Σ_{c,k} D_i[c,k]
//!    a_c(Z_j) b_k'(r_e)`, with the product rule `b_k' = g_k' fc + g_k fc'`.
//! 3. `∂r_e/∂r_j = r̂_ij` and `∂r_e/∂r_i = −r̂_ij`, so the edge gives `+s_e
//!    r̂_ij` to `F_i` and `−s_e r̂_ij` to `F_j` (both ends scattered; the
//!    full list's reverse edge `j → i` enters `G_j` and adds its own terms).
//!
//! The result is a forward graph of matmuls, activations and scatters, so
//! the loss on these forces has a first-order gradient in the weights, and
//! `F = −∂E/∂x` holds exactly (to float rounding) for any weights: the
//! tests check it against Burn's own gradient of `E`, against finite
//! differences, and through energy conservation in molecular dynamics.
//!
//! Since `r_e`, `b_k` and the MLP see only distances, `E` is invariant under
//! rotation and translation, the forces rotate with the structure and sum to
//! zero; `fc` and `fc'` vanish at `r_c`, so `E` and `F` are continuous as
//! atoms cross the cutoff.

use std::f64::consts::PI;

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::{sigmoid, silu};
use burn::tensor::{Device, Tensor};

use crate::model::{GraphBatch, GraphOps, MlipConfig, Prediction, cosine_cutoff, edge_geometry, gaussians};

/// Species channels of the descriptor (`a_c(Z_j)`).
pub const CHANNELS: usize = 4;

/// The conservative potential (see the module documentation).
#[derive(Module, Debug)]
pub struct Conservative {
    /// `a(Z)`: each neighbor species' weight in each descriptor channel.
    channels: Embedding,
    /// `s(Z)`: the center species' input to the MLP.
    center: Embedding,
    l1: Linear,
    l2: Linear,
    out: Linear,
    // Constants (rebuilt from the config; not part of the record).
    num_rbf: usize,
    r_min: f64,
    cutoff: f64,
    avg_neighbors: f64,
    energy_per_atom: f64,
    energy_scale: f64,
}

impl Conservative {
    /// A fresh model: `config.hidden` is the MLP's width and the center
    /// embedding's; `config.interactions` does not apply.
    pub fn init(config: &MlipConfig, device: &Device) -> Conservative {
        let (h, d) = (config.hidden, CHANNELS * config.num_rbf);
        let lin = |i: usize, o: usize| LinearConfig::new(i, o).init(device);
        Conservative {
            channels: EmbeddingConfig::new(config.max_z, CHANNELS).init(device),
            center: EmbeddingConfig::new(config.max_z, h).init(device),
            l1: lin(d + h, h),
            l2: lin(h, h),
            out: lin(h, 1),
            num_rbf: config.num_rbf,
            r_min: config.r_min,
            cutoff: config.cutoff,
            avg_neighbors: config.avg_neighbors,
            energy_per_atom: config.energy_per_atom,
            energy_scale: config.energy_scale,
        }
    }

    /// Energies and their exact negative gradient, the forces.
    pub fn forward(&self, batch: &GraphBatch, graph: &GraphOps) -> Prediction {
        let [v, _] = batch.positions.dims();
        let (c, k) = (CHANNELS, self.num_rbf);

        // Edge geometry, the basis and their derivatives in r.
        let (unit, r) = edge_geometry(batch); // [E,3], [E,1]
        let [e, _] = r.dims();
        let fc = cosine_cutoff(&r, self.cutoff); // [E,1]
        let dfc = (r.clone() * (PI / self.cutoff)).sin() * (-0.5 * PI / self.cutoff); // [E,1]
        let (g, dr, w) = gaussians(&r, self.r_min, self.cutoff, k); // [E,K]
        let dg = g.clone() * dr.mul_scalar(-2.0 / (w * w));
        let basis = g.clone() * fc.clone(); // [E,K]
        let dbasis = dg * fc + g * dfc; // [E,K]

        // Descriptor: neighbor species channels times the radial basis.
        let z = batch.atomic_numbers.clone().reshape([1, v]);
        let a_atom = self.channels.forward(z.clone()).reshape([v, c]);
        let a = graph.gather_dst(a_atom); // [E,C]
        let outer = a.clone().reshape([e, c, 1]) * basis.reshape([e, 1, k]); // [E,C,K]
        let desc = graph.sum_to_src(outer.reshape([e, c * k])) / self.avg_neighbors; // [V,C*K]
        let s = self.center.forward(z).reshape([v, self.center.weight.dims()[1]]);

        // The MLP, keeping its pre-activations.
        let u1 = self.l1.forward(Tensor::cat(vec![desc, s], 1));
        let u2 = self.l2.forward(silu(u1.clone()));
        let atom_e = self.out.forward(silu(u2.clone())) * self.energy_scale + self.energy_per_atom; // [V,1]
        let energy = graph.sum_to_graphs(atom_e);

        // Its gradient by hand: d(e_i)/d(desc_i), scaled as the energy is.
        let w3 = self.out.weight.val().reshape([1, u2.dims()[1]]);
        let d2 = silu_grad(u2) * w3;
        let d1 = silu_grad(u1) * d2.matmul(self.l2.weight.val().transpose());
        let dx = d1.matmul(self.l1.weight.val().transpose());
        let ddesc = dx.narrow(1, 0, c * k) * (self.energy_scale / self.avg_neighbors); // [V,C*K]

        // Chain rule to each edge's length: s_e = sum_{c,k} D_i[c,k] a_c(Z_j) b_k'(r_e).
        let per_channel = (graph.gather_src(ddesc).reshape([e, c, k]) * a.reshape([e, c, 1])).sum_dim(1); // [E,1,K]
        let s_e = (per_channel.reshape([e, k]) * dbasis).sum_dim(1); // [E,1]
        let along = unit * s_e; // [E,3] = dE/dr_j for this edge
        let forces = graph.sum_to_src(along.clone()) - graph.sum_to_dst(along);
        Prediction { energy, forces }
    }
}

/// `silu'(u) = σ(u) (1 + u (1 − σ(u)))`.
fn silu_grad(u: Tensor<2>) -> Tensor<2> {
    let sig = sigmoid(u.clone());
    sig.clone() * ((sig.neg() + 1.0) * u + 1.0)
}

//! Gathers over edges and sums into atoms and graphs in time linear in the
//! edges, with every step parallel on a GPU: the real-size form of the
//! model's message passing.
//!
//! Burn's scatter-add kernels on CubeCL backends run one GPU thread per
//! element *across* the summed axis, each looping over the whole axis:
//! `select_assign` of `[E, C]` edge rows into atoms has C threads looping
//! over E rows (and is `select`'s backward). `scatter` takes an index per
//! element, so the rows can be cut into `P` parts summed side by side:
//! part `p` scatters its `E / P` rows into its own `[V, C]` partial sum
//! (`P × C` threads, `E / P` rows each), and the `P` partial sums are added
//! up (one thread per element). A gather `x[src]` is written as `gather` on
//! `x` broadcast over the parts, so that its backward is that same
//! partitioned scatter and a sum over the broadcast, not `select_assign`.
//!
//! Work: `E × C` for the scatter plus `P × V × C` for the partial sums. `P`
//! is at most `E / V` (and [`MAX_PARTS`]), so the partial sums cost no more
//! than the messages themselves: linear in the edges, where the block
//! one-hot form (`incidence.rs`) costs `edges × atoms-per-block × C`. A
//! real bulk batch (10,000 atoms, 500,000 edges, C = 32) runs 49 parts:
//! about 1,600 threads of 10,000 rows each, against `select_assign`'s 32
//! threads of 500,000 rows.

use burn::tensor::{IndexingUpdateOp, Int, Tensor};

/// Rows each part sums at least (fewer parts for small inputs).
pub const ROWS_PER_PART: usize = 256;
/// Parts at most, unless [`MAX_PART_ROWS`] needs more.
pub const MAX_PARTS: usize = 256;
/// Rows each part sums at most: the scatter kernel loops over a part's rows,
/// and Mesa's llvmpipe (lavapipe, the software Vulkan device CI runs on)
/// ends every shader loop after 65,535 iterations
/// (`LP_MAX_TGSI_LOOP_ITERATIONS`), silently dropping the rows past it.
/// Burn's `select_assign` and `scatter` over more rows than that give wrong
/// sums there; this form stays well below.
pub const MAX_PART_ROWS: usize = 16_384;

/// How `rows` rows are cut into parts summed into `targets` rows: the number
/// of parts and the rows of each (the last part padded). Each part sums at
/// least `targets + 1` rows, so the partial sums (`parts × (targets + 1)`
/// rows) are no larger than the input, and at most [`MAX_PART_ROWS`].
pub fn parts(rows: usize, targets: usize) -> (usize, usize) {
    let p = (rows / ROWS_PER_PART.max(targets + 1)).clamp(1, MAX_PARTS).max(rows.div_ceil(MAX_PART_ROWS));
    (p, rows.div_ceil(p).max(1))
}

/// One index (edge -> atom, or atom -> graph), cut into parts.
#[derive(Debug, Clone)]
pub struct PartIndex {
    /// `[P, per, 1]`: the target of each row; padding rows point at the
    /// extra target row `targets`, which is dropped.
    index: Tensor<3, Int>,
    rows: usize,
    targets: usize,
}

impl PartIndex {
    /// `index` `[rows]` with values in `0..targets`.
    pub fn new(index: Tensor<1, Int>, targets: usize) -> PartIndex {
        let [rows] = index.dims();
        let (p, per) = parts(rows, targets);
        let pad = p * per - rows;
        let index = if pad > 0 {
            let fill = Tensor::<1, Int>::full([pad], targets as i64, &index.device());
            Tensor::cat(vec![index, fill], 0)
        } else {
            index
        };
        PartIndex { index: index.reshape([p, per, 1]), rows, targets }
    }

    fn shape(&self) -> (usize, usize) {
        let [p, per, _] = self.index.dims();
        (p, per)
    }

    /// `x[index]`: row `index[i]` of `x` `[targets, C]` for each row, `[rows, C]`.
    pub fn gather(&self, x: Tensor<2>) -> Tensor<2> {
        let [_, c] = x.dims();
        if self.rows == 0 {
            return Tensor::zeros([0, c], &x.device()); // Burn refuses an empty `narrow`
        }
        let (p, per) = self.shape();
        let x = Tensor::cat(vec![x.clone(), Tensor::zeros([1, c], &x.device())], 0);
        x.unsqueeze_dim::<3>(0)
            .expand([p, self.targets + 1, c])
            .gather(1, self.index.clone().expand([p, per, c]))
            .reshape([p * per, c])
            .narrow(0, 0, self.rows)
    }

    /// The rows of `m` `[rows, C]` summed into their targets: `[targets, C]`.
    pub fn sum(&self, m: Tensor<2>) -> Tensor<2> {
        let [_, c] = m.dims();
        let device = m.device();
        if self.targets == 0 {
            return Tensor::zeros([0, c], &device);
        }
        let (p, per) = self.shape();
        let pad = p * per - self.rows;
        let m = if pad > 0 { Tensor::cat(vec![m, Tensor::zeros([pad, c], &device)], 0) } else { m };
        Tensor::<3>::zeros([p, self.targets + 1, c], &device)
            .scatter(1, self.index.clone().expand([p, per, c]), m.reshape([p, per, c]), IndexingUpdateOp::Add)
            .sum_dim(0)
            .reshape([self.targets + 1, c])
            .narrow(0, 0, self.targets)
    }
}

/// A batch's gathers and sums in the partitioned form.
#[derive(Debug, Clone)]
pub struct Partitioned {
    src: PartIndex,
    dst: PartIndex,
    graph: PartIndex,
}

impl Partitioned {
    /// From `[E]` source and destination atoms of `atoms` atoms and the
    /// `[V]` graph index of `graphs` graphs.
    pub fn new(
        src: Tensor<1, Int>,
        dst: Tensor<1, Int>,
        graph_index: Tensor<1, Int>,
        atoms: usize,
        graphs: usize,
    ) -> Partitioned {
        Partitioned {
            src: PartIndex::new(src, atoms),
            dst: PartIndex::new(dst, atoms),
            graph: PartIndex::new(graph_index, graphs),
        }
    }

    /// `x[src]` `[E,C]` of atom rows `x` `[V,C]`.
    pub fn gather_src(&self, x: Tensor<2>) -> Tensor<2> {
        self.src.gather(x)
    }

    /// `x[dst]` `[E,C]` of atom rows `x` `[V,C]`.
    pub fn gather_dst(&self, x: Tensor<2>) -> Tensor<2> {
        self.dst.gather(x)
    }

    /// Edge rows `m` `[E,C]` summed into their source atoms: `[V,C]`.
    pub fn sum_to_src(&self, m: Tensor<2>) -> Tensor<2> {
        self.src.sum(m)
    }

    /// Edge rows `m` `[E,C]` summed into their destination atoms: `[V,C]`.
    pub fn sum_to_dst(&self, m: Tensor<2>) -> Tensor<2> {
        self.dst.sum(m)
    }

    /// Atom rows `a` `[V,C]` summed into their graphs: `[B,C]`.
    pub fn sum_to_graphs(&self, a: Tensor<2>) -> Tensor<2> {
        self.graph.sum(a)
    }
}

//! Gathers over edges and sums into atoms and graphs as matmuls with
//! block-diagonal one-hot (incidence) matrices: the GPU-sized form of the
//! model's message passing.
//!
//! Burn's scatter-add (`select_assign` with `IndexingUpdateOp::Add`, and
//! `scatter`) runs on CubeCL backends (CUDA, wgpu) as one GPU thread per
//! column looping over every row: summing `[E, C]` edge messages into atoms
//! uses C threads, summing atom energies into graphs one. `select` (a
//! gather) has that kernel as its backward. A batch is a disjoint union of
//! graphs, so its edge-to-atom incidence matrix is block diagonal: whole
//! graphs are grouped into blocks of at most [`BLOCK_ENTRIES`] one-hot
//! entries, and on each block a gather `x[src]` is `S @ x` and the scatter-sum
//! of edge values into their source atoms is `Sᵀ @ m` (`S` the block's
//! `[edges, atoms]` one-hot of the source atom). Forward and backward are
//! matmuls, parallel over every row and column. The price is arithmetic:
//! `edges × atoms × C` per block instead of `edges × C`, which a GPU has to
//! spare and a CPU does not (hence `--scatter select` stays the CPU default).

use burn::tensor::{Int, Tensor, TensorData};

/// One-hot entries per block at most (16 MiB of f32), unless one graph alone
/// needs more.
pub const BLOCK_ENTRIES: usize = 1 << 22;

/// Whole graphs `graphs`, their atoms and edges, and the block's one-hots.
#[derive(Debug, Clone)]
struct Block {
    atoms: (usize, usize),
    edges: (usize, usize),
    /// `[edges, atoms]`: 1 where the edge's source atom is that atom.
    src: Tensor<2>,
    /// `[edges, atoms]`: 1 where the edge's destination atom is that atom.
    dst: Tensor<2>,
    /// `[graphs, atoms]`: 1 where the atom belongs to that graph.
    graph: Tensor<2>,
}

/// A batch's incidence matrices, block by block.
#[derive(Debug, Clone)]
pub struct Incidence {
    blocks: Vec<Block>,
}

/// `[rows, n]` one-hot of local indices `idx` `[rows, 1]` (values in `0..n`).
fn one_hot(idx: Tensor<2, Int>, n: usize) -> Tensor<2> {
    let [rows, _] = idx.dims();
    let cols = Tensor::<1, Int>::arange(0..n as i64, &idx.device()).reshape([1, n]).expand([rows, n]);
    idx.expand([rows, n]).equal(cols).float()
}

/// Groups graphs `0..B` (by their `[B+1]` atom and edge offsets) into
/// blocks of at most `budget` atoms × edges, each at least one graph.
pub fn blocks(atoms_ptr: &[i64], edges_ptr: &[i64], budget: usize) -> Vec<(usize, usize)> {
    let graphs = atoms_ptr.len().saturating_sub(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < graphs {
        let mut end = start + 1;
        while end < graphs {
            let atoms = (atoms_ptr[end + 1] - atoms_ptr[start]) as usize;
            let edges = (edges_ptr[end + 1] - edges_ptr[start]) as usize;
            if atoms * edges > budget {
                break;
            }
            end += 1;
        }
        out.push((start, end));
        start = end;
    }
    out
}

impl Incidence {
    /// The incidence blocks of a batch: `edges` `[E,2]` batch-local
    /// (source, destination) atom pairs, `atoms_ptr` / `edges_ptr` its
    /// `[B+1]` offsets on the host.
    pub fn new(edges: &Tensor<2, Int>, atoms_ptr: &[i64], edges_ptr: &[i64]) -> Incidence {
        let device = edges.device();
        let blocks = blocks(atoms_ptr, edges_ptr, BLOCK_ENTRIES)
            .into_iter()
            .map(|(g0, g1)| {
                let (a0, a1) = (atoms_ptr[g0] as usize, atoms_ptr[g1] as usize);
                let (e0, e1) = (edges_ptr[g0] as usize, edges_ptr[g1] as usize);
                let n = a1 - a0;
                let local = |col: usize| edges.clone().narrow(0, e0, e1 - e0).narrow(1, col, 1) - a0 as i64;
                let (src, dst) = if e1 > e0 {
                    (one_hot(local(0), n), one_hot(local(1), n))
                } else {
                    (Tensor::zeros([0, n], &device), Tensor::zeros([0, n], &device))
                };
                // The graph of each atom is known on the host: build it there.
                let mut graph = vec![0f32; (g1 - g0) * n];
                for g in g0..g1 {
                    for a in atoms_ptr[g] as usize..atoms_ptr[g + 1] as usize {
                        graph[(g - g0) * n + (a - a0)] = 1.0;
                    }
                }
                let graph = Tensor::from_data(TensorData::new(graph, [g1 - g0, n]), &device);
                Block { atoms: (a0, a1), edges: (e0, e1), src, dst, graph }
            })
            .collect();
        Incidence { blocks }
    }

    /// `x[src]`: each edge's source-atom row of `x` `[V,C]`, as `[E,C]`.
    pub fn gather_src(&self, x: Tensor<2>) -> Tensor<2> {
        self.gather(x, |b| &b.src)
    }

    /// `x[dst]`: each edge's destination-atom row of `x` `[V,C]`, as `[E,C]`.
    pub fn gather_dst(&self, x: Tensor<2>) -> Tensor<2> {
        self.gather(x, |b| &b.dst)
    }

    fn gather(&self, x: Tensor<2>, pick: impl Fn(&Block) -> &Tensor<2>) -> Tensor<2> {
        let [_, c] = x.dims();
        let parts: Vec<Tensor<2>> = self
            .blocks
            .iter()
            .filter(|b| b.edges.1 > b.edges.0)
            .map(|b| pick(b).clone().matmul(x.clone().narrow(0, b.atoms.0, b.atoms.1 - b.atoms.0)))
            .collect();
        if parts.is_empty() { Tensor::zeros([0, c], &x.device()) } else { Tensor::cat(parts, 0) }
    }

    /// Sums the rows of `m` `[E,C]` into each edge's source atom: `[V,C]`.
    pub fn sum_to_src(&self, m: Tensor<2>) -> Tensor<2> {
        self.sum_to(m, |b| &b.src)
    }

    /// Sums the rows of `m` `[E,C]` into each edge's destination atom: `[V,C]`.
    pub fn sum_to_dst(&self, m: Tensor<2>) -> Tensor<2> {
        self.sum_to(m, |b| &b.dst)
    }

    fn sum_to(&self, m: Tensor<2>, pick: impl Fn(&Block) -> &Tensor<2>) -> Tensor<2> {
        let [_, c] = m.dims();
        let parts: Vec<Tensor<2>> = self
            .blocks
            .iter()
            .map(|b| {
                let n = b.atoms.1 - b.atoms.0;
                if b.edges.1 > b.edges.0 {
                    pick(b).clone().transpose().matmul(m.clone().narrow(0, b.edges.0, b.edges.1 - b.edges.0))
                } else {
                    Tensor::zeros([n, c], &m.device())
                }
            })
            .collect();
        Tensor::cat(parts, 0)
    }

    /// Sums the rows of `a` `[V,C]` into each atom's graph: `[B,C]`.
    pub fn sum_to_graphs(&self, a: Tensor<2>) -> Tensor<2> {
        let parts: Vec<Tensor<2>> = self
            .blocks
            .iter()
            .map(|b| b.graph.clone().matmul(a.clone().narrow(0, b.atoms.0, b.atoms.1 - b.atoms.0)))
            .collect();
        Tensor::cat(parts, 0)
    }
}

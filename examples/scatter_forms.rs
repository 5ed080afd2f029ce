//! How the three forms of `train_mlip`'s message aggregation scale with the
//! batch: one gather of atom features onto edges and one sum of edge
//! messages back into atoms, forward and backward (what every interaction
//! of the model does), timed per batch size on a backend.
//!
//! ```text
//! cargo run --release --example scatter_forms                                   # Flex (CPU)
//! cargo run --release --features wgpu --example scatter_forms -- --backend wgpu # any Vulkan device, lavapipe too
//! cargo run --release --features cuda --example scatter_forms -- --backend cuda
//! ```
//!
//! The batches are disjoint graphs of `--atoms` atoms with `--neighbors`
//! edges per atom (50 at 200 atoms: 10,000 edges a graph, so 50 graphs make
//! the 10,000 atoms and 500,000 edges of a real bulk batch), edges sorted by
//! source atom as neighbor lists are. Each line is the median over
//! `--repeats` runs after one warm-up, with the time per edge: a form whose
//! time per edge stays flat as the batch grows is linear in the edges. Each
//! form's gradient is checked against plain loops on the host (in f64):
//! `WRONG` marks a form whose gradient differs by more than 1e-4.

// Only the edge-to-atom parts of the two modules are timed here.
#[allow(dead_code)]
#[path = "train_mlip/incidence.rs"]
mod incidence;
#[allow(dead_code)]
#[path = "train_mlip/partitioned.rs"]
mod partitioned;

use std::time::Instant;

use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};
use clap::Parser;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    Flex,
    Cuda,
    Wgpu,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Select,
    Incidence,
    Partitioned,
}

/// Time the gather-and-sum forms against the batch size.
#[derive(Parser, Debug)]
struct Args {
    #[arg(long, value_enum, default_value = "flex")]
    backend: BackendArg,
    /// Graphs per batch, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50")]
    graphs: Vec<usize>,
    /// Atoms per graph.
    #[arg(long, default_value_t = 200)]
    atoms: usize,
    /// Edges per atom.
    #[arg(long, default_value_t = 50)]
    neighbors: usize,
    /// Feature width.
    #[arg(long, default_value_t = 32)]
    channels: usize,
    /// Timed runs per point (after one warm-up).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Forms to time.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "select,incidence,partitioned")]
    forms: Vec<Form>,
    /// Skip a form at a batch size once one of its runs took longer than this (s).
    #[arg(long, default_value_t = 60.0)]
    give_up_s: f64,
}

fn main() {
    let args = Args::parse();
    // Forward and backward: the device with autodiff.
    match args.backend {
        BackendArg::Flex => run(&args, &Device::flex().autodiff(), "Flex"),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => run(&args, &Device::cuda(0).autodiff(), "CUDA"),
        #[cfg(feature = "wgpu")]
        BackendArg::Wgpu => run(&args, &Device::wgpu(burn::tensor::DeviceKind::DefaultDevice).autodiff(), "wgpu"),
        #[allow(unreachable_patterns)]
        other => eprintln!("--backend {other:?}: build with that feature"),
    }
}

/// A batch of `graphs` graphs: `[E]` source and destination atoms (sorted by
/// source), CSR offsets on the host, and the host inputs.
struct Batch {
    src: Tensor<1, Int>,
    dst: Tensor<1, Int>,
    atoms_ptr: Vec<i64>,
    edges_ptr: Vec<i64>,
    edges: Tensor<2, Int>,
    atoms: usize,
    host_src: Vec<usize>,
    host_dst: Vec<usize>,
}

/// A xorshift64 generator: the same batch and inputs on every backend.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn batch(graphs: usize, atoms: usize, neighbors: usize, device: &Device) -> Batch {
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for g in 0..graphs {
        for a in 0..atoms {
            for _ in 0..neighbors {
                // A neighbor in the same graph, not the atom itself.
                let b = (a + 1 + (rng.next() as usize % (atoms - 1).max(1))) % atoms;
                src.push(g * atoms + a);
                dst.push(g * atoms + b);
            }
        }
    }
    let e = src.len();
    let ints = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
    let pairs: Vec<i64> = src.iter().zip(&dst).flat_map(|(&s, &d)| [s as i64, d as i64]).collect();
    Batch {
        src: Tensor::from_data(TensorData::new(ints(&src), [e]), device),
        dst: Tensor::from_data(TensorData::new(ints(&dst), [e]), device),
        atoms_ptr: (0..=graphs).map(|g| (g * atoms) as i64).collect(),
        edges_ptr: (0..=graphs).map(|g| (g * atoms * neighbors) as i64).collect(),
        edges: Tensor::from_data(TensorData::new(pairs, [e, 2]), device),
        atoms: graphs * atoms,
        host_src: src,
        host_dst: dst,
    }
}

/// `Σ|∂x|` of `Σ y²`, `y[a] = Σ_{e: src e = a} x[dst e] w[e]`, by loops in f64:
/// `∂x[b] = Σ_{e: dst e = b} 2 y[src e] w[e]`.
fn reference(b: &Batch, x: &[f32], w: &[f32], c: usize) -> f64 {
    let mut y = vec![0f64; b.atoms * c];
    for (e, (&s, &d)) in b.host_src.iter().zip(&b.host_dst).enumerate() {
        for j in 0..c {
            y[s * c + j] += f64::from(x[d * c + j]) * f64::from(w[e * c + j]);
        }
    }
    let mut gx = vec![0f64; b.atoms * c];
    for (e, (&s, &d)) in b.host_src.iter().zip(&b.host_dst).enumerate() {
        for j in 0..c {
            gx[d * c + j] += 2.0 * y[s * c + j] * f64::from(w[e * c + j]);
        }
    }
    gx.iter().map(|g| g.abs()).sum()
}

/// One forward and backward of `sum_to_src(gather_dst(x) * w)`; returns a
/// number read back (so that the work is done).
fn step(form: Form, b: &Batch, x: &Tensor<2>, w: &Tensor<2>) -> f32 {
    let m = match form {
        Form::Select => {
            let m = x.clone().select(0, b.dst.clone()) * w.clone();
            let [_, c] = m.dims();
            Tensor::<2>::zeros([b.atoms, c], &m.device()).select_assign(0, b.src.clone(), m, IndexingUpdateOp::Add)
        }
        Form::Incidence => {
            let i = incidence::Incidence::new(&b.edges, &b.atoms_ptr, &b.edges_ptr);
            i.sum_to_src(i.gather_dst(x.clone()) * w.clone())
        }
        Form::Partitioned => {
            let graph = Tensor::<1, Int>::zeros([b.atoms], &x.device());
            let p = partitioned::Partitioned::new(b.src.clone(), b.dst.clone(), graph, b.atoms, 1);
            p.sum_to_src(p.gather_dst(x.clone()) * w.clone())
        }
    };
    let grads = m.powi_scalar(2).sum().backward();
    let g = x.grad(&grads).expect("x has a gradient");
    g.abs().sum().into_scalar::<f32>()
}

fn run(args: &Args, device: &Device, backend: &str) {
    println!(
        "backend {backend} ({device:?}); graphs of {} atoms, {} edges per atom, {} channels; gather + sum, forward and backward; median of {}",
        args.atoms, args.neighbors, args.channels, args.repeats
    );
    println!("| form | graphs | atoms | edges | ms | ns per edge | Σ|∂x| |");
    println!("|---|---|---|---|---|---|---|");
    let mut given_up = Vec::new();
    let mut rng = XorShift(7);
    for &graphs in &args.graphs {
        let b = batch(graphs, args.atoms, args.neighbors, device);
        let e = b.atoms * args.neighbors;
        let c = args.channels;
        let hx: Vec<f32> = (0..b.atoms * c).map(|_| rng.unit()).collect();
        let hw: Vec<f32> = (0..e * c).map(|_| rng.unit()).collect();
        let want = reference(&b, &hx, &hw, c);
        let x = Tensor::<2>::from_data(TensorData::new(hx, [b.atoms, c]), device).require_grad();
        let w = Tensor::<2>::from_data(TensorData::new(hw, [e, c]), device);
        for &form in &args.forms {
            if given_up.contains(&form) {
                println!(
                    "| {form:?} | {graphs} | {} | {e} | (skipped: over {} s at a smaller batch) | |",
                    b.atoms, args.give_up_s
                );
                continue;
            }
            let mut times = Vec::new();
            let mut value = 0.0;
            for k in 0..=args.repeats {
                let t = Instant::now();
                value = step(form, &b, &x, &w);
                let s = t.elapsed().as_secs_f64();
                if k > 0 {
                    times.push(s);
                }
                if s > args.give_up_s {
                    given_up.push(form);
                    break;
                }
            }
            let agree = if ((f64::from(value) - want) / want.abs().max(1e-6)).abs() < 1e-4 { "" } else { " WRONG" };
            times.sort_by(f64::total_cmp);
            let Some(&median) = times.get(times.len() / 2) else {
                println!("| {form:?} | {graphs} | {} | {e} | > {} s | |", b.atoms, args.give_up_s);
                continue;
            };
            println!(
                "| {form:?} | {graphs} | {} | {e} | {:.1} | {:.1} | {value:.6e}{agree} (host {want:.6e}) |",
                b.atoms,
                median * 1e3,
                median * 1e9 / e as f64
            );
        }
    }
}

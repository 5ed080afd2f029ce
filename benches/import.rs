//! Speed of bringing your own data:
//! - `import/extxyz_50_atoms`: parse plus write of 50-atom periodic
//!   structures (energy, forces, stress, Lattice, pbc) from an extended-XYZ
//!   file into a new store, in structures per second (target >= 20,000/s);
//! - `neighbors/bulk_64_atoms_5A`: neighbor lists of periodic bulk, 64 atoms
//!   per cell at 0.085 atoms/Å³ (about 45 neighbors each at 5 Å), built on
//!   ONE thread, in edges per second (target >= 2M edges/s per core).
//!
//! `cargo bench --bench import -- --warm-up-time 1 --measurement-time 5`

use std::fmt::Write as _;
use std::hint::black_box;

use atomzarr::data::neighbors::neighbor_list;
use atomzarr::formats::import::{ImportOptions, import_files};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

const SYMBOLS: [&str; 4] = ["Si", "O", "Li", "Fe"];

/// `n` frames of `atoms` atoms in a random triclinic-ish cell, as ASE writes them.
fn extxyz(n: usize, atoms: usize, seed: u64) -> String {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut s = String::with_capacity(n * (atoms + 2) * 110);
    for _ in 0..n {
        let a = 9.0 + rng.random::<f64>();
        let _ = writeln!(s, "{atoms}");
        let _ = writeln!(
            s,
            "Lattice=\"{a:.8} 0.0 0.0 0.3 {a:.8} 0.0 0.1 0.2 {a:.8}\" Properties=species:S:1:pos:R:3:forces:R:3 \
             energy={:.8} stress=\"0.01 0.002 0.003 0.002 0.02 0.001 0.003 0.001 0.03\" pbc=\"T T T\"",
            -5.0 * atoms as f64 + rng.random::<f64>()
        );
        for _ in 0..atoms {
            let sym = SYMBOLS[rng.random_range(0..SYMBOLS.len())];
            let p: [f64; 3] = [0, 1, 2].map(|_| rng.random::<f64>() * a);
            let f: [f64; 3] = [0, 1, 2].map(|_| rng.random::<f64>() - 0.5);
            let _ = writeln!(
                s,
                "{sym:<2} {:>16.8} {:>16.8} {:>16.8} {:>16.8} {:>16.8} {:>16.8}",
                p[0], p[1], p[2], f[0], f[1], f[2]
            );
        }
    }
    s
}

fn bench(c: &mut Criterion) {
    const N: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bench.extxyz");
    std::fs::write(&input, extxyz(N, 50, 1)).unwrap();
    let mut g = c.benchmark_group("import");
    g.sample_size(10).throughput(Throughput::Elements(N as u64));
    let mut k = 0;
    g.bench_function("extxyz_50_atoms", |b| {
        b.iter(|| {
            k += 1;
            let store = dir.path().join(format!("s{k}.zarr"));
            let r = import_files(&[&input], &store, &ImportOptions::default()).unwrap();
            assert_eq!(r.frames, N);
            std::fs::remove_dir_all(&store).unwrap();
        })
    });
    g.finish();

    // Periodic bulk: 64 atoms in a cube of 64 / 0.085 Å³.
    let mut rng = Pcg64::seed_from_u64(2);
    let l = (64.0f64 / 0.085).cbrt();
    let cell = [[l, 0.0, 0.0], [0.0, l, 0.0], [0.0, 0.0, l]];
    let structures: Vec<Vec<[f64; 3]>> =
        (0..64).map(|_| (0..64).map(|_| [0, 1, 2].map(|_| rng.random::<f64>() * l)).collect()).collect();
    let edges: usize = structures.iter().map(|p| neighbor_list(p, &cell, [true; 3], 5.0).unwrap().len()).sum();
    let mut g = c.benchmark_group("neighbors");
    g.sample_size(10).throughput(Throughput::Elements(edges as u64));
    g.bench_function("bulk_64_atoms_5A", |b| {
        b.iter(|| {
            for p in &structures {
                black_box(neighbor_list(black_box(p), &cell, [true; 3], 5.0).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

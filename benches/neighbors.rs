//! Neighbor-list throughput on one core, in millions of edges per second,
//! best of 3 passes over a set of structures (each list built alone, as a
//! loader worker builds them).
//!
//! Sets: every `LABEL=FILE` in `ATOMZARR_NEIGHBOR_SETS` (comma-separated;
//! any format `atomzarr import` reads), at `ATOMZARR_NEIGHBOR_CUTOFF` Å
//! (default 5). Without it: 500 bulk cells of 256 atoms (`roundtrip
//! --preset bulk` cells) and 5,000 random 20-atom molecules without a cell.
//! `scripts/neighbors_vs_vesin.py` writes the sets with ASE, runs
//! vesin on them and this bench on the same files, and prints the ratio.
//!
//! `cargo bench --bench neighbors`

use std::time::Instant;

use atomzarr::data::neighbors::neighbor_list;
use atomzarr::data::synth::{Generator, Preset};
use atomzarr::formats::{FrameOptions, open_frames};
use atomzarr::{AtomicData, HostData};

/// (positions, cell, pbc) of a structure, as the builder takes them.
type Structure = (Vec<[f64; 3]>, [[f64; 3]; 3], [bool; 3]);

fn structure(s: &AtomicData) -> Structure {
    let p = s.field("positions").expect("positions").data.to_f64_vec();
    let positions = p.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let c = s.field("cell").map(|f| f.data.to_f64_vec()).unwrap_or_else(|| vec![0.0; 9]);
    let cell = std::array::from_fn(|r| std::array::from_fn(|k| c[3 * r + k]));
    let pbc = match s.field("pbc").map(|f| &f.data) {
        Some(HostData::Bool(b)) => [b[0], b[1], b[2]],
        _ => [false; 3],
    };
    (positions, cell, pbc)
}

fn from_file(path: &str) -> Vec<Structure> {
    let (mut frames, _) = open_frames(std::path::Path::new(path), &FrameOptions::default()).expect("open");
    let mut out = Vec::new();
    while let Some(batch) = frames.next_batch(4096).expect("read") {
        out.extend(batch.iter().map(|f| structure(&f.data)));
    }
    out
}

fn defaults() -> Vec<(String, Vec<Structure>)> {
    let cells = Generator::with_preset(Preset::Bulk { cutoff: 5.0 }, 256, 256, 7).unwrap().batch(500).unwrap();
    let molecules = atomzarr::data::synth::generate(5000, 20, 20, 7).unwrap();
    let molecule = |s: &AtomicData| {
        let (p, _, _) = structure(s);
        (p, [[0.0; 3]; 3], [false; 3])
    };
    vec![
        ("bulk_256_atoms".into(), cells.iter().map(structure).collect()),
        ("molecules_20_atoms".into(), molecules.iter().map(molecule).collect()),
    ]
}

fn main() {
    let cutoff: f64 = std::env::var("ATOMZARR_NEIGHBOR_CUTOFF").ok().and_then(|c| c.parse().ok()).unwrap_or(5.0);
    let sets: Vec<(String, Vec<Structure>)> = match std::env::var("ATOMZARR_NEIGHBOR_SETS") {
        Ok(spec) if !spec.is_empty() => spec
            .split(',')
            .map(|kv| {
                let (label, path) = kv.split_once('=').expect("LABEL=FILE");
                (label.to_string(), from_file(path))
            })
            .collect(),
        _ => defaults(),
    };
    for (label, structures) in sets {
        let mut best = f64::INFINITY;
        let mut edges = 0usize;
        for _ in 0..3 {
            let t = Instant::now();
            edges = structures.iter().map(|(p, c, pbc)| neighbor_list(p, c, *pbc, cutoff).expect("list").len()).sum();
            best = best.min(t.elapsed().as_secs_f64());
        }
        // One JSON line per set (the script reads these).
        println!(
            "{{\"set\": \"{label}\", \"structures\": {}, \"edges\": {edges}, \"cutoff\": {cutoff}, \"seconds\": {best:.6}, \"medges_per_s\": {:.3}}}",
            structures.len(),
            edges as f64 / best / 1e6
        );
    }
}

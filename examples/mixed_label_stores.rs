//! Writes two synthetic stores whose labels differ, for timing a mixture of
//! a periodic and a molecular data set: `periodic_N.zarr` (the reference
//! benchmark's structures with a cell, pbc, neighbor shifts and a stress)
//! and `molecules_N.zarr` (the same kind of structures without cell, pbc,
//! shifts or stress).
//!
//! ```text
//! cargo run --release --example mixed_label_stores -- OUT_DIR N [MIN_ATOMS MAX_ATOMS]
//! ./target/release/atomzarr read OUT_DIR/periodic_N.zarr OUT_DIR/molecules_N.zarr \
//!     --weights 0.5,0.5 --read-order shuffle --cache-bytes 268435456
//! ```
//!
//! The read of the pair is a mixture with `output_strict` off: each batch
//! carries the union of the fields, the molecules' stress absent (NaN, with
//! `stress_present` false) and their cells zero (docs/LABELS.md).

use std::path::PathBuf;

use atomzarr::data::synth::Generator;
use atomzarr::{AtomicData, AtomicDataZarrWriter, ZarrWriteConfig};

/// Samples written per append.
const BATCH: usize = 50_000;

fn main() -> atomzarr::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mixed_label_stores OUT_DIR N [MIN_ATOMS MAX_ATOMS]";
    let (Some(out), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse::<usize>().ok())) else {
        return Err(atomzarr::Error::Config(usage.into()));
    };
    let atoms = |k: usize, default: usize| args.get(k).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (min_atoms, max_atoms) = (atoms(2, 10), atoms(3, 30));
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).map_err(|e| atomzarr::Error::Config(format!("{}: {e}", out.display())))?;
    for (kind, seed) in [("periodic", 1), ("molecules", 2)] {
        let path = out.join(format!("{kind}_{n}.zarr"));
        let mut writer = AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())?;
        let mut generator = Generator::new(min_atoms, max_atoms, seed)?;
        let mut written = 0;
        while written < n {
            let batch: Vec<AtomicData> = generator
                .batch(BATCH.min(n - written))?
                .into_iter()
                .enumerate()
                .map(|(k, s)| if kind == "periodic" { with_stress(s, written + k) } else { molecule(s) })
                .collect();
            writer.append(&batch)?;
            written += batch.len();
        }
        println!("{}: {written} samples", path.display());
    }
    Ok(())
}

/// `s` with a small stress that differs from sample to sample.
fn with_stress(s: AtomicData, k: usize) -> AtomicData {
    let x = (k % 1000) as f32 * 1e-5;
    s.with_stress([[x, 0.0, 0.0], [0.0, -x, 0.0], [0.0, 0.0, 2.0 * x]])
}

/// `s` without its periodic geometry: no cell, pbc or shifts.
fn molecule(mut s: AtomicData) -> AtomicData {
    for name in ["cell", "pbc", "shifts"] {
        s.fields.remove(name);
    }
    s
}

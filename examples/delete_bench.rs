//! Times one soft `delete` of random samples, as the Python package's
//! `atomzarr.Writer(store).delete(indices)` calls it: `COUNT` distinct
//! physical indices drawn with `SEED` (default 0) from the store's samples,
//! deleted in one call. The store is changed: run it on a copy.
//!
//! ```text
//! ./target/release/atomzarr roundtrip -n 1000000 --output-dir D   # the 1M reference store (1.7 GB)
//! cp -r D/bench_1000000.zarr /tmp/copy.zarr
//! cargo run --release --example delete_bench -- /tmp/copy.zarr 10000 [SEED] [--defragment] [--indices-out FILE]
//! ```
//!
//! Prints one line: the count, the store's physical samples, the seconds
//! the call took (opening the writer excluded), and the chunk files the
//! store held before and after (deletes keep the layout). With
//! `--defragment`, a second line: the seconds `defragment(None)` then takes
//! to rewrite the store without the deleted samples. With
//! `--indices-out FILE`, the drawn indices are written to `FILE` (one
//! decimal index a line, in the order drawn) before the delete, so that
//! another implementation can delete the same samples
//! (`scripts/delete_bench_toolkit.py`).
//!
//! `scripts/delete_bench.sh` runs it on fresh copies of a store, three
//! times per count, and prints the median.

use std::path::Path;
use std::time::Instant;

use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, ZarrWriteConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| if e.path().is_dir() { files(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

fn main() -> atomzarr::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: delete_bench STORE COUNT [SEED] [--defragment] [--indices-out FILE]";
    let defragment = args.iter().any(|a| a == "--defragment");
    let mut indices_out = None;
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--defragment" => {}
            "--indices-out" => match it.next() {
                Some(f) => indices_out = Some(f),
                None => {
                    eprintln!("{usage}");
                    std::process::exit(2);
                }
            },
            _ => rest.push(a),
        }
    }
    let args = rest;
    let (Some(store), Some(count)) = (args.first(), args.get(1).and_then(|c| c.parse::<usize>().ok())) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let physical = AtomicDataZarrReader::open(store.as_str())?.num_physical();
    if count > physical {
        eprintln!("{store} holds {physical} samples, fewer than {count}");
        std::process::exit(2);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let indices = rand::seq::index::sample(&mut rng, physical, count).into_vec();
    if let Some(file) = &indices_out {
        let text: String = indices.iter().map(|i| format!("{i}\n")).collect();
        std::fs::write(file, text).map_err(|source| atomzarr::Error::Io { path: file.into(), source })?;
    }
    let before = files(Path::new(store));
    let mut writer = AtomicDataZarrWriter::open(store.as_str(), ZarrWriteConfig::default())?;
    let t = Instant::now();
    writer.delete(&indices)?;
    let secs = t.elapsed().as_secs_f64();
    let after = files(Path::new(store));
    println!("delete of {count} random samples of {physical}: {secs:.3} s (seed {seed}; files {before} -> {after})");
    if defragment {
        let t = Instant::now();
        writer.defragment(None)?;
        println!("defragment to {} samples: {:.3} s", physical - count, t.elapsed().as_secs_f64());
    }
    Ok(())
}

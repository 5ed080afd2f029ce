//! Small appends and the writer lock, on disk (Cargo's target dir, never a
//! tmpfs: the syncs must be real):
//! - `append_10/<layout>`: 10 samples (10-100 atoms, 1-4x edges) appended to
//!   a store of 100,000 such samples, crash-safe as always; one append per
//!   criterion sample, 100 samples. Layouts: `default` (what
//!   `ZarrWriteConfig::default()` and `atomzarr import` write: ~1 MiB
//!   chunks, no shards) and `reference` (the I/O benchmark's: zstd 3,
//!   10,000-row chunks, 500,000-row shards). Target: median <= 10 ms.
//! - `writer/open_and_drop`: `AtomicDataZarrWriter::open` on that store (it
//!   takes the lock and checks for interrupted operations) and drop.
//! - `lock/acquire_release`: the lock alone.
//!
//! After criterion's lines, each append bench prints the median of exactly
//! the appends it timed. `cargo bench --bench append`

use std::time::{Duration, Instant};

use atomzarr::data::synth::Generator;
use atomzarr::store::lock::StoreLock;
use atomzarr::{AtomicDataZarrWriter, Codec, ZarrArrayConfig, ZarrWriteConfig};
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};

const STORE_SAMPLES: usize = 100_000;
const APPEND: usize = 10;

fn layouts() -> Vec<(&'static str, ZarrWriteConfig)> {
    let reference = ZarrArrayConfig::default()
        .with_codec(Codec::Zstd { level: 3 })
        .with_chunk_size(10_000)
        .with_shard_size(500_000);
    vec![
        ("default", ZarrWriteConfig::default()),
        ("reference", ZarrWriteConfig::default().with_meta(reference).with_core(reference).with_custom(reference)),
    ]
}

fn disk_dir() -> tempfile::TempDir {
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new().prefix("bench-append-").tempdir_in(base).unwrap()
}

fn median_ms(times: &mut [Duration]) -> f64 {
    times.sort_unstable();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn bench(c: &mut Criterion) {
    let dir = disk_dir();
    for (name, config) in layouts() {
        let path = dir.path().join(format!("{name}.zarr"));
        let mut generator = Generator::new(10, 100, 7).unwrap();
        {
            let mut w = AtomicDataZarrWriter::create(&path, config.clone()).unwrap();
            for _ in 0..STORE_SAMPLES / 25_000 {
                w.append(&generator.batch(25_000).unwrap()).unwrap();
            }
        }
        let mut w = AtomicDataZarrWriter::open(&path, config.clone()).unwrap();
        let batches: Vec<_> = (0..400).map(|_| generator.batch(APPEND).unwrap()).collect();
        let mut next = 0;
        let mut times = Vec::new();
        let mut g = c.benchmark_group("append_10");
        // One append per criterion sample: flat sampling with a measurement
        // time far below 100 appends.
        g.sample_size(100).sampling_mode(SamplingMode::Flat).measurement_time(Duration::from_millis(100));
        g.warm_up_time(Duration::from_millis(200));
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let batch = &batches[next % batches.len()];
                    next += 1;
                    let t = Instant::now();
                    w.append(batch).unwrap();
                    let dt = t.elapsed();
                    total += dt;
                    times.push(dt);
                }
                total
            })
        });
        g.finish();
        // The last 100 are criterion's samples (the rest warmed up).
        let n = times.len();
        let mut last: Vec<Duration> = times[n.saturating_sub(100)..].to_vec();
        println!(
            "append_10/{name}: median of the last {} appends {:.2} ms (store of {}+ samples, on disk)",
            last.len(),
            median_ms(&mut last),
            STORE_SAMPLES
        );
        drop(w);
        if name == "default" {
            let mut g = c.benchmark_group("writer");
            g.bench_function("open_and_drop", |b| {
                b.iter(|| drop(AtomicDataZarrWriter::open(&path, config.clone()).unwrap()))
            });
            g.finish();
            let mut g = c.benchmark_group("lock");
            g.bench_function("acquire_release", |b| {
                b.iter(|| drop(StoreLock::acquire(&path, Duration::ZERO).unwrap()))
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

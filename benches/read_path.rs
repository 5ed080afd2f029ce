//! The Zarr reader's batched read path (`read_collated`) on a store laid out
//! like the reference benchmark's: 10,000 structures of 10-100 atoms, edges
//! uniform in 1..4*atoms, zstd level 3, chunk 10,000 and shard 500,000 rows
//! for every core array including the edge arrays.
//!
//! Groups (criterion's elements/s = samples/s):
//! - `window/{cache,nocache}/{order}/{1,64,1024}`: one `read_collated` call
//!   of a window of that many samples (batches of up to 64), walking the
//!   order window by window. With the cache the store is resident after the
//!   first pass (steady state: planning + copy); without it every call
//!   decodes every chunk it touches (decode-bound).
//! - `epoch/{order}/{cold,warm}`: every sample once in windows of 1,024,
//!   from a fresh reader (cold: each chunk decoded once) or a reader that has
//!   already read the store (warm: a second epoch).
//! - `epoch/single_shuffled/{cold,warm}`: `read(i)` once per sample, shuffled.
//! - `checksum/{on,off}`: a cold shuffled epoch (as `epoch/shuffled/cold`) of
//!   the store with its per-chunk crc32c (the default) and of the same store
//!   written without: the read cost of the checksums
//!   (`cargo bench --bench read_path -- checksum`).
//!
//! `cargo bench --bench read_path` (about a minute on 2 cores).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

use atomzarr::bench::{ReadOrder, WriteOptions, read_order};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, CollatedBatch, ReaderExt, ReaderOptions};

const N: usize = 10_000;
const BATCH: usize = 64;
const ORDERS: [(ReadOrder, &str); 3] = [
    (ReadOrder::Sequential, "sequential"),
    (ReadOrder::Shuffle, "shuffled"),
    (ReadOrder::BlockShuffle, "block_shuffled"),
];
/// Block size of the block-shuffled order: small enough that a 10,000-sample
/// store has several blocks (the CLI's default, 8,192, would leave two).
const BLOCK: usize = 1024;

fn store() -> (tempfile::TempDir, PathBuf) {
    store_with(true)
}

/// The reference store, with or without its per-chunk checksums.
fn store_with(checksum: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.zarr");
    let w = WriteOptions {
        checksum,
        codec: Some(atomzarr::Codec::Zstd { level: 3 }),
        chunk_size: Some(10_000),
        shard_size: Some(500_000),
        edge_chunk_size: Some(10_000),
        edge_shard_size: Some(500_000),
        ..WriteOptions::default()
    };
    let samples = atomzarr::data::synth::generate(N, 10, 100, 42).expect("generate");
    AtomicDataZarrWriter::create(&path, w.write_config().expect("config"))
        .expect("create")
        .write(&samples)
        .expect("write");
    (dir, path)
}

fn open(path: &Path, cache_bytes: u64) -> AtomicDataZarrReader {
    AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(cache_bytes)).expect("open")
}

/// The windows of `order`, each as batches of up to `BATCH` logical indices.
fn windows(order: &[usize], window: usize) -> Vec<Vec<Vec<i64>>> {
    order.chunks(window).map(|w| w.chunks(BATCH).map(|b| b.iter().map(|&i| i as i64).collect()).collect()).collect()
}

/// Reads every window once; returns the samples delivered.
fn epoch(reader: &AtomicDataZarrReader, wins: &[Vec<Vec<i64>>], out: &mut Vec<CollatedBatch>) -> usize {
    let mut n = 0;
    for w in wins {
        reader.read_collated(w, out).expect("read");
        n += out.iter().take(w.len()).map(CollatedBatch::num_graphs).sum::<usize>();
    }
    n
}

fn bench_windows(c: &mut Criterion, path: &Path) {
    let mut g = c.benchmark_group("window");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_millis(800));
    for (cache, cache_bytes) in [("cache", atomzarr::DEFAULT_CACHE_BYTES), ("nocache", 0)] {
        let reader = open(path, cache_bytes);
        let mut out = Vec::new();
        for (order, name) in ORDERS {
            let o = read_order(N, order, 0, BLOCK).expect("order");
            if cache_bytes > 0 {
                // Steady state: the store resident before timing.
                epoch(&reader, &windows(&o, 1024), &mut out);
            }
            for window in [1usize, 64, 1024] {
                let wins = windows(&o, window);
                let mut k = 0;
                g.throughput(Throughput::Elements(window as u64));
                g.bench_function(BenchmarkId::new(format!("{cache}/{name}"), window), |b| {
                    b.iter(|| {
                        let w = &wins[k % wins.len()];
                        k += 1;
                        reader.read_collated(w, &mut out).expect("read");
                        black_box(out.len())
                    })
                });
            }
        }
    }
    g.finish();
}

fn bench_epochs(c: &mut Criterion, path: &Path) {
    let mut g = c.benchmark_group("epoch");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(N as u64));
    for (order, name) in ORDERS {
        let wins = windows(&read_order(N, order, 0, BLOCK).expect("order"), 1024);
        g.bench_function(format!("{name}/cold"), |b| {
            b.iter_batched(
                || (open(path, atomzarr::DEFAULT_CACHE_BYTES), Vec::new()),
                |(reader, mut out)| assert_eq!(epoch(&reader, &wins, &mut out), N),
                BatchSize::PerIteration,
            )
        });
        let warm = open(path, atomzarr::DEFAULT_CACHE_BYTES);
        let mut out = Vec::new();
        epoch(&warm, &wins, &mut out);
        g.bench_function(format!("{name}/warm"), |b| b.iter(|| assert_eq!(epoch(&warm, &wins, &mut out), N)));
    }
    let shuffled = read_order(N, ReadOrder::Shuffle, 0, BLOCK).expect("order");
    g.bench_function("shuffled/nocache", |b| {
        let reader = open(path, 0);
        let wins = windows(&shuffled, 1024);
        let mut out = Vec::new();
        b.iter(|| assert_eq!(epoch(&reader, &wins, &mut out), N))
    });
    let single = |reader: &AtomicDataZarrReader| {
        for &i in &shuffled {
            black_box(reader.read(i as i64).expect("read"));
        }
    };
    g.bench_function("single_shuffled/cold", |b| {
        b.iter_batched(|| open(path, atomzarr::DEFAULT_CACHE_BYTES), |r| single(&r), BatchSize::PerIteration)
    });
    let warm = open(path, atomzarr::DEFAULT_CACHE_BYTES);
    single(&warm);
    g.bench_function("single_shuffled/warm", |b| b.iter(|| single(&warm)));
    g.finish();
}

fn bench_checksum(c: &mut Criterion, on: &Path, off: &Path) {
    let mut g = c.benchmark_group("checksum");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(N as u64));
    let wins = windows(&read_order(N, ReadOrder::Shuffle, 0, BLOCK).expect("order"), 1024);
    for (name, path) in [("on", on), ("off", off)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || (open(path, atomzarr::DEFAULT_CACHE_BYTES), Vec::new()),
                |(reader, mut out)| assert_eq!(epoch(&reader, &wins, &mut out), N),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let (_dir, path) = store();
    bench_windows(c, &path);
    bench_epochs(c, &path);
    let (_off_dir, off) = store_with(false);
    bench_checksum(c, &path, &off);
}

criterion_group!(read_path, benches);
criterion_main!(read_path);

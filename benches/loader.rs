//! DataLoader throughput against the raw collated read path and against
//! Burn's own `DataLoaderBuilder`, one shuffled epoch of 10,000 structures
//! (batch 64, prefetch 16, validation skipped, CPU device) on a store laid out
//! like the reference benchmark's (zstd 3, chunk 10,000, shard 500,000).
//!
//! `cargo bench --bench loader` (criterion reports time per epoch and
//! elements/s = samples/s).

use std::sync::Arc;

use burn::data::dataloader::DataLoaderBuilder;
use burn::tensor::Device;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use atomzarr::data::CollateOptions;
use atomzarr::sampler::{RandomSampler, Sampler};
use atomzarr::{
    AtomicBatch, AtomicBatcher, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, ReaderExt,
    ZarrArrayConfig, ZarrWriteConfig,
};

const N: usize = 10_000;
const BATCH: usize = 64;
const PF: usize = 16;

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.zarr");
    let samples = atomzarr::data::synth::generate(N, 10, 100, 0).expect("generate");
    let config = ZarrWriteConfig::default().with_core(
        ZarrArrayConfig::default()
            .with_codec(Codec::Zstd { level: 3 })
            .with_chunk_size(10_000)
            .with_shard_size(500_000),
    );
    AtomicDataZarrWriter::create(&path, config).expect("create").write(&samples).expect("write");
    (dir, path)
}

fn bench(c: &mut Criterion) {
    let (_dir, path) = store();
    let reader = Arc::new(AtomicDataZarrReader::open(&path).expect("open"));
    let device = Device::flex();
    let mut g = c.benchmark_group("epoch_shuffled_b64");
    g.sample_size(10).throughput(Throughput::Elements(N as u64));
    let mut epoch = 0u64;

    // The raw path as stored (int64 indices), and as the loader reads for an
    // int32 device (indices narrowed in the chunk cache): the loader is
    // compared with both.
    for (name, opts) in [
        ("raw_read_collated_window1024", CollateOptions::default()),
        ("raw_read_collated_int32_window1024", CollateOptions::default().with_narrow_int64(true)),
    ] {
        g.bench_function(name, |b| {
            let mut out = Vec::new();
            b.iter(|| {
                epoch += 1;
                let order: Vec<i64> = RandomSampler::new(N, 0).indices(epoch).into_iter().map(|i| i as i64).collect();
                let batches: Vec<Vec<i64>> = order.chunks(BATCH).map(<[i64]>::to_vec).collect();
                let mut n = 0;
                for window in batches.chunks(PF) {
                    reader.read_collated_opt(window, opts, &mut out).expect("read");
                    n += out.iter().map(|b| b.num_graphs()).sum::<usize>();
                }
                assert_eq!(n, N);
            })
        });
    }

    let ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
    let loader = DataLoader::builder(ds.clone())
        .with_batch_size(BATCH)
        .with_shuffle(true)
        .with_prefetch_factor(PF)
        .build(&device)
        .expect("loader");
    // use_streams off: the CPU default.
    g.bench_function("atomzarr_dataloader_pf16", |b| {
        b.iter(|| {
            let n: usize = loader.iter().map(|b| b.expect("batch").num_graphs).sum();
            assert_eq!(n, N);
        })
    });

    let sync_upload = DataLoader::builder(ds.clone())
        .with_batch_size(BATCH)
        .with_shuffle(true)
        .with_prefetch_factor(PF)
        .with_use_streams(true)
        .build(&device)
        .expect("loader");
    g.bench_function("atomzarr_dataloader_pf16_streams_on", |b| {
        b.iter(|| {
            let n: usize = sync_upload.iter().map(|b| b.expect("batch").num_graphs).sum();
            assert_eq!(n, N);
        })
    });

    let burn_loader = DataLoaderBuilder::<_, AtomicBatch>::new(AtomicBatcher::default())
        .batch_size(BATCH)
        .shuffle(0)
        .num_workers(2)
        .set_device(device)
        .build(ds);
    g.bench_function("burn_dataloaderbuilder_workers2", |b| {
        b.iter(|| {
            let n: usize = burn_loader.iter().map(|b| b.expect("batch").num_graphs).sum();
            assert_eq!(n, N);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

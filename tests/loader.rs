//! DataLoader, Dataset and Batcher semantics (issue: Burn integration).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::Device;

use atomzarr::sampler::{BatchSampler, ListBatchSampler, ListSampler, RandomSampler, Sampler, SamplerBatches};
use atomzarr::source::Schema;
use atomzarr::{
    AtomicBatch, AtomicBatcher, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, CollatedBatch,
    DataLoader, Dataset, Error, HostData, Reader, ReaderExt, ZarrArrayConfig, ZarrWriteConfig,
};

fn write_store(path: &Path, n: usize, chunk: u64) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 9, 42).unwrap();
    let config = ZarrWriteConfig::default()
        .with_core(ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(chunk));
    AtomicDataZarrWriter::create(path, config).unwrap().write(&samples).unwrap();
    samples
}

fn collated_to_host(c: &CollatedBatch) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    c.fields.iter().map(|(n, f)| (n.clone(), (f.shape(), f.data.to_f64_vec()))).collect()
}

#[test]
fn loader_yields_sampler_batches_in_order_with_read_many_contents() {
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    write_store(&path, 37, 16);
    let reader = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    for pf in [0usize, 1, 3, 16] {
        for drop_last in [false, true] {
            for streams in [0usize, 2] {
                let ds = Dataset::from_arc(reader.clone()).with_skip_validation(pf % 2 == 1);
                let mut builder = DataLoader::builder(ds)
                    .with_batch_size(4)
                    .with_shuffle(true)
                    .with_seed(9)
                    .with_drop_last(drop_last)
                    .with_prefetch_factor(pf);
                if streams > 0 {
                    builder = builder.with_use_streams(true).with_num_streams(streams);
                }
                let loader = builder.build(&Device::flex()).unwrap();
                loader.set_epoch(3);
                let expected = SamplerBatches::new(RandomSampler::new(37, 9), 4, drop_last).batches(3);
                assert_eq!(loader.planned_batches(), expected);
                assert_eq!(loader.len(), expected.len());
                let mut got = Vec::new();
                for batch in loader.iter() {
                    let batch = batch.unwrap();
                    let idx: Vec<i64> = batch.indices.iter().map(|&i| i as i64).collect();
                    let samples: Vec<AtomicData> =
                        reader.read_many(&idx).unwrap().into_iter().map(|s| s.data).collect();
                    let want = CollatedBatch::from_samples(&batch.indices, &samples).unwrap();
                    assert_eq!(batch.to_host_f64().unwrap(), collated_to_host(&want), "pf {pf} drop_last {drop_last}");
                    assert_eq!(batch.num_graphs, batch.indices.len());
                    assert_eq!(batch.atoms_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap(), want.atoms_ptr);
                    assert_eq!(batch.edges_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap(), want.edges_ptr);
                    got.push(batch.indices.clone());
                }
                assert_eq!(got, expected, "pf {pf} drop_last {drop_last} streams {streams}");
                assert_eq!(got.iter().map(Vec::len).sum::<usize>(), if drop_last { 36 } else { 37 });
            }
        }
    }
}

#[test]
fn hand_checked_offsets_and_graph_index() {
    let a = AtomicData::new(vec![1, 1], vec![[0.0; 3], [1.0, 0.0, 0.0]])
        .unwrap()
        .with_neighbor_list(vec![[0, 1], [1, 0]], Some(vec![[0.0; 3]; 2]))
        .unwrap()
        .with_energy(-1.0);
    let b = AtomicData::new(vec![8, 1, 1], vec![[0.0; 3], [0.9, 0.0, 0.0], [0.0, 0.9, 0.0]])
        .unwrap()
        .with_neighbor_list(vec![[0, 1], [0, 2], [2, 1]], Some(vec![[0.0; 3]; 3]))
        .unwrap()
        .with_energy(-2.0);
    let c = AtomicData::new(vec![6], vec![[5.0; 3]])
        .unwrap()
        .with_neighbor_list(vec![[0, 0]], Some(vec![[1.0, 0.0, 0.0]]))
        .unwrap()
        .with_energy(-3.0);
    let dir = common::tmpdir();
    let path = dir.path().join("h.zarr");
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default())
        .unwrap()
        .write(&[a.clone(), b.clone(), c.clone()])
        .unwrap();
    // Through the loader (collated path) and through Burn's Batcher (sample path).
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true);
    let loader = DataLoader::builder(ds).with_batch_size(3).build(&Device::flex()).unwrap();
    let from_loader = loader.iter().next().unwrap().unwrap();
    let from_batcher: AtomicBatch = AtomicBatcher::default().batch(vec![a, b, c], &Device::flex());
    for batch in [from_loader, from_batcher] {
        let nl = batch.neighbor_list().unwrap().to_data().convert::<i64>().try_to_vec::<i64>().unwrap();
        assert_eq!(nl, vec![0, 1, 1, 0, 2, 3, 2, 4, 4, 3, 5, 5]);
        let gi = batch.graph_index.to_data().convert::<i64>().try_to_vec::<i64>().unwrap();
        assert_eq!(gi, vec![0, 0, 1, 1, 1, 2]);
        assert_eq!(batch.atoms_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap(), vec![0, 2, 5, 6]);
        assert_eq!(batch.edges_ptr.to_data().convert::<i64>().try_to_vec::<i64>().unwrap(), vec![0, 2, 5, 6]);
        assert_eq!(batch.energy().unwrap().to_data().try_to_vec::<f32>().unwrap(), vec![-1.0, -2.0, -3.0]);
        assert_eq!(batch.positions().unwrap().dims(), [6, 3]);
        assert_eq!(batch.shifts().unwrap().dims(), [6, 3]);
        assert_eq!((batch.num_graphs, batch.num_atoms, batch.num_edges), (3, 6, 6));
    }
}

#[test]
fn dropping_an_iterator_early_returns_promptly() {
    let dir = common::tmpdir();
    let path = dir.path().join("d.zarr");
    write_store(&path, 400, 64);
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true);
    let loader = DataLoader::builder(ds)
        .with_batch_size(8)
        .with_shuffle(true)
        .with_prefetch_factor(4)
        .with_use_streams(true)
        .with_num_streams(2)
        .build(&Device::flex())
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut it = loader.iter();
        let first = it.next().map(|b| b.is_ok());
        drop(it); // reads in flight, uploads pending
        // A second epoch still works after an early drop.
        let n = loader.iter().count();
        tx.send((first, n)).unwrap();
    });
    let (first, n) = rx.recv_timeout(Duration::from_secs(10)).expect("drop hung");
    assert_eq!(first, Some(true));
    assert_eq!(n, 50);

    // The drop itself: measured as a bound on a hang, not a speed figure.
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true);
    let loader = DataLoader::builder(ds).with_batch_size(8).with_prefetch_factor(16).build(&Device::flex()).unwrap();
    let mut it = loader.iter();
    it.next().unwrap().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(it);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(1)).expect("dropping the iterator took more than a second");
}

#[test]
fn corrupt_chunk_mid_epoch_yields_err_then_ends() {
    let dir = common::tmpdir();
    let path = dir.path().join("c.zarr");
    let samples = write_store(&path, 60, 16);
    // Corrupt the last positions chunk: early batches read fine, a later one fails.
    let total_atoms: usize = samples.iter().map(AtomicData::num_atoms).sum();
    let last = (total_atoms - 1) / 16;
    let chunk = path.join(format!("core/positions/c/{last}/0"));
    std::fs::write(&chunk, b"definitely not zstd").unwrap();
    for pf in [0usize, 2] {
        let ds = Dataset::new(
            AtomicDataZarrReader::open_opt(&path, atomzarr::ReaderOptions::default().with_cache_bytes(0)).unwrap(),
        )
        .with_skip_validation(true);
        let loader =
            DataLoader::builder(ds).with_batch_size(5).with_prefetch_factor(pf).build(&Device::flex()).unwrap();
        let results: Vec<_> = loader.iter().collect();
        assert!(results[0].is_ok(), "first batch should read");
        let errs: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(errs.len(), 1, "exactly one Err, then the iterator ends");
        assert!(results.last().unwrap().is_err());
        let msg = errs[0].to_string();
        assert!(msg.contains("core/positions") && msg.contains("c.zarr"), "{msg}");
        // Garbage no longer matches the chunk's crc32c (the default).
        assert!(matches!(errs[0], Error::Chunk { .. } | Error::Checksum { .. }), "{msg}");
    }
}

/// A backend that yields an invalid sample at index 1 (neighbor index out of range).
struct Broken;
impl Reader for Broken {
    fn len(&self) -> usize {
        3
    }
    fn name(&self) -> &str {
        "broken"
    }
    fn schema(&self) -> Schema {
        Schema::default()
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        let one = |i: usize| {
            let nl = if i == 1 { vec![[0, 5]] } else { vec![[0, 1]] };
            AtomicData::new(vec![1, 1], vec![[0.0; 3]; 2])?.with_neighbor_list(nl, None)
        };
        indices.iter().map(|&i| one(i)).collect()
    }
}

/// A backend whose sample 1 has a non-finite position (invalid, though it
/// would batch).
struct NanAt1;
impl Reader for NanAt1 {
    fn len(&self) -> usize {
        3
    }
    fn name(&self) -> &str {
        "nan"
    }
    fn schema(&self) -> Schema {
        Schema::default()
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        let one = |i: usize| {
            let x = if i == 1 { f32::NAN } else { 0.0 };
            AtomicData::new(vec![1, 1], vec![[x; 3]; 2])?.with_neighbor_list(vec![[0, 1]], None)
        };
        indices.iter().map(|&i| one(i)).collect()
    }
}

#[test]
fn validation_on_by_default_and_skippable() {
    let ds = Dataset::new(NanAt1);
    let err = ds.load_batches(&[vec![0, 1]]).unwrap_err();
    assert!(matches!(err, Error::Validation { index: 1, .. }), "{err}");
    assert!(err.to_string().contains("positions"));
    assert!(Dataset::new(NanAt1).with_skip_validation(true).load_batches(&[vec![0, 1]]).is_ok());
    // An index outside its sample is refused by batches with validation on
    // or off: the typed range error, not a validation failure.
    for ds in [Dataset::new(Broken), Dataset::new(Broken).with_skip_validation(true)] {
        let err = ds.load_batches(&[vec![0, 1]]).unwrap_err();
        assert!(
            matches!(err, Error::NeighborIndex { index: 1, physical_index: 1, value: 5, num_atoms: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().starts_with("broken, sample 1 (physical 1): neighbor_list index 5 outside"), "{err}");
    }
    // Burn's Dataset trait: the sample, the typed error for a bad one (its
    // message, and the error itself behind Burn's), a range error past the end.
    use burn::data::dataset::Dataset as BurnDataset;
    fn typed(e: &burn::data::dataset::DatasetError) -> Option<&Error> {
        std::error::Error::source(e)?.downcast_ref()
    }
    let ds = Dataset::new(Broken);
    assert!(BurnDataset::get(&ds, 0).is_ok());
    let err = BurnDataset::get(&ds, 1).unwrap_err();
    assert!(err.to_string().contains("broken, sample 1 (physical 1): neighbor_list index 5"), "{err}");
    assert!(matches!(typed(&err), Some(Error::NeighborIndex { index: 1, value: 5, .. })), "{err}");
    let err = BurnDataset::get(&ds, 3).unwrap_err();
    assert!(matches!(typed(&err), Some(Error::IndexOutOfRange { index: 3, len: 3, .. })), "{err}");
    assert_eq!(BurnDataset::len(&ds), 3);
    // Out-of-range indices are errors, not panics.
    assert!(matches!(ds.load_batches(&[vec![7]]), Err(Error::IndexOutOfRange { .. })));
    // Transforms run after validation.
    let t = Dataset::new(Broken).with_transform(|s| Ok(s.with_energy(5.0)));
    let b = t.load_batches(&[vec![2]]).unwrap();
    assert_eq!(b[0].fields["energy"].data, HostData::Float32(vec![5.0]));
}

#[test]
fn fused_prefetch_queue_and_cancel() {
    let dir = common::tmpdir();
    let path = dir.path().join("p.zarr");
    write_store(&path, 30, 8);
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap());
    let p = atomzarr::Prefetcher::new(2);
    assert!(!p.has_pending());
    p.push(&ds, vec![vec![3, 1], vec![2]]);
    p.push(&ds, vec![vec![29]]);
    assert_eq!(p.pending_reads(), 2);
    let first = p.pop().unwrap();
    assert_eq!(first.iter().map(|b| b.indices.clone()).collect::<Vec<_>>(), vec![vec![3, 1], vec![2]]);
    assert_eq!(first, ds.load_batches(&[vec![3, 1], vec![2]]).unwrap());
    assert_eq!(p.pop().unwrap()[0].indices, vec![29]);
    assert!(!p.has_pending());
    assert!(p.pop().is_err());
    p.push(&ds, vec![vec![0]]);
    p.cancel();
    assert!(!p.has_pending());
}

#[test]
fn epochs_steps_and_options() {
    let dir = common::tmpdir();
    let path = dir.path().join("e.zarr");
    write_store(&path, 20, 8);
    let reader = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    let mk = || {
        DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_batch_size(3)
            .with_shuffle(true)
            .with_seed(5)
            .build(&Device::flex())
            .unwrap()
    };
    let l = mk();
    let e0: Vec<_> = l.iter().map(|b| b.unwrap().indices).collect();
    let e1: Vec<_> = l.iter().map(|b| b.unwrap().indices).collect();
    assert_ne!(e0, e1, "each iter() advances the epoch");
    l.set_epoch(0);
    assert_eq!(l.iter().map(|b| b.unwrap().indices).collect::<Vec<_>>(), e0, "set_epoch reseeds");
    let l2 = mk();
    l2.set_epoch_step(4);
    let resumed: Vec<_> = l2.iter().map(|b| b.unwrap().indices).collect();
    assert_eq!(resumed, e0[4..].to_vec());
    // A sampler restricts and orders; shuffle on top permutes it per epoch.
    let sub = DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_size(2)
        .with_sampler(ListSampler::new(vec![7, 3, 11]))
        .build(&Device::flex())
        .unwrap();
    assert_eq!(sub.iter().map(|b| b.unwrap().indices).collect::<Vec<_>>(), vec![vec![7, 3], vec![11]]);
    let bs = DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_sampler(ListBatchSampler::new(vec![vec![1, 1, 0], vec![19]]))
        .build(&Device::flex())
        .unwrap();
    assert_eq!(bs.iter().map(|b| b.unwrap().indices).collect::<Vec<_>>(), vec![vec![1, 1, 0], vec![19]]);
    // Bad options are errors.
    let err = |r: atomzarr::Result<DataLoader<AtomicDataZarrReader>>| matches!(r, Err(Error::Config(_)));
    assert!(err(DataLoader::builder(Dataset::from_arc(reader.clone())).with_batch_size(0).build(&Device::flex())));
    assert!(err(DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_sampler(ListBatchSampler::new(vec![]))
        .with_shuffle(true)
        .build(&Device::flex())));
    // Knobs that would do nothing are refused, not ignored.
    let streams = |use_streams: bool, n: usize| {
        DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_use_streams(use_streams)
            .with_num_streams(n)
            .build(&Device::flex())
    };
    match streams(false, 2) {
        Err(Error::Config(msg)) => assert!(msg.contains("with_num_streams(2) needs with_use_streams(true)"), "{msg}"),
        other => panic!("num_streams without use_streams: expected a Config error, got {:?}", other.err()),
    }
    assert!(err(streams(true, 0)), "num_streams(0)");
    assert!(err(DataLoader::builder(Dataset::from_arc(reader.clone())).with_num_workers(0).build(&Device::flex())));
    // With use_streams, 1 and 4 streams deliver the same batches.
    let by = |n: usize| -> Vec<Vec<f64>> {
        let l = streams(true, n).unwrap();
        l.iter().map(|b| b.unwrap().to_host_f64().unwrap().into_values().flat_map(|(_, v)| v).collect()).collect()
    };
    assert_eq!(by(1), by(4));
    // Batch transforms apply to every batch.
    let t = DataLoader::builder(Dataset::from_arc(reader.clone()))
        .with_batch_size(4)
        .with_batch_transform(|mut b| {
            b.fields.remove("forces");
            Ok(b)
        })
        .build(&Device::flex())
        .unwrap();
    assert!(t.iter().all(|b| b.unwrap().forces().is_none()));
    let _ = RandomSampler::new(3, 0).indices(0);
}

#[test]
fn burn_traits_dataloader_and_batcher() {
    use burn::data::dataloader::DataLoader as BurnDataLoader;
    let dir = common::tmpdir();
    let path = dir.path().join("b.zarr");
    write_store(&path, 23, 8);
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true);
    let loader =
        DataLoader::builder(ds.clone()).with_batch_size(5).with_prefetch_factor(2).build(&Device::flex()).unwrap();
    let dl: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(loader);
    assert_eq!(dl.num_items(), 23);
    let mut it = dl.iter();
    let mut n = 0;
    for b in it.by_ref() {
        n += b.unwrap().num_graphs;
    }
    assert_eq!(n, 23);
    assert_eq!(it.progress().items_processed, 23);
    let sliced = dl.slice(5, 12);
    assert_eq!(sliced.num_items(), 7);
    let got: Vec<Vec<usize>> = sliced.iter().map(|b| b.unwrap().indices).collect();
    assert_eq!(got, vec![(5..10).collect::<Vec<_>>(), vec![10, 11]]);
    // Batches of different sizes keep their membership: the slice takes the
    // whole batches that start in its range.
    struct Fixed(Vec<Vec<usize>>);
    impl atomzarr::sampler::BatchSampler for Fixed {
        fn batches(&self, _epoch: u64) -> Vec<Vec<usize>> {
            self.0.clone()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }
    let uneven = vec![vec![0, 1, 2], vec![3], vec![4, 5, 6, 7], vec![8, 9]];
    let loader = DataLoader::builder(ds.clone()).with_batch_sampler(Fixed(uneven)).build(&Device::flex()).unwrap();
    let sliced = BurnDataLoader::slice(&loader, 2, 7);
    assert_eq!(sliced.num_items(), 5);
    let got: Vec<Vec<usize>> = sliced.iter().map(|b| b.unwrap().indices).collect();
    assert_eq!(got, vec![vec![3], vec![4, 5, 6, 7]]);
    // Burn's own DataLoaderBuilder over our Dataset and Batcher.
    let burn_loader = burn::data::dataloader::DataLoaderBuilder::<_, AtomicBatch>::new(AtomicBatcher::default())
        .batch_size(5)
        .num_workers(2)
        .set_device(Device::flex())
        .build(ds);
    let total: usize = burn_loader.iter().map(|b| b.unwrap().num_graphs).sum();
    assert_eq!(total, 23);
}

/// `Prefetcher::with_num_workers` after the pool started: the handle gets a new
/// pool of that many threads (seen as that many reads running at once), and
/// clones made before keep the old one.
#[test]
fn num_workers_after_the_pool_started_takes_effect() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = common::tmpdir();
    let path = dir.path().join("w.zarr");
    write_store(&path, 6, 8);
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap()).with_skip_validation(true);
    let pf = atomzarr::Prefetcher::default();
    // Starts the pool with the default single worker.
    pf.spawn(&ds, vec![vec![0]]).wait().unwrap();

    // How many jobs of a round run at once: each waits (up to `patience`)
    // for `want` jobs to be running together, then reports its thread.
    let probe = |d: &atomzarr::Prefetcher, want: usize, patience: Duration| -> (usize, Vec<String>) {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let names = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = (0..want)
            .map(|i| {
                let (running, peak, names) = (running.clone(), peak.clone(), names.clone());
                d.spawn_then(&ds, ds.plan(vec![vec![i % 6]]).unwrap(), move |b| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    let t = std::time::Instant::now();
                    while peak.load(Ordering::SeqCst) < want && t.elapsed() < patience {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    names.lock().unwrap().push(std::thread::current().name().unwrap_or("").to_string());
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(b)
                })
            })
            .collect();
        for h in handles {
            h.wait().unwrap();
        }
        let mut names = names.lock().unwrap().clone();
        names.sort();
        names.dedup();
        (peak.load(Ordering::SeqCst), names)
    };
    let old = pf.clone();
    let pf = pf.with_num_workers(3);
    let (peak, names) = probe(&pf, 3, Duration::from_secs(10));
    assert_eq!(peak, 3, "3 workers run 3 reads at once");
    assert_eq!(names.len(), 3, "{names:?}");
    // The clone made before still has its single worker.
    let (peak, names) = probe(&old, 2, Duration::from_millis(300));
    assert_eq!((peak, names.len()), (1, 1), "{names:?}");
    // The same count again keeps the running pool.
    let same = pf.clone().with_num_workers(3);
    assert_eq!(probe(&same, 3, Duration::from_secs(10)).0, 3);
}

/// With `use_streams`, device batches are built on the loader's own upload
/// threads (one device stream each on CubeCL backends), `num_streams` of
/// them in turn, across epochs the same threads; the batches still come in
/// the sampler's order. Without it, on the consumer's thread. A transform
/// that fails or panics there is that batch's error.
#[test]
fn uploads_run_on_the_loaders_own_threads() {
    let dir = common::tmpdir();
    let path = dir.path().join("u.zarr");
    write_store(&path, 40, 8);
    let reader = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    let run = |streams: usize, epochs: usize| -> (Vec<Vec<usize>>, Vec<String>) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let mut b = DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_batch_size(3)
            .with_shuffle(true)
            .with_seed(5)
            .with_prefetch_factor(4)
            .with_batch_transform(move |b| {
                let t = std::thread::current();
                log.lock().unwrap().push(t.name().unwrap_or("unnamed").to_string());
                Ok(b)
            });
        if streams > 0 {
            b = b.with_use_streams(true).with_num_streams(streams);
        }
        let loader = b.build(&Device::flex()).unwrap();
        let mut order = Vec::new();
        for _ in 0..epochs {
            let planned = loader.planned_batches();
            let got: Vec<Vec<usize>> = loader.iter().map(|b| b.unwrap().indices).collect();
            assert_eq!(got, planned, "streams {streams}");
            order.extend(got);
        }
        loader.sync_uploads().unwrap();
        let names = seen.lock().unwrap().clone();
        (order, names)
    };
    let me = std::thread::current().name().unwrap_or("unnamed").to_string();
    let (plain, names) = run(0, 1);
    assert!(names.iter().all(|n| *n == me), "without use_streams: built on the consumer thread, got {names:?}");
    for streams in [1usize, 2] {
        let (order, names) = run(streams, 2);
        assert_eq!(order[..plain.len()], plain[..], "same batches with {streams} upload streams");
        let mut threads: Vec<&String> = names.iter().collect();
        threads.sort();
        threads.dedup();
        let want: Vec<String> = (0..streams).map(|i| format!("atomzarr-upload-{i}")).collect();
        assert_eq!(threads, want.iter().collect::<Vec<_>>(), "the loader's {streams} upload threads, over two epochs");
    }
    // A transform's failure and a transform's panic on an upload thread
    // come back as that batch's error; the loader then stops the epoch.
    for panics in [false, true] {
        let loader = DataLoader::builder(Dataset::from_arc(reader.clone()))
            .with_batch_size(4)
            .with_use_streams(true)
            .with_batch_transform(move |b| {
                if b.indices.contains(&9) {
                    if panics {
                        panic!("transform panicked on purpose");
                    }
                    return Err(Error::Config("transform failed on purpose".into()));
                }
                Ok(b)
            })
            .build(&Device::flex())
            .unwrap();
        let results: Vec<_> = loader.iter().collect();
        assert_eq!(results.len(), 3, "two good batches, then the error");
        let e = results[2].as_ref().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("on purpose"), "panics {panics}: {e}");
    }
}

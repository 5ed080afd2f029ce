//! atomzarr through Burn 0.22's own data traits: `Dataset` (`get`,
//! `get_many`), `Batcher`, `DataLoader` (`iter`, `slice`, `to_device`) and
//! `split_dataloader`, each compared with the samples written, never with
//! another atomzarr read path.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use atomzarr::source::Schema;
use atomzarr::{
    AtomicBatch, AtomicBatcher, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset,
    InMemoryReader, Reader, ZarrWriteConfig,
};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::split::split_dataloader;
use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset as BurnDataset;
use burn::tensor::Device;
use common::{Extras, assert_sample_eq, samples};

/// A reader over samples in memory that counts what it is asked for: how
/// many backend reads (`load_many` calls) and how often each sample.
struct Counting {
    inner: InMemoryReader,
    reads: AtomicUsize,
    loads: Mutex<BTreeMap<usize, usize>>,
}

impl Counting {
    fn new(samples: &[AtomicData]) -> Counting {
        Counting {
            inner: InMemoryReader::from_samples(samples, "counted").unwrap(),
            reads: AtomicUsize::new(0),
            loads: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Reader for Counting {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn name(&self) -> &str {
        "counted"
    }
    fn schema(&self) -> Schema {
        self.inner.schema()
    }
    fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut loads = self.loads.lock().unwrap();
        for &i in indices {
            *loads.entry(i).or_default() += 1;
        }
        self.inner.load_many(indices)
    }
}

fn written(n: usize) -> Vec<AtomicData> {
    samples(7, n, 9, 14, &Extras::default())
}

/// Each graph's atomic numbers and positions, read back from a device
/// batch, in batch order.
fn host_graphs(b: &AtomicBatch) -> Vec<(Vec<f64>, Vec<f64>)> {
    let host = b.to_host_f64().unwrap();
    (0..b.num_graphs)
        .map(|g| {
            let (a0, a1) = (b.host_atoms_ptr[g] as usize, b.host_atoms_ptr[g + 1] as usize);
            (host["atomic_numbers"].1[a0..a1].to_vec(), host["positions"].1[3 * a0..3 * a1].to_vec())
        })
        .collect()
}

/// A written sample's atomic numbers and positions, as `host_graphs` has them.
fn graph_of(s: &AtomicData) -> (Vec<f64>, Vec<f64>) {
    let f = |name: &str| s.field(name).unwrap().data.to_f64_vec();
    (f("atomic_numbers"), f("positions"))
}

#[test]
fn get_and_get_many_return_the_written_samples_and_errors_not_panics() {
    let want = written(40);
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&want).unwrap();
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap());
    assert_eq!(BurnDataset::len(&ds), 40);
    for i in [0, 17, 39] {
        assert_sample_eq(&BurnDataset::get(&ds, i).unwrap(), &want[i], &format!("get({i})"));
    }
    let idx = vec![31, 2, 2, 18, 0];
    let got = ds.get_many(idx.clone()).unwrap();
    assert_eq!(got.len(), idx.len());
    for (g, &i) in got.iter().zip(&idx) {
        assert_sample_eq(g, &want[i], &format!("get_many sample {i}"));
    }
    // Out of range: an error naming the store, never a panic (Burn's
    // default `get_many` asserts).
    let e = BurnDataset::get(&ds, 40).unwrap_err().to_string();
    assert!(e.contains("s.zarr") && e.contains("40"), "{e}");
    let e = ds.get_many(vec![3, 40]).unwrap_err().to_string();
    assert!(e.contains("s.zarr") && e.contains("40"), "{e}");
}

#[test]
fn get_many_is_one_backend_read() {
    let want = written(30);
    let reader = Arc::new(Counting::new(&want));
    let ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
    let got = ds.get_many((0..30).rev().collect()).unwrap();
    assert_eq!(reader.reads.load(Ordering::Relaxed), 1, "30 samples through one load_many");
    for (k, g) in got.iter().enumerate() {
        assert_sample_eq(g, &want[29 - k], "get_many");
    }
}

#[test]
fn the_batcher_gives_errors_as_values_when_asked() {
    let device = Device::flex();
    let a = AtomicData::new(vec![1], vec![[0.0; 3]]).unwrap().with_energy(1.0);
    let b = AtomicData::new(vec![6, 1], vec![[0.0; 3], [1.0, 0.0, 0.0]]).unwrap();
    let r: atomzarr::Result<AtomicBatch> = AtomicBatcher::default().batch(vec![a.clone(), b], &device);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("energy"), "{e}");
    let ok: AtomicBatch = AtomicBatcher::default().batch(vec![a.clone(), a], &device);
    assert_eq!(ok.num_graphs, 2);
    assert_eq!(ok.energy().unwrap().into_data().try_into_vec_as::<f32>().unwrap(), vec![1.0, 1.0]);
}

#[test]
fn burns_own_loader_reads_the_dataset_in_order_through_get_many() {
    let want = written(50);
    let reader = Arc::new(Counting::new(&want));
    let ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
    let loader = DataLoaderBuilder::<AtomicData, AtomicBatch>::new(AtomicBatcher::default())
        .batch_size(8)
        .set_device(Device::flex())
        .build(ds);
    let mut got = Vec::new();
    for b in loader.iter() {
        got.extend(host_graphs(&b.unwrap()));
    }
    assert_eq!(got, want.iter().map(graph_of).collect::<Vec<_>>(), "Burn's loader reads the samples in order");
    // One backend read per batch (7 batches of 8, the last of 2), each
    // sample once.
    assert_eq!(reader.reads.load(Ordering::Relaxed), 7);
    assert!(reader.loads.lock().unwrap().values().all(|&c| c == 1));
}

#[test]
fn split_dataloader_reads_every_sample_once_through_fused_reads() {
    let want = written(203);
    for devices in [2usize, 3] {
        let reader = Arc::new(Counting::new(&want));
        let ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
        let loader =
            DataLoader::builder(ds).with_batch_size(10).with_prefetch_factor(4).build(&Device::flex()).unwrap();
        let whole: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(loader);
        let parts = split_dataloader(whole, &vec![Device::flex(); devices]);
        assert_eq!(parts.len(), devices);
        let mut seen = Vec::new();
        for part in &parts {
            let mut n = 0;
            let mut it = part.iter();
            for b in it.by_ref() {
                let b = b.unwrap();
                n += b.num_graphs;
                seen.extend(b.indices.iter().copied());
            }
            assert!(n > 0, "every device gets samples");
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..203).collect::<Vec<_>>(), "{devices} devices: every sample exactly once");
        let loads = reader.loads.lock().unwrap();
        assert_eq!(loads.len(), 203);
        assert!(loads.values().all(|&c| c == 1), "{devices} devices: each sample loaded once");
        // Fused: a backend read per window of 4 batches, not per sample or
        // per batch (21 batches over the parts).
        let reads = reader.reads.load(Ordering::Relaxed);
        assert!(reads <= 21usize.div_ceil(4) + devices, "{devices} devices: {reads} reads");
    }
}

#[test]
fn a_read_error_reaches_burns_loop_as_an_err_item() {
    // A reader whose sample 13 cannot be read.
    struct Broken(InMemoryReader);
    impl Reader for Broken {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn name(&self) -> &str {
            "broken"
        }
        fn schema(&self) -> Schema {
            self.0.schema()
        }
        fn load_many(&self, indices: &[usize]) -> atomzarr::Result<Vec<AtomicData>> {
            if indices.contains(&13) {
                return Err(atomzarr::Error::InvalidInput {
                    context: "broken".into(),
                    reason: "sample 13 is bad".into(),
                });
            }
            self.0.load_many(indices)
        }
    }
    let ds =
        Dataset::new(Broken(InMemoryReader::from_samples(&written(30), "mem").unwrap())).with_skip_validation(true);
    let loader = DataLoader::builder(ds).with_batch_size(5).with_prefetch_factor(0).build(&Device::flex()).unwrap();
    let burn: &dyn BurnDataLoader<AtomicBatch> = &loader;
    let items: Vec<_> = burn.iter().collect();
    let errors: Vec<String> = items.iter().filter_map(|r| r.as_ref().err().map(|e| e.to_string())).collect();
    assert!(!errors.is_empty(), "the bad batch is an Err item");
    assert!(errors.iter().all(|e| e.contains("sample 13 is bad")), "{errors:?}");
    // The moved copy on another device reads the same stream of epochs.
    let moved = burn.to_device(&Device::flex());
    assert_eq!(moved.num_items(), 30);
}

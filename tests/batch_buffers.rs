//! Recycled batch memory: the buffers of delivered batches go back to the
//! reader's pool when their tensors are dropped, later batches are written
//! into them, and a batch a consumer still holds is never overwritten.

use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::tensor::Device;

use atomzarr::{
    AtomicBatch, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, ReaderOptions,
    ZarrWriteConfig,
};

/// The RSS test measures the whole process: the tests of this file run one
/// at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn write_store(path: &Path, n: usize) -> Vec<AtomicData> {
    // 60-120 atoms a sample, so a batch's buffers are worth pooling (64 KiB up).
    let samples = atomzarr::data::synth::generate(n, 60, 120, 9).unwrap();
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default()).unwrap().write(&samples).unwrap();
    samples
}

fn loader(r: &Arc<AtomicDataZarrReader>, seed: u64) -> DataLoader<AtomicDataZarrReader> {
    DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(32)
        .with_shuffle(true)
        .with_seed(seed)
        .with_prefetch_factor(2)
        .build(&Device::flex())
        .unwrap()
}

/// The batch's positions, forces and neighbor list against the samples it
/// claims, written independently of the read path.
fn assert_batch_matches(b: &AtomicBatch, samples: &[AtomicData], what: &str) {
    let host = b.to_host_f64().unwrap();
    for name in ["positions", "forces"] {
        let want: Vec<f64> =
            b.indices.iter().flat_map(|&i| samples[i].field(name).unwrap().data.to_f64_vec()).collect();
        assert_eq!(host[name].1, want, "{what}: {name} of samples {:?}", b.indices);
    }
    let mut base = 0i64;
    let mut want = Vec::new();
    for &i in &b.indices {
        let nl = samples[i].field("neighbor_list").unwrap().data.to_i64_vec().unwrap();
        want.extend(nl.iter().map(|&x| (x + base) as f64));
        base += samples[i].num_atoms() as i64;
    }
    assert_eq!(host["neighbor_list"].1, want, "{what}: neighbor_list");
}

/// Batches held across later windows (each kept for the next ten batches,
/// and the first epoch's kept to the end) read back exactly their samples,
/// while the reader's pool is busy recycling the memory of the others.
#[test]
fn held_batches_keep_their_values() {
    let _one = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.zarr");
    let samples = write_store(&path, 640);
    let r = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    let l = loader(&r, 1);
    let first: Vec<AtomicBatch> = l.iter().map(|b| b.unwrap()).collect();
    // Dropped batches came back: the pool had memory to hand out.
    let mut recycled = false;
    for epoch in 1..4 {
        let mut held: std::collections::VecDeque<AtomicBatch> = Default::default();
        for b in l.iter() {
            held.push_back(b.unwrap());
            if held.len() > 10 {
                let old = held.pop_front().unwrap();
                assert_batch_matches(&old, &samples, &format!("epoch {epoch}, held across windows"));
                drop(old);
                recycled |= r.batch_buffers().held_bytes() > 0;
            }
        }
        for b in &held {
            assert_batch_matches(b, &samples, &format!("epoch {epoch}, last batches"));
        }
    }
    assert!(recycled, "the pool never held a returned buffer");
    for b in &first {
        assert_batch_matches(b, &samples, "the first epoch's batches, kept to the end");
    }
}

/// However many batches come back at once, the pool keeps at most its
/// bound of free buffers.
#[test]
fn the_pool_stays_within_its_bound() {
    let _one = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.zarr");
    write_store(&path, 640);
    let limit = 1 << 20;
    let r = Arc::new(
        AtomicDataZarrReader::open_opt(&path, ReaderOptions::default().with_batch_buffer_bytes(limit)).unwrap(),
    );
    assert_eq!(r.batch_buffers().limit(), limit as usize);
    let l = loader(&r, 2);
    for _ in 0..3 {
        // Every batch of the epoch alive, then all dropped together.
        let all: Vec<AtomicBatch> = l.iter().map(|b| b.unwrap()).collect();
        assert!(all.len() == 20);
        drop(all);
        let held = r.batch_buffers().held_bytes();
        assert!(held > 0 && held <= limit as usize, "{held} bytes held, bound {limit}");
    }
}

fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// Twenty shuffled epochs, batches dropped as they are used: the resident
/// size after the last is about what it was after the second (the batches'
/// memory is recycled, not grown).
#[test]
fn rss_does_not_grow_over_twenty_epochs() {
    let _one = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.zarr");
    write_store(&path, 1280);
    let r = Arc::new(AtomicDataZarrReader::open(&path).unwrap());
    let l = loader(&r, 3);
    let mut after_second = 0;
    for epoch in 0..20 {
        let atoms: usize = l.iter().map(|b| b.unwrap().num_atoms).sum();
        assert!(atoms >= 1280 * 60);
        if epoch == 1 {
            after_second = vm_rss_kib().unwrap_or(0);
        }
    }
    let Some(last) = vm_rss_kib() else { return }; // not Linux
    // One epoch's output is ~30 MB: growth by a window a few epochs would show.
    assert!(last <= after_second + 16 * 1024, "VmRSS {after_second} KiB after epoch 2, {last} KiB after epoch 20");
}

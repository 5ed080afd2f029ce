//! The DataLoader as burn-train uses it (issue 14): device copies share the
//! epoch, slices keep Burn's batch-size contract, counts do not plan epochs,
//! and a serialized `LoaderState` resumes mid-epoch exactly, also on another
//! number of ranks. References are computed from the samplers directly
//! (`RandomSampler::indices`), not from the loader.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::data::dataloader::DataLoader as BurnDataLoader;
use burn::data::dataloader::split::split_dataloader;
use burn::tensor::Device;

use atomzarr::sampler::{RandomSampler, Sampler};
use atomzarr::{AtomicBatch, AtomicDataZarrReader, AtomicDataZarrWriter, DataLoader, Dataset, Error, LoaderState};

fn write_store(path: &Path, n: usize) -> Arc<AtomicDataZarrReader> {
    let samples = atomzarr::data::synth::generate(n, 2, 6, 7).unwrap();
    AtomicDataZarrWriter::create(path, Default::default()).unwrap().write(&samples).unwrap();
    Arc::new(AtomicDataZarrReader::open(path).unwrap())
}

fn loader(
    reader: &Arc<AtomicDataZarrReader>,
    batch: usize,
    seed: u64,
    rank: usize,
    world: usize,
) -> DataLoader<AtomicDataZarrReader> {
    DataLoader::builder(Dataset::from_arc(reader.clone()).with_skip_validation(true))
        .with_batch_size(batch)
        .with_shuffle(true)
        .with_seed(seed)
        .with_prefetch_factor(2)
        .with_rank(rank, world)
        .build(&Device::flex())
        .unwrap()
}

fn take(it: &mut dyn Iterator<Item = atomzarr::Result<AtomicBatch>>, k: usize) -> Vec<Vec<usize>> {
    it.take(k).map(|b| b.unwrap().indices).collect()
}

fn burn_batches(l: &Arc<dyn BurnDataLoader<AtomicBatch>>) -> Vec<Vec<usize>> {
    l.iter().map(|b| b.unwrap().indices).collect()
}

#[test]
fn device_copies_share_the_epoch_set_on_the_users_handle() {
    let dir = common::tmpdir();
    let reader = write_store(&dir.path().join("d.zarr"), 23);
    let l = loader(&reader, 5, 3, 0, 1);
    // What burn-train's single-device strategy does: a copy per device.
    let copy = BurnDataLoader::to_device(&l, &Device::flex());
    l.set_epoch(4); // after the copy was made: it must still reach it
    let got: Vec<usize> = burn_batches(&copy).concat();
    assert_eq!(got, RandomSampler::new(23, 3).indices(4), "the copy runs the epoch set on the handle");
    // The copy advanced the shared stream: the handle sees epoch 5 next.
    assert_eq!(l.epoch(), 5);
    assert_eq!(l.state().epoch(), 5);
    assert_eq!(l.state().position(), 0);
    let again: Vec<usize> = burn_batches(&copy).concat();
    assert_eq!(again, RandomSampler::new(23, 3).indices(5));
    // Batch sizes of the copy: full batches, then the ragged end.
    let sizes: Vec<usize> = burn_batches(&copy).iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![5, 5, 5, 5, 3]);
}

#[test]
fn split_slices_keep_the_batch_size_and_share_one_epoch() {
    let dir = common::tmpdir();
    let reader = write_store(&dir.path().join("s.zarr"), 23);
    let l = loader(&reader, 4, 9, 0, 1);
    l.set_epoch(2);
    let dl: Arc<dyn BurnDataLoader<AtomicBatch>> = Arc::new(l.clone());
    let dev = Device::flex();
    // burn-train's multi-device strategies split with this function.
    let parts = split_dataloader(dl, &[dev.clone(), dev.clone(), dev]);
    assert_eq!(parts.iter().map(|p| p.num_items()).collect::<Vec<_>>(), vec![7, 7, 9]);
    for round in 0..2u64 {
        let got: Vec<Vec<Vec<usize>>> = parts.iter().map(burn_batches).collect();
        for (k, part) in got.iter().enumerate() {
            let sizes: Vec<usize> = part.iter().map(Vec::len).collect();
            let n = part.iter().map(Vec::len).sum::<usize>();
            let mut want = vec![4; n / 4];
            if n % 4 > 0 {
                want.push(n % 4);
            }
            assert_eq!(sizes, want, "slice {k}: full batches, the ragged end last");
        }
        // Each slice ran the same epoch: together they are its order.
        let all: Vec<usize> = got.concat().concat();
        assert_eq!(all, RandomSampler::new(23, 9).indices(2 + round), "round {round}");
    }
}

/// A sampler that counts its plans: `len`, `num_items` and `slice` must not
/// plan an epoch.
struct Counting {
    inner: RandomSampler,
    plans: Arc<AtomicUsize>,
}

impl Sampler for Counting {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        self.plans.fetch_add(1, Ordering::SeqCst);
        self.inner.indices(epoch)
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
}

#[test]
fn counts_and_slices_do_not_plan_epochs() {
    let dir = common::tmpdir();
    let reader = write_store(&dir.path().join("c.zarr"), 30);
    let plans = Arc::new(AtomicUsize::new(0));
    let l = DataLoader::builder(Dataset::from_arc(reader))
        .with_batch_size(4)
        .with_sampler(Counting { inner: RandomSampler::new(30, 1), plans: plans.clone() })
        .with_rank(1, 3)
        .build(&Device::flex())
        .unwrap();
    assert_eq!(l.len(), 3); // rounds of 12: 4 + 4 + (6 split 2/2/2)
    assert_eq!(BurnDataLoader::num_items(&l), 10);
    let s = BurnDataLoader::slice(&l, 3, 9);
    assert_eq!(s.num_items(), 6);
    let _ = s.to_device(&Device::flex()).num_items();
    assert_eq!(plans.load(Ordering::SeqCst), 0, "no epoch planned for counts");
    let got: Vec<usize> = burn_batches(&s).concat();
    assert_eq!(plans.load(Ordering::SeqCst), 1, "one plan for one epoch");
    let order = RandomSampler::new(30, 1).indices(0);
    let rank1: Vec<usize> = [&order[4..8], &order[16..20], &order[26..28]].concat();
    assert_eq!(got, rank1[3..9].to_vec());
}

#[test]
fn state_resumes_mid_epoch_exactly_through_json() {
    let dir = common::tmpdir();
    let reader = write_store(&dir.path().join("r.zarr"), 29);
    let a = loader(&reader, 4, 11, 0, 1);
    a.set_epoch(6);
    let mut it = a.iter();
    let head = take(&mut it, 3);
    let state = a.state();
    assert_eq!((state.epoch(), state.position(), state.step()), (6, 12, 3));
    let json = serde_json::to_string(&state).unwrap();
    drop(it);
    let b = loader(&reader, 4, 11, 0, 1);
    b.load_state(&serde_json::from_str::<LoaderState>(&json).unwrap()).unwrap();
    let rest: Vec<Vec<usize>> = b.iter().map(|x| x.unwrap().indices).collect();
    assert_eq!([head, rest].concat().concat(), RandomSampler::new(29, 11).indices(6));
    // After the epoch the state points at the next one, from its start.
    assert_eq!((b.state().epoch(), b.state().position()), (7, 0));
    // A state of another order is refused, not followed.
    let other = loader(&reader, 4, 12, 0, 1);
    assert!(matches!(other.load_state(&state), Err(Error::StateMismatch { .. })));
    let other = loader(&reader, 5, 11, 0, 1);
    assert!(matches!(other.load_state(&state), Err(Error::StateMismatch { .. })));
}

#[test]
fn state_saved_on_two_ranks_resumes_on_three() {
    let dir = common::tmpdir();
    let n = 47;
    let reader = write_store(&dir.path().join("w.zarr"), n);
    let (batch, seed, epoch) = (3, 5, 2);
    let order = RandomSampler::new(n, seed).indices(epoch);
    // Two ranks take 4 batches each, in step, then a checkpoint.
    let two: Vec<_> = (0..2).map(|r| loader(&reader, batch, seed, r, 2)).collect();
    let mut seen: Vec<usize> = Vec::new();
    let mut state = None;
    for l in &two {
        l.set_epoch(epoch);
        let mut it = l.iter();
        seen.extend(take(&mut it, 4).concat());
        state = Some(l.state());
    }
    let state = state.unwrap();
    assert_eq!((state.world_size(), state.position()), (2, 24));
    // Consumed so far: exactly the first 24 samples of the global order.
    let mut prefix = order[..24].to_vec();
    prefix.sort();
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, prefix);
    // Three ranks resume from the JSON of rank 1's state.
    let json = serde_json::to_string(&state).unwrap();
    let mut steps = Vec::new();
    for r in 0..3 {
        let l = loader(&reader, batch, seed, r, 3);
        l.load_state(&serde_json::from_str(&json).unwrap()).unwrap();
        let rest: Vec<Vec<usize>> = l.iter().map(|x| x.unwrap().indices).collect();
        steps.push(rest.len());
        seen.extend(rest.concat());
    }
    assert!(steps.iter().all(|&s| s == steps[0]), "every rank takes the same number of steps: {steps:?}");
    assert_eq!(seen.len(), n, "no sample repeated or lost");
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), (0..n).collect::<BTreeSet<_>>());
}

#[test]
fn ranks_split_every_epoch_without_padding() {
    let dir = common::tmpdir();
    let n = 26;
    let reader = write_store(&dir.path().join("p.zarr"), n);
    for world in [1, 2, 3, 4] {
        let mut all = Vec::new();
        let mut lens = BTreeSet::new();
        for r in 0..world {
            let l = loader(&reader, 4, 8, r, world);
            let b: Vec<Vec<usize>> = l.iter().map(|x| x.unwrap().indices).collect();
            lens.insert(b.len());
            all.extend(b.concat());
        }
        assert_eq!(lens.len(), 1, "world {world}: equal step counts");
        all.sort();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "world {world}");
    }
    let bad = DataLoader::builder(Dataset::from_arc(reader)).with_rank(2, 2).build(&Device::flex());
    assert!(matches!(bad, Err(Error::Config(_))));
}

//! `with_shuffle(true)` on a store larger than the reader's cache: the block
//! pool. What held for the full permutation holds here too (every sample
//! once, reproducible, exact resume, on another number of ranks too, ranks
//! disjoint and complete), each rank decodes only its own part of the store,
//! and batches mix. References are the sample ids themselves, decoded bytes
//! computed from the written samples and the chunk grid, and windows of
//! consecutive indices; never the loader's own plan.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::sampler::{ChunkShuffleSampler, RandomSampler, Sampler};
use atomzarr::source::ChunkedReader;
use atomzarr::{
    AtomicBatch, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, LoaderState,
    ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Rows per chunk of every array: many blocks in a small store.
const CHUNK: u64 = 64;
/// A cache a third of the test stores' decoded size (~16 MB at 40,000
/// samples), with room for a pool of more than MIN_POOL_BLOCKS blocks.
const SMALL_CACHE: u64 = 6 << 20;
/// Samples of the test stores.
const N: usize = 40_000;

fn write_store(path: &Path, n: usize) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 6, 3).unwrap();
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(CHUNK);
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default().with_core(c)).unwrap().write(&samples).unwrap();
    samples
}

fn open(path: &Path, cache: u64) -> Arc<AtomicDataZarrReader> {
    Arc::new(AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(cache)).unwrap())
}

fn loader(
    r: &Arc<AtomicDataZarrReader>,
    batch: usize,
    seed: u64,
    rank: usize,
    world: usize,
) -> DataLoader<AtomicDataZarrReader> {
    DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(batch)
        .with_shuffle(true)
        .with_seed(seed)
        .with_prefetch_factor(4)
        .with_rank(rank, world)
        .build(&Device::flex())
        .unwrap()
}

fn epoch(l: &DataLoader<AtomicDataZarrReader>) -> Vec<Vec<usize>> {
    l.iter().map(|b: atomzarr::Result<AtomicBatch>| b.unwrap().indices).collect()
}

fn take(it: &mut dyn Iterator<Item = atomzarr::Result<AtomicBatch>>, k: usize) -> Vec<Vec<usize>> {
    it.take(k).map(|b| b.unwrap().indices).collect()
}

fn assert_once(got: &[usize], n: usize, what: &str) {
    let mut sorted = got.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{what}: every sample exactly once");
}

/// Decoded bytes of the whole store, from the samples and the chunk grid:
/// every array's rows rounded up to whole chunks.
fn store_bytes(samples: &[AtomicData]) -> u64 {
    let mut rows = [0u64; 3];
    let mut row_bytes = [0u64; 3];
    for s in samples {
        rows[0] += s.num_atoms() as u64;
        rows[1] += s.num_edges() as u64;
        rows[2] += 1;
    }
    for f in samples[0].fields.values() {
        let (slot, n) = match f.level {
            atomzarr::Level::Atom => (0, samples[0].num_atoms()),
            atomzarr::Level::Edge => (1, samples[0].num_edges()),
            atomzarr::Level::System => (2, 1),
        };
        row_bytes[slot] += (f.data.len() * f.data.dtype().size() / n.max(1)) as u64;
    }
    (0..3).map(|a| rows[a].div_ceil(CHUNK) * CHUNK * row_bytes[a]).sum()
}

#[test]
fn a_store_larger_than_the_cache_is_read_through_the_block_pool() {
    let dir = common::tmpdir();
    let path = dir.path().join("p.zarr");
    let n = N;
    let samples = write_store(&path, n);
    let r = open(&path, SMALL_CACHE);
    let l = loader(&r, 32, 5, 0, 1);
    let state = l.state();
    assert_eq!(state.sampler(), "block-pool");
    let k = state.pool_blocks().expect("a pool size is recorded");
    assert!(k > atomzarr::sampler::MIN_POOL_BLOCKS, "K = {k}, chosen from the cache");
    l.set_epoch(2);
    let mut it = l.iter();
    let e2: Vec<Vec<usize>> = take(&mut it, usize::MAX);
    let amp = it.decode_counters().and_then(|c| c.amplification()).unwrap();
    assert_once(&e2.concat(), n, "epoch 2");
    // Decoded about once: the whole store's chunks (computed from the
    // samples) and at most half as much again.
    let decoded = r.decode_counters().decoded_bytes;
    let whole = store_bytes(&samples);
    assert!(decoded as f64 <= 1.5 * whole as f64, "decoded {decoded} of a {whole}-byte store; amplification {amp:.2}");
    // A full permutation on the same store and cache decodes far more.
    let plain = open(&path, SMALL_CACHE);
    let pl = DataLoader::builder(Dataset::from_arc(plain.clone()).with_skip_validation(true))
        .with_batch_size(32)
        .with_sampler(RandomSampler::new(n, 5))
        .with_prefetch_factor(4)
        .build(&Device::flex())
        .unwrap();
    assert_once(&epoch(&pl).concat(), n, "random sampler");
    assert!(plain.decode_counters().decoded_bytes > 3 * decoded);
    // Reproducible per (seed, epoch), reshuffled across epochs and seeds.
    let again = loader(&open(&path, SMALL_CACHE), 32, 5, 0, 1);
    again.set_epoch(2);
    assert_eq!(epoch(&again), e2);
    let e3 = epoch(&again);
    assert_once(&e3.concat(), n, "epoch 3");
    assert_ne!(e3, e2);
    let other = loader(&open(&path, SMALL_CACHE), 32, 6, 0, 1);
    other.set_epoch(2);
    assert_ne!(epoch(&other), e2);
}

#[test]
fn a_store_that_fits_the_cache_keeps_the_full_permutation() {
    let dir = common::tmpdir();
    let path = dir.path().join("f.zarr");
    write_store(&path, 3_000);
    let l = loader(&open(&path, 1 << 30), 16, 9, 0, 1);
    assert_eq!((l.state().sampler(), l.state().pool_blocks()), ("random", None));
    l.set_epoch(1);
    assert_eq!(epoch(&l).concat(), RandomSampler::new(3_000, 9).indices(1));
}

#[test]
fn batches_draw_from_the_whole_pool() {
    let dir = common::tmpdir();
    let path = dir.path().join("m.zarr");
    let n = N;
    write_store(&path, n);
    let r = open(&path, SMALL_CACHE);
    let blocks = r.chunk_blocks();
    let l = loader(&r, 64, 1, 0, 1);
    let k = l.state().pool_blocks().unwrap();
    let batches = epoch(&l);
    // Distinct storage blocks per batch, averaged over the whole epoch
    // (ramp and drain included); the pool holds K blocks, so a batch of
    // 64 draws from K * (1 - exp(-64 / K)) of them when it is full.
    let block_of = |i: usize| blocks.partition_point(|&s| s <= i);
    let per: Vec<usize> =
        batches.iter().map(|b| b.iter().map(|&i| block_of(i)).collect::<BTreeSet<_>>().len()).collect();
    let mean = per.iter().sum::<usize>() as f64 / per.len() as f64;
    let full = k as f64 * (1.0 - (-64.0 / k as f64).exp());
    assert!(mean >= 0.75 * full, "mean {mean:.1} distinct blocks per batch, a full pool gives {full:.1}");
    // A read window (4 batches) reads the pool, not the store.
    for w in batches.chunks(4) {
        let touched: BTreeSet<usize> = w.concat().into_iter().map(block_of).collect();
        assert!(touched.len() <= k + 4 * 64 / 8, "{} blocks in a window", touched.len());
    }
}

#[test]
fn a_mid_epoch_state_resumes_exactly_and_carries_the_pool_blocks() {
    let dir = common::tmpdir();
    let path = dir.path().join("r.zarr");
    let n = N;
    write_store(&path, n);
    let r = open(&path, SMALL_CACHE);
    let a = loader(&r, 32, 11, 0, 1);
    a.set_epoch(4);
    let whole = epoch(&a);
    a.set_epoch(4);
    let mut it = a.iter();
    let head = take(&mut it, 37);
    let json = serde_json::to_string(&a.state()).unwrap();
    drop(it);
    // A loader whose own cache would pick another pool size (or none)
    // follows the saved state.
    for cache in [SMALL_CACHE, 4 * SMALL_CACHE, 1 << 30] {
        let b = loader(&open(&path, cache), 32, 11, 0, 1);
        b.load_state(&serde_json::from_str::<LoaderState>(&json).unwrap()).unwrap();
        let rest = epoch(&b);
        assert_eq!([head.clone(), rest].concat(), whole, "cache {cache}");
    }
    // Another seed or batch size is another order: refused.
    let state: LoaderState = serde_json::from_str(&json).unwrap();
    assert!(loader(&r, 32, 12, 0, 1).load_state(&state).is_err());
    assert!(loader(&r, 16, 11, 0, 1).load_state(&state).is_err());
}

#[test]
fn ranks_are_disjoint_complete_and_decode_their_own_part() {
    let dir = common::tmpdir();
    let path = dir.path().join("d.zarr");
    let n = N;
    let samples = write_store(&path, n);
    let world = 4;
    let whole = store_bytes(&samples);
    let mut all = Vec::new();
    let mut steps = BTreeSet::new();
    for rank in 0..world {
        // Each rank its own process: its own reader and cache.
        let r = open(&path, SMALL_CACHE);
        let l = loader(&r, 32, 2, rank, world);
        l.set_epoch(1);
        let b = epoch(&l);
        steps.insert(b.len());
        all.extend(b.concat());
        // Its region's chunks of every array: about a quarter of the store
        // (within 1.5x: chunks straddling the pool's blocks).
        let decoded = r.decode_counters().decoded_bytes as f64;
        let share = 1.5 * whole as f64 / world as f64;
        assert!(decoded <= share, "rank {rank} decoded {decoded} bytes, its share is {share:.0} of {whole}");
    }
    assert_eq!(steps.len(), 1, "equal steps on every rank");
    assert_once(&all, n, "ranks together");
}

#[test]
fn a_state_saved_on_two_ranks_resumes_on_three_with_no_sample_twice() {
    let dir = common::tmpdir();
    let path = dir.path().join("w.zarr");
    let n = N + 1;
    write_store(&path, n);
    let (batch, seed) = (32, 7);
    let mut seen = Vec::new();
    let mut state = None;
    for rank in 0..2 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 2);
        l.set_epoch(3);
        let mut it = l.iter();
        seen.extend(take(&mut it, 50).concat());
        state = Some(l.state());
    }
    let state = state.unwrap();
    assert_eq!((state.position(), state.order_world_size()), (2 * 50 * batch, Some(2)));
    let json = serde_json::to_string(&state).unwrap();
    let mut steps = BTreeSet::new();
    for rank in 0..3 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 3);
        l.load_state(&serde_json::from_str(&json).unwrap()).unwrap();
        // Saved again mid-way, the state still names the order's ranks.
        assert_eq!(l.state().order_world_size(), Some(2));
        let rest = epoch(&l);
        steps.insert(rest.len());
        seen.extend(rest.concat());
        // The next epoch is cut for three ranks.
        assert_eq!(l.state().order_world_size(), Some(3));
    }
    assert_eq!(steps.len(), 1, "every rank takes the same number of steps");
    assert_once(&seen, n, "two ranks, then three");
    // The next epoch on three ranks: disjoint and complete again.
    let mut next = Vec::new();
    for rank in 0..3 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 3);
        l.set_epoch(4);
        next.extend(epoch(&l).concat());
    }
    assert_once(&next, n, "three ranks");
}

#[test]
fn a_shuffled_list_is_drawn_in_its_samples_blocks() {
    let dir = common::tmpdir();
    let path = dir.path().join("l.zarr");
    let n = N;
    write_store(&path, n);
    let r = open(&path, SMALL_CACHE);
    let split: Vec<usize> = (0..n).filter(|i| i % 10 != 3).collect();
    let l = DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(32)
        .with_sampler(atomzarr::sampler::ListSampler::new(split.clone()))
        .with_shuffle(true)
        .with_seed(3)
        .build(&Device::flex())
        .unwrap();
    assert_eq!(l.state().sampler(), "block-pool");
    let mut got = epoch(&l).concat();
    got.sort_unstable();
    assert_eq!(got, split);
    // The pool order over the list is the sampler's own, over the same blocks.
    let k = l.state().pool_blocks().unwrap();
    let want = ChunkShuffleSampler::for_reader_indices(&*r, &split, 32).unwrap().with_pool_blocks(k).with_seed(3);
    l.set_epoch(0);
    assert_eq!(epoch(&l).concat(), Sampler::indices(&want, 0));
}

/// Mean distinct windows of `len / 1000` consecutive indices among the
/// samples of each batch, over the whole epoch.
fn mixing(batches: &[Vec<usize>], len: usize) -> f64 {
    let w = (len / 1000).max(1);
    let per: usize = batches.iter().map(|b| b.iter().map(|&i| i / w).collect::<BTreeSet<_>>().len()).sum();
    per as f64 / batches.len() as f64
}

#[test]
fn the_pool_mixes_at_least_32_windows_per_batch_of_64() {
    // The block layouts of the two scale stores (docs/PERFORMANCE.md),
    // shrunk to 2M samples with the same block-to-window ratios: the 10M
    // store's blocks span 2.9 windows, the 1M reference store's 1.6. Both
    // get the smallest pool, MIN_POOL_BLOCKS.
    let len = 2_000_000;
    for (name, block) in [("10M store", 5_825), ("1M store", 3_178)] {
        let s = ChunkShuffleSampler::new(len, block, 64).with_pool_blocks(atomzarr::sampler::MIN_POOL_BLOCKS);
        for w in [1, 8] {
            for r in [0, w - 1] {
                let order = s.rank_order(0, r, w);
                let batches: Vec<Vec<usize>> = order.chunks(64).map(<[usize]>::to_vec).collect();
                let m = mixing(&batches, len);
                assert!(m >= 32.0, "{name}, rank {r} of {w}: {m:.1} windows per batch");
            }
        }
        // A full permutation gives ~62; store order 1.
        let plain = RandomSampler::new(len, 0).indices(0);
        let batches: Vec<Vec<usize>> = plain.chunks(64).map(<[usize]>::to_vec).collect();
        assert!(mixing(&batches, len) > 60.0);
    }
}

/// A state saved on `from` ranks after `steps` batches each, loaded on `to`
/// ranks: every sample of the epoch read once, and each new rank decodes
/// about the bytes of the samples it reads, from the old regions it takes
/// over, not the store (the old ranks' rests interleaved would decode
/// nearly all of it on every new rank).
fn resume_reads_the_regions_it_takes_over(from: usize, to: usize, steps: usize) {
    let dir = common::tmpdir();
    let path = dir.path().join("r.zarr");
    let n = N;
    let samples = write_store(&path, n);
    let whole = store_bytes(&samples) as f64;
    let (batch, seed) = (32, 11);
    let mut seen = Vec::new();
    let mut state = None;
    for rank in 0..from {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, from);
        l.set_epoch(2);
        seen.extend(take(&mut l.iter(), steps).concat());
        state = Some(l.state());
    }
    let json = serde_json::to_string(&state.unwrap()).unwrap();
    for rank in 0..to {
        let r = open(&path, SMALL_CACHE);
        let l = loader(&r, batch, seed, rank, to);
        l.load_state(&serde_json::from_str(&json).unwrap()).unwrap();
        let before = r.decode_counters().decoded_bytes;
        let rest = epoch(&l).concat();
        let decoded = (r.decode_counters().decoded_bytes - before) as f64;
        // The old regions this rank reads from: each old rank's region is a
        // contiguous `1 / from` of the store, up to a block at its ends, so
        // a region counts when it holds more of the rank's samples than a
        // block straddling a boundary could.
        let mut per_region = vec![0usize; from];
        for &i in &rest {
            per_region[i * from / n] += 1;
        }
        let regions: Vec<usize> = (0..from).filter(|&q| per_region[q] > 64.max(rest.len() / 50)).collect();
        let most = from.div_ceil(to) + 1;
        assert!(regions.len() <= most, "{from} -> {to}, rank {rank}: samples of {} old regions", regions.len());
        // About the bytes of the samples it reads: their blocks are its own
        // (the rests of the old regions, cut in storage order), up to the
        // blocks a cut falls in. (Continuing the old ranks' pools decoded
        // 1.35-3.0 times this: a whole pool per stretch taken over.)
        let bound = 1.4 * whole * rest.len() as f64 / n as f64;
        assert!(
            decoded <= bound,
            "{from} -> {to}, rank {rank}: decoded {decoded:.0} bytes, more than {bound:.0} for {} of {n} samples",
            rest.len()
        );
        seen.extend(rest);
    }
    assert_once(&seen, n, &format!("{from} ranks, then {to}"));
}

#[test]
fn a_resume_from_8_ranks_onto_3_decodes_the_old_regions_it_takes_over() {
    resume_reads_the_regions_it_takes_over(8, 3, 40);
}

#[test]
fn a_resume_from_3_ranks_onto_8_decodes_the_old_regions_it_takes_over() {
    resume_reads_the_regions_it_takes_over(3, 8, 100);
}

/// Two resumes in one epoch (3 ranks, then 5, then 2), each saved mid-way:
/// every sample once, every rank the same number of steps.
#[test]
fn a_resumed_epoch_resumes_again_on_other_ranks() {
    let dir = common::tmpdir();
    let path = dir.path().join("twice.zarr");
    let n = N - 7;
    write_store(&path, n);
    let (batch, seed) = (32, 5);
    let mut seen = Vec::new();
    let mut state = None;
    for rank in 0..3 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 3);
        l.set_epoch(1);
        seen.extend(take(&mut l.iter(), 60).concat());
        state = Some(l.state());
    }
    let first = serde_json::to_string(&state.unwrap()).unwrap();
    let mut state = None;
    for rank in 0..5 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 5);
        l.load_state(&serde_json::from_str(&first).unwrap()).unwrap();
        seen.extend(take(&mut l.iter(), 45).concat());
        state = Some(l.state());
    }
    let second = serde_json::to_string(&state.unwrap()).unwrap();
    let mut steps = BTreeSet::new();
    for rank in 0..2 {
        let l = loader(&open(&path, SMALL_CACHE), batch, seed, rank, 2);
        l.load_state(&serde_json::from_str(&second).unwrap()).unwrap();
        let rest = epoch(&l);
        steps.insert(rest.len());
        seen.extend(rest.concat());
    }
    assert_eq!(steps.len(), 1, "equal steps on every rank");
    assert_once(&seen, n, "3 ranks, then 5, then 2");
}

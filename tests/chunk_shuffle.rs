//! The chunk-aware shuffle, decode amplification and a cache that
//! does not thrash, checked on counted decodes (never on timing). Expected
//! chunk sets and byte counts are computed here from the written samples and
//! the chunk size, not through the reader's planner.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::data::CollateOptions;
use atomzarr::sampler::{BatchSampler, ChunkShuffleSampler, RandomSampler, Shard};
use atomzarr::source::ChunkedReader;
use atomzarr::{
    AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, MultiReader, Reader, ReaderExt,
    ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Rows per chunk of every array of the test stores (no sharding).
const CHUNK: u64 = 64;

fn write_store(path: &Path, n: usize) -> Vec<AtomicData> {
    write_store_seeded(path, n, 7)
}

fn write_store_seeded(path: &Path, n: usize, seed: u64) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 6, seed).unwrap();
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(CHUNK);
    let config = ZarrWriteConfig::default().with_core(c);
    AtomicDataZarrWriter::create(path, config).unwrap().write(&samples).unwrap();
    samples
}

fn open(path: &Path, cache: u64) -> AtomicDataZarrReader {
    AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(cache)).unwrap()
}

/// Row offsets of the samples on the atom and edge axes.
fn offsets(samples: &[AtomicData]) -> (Vec<u64>, Vec<u64>) {
    let (mut a, mut e) = (vec![0u64], vec![0u64]);
    for s in samples {
        a.push(a.last().unwrap() + s.num_atoms() as u64);
        e.push(e.last().unwrap() + s.num_edges() as u64);
    }
    (a, e)
}

/// Bytes of one row of each field on each axis (atom, edge, system), from
/// a sample's own field data.
fn row_bytes(s: &AtomicData) -> [u64; 3] {
    let mut out = [0u64; 3];
    for f in s.fields.values() {
        let rows = match f.level {
            atomzarr::Level::Atom => s.num_atoms(),
            atomzarr::Level::Edge => s.num_edges(),
            atomzarr::Level::System => 1,
        } as u64;
        let slot = match f.level {
            atomzarr::Level::Atom => 0,
            atomzarr::Level::Edge => 1,
            atomzarr::Level::System => 2,
        };
        out[slot] += (f.data.len() * f.data.dtype().size()) as u64 / rows.max(1);
    }
    out
}

/// (axis, chunk) pairs the samples `idx` touch, and the chunks' decoded
/// bytes (every array of an axis shares the chunk grid here).
fn chunks_of(samples: &[AtomicData], idx: &[usize]) -> (BTreeSet<(usize, u64)>, u64) {
    let (a, e) = offsets(samples);
    let rb = row_bytes(&samples[0]);
    let mut set = BTreeSet::new();
    for &i in idx {
        for (axis, lo, hi) in [(0, a[i], a[i + 1]), (1, e[i], e[i + 1]), (2, i as u64, i as u64 + 1)] {
            if hi > lo {
                for c in lo / CHUNK..=(hi - 1) / CHUNK {
                    set.insert((axis, c));
                }
            }
        }
    }
    let bytes = set.iter().map(|&(axis, _)| CHUNK * rb[axis]).sum();
    (set, bytes)
}

/// Number of (array, chunk) decodes the chunk set means: one per array of
/// each axis.
fn arrays_per_axis(s: &AtomicData) -> [u64; 3] {
    let mut n = [0u64; 3];
    for f in s.fields.values() {
        n[match f.level {
            atomzarr::Level::Atom => 0,
            atomzarr::Level::Edge => 1,
            atomzarr::Level::System => 2,
        }] += 1;
    }
    n
}

fn decodes_for(samples: &[AtomicData], set: &BTreeSet<(usize, u64)>) -> u64 {
    let per = arrays_per_axis(&samples[0]);
    set.iter().map(|&(axis, _)| per[axis]).sum()
}

fn window(range: std::ops::Range<usize>) -> Vec<Vec<i64>> {
    range.map(|i| i as i64).collect::<Vec<_>>().chunks(16).map(<[i64]>::to_vec).collect()
}

fn logical(w: &[Vec<i64>]) -> Vec<Vec<usize>> {
    w.iter().map(|b| b.iter().map(|&i| i as usize).collect()).collect()
}

#[test]
fn a_window_decodes_each_chunk_once_and_counts_its_bytes() {
    let dir = common::tmpdir();
    let path = dir.path().join("w.zarr");
    let samples = write_store(&path, 600);
    // No cache at all, and a cache far smaller than the window: every
    // needed chunk is decoded exactly once either way.
    for cache in [0u64, 4096] {
        let r = open(&path, cache);
        let mut out = Vec::new();
        let idx: Vec<usize> = (0..600).rev().step_by(3).collect();
        let batches: Vec<Vec<i64>> = idx.chunks(32).map(|b| b.iter().map(|&i| i as i64).collect()).collect();
        r.read_collated(&batches, &mut out).unwrap();
        let (set, bytes) = chunks_of(&samples, &idx);
        let c = r.decode_counters();
        assert_eq!(c.chunks_decoded, decodes_for(&samples, &set), "cache {cache}");
        assert_eq!(r.cache_stats().misses, decodes_for(&samples, &set));
        assert_eq!(c.decoded_bytes, bytes);
        let want: u64 = idx
            .iter()
            .map(|&i| samples[i].fields.values().map(|f| (f.data.len() * f.data.dtype().size()) as u64).sum::<u64>())
            .sum();
        assert_eq!(c.sample_bytes, want);
        assert!(c.amplification().unwrap() > 1.0);
    }
}

#[test]
fn a_window_planned_ahead_survives_a_window_that_overflows_the_cache() {
    let dir = common::tmpdir();
    let path = dir.path().join("p.zarr");
    let samples = write_store(&path, 2000);
    let (w1, w2, w3) = (window(0..100), window(1000..1600), window(0..50));
    let (w1_set, _) = chunks_of(&samples, &(0..100).collect::<Vec<_>>());
    let (w2_set, w2_bytes) = chunks_of(&samples, &(1000..1600).collect::<Vec<_>>());
    let (w3_set, w3_bytes) = chunks_of(&samples, &(0..50).collect::<Vec<_>>());
    let budget = 64 << 10;
    // The premises: window 2 alone overflows the budget, shares no chunk
    // with window 3, and window 3 fits in it and was read by window 1.
    assert!(w2_bytes > 2 * budget && w3_bytes < budget / 2);
    assert!(w2_set.is_disjoint(&w3_set) && w3_set.is_subset(&w1_set));
    let w3_decodes = decodes_for(&samples, &w3_set);
    for ahead in [false, true] {
        let r = open(&path, budget);
        let mut out = Vec::new();
        r.read_collated(&w1, &mut out).unwrap();
        // Window 3 planned before window 2 is read, or only when it is read.
        let planned = ahead.then(|| r.plan(logical(&w3), CollateOptions::default()).unwrap());
        r.read_collated(&w2, &mut out).unwrap();
        let before = r.cache_stats().misses;
        match planned {
            Some(plan) => r.read_plan(plan, &mut out).unwrap(),
            None => r.read_collated(&w3, &mut out).unwrap(),
        }
        let misses = r.cache_stats().misses - before;
        // Plain LRU: window 2 pushed every chunk of window 1 out. Planned ahead:
        // none of window 3's was evicted.
        assert_eq!(misses, if ahead { 0 } else { w3_decodes }, "planned ahead {ahead}");
    }
}

/// Block starts where a sample's first row on the atom axis (`atoms`) or
/// the system axis (`atoms == None`) enters a new chunk.
fn first_row_blocks(offsets: Option<&[u64]>, n: usize) -> Vec<usize> {
    let mut want = Vec::new();
    let mut last = None;
    for i in 0..n {
        let c = offsets.map_or(i as u64, |a| a[i]) / CHUNK;
        if last != Some(c) {
            want.push(i);
            last = Some(c);
        }
    }
    want
}

#[test]
fn chunk_blocks_follow_the_bulky_arrays_chunks() {
    let dir = common::tmpdir();
    // 2-6 atoms a sample: the per-system `cell` (36 bytes a sample, 64
    // samples a chunk) is more than an eighth of the store, so it is bulky
    // and has the coarsest chunking of the bulky arrays.
    let path = dir.path().join("b.zarr");
    write_store(&path, 3000);
    let want = first_row_blocks(None, 3000);
    // The blocks depend on the store alone, not on the cache.
    for cache in [0, 600 << 10, 1 << 30] {
        assert_eq!(open(&path, cache).chunk_blocks(), want, "cache {cache}");
    }
    // 40-60 atoms a sample: the per-system arrays are far below an eighth
    // and stay resident; the atom arrays (about 1 sample a chunk, coarser
    // than the edge arrays) define the blocks.
    let path = dir.path().join("a.zarr");
    let samples = atomzarr::data::synth::generate(400, 40, 60, 1).unwrap();
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(CHUNK);
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(c)).unwrap().write(&samples).unwrap();
    let (a, _) = offsets(&samples);
    let r = open(&path, 600 << 10);
    let want = first_row_blocks(Some(&a), samples.len());
    assert_eq!(r.chunk_blocks(), want);
    let fit = r.cache_fit();
    assert!(fit.resident_bytes > 0 && fit.resident_bytes <= fit.decoded_bytes / 8, "{fit:?}");
    let s = ChunkShuffleSampler::for_reader(&r, 32).unwrap();
    assert_eq!(s.num_blocks(), want.len());
}

#[test]
fn chunk_shuffle_decodes_far_less_than_a_shuffle_on_a_store_larger_than_the_cache() {
    let dir = common::tmpdir();
    let path = dir.path().join("l.zarr");
    let samples = write_store(&path, 6000);
    let (all, store_bytes) = chunks_of(&samples, &(0..6000).collect::<Vec<_>>());
    let budget = store_bytes / 10;
    let reader = Arc::new(open(&path, budget));
    let amp = |sampler: Arc<dyn BatchSampler>| {
        reader.clear_cache();
        let ds = Dataset::from_arc(reader.clone()).with_skip_validation(true);
        let loader =
            DataLoader::builder(ds).with_batch_sampler(sampler).with_prefetch_factor(4).build(&Device::flex()).unwrap();
        let mut it = loader.iter();
        let mut seen = Vec::new();
        for b in it.by_ref() {
            seen.extend(b.unwrap().indices);
        }
        let c = it.decode_counters().unwrap();
        assert_eq!(loader.stats().decode, reader.decode_counters());
        (c, seen)
    };
    let chunky = ChunkShuffleSampler::for_reader(&*reader, 32).unwrap().with_pool_blocks(8).with_seed(1);
    let (c, seen) = amp(Arc::new(chunky.clone()));
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..6000).collect::<Vec<_>>());
    assert_eq!(seen, chunky.batches(0).concat());
    let chunk_amp = c.amplification().unwrap();
    // Each chunk about once (boundary chunks shared by two blocks at most
    // twice): well under 3 decodes per chunk of the store.
    assert!(c.chunks_decoded < 3 * decodes_for(&samples, &all), "{c:?}");
    let plain = atomzarr::sampler::SamplerBatches::new(RandomSampler::new(6000, 1), 32, false);
    let (p, _) = amp(Arc::new(plain));
    let plain_amp = p.amplification().unwrap();
    assert!(plain_amp > 3.0 * chunk_amp, "shuffle {plain_amp:.2}x, chunk-shuffle {chunk_amp:.2}x");
}

#[test]
fn chunk_shuffle_shards_read_whole_blocks_per_rank() {
    let dir = common::tmpdir();
    let path = dir.path().join("r.zarr");
    write_store(&path, 1500);
    let r = open(&path, 64 << 10);
    let blocks = r.chunk_blocks();
    let base = ChunkShuffleSampler::for_reader(&r, 16).unwrap().with_seed(3).with_pool_blocks(4);
    let mut all = Vec::new();
    for rank in 0..3 {
        let s = base.clone().with_shard(Shard::new(rank, 3).unwrap());
        let idx = s.batches(5).concat();
        assert_eq!(idx.len(), 500);
        // A rank's samples come from its share of the blocks (a third, plus
        // the two its share's edges cut), where every-third-sample sharding
        // would touch them all.
        let mut ids: Vec<usize> = idx.iter().map(|&i| blocks.partition_point(|&b| b <= i)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert!(ids.len() < blocks.len() / 2, "rank {rank}: {} of {} blocks", ids.len(), blocks.len());
        all.extend(idx);
    }
    all.sort_unstable();
    assert_eq!(all, (0..1500).collect::<Vec<_>>());
}

#[test]
fn a_window_over_the_decode_limit_is_read_a_group_of_batches_at_a_time() {
    let dir = common::tmpdir();
    let path = dir.path().join("g.zarr");
    let samples = write_store(&path, 800);
    let idx: Vec<usize> = (0..800).map(|i| (i * 373) % 800).collect();
    let batches: Vec<Vec<i64>> = idx.chunks(40).map(|b| b.iter().map(|&i| i as i64).collect()).collect();
    let whole = open(&path, 0);
    let mut want = Vec::new();
    whole.read_collated(&batches, &mut want).unwrap();
    let (set, _) = chunks_of(&samples, &idx);
    assert_eq!(whole.decode_counters().chunks_decoded, decodes_for(&samples, &set));
    // A limit below one batch's chunks: each batch is a group; with no cache
    // a chunk two batches share is decoded once per batch.
    let options = ReaderOptions::default().with_cache_bytes(0).with_window_decode_bytes(1);
    let grouped = AtomicDataZarrReader::open_opt(&path, options).unwrap();
    let mut got = Vec::new();
    grouped.read_collated(&batches, &mut got).unwrap();
    assert_eq!(got, want);
    let per_batch: u64 = idx.chunks(40).map(|b| decodes_for(&samples, &chunks_of(&samples, b).0)).sum();
    assert_eq!(grouped.decode_counters().chunks_decoded, per_batch);
    assert!(per_batch > decodes_for(&samples, &set));
}

/// The same batches every epoch.
struct Fixed(Vec<Vec<usize>>);
impl BatchSampler for Fixed {
    fn batches(&self, _epoch: u64) -> Vec<Vec<usize>> {
        self.0.clone()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Two epochs of `batches` through a DataLoader over `reader`: each epoch's
/// decode counters, and the loader's total.
fn two_epochs<R: Reader + 'static>(reader: R, batches: Vec<Vec<usize>>) -> [atomzarr::source::DecodeCounters; 3] {
    let loader = DataLoader::builder(Dataset::new(reader).with_skip_validation(true))
        .with_batch_sampler(Fixed(batches))
        .with_prefetch_factor(4)
        .build(&Device::flex())
        .unwrap();
    let epoch = || {
        let mut it = loader.iter();
        for b in it.by_ref() {
            b.unwrap();
        }
        it.decode_counters().expect("a chunked reader has decode counters")
    };
    let (first, second) = (epoch(), epoch());
    [first, second, loader.stats().decode]
}

#[test]
fn a_loader_over_a_multi_dataset_of_two_stores_decodes_and_caches_as_the_stores_alone() {
    let dir = common::tmpdir();
    let (pa, pb) = (dir.path().join("a.zarr"), dir.path().join("b.zarr"));
    let (a, b) = (write_store_seeded(&pa, 600, 1), write_store_seeded(&pb, 400, 2));
    let cache = 1 << 30;
    // A global order that interleaves the two stores, in batches of 25.
    let order: Vec<usize> = (0..1000).map(|i| (i * 373) % 1000).collect();
    let global: Vec<Vec<usize>> = order.chunks(25).map(<[usize]>::to_vec).collect();
    let local = |lo: usize, hi: usize| -> Vec<Vec<usize>> {
        global
            .iter()
            .map(|g| g.iter().filter(|&&i| (lo..hi).contains(&i)).map(|&i| i - lo).collect::<Vec<_>>())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let multi = MultiReader::new(vec![Arc::new(open(&pa, cache)), Arc::new(open(&pb, cache))]).unwrap();
    // The multi dataset's blocks are each store's, shifted to global indices.
    let mut want_blocks = open(&pa, cache).chunk_blocks();
    want_blocks.extend(open(&pb, cache).chunk_blocks().into_iter().map(|i| i + 600));
    assert_eq!(multi.chunked().expect("stores have chunks").chunk_blocks(), want_blocks);
    assert_eq!(ChunkShuffleSampler::for_reader(&multi, 16).unwrap().num_blocks(), want_blocks.len());

    let [m1, m2, m_total] = two_epochs(multi, global.clone());
    let [a1, a2, _] = two_epochs(open(&pa, cache), local(0, 600));
    let [b1, b2, _] = two_epochs(open(&pb, cache), local(600, 1000));
    // The multi run's counters are the sum of the stores' alone, epoch by epoch.
    assert_eq!(m1, [a1, b1].into_iter().sum());
    assert_eq!(m2, [a2, b2].into_iter().sum());
    assert_eq!(m_total, [m1, m2].into_iter().sum());
    // Independently: the first epoch decodes every chunk of both stores once
    // (the cache holds both), the second decodes nothing and reads as much.
    let all = |s: &[AtomicData]| chunks_of(s, &(0..s.len()).collect::<Vec<_>>());
    let ((sa, bytes_a), (sb, bytes_b)) = (all(&a), all(&b));
    assert_eq!(m1.chunks_decoded, decodes_for(&a, &sa) + decodes_for(&b, &sb));
    assert_eq!(m1.decoded_bytes, bytes_a + bytes_b);
    assert_eq!((m2.chunks_decoded, m2.decoded_bytes), (0, 0));
    assert_eq!(m2.sample_bytes, m1.sample_bytes);
}

#[test]
fn a_multi_dataset_plans_each_window_with_the_child_that_owns_it() {
    let dir = common::tmpdir();
    let (small, path) = (dir.path().join("s.zarr"), dir.path().join("p.zarr"));
    write_store_seeded(&small, 100, 3);
    let samples = write_store(&path, 2000);
    // The windows of the single-store test above, shifted past the small store.
    let shift = |r: std::ops::Range<usize>| window(r.start + 100..r.end + 100);
    let (w1, w2, w3) = (shift(0..100), shift(1000..1600), shift(0..50));
    let (w3_set, _) = chunks_of(&samples, &(0..50).collect::<Vec<_>>());
    let w3_decodes = decodes_for(&samples, &w3_set);
    for ahead in [false, true] {
        let big = Arc::new(open(&path, 64 << 10));
        let multi = MultiReader::new(vec![Arc::new(open(&small, 64 << 10)), big.clone()]).unwrap();
        // The big store's cache as the single-store test has it (the
        // mixture gave it a share of its own budget).
        big.chunked().unwrap().set_cache_bytes(64 << 10);
        let mut out = Vec::new();
        multi.read_collated(&w1, &mut out).unwrap();
        let planned = ahead.then(|| multi.plan(logical(&w3), CollateOptions::default()).unwrap());
        multi.read_collated(&w2, &mut out).unwrap();
        let before = big.cache_stats().misses;
        match planned {
            Some(plan) => multi.read_plan(plan, &mut out).unwrap(),
            None => multi.read_collated(&w3, &mut out).unwrap(),
        }
        let misses = big.cache_stats().misses - before;
        assert_eq!(misses, if ahead { 0 } else { w3_decodes }, "planned ahead {ahead}");
    }
}

#[test]
fn the_cache_reports_the_bytes_it_holds_within_its_budget() {
    let dir = common::tmpdir();
    let path = dir.path().join("h.zarr");
    let samples = write_store(&path, 600);
    let idx: Vec<usize> = (0..600).step_by(5).collect();
    let batches: Vec<Vec<i64>> = idx.chunks(32).map(|b| b.iter().map(|&i| i as i64).collect()).collect();
    // What the window's chunks decode to, from the samples alone: the cache
    // keeps them as decoded or in compact forms, never more.
    let (_, decoded) = chunks_of(&samples, &idx);
    for (cache, bound) in [(0u64, 0u64), (4096, 4096), (1 << 30, decoded)] {
        let r = open(&path, cache);
        assert_eq!(r.cache_bytes_held(), 0, "cache {cache}: nothing read yet");
        r.read_collated(&batches, &mut Vec::new()).unwrap();
        let held = r.cache_bytes_held();
        assert!(held <= bound, "cache {cache}: holds {held}, more than {bound}");
        if cache == 1 << 30 {
            assert!(held > 0, "a cache larger than the store keeps what was read");
            r.refresh().unwrap();
            assert_eq!(r.cache_bytes_held(), 0, "refresh empties the cache");
        }
    }
    // A mixture's caches: the sum of its children's.
    let other = dir.path().join("h2.zarr");
    write_store_seeded(&other, 300, 7);
    let a = Arc::new(open(&path, 1 << 30));
    let b = Arc::new(open(&other, 1 << 30));
    let multi = MultiReader::new(vec![a.clone(), b.clone()]).unwrap();
    multi.read_collated(&[vec![0, 1, 650, 899]], &mut Vec::new()).unwrap();
    assert!(a.cache_bytes_held() > 0 && b.cache_bytes_held() > 0);
    assert_eq!(multi.chunked().unwrap().cache_bytes_held(), a.cache_bytes_held() + b.cache_bytes_held());
}

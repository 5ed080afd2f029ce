//! An epoch read in index order (no sampler, no shuffle) across ranks: each
//! rank reads one contiguous range of the live samples, every sample once,
//! so the ranks together decode each chunk once; a resume on another number
//! of ranks stays exact; the toolkit's interleaved rounds stay available and
//! states saved by them resume as rounds. References: the written samples
//! (atom counts of the live ones), decoded bytes from the chunk grid, and
//! the rounds written out by hand; never the loader's own plan.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::source::ChunkedReader;
use atomzarr::{
    AtomicBatch, AtomicData, AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, Error,
    LoaderState, RankSplit, Reader, ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Rows per chunk of every array: many chunks per rank.
const CHUNK: u64 = 64;

/// Writes `n` samples and soft-deletes every 7th and a run in the middle;
/// returns the live samples in logical order.
fn write_store(path: &Path, n: usize) -> Vec<AtomicData> {
    let samples = atomzarr::data::synth::generate(n, 2, 6, 3).unwrap();
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(CHUNK);
    let mut w = AtomicDataZarrWriter::create(path, ZarrWriteConfig::default().with_core(c)).unwrap();
    w.write(&samples).unwrap();
    let gone: BTreeSet<usize> = (0..n).filter(|i| i % 7 == 3).chain(n / 2..n / 2 + n / 10).collect();
    w.delete(&gone.iter().copied().collect::<Vec<_>>()).unwrap();
    samples.into_iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, s)| s).collect()
}

fn open(path: &Path) -> Arc<AtomicDataZarrReader> {
    Arc::new(AtomicDataZarrReader::open_opt(path, ReaderOptions::default().with_cache_bytes(4 << 20)).unwrap())
}

fn loader(r: &Arc<AtomicDataZarrReader>, batch: usize, rank: usize, world: usize) -> DataLoader<AtomicDataZarrReader> {
    DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(batch)
        .with_prefetch_factor(4)
        .with_rank(rank, world)
        .build(&Device::flex())
        .unwrap()
}

/// Each batch's indices and atom count.
fn epoch(l: &DataLoader<AtomicDataZarrReader>) -> Vec<(Vec<usize>, usize)> {
    l.iter()
        .map(|b: atomzarr::Result<AtomicBatch>| {
            let b = b.unwrap();
            (b.indices, b.num_atoms)
        })
        .collect()
}

/// Decoded bytes of the whole store (deleted rows included), as the
/// reader's chunk grid gives them.
fn store_bytes(r: &AtomicDataZarrReader) -> u64 {
    r.cache_fit().decoded_bytes
}

/// How many increasing runs of consecutive indices `v` is made of.
fn runs(v: &[usize]) -> usize {
    if v.is_empty() {
        return 0;
    }
    1 + v.windows(2).filter(|w| w[1] != w[0] + 1).count()
}

#[test]
fn ranks_read_contiguous_ranges_once_and_decode_their_share() {
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    let live = write_store(&path, 30_000);
    let n = live.len();
    let whole = store_bytes(&open(&path));
    for world in [1, 3, 4] {
        let (mut all, mut steps, mut decoded) = (Vec::new(), BTreeSet::new(), 0u64);
        for rank in 0..world {
            // Each rank its own process: its own reader and cache.
            let r = open(&path);
            let batches = epoch(&loader(&r, 32, rank, world));
            steps.insert(batches.len());
            let mine: Vec<usize> = batches.iter().flat_map(|b| b.0.clone()).collect();
            assert_eq!(runs(&mine), 1, "world {world} rank {rank}: one contiguous range");
            let lo = mine[0];
            assert_eq!(lo, n * rank / world, "ranges in rank order, within one sample of equal");
            // The atoms delivered are those of the live samples in the range.
            let atoms: usize = batches.iter().map(|b| b.1).sum();
            assert_eq!(atoms, live[lo..lo + mine.len()].iter().map(AtomicData::num_atoms).sum::<usize>());
            all.extend(mine);
            let d = r.decode_counters().decoded_bytes;
            let share = whole as f64 / world as f64;
            assert!(d as f64 <= 1.05 * share, "world {world} rank {rank}: decoded {d}, share {share:.0}");
            decoded += d;
        }
        assert_eq!(steps.len(), 1, "world {world}: equal steps");
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "world {world}: every live sample once");
        assert!(decoded as f64 <= 1.05 * whole as f64, "world {world}: the store about once: {decoded} of {whole}");
    }
    // The toolkit's rounds (of 4 * 4 samples, within every chunk): one
    // rank decodes far more than its share.
    let r = open(&path);
    let l = DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
        .with_batch_size(4)
        .with_rank(1, 4)
        .with_rank_split(RankSplit::Interleaved)
        .build(&Device::flex())
        .unwrap();
    let got: usize = epoch(&l).iter().map(|b| b.0.len()).sum();
    let rem = n % 16;
    assert_eq!(got, n / 16 * 4 + rem * 2 / 4 - rem / 4);
    let d = r.decode_counters().decoded_bytes;
    assert!(d as f64 >= 0.5 * whole as f64, "interleaved rank decoded {d} of {whole}");
}

#[test]
fn interleaved_rounds_are_the_toolkits_split() {
    let dir = common::tmpdir();
    let r = open(&{
        let p = dir.path().join("i.zarr");
        write_store(&p, 100);
        p
    });
    let n = r.len();
    let (b, w) = (4, 3);
    for rank in 0..w {
        let l = DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
            .with_batch_size(b)
            .with_rank(rank, w)
            .with_rank_split(RankSplit::Interleaved)
            .build(&Device::flex())
            .unwrap();
        let got: Vec<Vec<usize>> = epoch(&l).into_iter().map(|x| x.0).collect();
        // Rounds of w * b: rank r takes the r-th b of each; the last round
        // split as evenly as it goes.
        let mut want = Vec::new();
        let mut start = 0;
        while start < n {
            let len = (w * b).min(n - start);
            want.push((start + len * rank / w..start + len * (rank + 1) / w).collect::<Vec<_>>());
            start += len;
        }
        assert_eq!(got, want, "rank {rank}");
    }
}

#[test]
fn a_state_saved_on_four_ranks_resumes_on_three_exactly() {
    let dir = common::tmpdir();
    let path = dir.path().join("r.zarr");
    let n = write_store(&path, 3000).len();
    let r = open(&path);
    let batch = 8;
    let mut seen = Vec::new();
    let mut state = None;
    for rank in 0..4 {
        let l = loader(&r, batch, rank, 4);
        let mut it = l.iter();
        for _ in 0..5 {
            seen.extend(it.next().unwrap().unwrap().indices);
        }
        state = Some(l.state());
    }
    let state: LoaderState = serde_json::from_str(&serde_json::to_string(&state.unwrap()).unwrap()).unwrap();
    assert_eq!((state.sampler(), state.position(), state.order_world_size()), ("sequential_ranges", 160, Some(4)));
    let mut steps = BTreeSet::new();
    for rank in 0..3 {
        let l = loader(&r, batch, rank, 3);
        l.load_state(&state).unwrap();
        let batches = epoch(&l);
        steps.insert(batches.len());
        let rest: Vec<usize> = batches.into_iter().flat_map(|b| b.0).collect();
        // Whole stretches of at most two old ranges.
        assert!(runs(&rest) <= 2, "rank {rank}: {} runs", runs(&rest));
        seen.extend(rest);
    }
    assert_eq!(steps.len(), 1, "equal steps after the resume");
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "every sample once across the resume");
}

#[test]
fn states_of_the_interleaved_split_resume_as_rounds() {
    let dir = common::tmpdir();
    let path = dir.path().join("o.zarr");
    let n = write_store(&path, 500).len();
    let r = open(&path);
    let interleaved = |rank| {
        DataLoader::builder(Dataset::from_arc(r.clone()).with_skip_validation(true))
            .with_batch_size(5)
            .with_rank(rank, 2)
            .with_rank_split(RankSplit::Interleaved)
            .build(&Device::flex())
            .unwrap()
    };
    // Two ranks take 3 batches of rounds, the state says "sequential" (what
    // a state saved before ranges existed says too).
    let mut seen = Vec::new();
    let mut state = None;
    for rank in 0..2 {
        let l = interleaved(rank);
        let mut it = l.iter();
        for _ in 0..3 {
            seen.extend(it.next().unwrap().unwrap().indices);
        }
        state = Some(l.state());
    }
    let state = state.unwrap();
    assert_eq!((state.sampler(), state.order_world_size()), ("sequential", None));
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), (0..30).collect::<BTreeSet<_>>());
    // A loader of the default split follows it: the rest of the rounds.
    for rank in 0..2 {
        let l = loader(&r, 5, rank, 2);
        l.load_state(&state).unwrap();
        let rest: Vec<Vec<usize>> = epoch(&l).into_iter().map(|x| x.0).collect();
        assert_eq!(rest[0], (30 + 5 * rank..35 + 5 * rank).collect::<Vec<_>>(), "rank {rank}: rounds go on");
        seen.extend(rest.concat());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
    // Between epochs the name does not matter: the next epoch is ranges.
    let at_start = {
        let l = interleaved(0);
        l.set_epoch(1);
        l.state()
    };
    assert_eq!((at_start.sampler(), at_start.position()), ("sequential", 0));
    let l = loader(&r, 5, 1, 2);
    l.load_state(&at_start).unwrap();
    assert_eq!(epoch(&l)[0].0, (n / 2..n / 2 + 5).collect::<Vec<_>>());
}

#[test]
fn a_rank_split_with_a_sampler_or_shuffle_is_refused() {
    let dir = common::tmpdir();
    let path = dir.path().join("x.zarr");
    write_store(&path, 50);
    let ds = Dataset::from_arc(open(&path));
    let shuffled =
        DataLoader::builder(ds.clone()).with_shuffle(true).with_rank_split(RankSplit::Ranges).build(&Device::flex());
    assert!(matches!(shuffled, Err(Error::Config(_))));
    let sampled = DataLoader::builder(ds)
        .with_sampler(atomzarr::sampler::SequentialSampler::new(50 - 50 / 7))
        .with_rank_split(RankSplit::Interleaved)
        .build(&Device::flex());
    assert!(matches!(sampled, Err(Error::Config(_))));
}

//! Weighted mixtures of stores larger than their share of the cache: the
//! loader draws each such store through a block pool and gives each rank
//! its own region of each store. What held for the permutation still holds
//! (exact counts per store, per batch, every sample once per pass without
//! replacement, reproducible epochs, exact resume on any number of ranks),
//! the stores share one cache budget, ranks decode about their share, and
//! batches mix. References are sample ids and counts computed here from the
//! options, never the loader's own plan.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use burn::tensor::Device;

use atomzarr::sampler::{MultiDatasetBatchSampler, MultiDatasetSampler};
use atomzarr::{
    AtomicDataZarrReader, AtomicDataZarrWriter, Codec, DataLoader, Dataset, LoaderState, MultiReader,
    MultiReaderOptions, Reader, ReaderExt, ReaderOptions, ZarrArrayConfig, ZarrWriteConfig,
};

/// Samples of the two stores.
const NA: usize = 30_000;
const NB: usize = 6_000;
/// A mixture budget neither store fits in (they decode to ~12 and ~2.4 MB).
const SMALL: u64 = 4 << 20;

fn write_store(path: &Path, n: usize, seed: u64) {
    let samples = atomzarr::data::synth::generate(n, 2, 6, seed).unwrap();
    let c = ZarrArrayConfig::default().with_codec(Codec::Zstd { level: 1 }).with_chunk_size(64);
    AtomicDataZarrWriter::create(path, ZarrWriteConfig::default().with_core(c)).unwrap().write(&samples).unwrap();
}

struct Stores {
    _dir: tempfile::TempDir,
    a: std::path::PathBuf,
    b: std::path::PathBuf,
}

fn stores() -> Stores {
    let dir = common::tmpdir();
    let (a, b) = (dir.path().join("a.zarr"), dir.path().join("b.zarr"));
    write_store(&a, NA, 1);
    write_store(&b, NB, 2);
    Stores { _dir: dir, a, b }
}

/// The two stores behind a MultiReader sharing `budget` bytes, and the
/// children (to read their counters).
fn mixture(s: &Stores, budget: u64) -> (MultiReader, Vec<Arc<AtomicDataZarrReader>>) {
    let open = |p: &Path| Arc::new(AtomicDataZarrReader::open_opt(p, ReaderOptions::default()).unwrap());
    let kids = vec![open(&s.a), open(&s.b)];
    let children: Vec<Arc<dyn Reader>> = kids.iter().map(|k| k.clone() as Arc<dyn Reader>).collect();
    let multi = MultiReader::with_options(children, MultiReaderOptions::default().with_cache_bytes(budget)).unwrap();
    (multi, kids)
}

fn weighted(w: Vec<f64>, n: Option<usize>, replacement: bool) -> MultiDatasetSampler {
    let mut b =
        MultiDatasetSampler::for_lengths(vec![NA, NB]).with_weights(w).with_replacement(replacement).with_seed(7);
    if let Some(n) = n {
        b = b.with_num_samples(n);
    }
    b.build().unwrap()
}

fn sample_loader(multi: MultiReader, s: MultiDatasetSampler, rank: usize, world: usize) -> DataLoader<MultiReader> {
    DataLoader::builder(Dataset::new(multi).with_skip_validation(true))
        .with_batch_size(32)
        .with_seed(7)
        .with_prefetch_factor(4)
        .with_rank(rank, world)
        .with_sampler(s)
        .build(&Device::flex())
        .unwrap()
}

fn epoch(l: &DataLoader<MultiReader>) -> Vec<Vec<usize>> {
    l.iter_host().map(|b| b.map(|b| b.indices.clone())).collect::<atomzarr::Result<_>>().unwrap()
}

/// How many of `idx` come from each store.
fn per_store(idx: &[usize]) -> [usize; 2] {
    let a = idx.iter().filter(|&&i| i < NA).count();
    [a, idx.len() - a]
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

#[test]
fn stores_larger_than_their_share_are_drawn_through_pools_each_sample_once_per_pass() {
    let s = stores();
    // Without replacement and weights by length: every sample of both once.
    for world in [1, 3] {
        let mut all = Vec::new();
        for rank in 0..world {
            let (multi, _) = mixture(&s, SMALL);
            let l = sample_loader(multi, weighted(vec![NA as f64, NB as f64], None, false), rank, world);
            let pools = l.state().child_pool_blocks().map(<[_]>::to_vec);
            assert!(matches!(pools.as_deref(), Some([Some(_), Some(_)])), "both stores pooled: {pools:?}");
            let batches = epoch(&l);
            assert!(batches.iter().all(|b| b.len() <= 32));
            all.extend(batches.concat());
        }
        assert_eq!(sorted(all), (0..NA + NB).collect::<Vec<_>>(), "world {world}");
    }
    // The batch sampler: exact counts in every batch, every sample once.
    let (multi, _) = mixture(&s, SMALL);
    let bs = MultiDatasetBatchSampler::for_lengths(vec![NA, NB], 30)
        .with_samples_per_dataset(vec![25usize, 5])
        .with_replacement(false)
        .with_seed(3)
        .build()
        .unwrap();
    let l = DataLoader::builder(Dataset::new(multi).with_skip_validation(true))
        .with_batch_sampler(bs)
        .with_prefetch_factor(4)
        .build(&Device::flex())
        .unwrap();
    let batches = epoch(&l);
    assert_eq!(batches.len(), NA / 25);
    assert!(batches.iter().all(|b| per_store(b) == [25, 5]));
    assert_eq!(sorted(batches.concat()), (0..NA + NB).collect::<Vec<_>>());
}

#[test]
fn a_store_that_fits_its_share_keeps_a_permutation() {
    let s = stores();
    let (multi, kids) = mixture(&s, 8 << 20);
    // The small store is cached whole; the large one gets the rest.
    assert!(kids[1].cache_stats().budget >= kids[1].cache_fit_bytes());
    assert_eq!(kids.iter().map(|k| k.cache_stats().budget).sum::<u64>(), 8 << 20);
    let l = sample_loader(multi, weighted(vec![0.5, 0.5], Some(8_000), true), 0, 1);
    let pools = l.state().child_pool_blocks().map(<[_]>::to_vec);
    assert!(matches!(pools.as_deref(), Some([Some(_), None])), "{pools:?}");
}

#[test]
fn pool_sizes_are_saved_in_chunk_blocks_and_read_back_from_runs_of_four() {
    let s = stores();
    let (multi, _) = mixture(&s, SMALL);
    let l = sample_loader(multi, weighted(vec![NA as f64, NB as f64], None, false), 0, 1);
    let state = l.state();
    let pools = state.child_pool_blocks().map(<[_]>::to_vec).unwrap();
    assert!(pools.iter().all(|p| p.is_some_and(|k| k > 0 && k % 4 == 0)), "{pools:?}");
    let json = serde_json::to_value(&state).unwrap();
    assert_eq!(json["child_pool_chunk_blocks"], serde_json::json!(pools));
    // The same state with its pools counted in runs of four chunk blocks,
    // under the key that holds them so, loaded by a loader whose own cache
    // would pick other pools: it reads the saved order.
    let mut legacy = json.clone();
    let obj = legacy.as_object_mut().unwrap();
    obj.remove("child_pool_chunk_blocks");
    let runs: Vec<Option<usize>> = pools.iter().map(|p| p.map(|k| k / 4)).collect();
    obj.insert("child_pool_blocks".into(), serde_json::json!(runs));
    let legacy: atomzarr::LoaderState = serde_json::from_value(legacy).unwrap();
    let (multi, _) = mixture(&s, 64 << 20);
    let other = sample_loader(multi, weighted(vec![NA as f64, NB as f64], None, false), 0, 1);
    assert_ne!(other.state().child_pool_blocks().map(<[_]>::to_vec), Some(pools.clone()));
    other.load_state(&legacy).unwrap();
    assert_eq!(other.state().child_pool_blocks().map(<[_]>::to_vec), Some(pools));
    assert_eq!(epoch(&other), epoch(&l));
}

/// A reader's decoded size, for `a_store_that_fits_its_share_keeps_a_permutation`.
trait DecodedSize {
    fn cache_fit_bytes(&self) -> u64;
}

impl DecodedSize for AtomicDataZarrReader {
    fn cache_fit_bytes(&self) -> u64 {
        self.chunked().unwrap().cache_fit().decoded_bytes
    }
}

#[test]
fn counts_per_store_are_exact_passes_whole_and_epochs_reproducible() {
    let s = stores();
    let n = 20_000;
    let run = |epoch_no: u64, rank: usize, world: usize| {
        let (multi, _) = mixture(&s, SMALL);
        let l = sample_loader(multi, weighted(vec![0.5, 0.5], Some(n), true), rank, world);
        l.set_epoch(epoch_no);
        epoch(&l)
    };
    let one = run(0, 0, 1);
    let flat = one.concat();
    assert_eq!(per_store(&flat), [n / 2, n / 2]);
    // Store B (6,000 samples) is drawn 10,000 times: one whole pass first,
    // then a second, so no sample repeats before every one was drawn.
    let b_draws: Vec<usize> = flat.iter().copied().filter(|&i| i >= NA).collect();
    assert_eq!(sorted(b_draws[..NB].to_vec()), (NA..NA + NB).collect::<Vec<_>>());
    assert_eq!(b_draws[NB..].iter().collect::<BTreeSet<_>>().len(), n / 2 - NB);
    // Reproducible per (seed, epoch), another epoch another order.
    assert_eq!(run(0, 0, 1), one);
    assert_ne!(run(1, 0, 1), one);
    // Two ranks: the counts over the ranks are exact, each rank's within one.
    let ranks: Vec<Vec<usize>> = (0..2).map(|r| run(0, r, 2).concat()).collect();
    let counts: Vec<[usize; 2]> = ranks.iter().map(|r| per_store(r)).collect();
    assert_eq!(counts[0][0] + counts[1][0], n / 2);
    assert_eq!(counts[0][1] + counts[1][1], n / 2);
    assert!(counts.iter().all(|c| c[0].abs_diff(n / 4) <= 1 && c[1].abs_diff(n / 4) <= 1), "{counts:?}");
    // Without replacement, two ranks' samples of each store are disjoint.
    let m = 2 * (NB - 100);
    let norep: Vec<Vec<usize>> = (0..2)
        .map(|r| {
            let (multi, _) = mixture(&s, SMALL);
            epoch(&sample_loader(multi, weighted(vec![0.5, 0.5], Some(m), false), r, 2)).concat()
        })
        .collect();
    let (a, b): (BTreeSet<usize>, BTreeSet<usize>) =
        (norep[0].iter().copied().collect(), norep[1].iter().copied().collect());
    assert!(a.is_disjoint(&b));
    assert_eq!(a.len() + b.len(), m);
    assert_eq!(per_store(&[norep[0].clone(), norep[1].clone()].concat()), [m / 2, m / 2]);
}

#[test]
fn a_mixed_epoch_resumes_exactly_on_the_same_and_other_numbers_of_ranks() {
    let s = stores();
    let sampler = || weighted(vec![NA as f64, NB as f64], None, false);
    let steps = 40;
    // Four ranks read `steps` batches each; rank 0 saves the state.
    let mut read = Vec::new();
    let mut saved: Option<LoaderState> = None;
    for rank in 0..4 {
        let (multi, _) = mixture(&s, SMALL);
        let l = sample_loader(multi, sampler(), rank, 4);
        let mut it = l.iter_host();
        for _ in 0..steps {
            read.extend(it.next().unwrap().unwrap().indices.clone());
        }
        if rank == 0 {
            saved = Some(l.state());
        }
    }
    let saved = saved.unwrap();
    assert_eq!(saved.position(), steps * 4 * 32);
    assert_eq!(saved.order_world_size(), Some(4));
    let json = serde_json::to_string(&saved).unwrap();
    // Resumed on 4, 3 and 6 ranks, and with a cache where store B fits
    // (the saved pool sizes are followed): the rest of the epoch, once.
    for (world, budget) in [(4, SMALL), (3, SMALL), (6, SMALL), (3, 64 << 20)] {
        let mut all = read.clone();
        let mut resumed_states = Vec::new();
        for rank in 0..world {
            let (multi, _) = mixture(&s, budget);
            let l = sample_loader(multi, sampler(), rank, world);
            l.load_state(&serde_json::from_str(&json).unwrap()).unwrap();
            let mut it = l.iter_host();
            // Two steps, then a state: a second resume in the same epoch
            // onto 2 ranks must still read the rest once.
            for _ in 0..2 {
                all.extend(it.next().unwrap().unwrap().indices.clone());
            }
            resumed_states.push(l.state());
        }
        let again = resumed_states[0].clone();
        assert_eq!(again.position(), saved.position() + 2 * world * 32);
        for rank in 0..2 {
            let (multi, _) = mixture(&s, budget);
            let l = sample_loader(multi, sampler(), rank, 2);
            l.load_state(&again).unwrap();
            all.extend(epoch(&l).concat());
        }
        assert_eq!(sorted(all), (0..NA + NB).collect::<Vec<_>>(), "4 -> {world} -> 2, budget {budget}");
    }
}

#[test]
fn ranks_decode_about_their_share_of_each_store_and_the_cache_holds_one_budget() {
    let s = stores();
    // Every store's decoded bytes read once, in order, as the reference.
    let whole: Vec<u64> = {
        let (multi, kids) = mixture(&s, 1 << 30);
        let l = DataLoader::builder(Dataset::new(multi).with_skip_validation(true))
            .with_batch_size(256)
            .build(&Device::flex())
            .unwrap();
        epoch(&l);
        kids.iter().map(|k| k.chunked().unwrap().decode_counters().decoded_bytes).collect()
    };
    let world = 4;
    let mut per_rank = Vec::new();
    for rank in 0..world {
        let (multi, kids) = mixture(&s, SMALL);
        let l = sample_loader(multi, weighted(vec![NA as f64, NB as f64], None, false), rank, world);
        epoch(&l);
        per_rank.push(kids.iter().map(|k| k.chunked().unwrap().decode_counters().decoded_bytes).collect::<Vec<u64>>());
        // One budget: what the children's caches hold never passes it.
        let held: u64 = kids.iter().map(|k| k.cache_stats().bytes).sum();
        assert!(held <= SMALL, "held {held}");
        assert_eq!(kids.iter().map(|k| k.cache_stats().budget).sum::<u64>(), SMALL);
    }
    for d in 0..2 {
        for (rank, r) in per_rank.iter().enumerate() {
            // A quarter each (chunks at region ends and the pool's chunks
            // straddling blocks cost a little more); a permutation of the
            // whole store would decode several times the store.
            let share = r[d] as f64 / whole[d] as f64;
            assert!(share < 0.3, "store {d} rank {rank}: {share:.2} of the store");
        }
    }
}

#[test]
fn batches_mix_each_store() {
    let s = stores();
    let (multi, _) = mixture(&s, SMALL);
    let l = sample_loader(multi, weighted(vec![0.5, 0.5], Some(20_000), true), 0, 1);
    let batches = epoch(&l);
    // Among a batch's samples of one store, distinct windows of 0.1% of
    // that store (30 samples of A, 6 of B) per sample; a read in order
    // gives nearly 0, a uniform draw nearly 1.
    let mut mix: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
    for b in &batches[20..] {
        for (d, (lo, len)) in [(0, NA), (NA, NB)].into_iter().enumerate() {
            let w: Vec<usize> =
                b.iter().filter(|&&i| i >= lo && i < lo + len).map(|&i| (i - lo) * 1000 / len).collect();
            if !w.is_empty() {
                let distinct = w.iter().collect::<BTreeSet<_>>().len();
                let e = mix.entry(d).or_default();
                e.0 += distinct as f64 / w.len() as f64;
                e.1 += 1;
            }
        }
    }
    for (d, (sum, n)) in mix {
        assert!(sum / n as f64 >= 0.5, "store {d}: {:.2}", sum / n as f64);
    }
}

#[test]
fn a_store_drawn_several_times_over_is_cached_whole_and_decoded_once() {
    let s = stores();
    // Every store's decoded bytes read once, in order, as the reference.
    let whole: Vec<u64> = {
        let (multi, kids) = mixture(&s, 1 << 30);
        let l = DataLoader::builder(Dataset::new(multi).with_skip_validation(true))
            .with_batch_size(256)
            .build(&Device::flex())
            .unwrap();
        epoch(&l);
        kids.iter().map(|k| k.chunked().unwrap().decode_counters().decoded_bytes).collect()
    };
    // Half the draws from each: A is drawn half a pass, B 2.5 passes. In
    // equal parts of the budget neither fits; B fits whole if A gives up
    // what it would not use to save decoding (half a pass decodes about
    // half of A whatever its pool).
    let budget = whole[1] + whole[1] / 2;
    for shuffle in [true, false] {
        let (multi, kids) = mixture(&s, budget);
        let w = MultiDatasetSampler::for_lengths(vec![NA, NB])
            .with_weights(vec![0.5, 0.5])
            .with_num_samples(NA)
            .with_shuffle(shuffle)
            .with_seed(7)
            .build()
            .unwrap();
        let l = sample_loader(multi, w, 0, 1);
        let b_size = kids[1].chunked().unwrap().cache_fit().decoded_bytes;
        assert_eq!(kids[1].cache_stats().budget, b_size, "B's share is its decoded size");
        let got = epoch(&l).concat();
        assert_eq!(per_store(&got), [NA / 2, NA / 2]);
        let decoded: Vec<u64> = kids.iter().map(|k| k.chunked().unwrap().decode_counters().decoded_bytes).collect();
        // B once (a pool would decode it once per pass, 2.5 times).
        assert!(decoded[1] as f64 <= 1.05 * whole[1] as f64, "shuffle {shuffle}: B decoded {decoded:?} of {whole:?}");
        assert!(decoded[0] as f64 <= 0.75 * whole[0] as f64, "shuffle {shuffle}: A decoded {decoded:?} of {whole:?}");
        assert!(kids.iter().map(|k| k.cache_stats().bytes).sum::<u64>() <= budget);
    }
}

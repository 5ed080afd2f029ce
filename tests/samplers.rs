//! Samplers: size-aware packing, rank sharding, multi-dataset mixing
//! (issue: samplers, InMemoryReader and MultiReader).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use atomzarr::sampler::{
    BatchSampler, DistributedBatchSampler, DistributedSampler, EpochPolicy, ListSampler, MultiDatasetBatchSampler,
    MultiDatasetSampler, RandomSampler, Sampler, SamplerBatches, SequentialSampler, Shard, SizeAwareOptions,
    SizeAwareSampler,
};
use atomzarr::{AtomicDataZarrReader, AtomicDataZarrWriter, Dataset, Error, ZarrWriteConfig};

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

fn is_config<T>(r: atomzarr::Result<T>) -> bool {
    matches!(r, Err(Error::Config(_)))
}

/// Multiset of items as counts.
fn counts(items: impl IntoIterator<Item = usize>) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i).or_insert(0) += 1;
    }
    m
}

// ---------------------------------------------------------------- sharding

#[test]
fn distributed_sampler_shards_are_disjoint_and_cover_the_epoch() {
    for n in [0usize, 2, 12, 13, 29] {
        for r in [1usize, 3, 4] {
            let inner = RandomSampler::new(n, 11);
            for epoch in [0u64, 5] {
                let global = inner.indices(epoch);
                // Padding (default): equal shard sizes, union = epoch + its first `pad` items.
                let shards: Vec<Vec<usize>> =
                    (0..r).map(|k| DistributedSampler::new(inner, k, r).unwrap().indices(epoch)).collect();
                let per = n.div_ceil(r);
                assert!(shards.iter().all(|s| s.len() == per), "n {n} r {r}: {shards:?}");
                assert!((0..r).all(|k| DistributedSampler::new(inner, k, r).unwrap().len() == per));
                let total = per * r;
                let mut want: Vec<usize> = global.clone();
                want.extend(global.iter().cycle().take(total - n));
                assert_eq!(counts(shards.concat()), counts(want), "n {n} r {r}");
                if n % r == 0 {
                    assert_eq!(sorted(shards.concat()), sorted(global.clone()), "disjoint, covering");
                }
                // Rank k takes positions k, k + r, ... of the global epoch.
                if n >= r {
                    assert_eq!(shards[r - 1][0], global[r - 1]);
                }
                // drop_last: disjoint, n / r each, the tail of the epoch dropped.
                let dropped: Vec<Vec<usize>> = (0..r)
                    .map(|k| DistributedSampler::new(inner, k, r).unwrap().with_drop_last(true).indices(epoch))
                    .collect();
                assert!(dropped.iter().all(|s| s.len() == n / r));
                let flat = dropped.concat();
                assert_eq!(counts(flat.iter().copied()).values().max().copied().unwrap_or(1), 1, "disjoint");
                assert_eq!(sorted(flat), sorted(global[..n / r * r].to_vec()));
            }
        }
    }
}

#[test]
fn distributed_sampler_is_deterministic_per_epoch_and_changes_across_epochs() {
    let s = DistributedSampler::new(RandomSampler::new(50, 3), 2, 4).unwrap();
    assert_eq!(s.indices(7), s.indices(7));
    assert_ne!(s.indices(7), s.indices(8));
    let other_seed = DistributedSampler::new(RandomSampler::new(50, 4), 2, 4).unwrap();
    assert_ne!(s.indices(7), other_seed.indices(7));
    // A fixed list keeps its order and is only dealt out.
    let l = DistributedSampler::new(ListSampler::new(vec![9, 8, 7, 6, 5]), 1, 2).unwrap();
    assert_eq!(l.indices(0), vec![8, 6, 9]);
    assert_eq!(l.with_drop_last(true).indices(0), vec![8, 6]);
}

#[test]
fn distributed_batch_sampler_shards_whole_batches() {
    let inner = SamplerBatches::new(RandomSampler::new(40, 2), 4, false); // 10 batches
    for r in [2usize, 5, 3] {
        let shards: Vec<Vec<Vec<usize>>> =
            (0..r).map(|k| DistributedBatchSampler::new(inner.clone(), k, r).unwrap().batches(1)).collect();
        let global = inner.batches(1);
        let per = 10usize.div_ceil(r);
        assert!(shards.iter().all(|s| s.len() == per));
        let all: Vec<Vec<usize>> = shards.concat();
        let mut want = global.clone();
        want.extend(global.iter().take(per * r - 10).cloned());
        let key = |v: &Vec<Vec<usize>>| {
            let mut v = v.clone();
            v.sort();
            v
        };
        assert_eq!(key(&all), key(&want), "r {r}");
        if 10 % r == 0 {
            assert_eq!(sorted(all.concat()), (0..40).collect::<Vec<_>>(), "disjoint and covering");
        }
        let dropped: Vec<Vec<Vec<usize>>> = (0..r)
            .map(|k| DistributedBatchSampler::new(inner.clone(), k, r).unwrap().with_drop_last(true).batches(1))
            .collect();
        assert!(dropped.iter().all(|s| s.len() == 10 / r));
        let flat: Vec<usize> = dropped.concat().concat();
        assert_eq!(counts(flat.iter().copied()).values().max().copied(), Some(1), "disjoint");
        assert_eq!(flat.len(), 10 / r * r * 4);
    }
}

#[test]
fn sharding_errors() {
    assert!(is_config(Shard::new(0, 0)));
    assert!(is_config(Shard::new(4, 4)));
    assert!(is_config(DistributedSampler::new(SequentialSampler::new(3), 2, 2)));
    assert!(is_config(DistributedSampler::new(SequentialSampler::new(3), 0, 0)));
    assert!(is_config(DistributedBatchSampler::new(SamplerBatches::new(SequentialSampler::new(3), 1, false), 1, 1)));
    assert!(is_config(DistributedBatchSampler::new(SamplerBatches::new(SequentialSampler::new(3), 1, false), 0, 0)));
    assert!(Shard::new(3, 4).is_ok());
}

// -------------------------------------------------------------- size-aware

fn random_sizes(n: usize, seed: u64) -> Vec<(usize, usize)> {
    atomzarr::data::synth::generate(n, 1, 60, seed).unwrap().iter().map(|s| (s.num_atoms(), s.num_edges())).collect()
}

/// Checks limits and exactly-once use; returns the number of oversize batches.
fn check_size_aware(batches: &[Vec<usize>], sizes: &[(usize, usize)], o: &SizeAwareOptions) -> usize {
    let mut oversize = 0;
    for b in batches {
        assert!(!b.is_empty());
        let atoms: usize = b.iter().map(|&i| sizes[i].0).sum();
        let edges: usize = b.iter().map(|&i| sizes[i].1).sum();
        let within = o.max_atoms().is_none_or(|m| atoms <= m) && o.max_edges().is_none_or(|m| edges <= m);
        if !within {
            assert_eq!(
                b.len(),
                1,
                "only a lone oversize sample may exceed a limit: {b:?} ({atoms} atoms, {edges} edges)"
            );
            oversize += 1;
        }
        assert!(o.max_batch_size().is_none_or(|m| b.len() <= m));
    }
    assert_eq!(sorted(batches.concat()), (0..sizes.len()).collect::<Vec<_>>(), "every sample exactly once");
    oversize
}

#[test]
fn size_aware_batches_respect_limits_and_use_every_sample_once() {
    let sizes = random_sizes(700, 5);
    let options = [
        SizeAwareOptions::default().with_max_atoms(200).with_seed(1),
        SizeAwareOptions::default().with_max_edges(300).with_max_batch_size(9).with_seed(2),
        SizeAwareOptions::default().with_max_atoms(150).with_max_edges(400).with_max_batch_size(6).with_pack_size(64),
        SizeAwareOptions::default().with_max_batch_size(16).with_shuffle(false),
    ];
    for o in options {
        let s = SizeAwareSampler::new(sizes.clone(), o).unwrap();
        assert!(s.oversize().is_empty());
        for epoch in 0..4 {
            let b = s.batches(epoch);
            assert_eq!(check_size_aware(&b, &sizes, &o), 0);
        }
        assert_eq!(s.len(), s.batches(0).len());
    }
    // Packing is real: never more batches than filling greedily in order.
    let o = SizeAwareOptions::default().with_max_atoms(200).with_shuffle(false).with_pack_size(100_000);
    let s = SizeAwareSampler::new(sizes.clone(), o).unwrap();
    let mut greedy = 1;
    let mut acc = 0;
    for &(a, _) in &sizes {
        if acc + a > 200 {
            greedy += 1;
            acc = 0;
        }
        acc += a;
    }
    let packed = s.batches(0).len();
    assert!(packed < greedy, "first-fit decreasing {packed} vs greedy {greedy}");
    let total: usize = sizes.iter().map(|s| s.0).sum();
    assert!(packed <= total.div_ceil(200) + 2, "{packed} batches for {total} atoms");
}

#[test]
fn size_aware_hand_checked_packing_and_oversize() {
    // First-fit decreasing by atoms: 6 | 5 | 4 -> first | 3 -> second | 2 -> second.
    let sizes = vec![(6, 0), (5, 0), (4, 0), (3, 0), (2, 0)];
    let s = SizeAwareSampler::new(sizes, SizeAwareOptions::default().with_max_atoms(10).with_shuffle(false)).unwrap();
    assert_eq!(s.batches(0), vec![vec![0, 2], vec![1, 3, 4]]);
    assert_eq!(s.batches(9), s.batches(0), "no shuffle: epoch-independent");
    // Oversize samples ride alone; everything else stays within the limit.
    let sizes = vec![(3, 1), (25, 1), (4, 1), (2, 40), (5, 1), (30, 1)];
    let o = SizeAwareOptions::default().with_max_atoms(10).with_max_edges(20).with_seed(4);
    let s = SizeAwareSampler::new(sizes.clone(), o).unwrap();
    assert_eq!(s.oversize(), vec![1, 3, 5]);
    for epoch in 0..5 {
        let b = s.batches(epoch);
        assert_eq!(check_size_aware(&b, &sizes, &o), 3);
        for i in [1, 3, 5] {
            assert!(b.contains(&vec![i]), "oversize {i} alone in {b:?}");
        }
    }
    // max_batch_size alone.
    let s = SizeAwareSampler::new(vec![(1, 1); 10], SizeAwareOptions::default().with_max_batch_size(4)).unwrap();
    assert_eq!(s.batches(0).iter().map(Vec::len).collect::<Vec<_>>().iter().sum::<usize>(), 10);
    assert_eq!(s.len(), 3);
}

#[test]
fn size_aware_is_seeded_per_epoch() {
    let sizes = random_sizes(300, 8);
    let o = SizeAwareOptions::default().with_max_atoms(180).with_seed(21);
    let s = SizeAwareSampler::new(sizes.clone(), o).unwrap();
    assert_eq!(s.batches(3), s.batches(3));
    assert_eq!(s.batches(3), SizeAwareSampler::new(sizes.clone(), o).unwrap().batches(3));
    assert_ne!(s.batches(3), s.batches(4));
    assert_ne!(s.batches(3), SizeAwareSampler::new(sizes, o.with_seed(22)).unwrap().batches(3));
}

#[test]
fn size_aware_sizes_come_from_metadata_and_shard_across_ranks() {
    let dir = common::tmpdir();
    let path = dir.path().join("s.zarr");
    let samples = atomzarr::data::synth::generate(90, 2, 30, 3).unwrap();
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default()).unwrap().write(&samples).unwrap();
    let reader = AtomicDataZarrReader::open(&path).unwrap();
    reader.clear_cache();
    let o = SizeAwareOptions::default().with_max_atoms(100).with_max_edges(300).with_seed(6);
    let s = SizeAwareSampler::from_reader(&reader, o).unwrap();
    let want: Vec<(usize, usize)> = samples.iter().map(|x| (x.num_atoms(), x.num_edges())).collect();
    assert_eq!(s.sizes(), want.as_slice());
    assert_eq!(reader.cache_stats().misses, 0, "no field chunk was decoded");
    // A Dataset is a Reader too.
    let ds = Dataset::new(AtomicDataZarrReader::open(&path).unwrap());
    assert_eq!(SizeAwareSampler::from_reader(&ds, o).unwrap().sizes(), want.as_slice());
    // Rank shards of size-aware batches: equal counts, together the whole padded epoch.
    for epoch in 0..3 {
        let global = s.batches(epoch);
        let shards: Vec<Vec<Vec<usize>>> =
            (0..4).map(|k| DistributedBatchSampler::new(s.clone(), k, 4).unwrap().batches(epoch)).collect();
        let per = global.len().div_ceil(4);
        assert!(shards.iter().all(|x| x.len() == per));
        let seen = counts(shards.concat().concat());
        assert_eq!(seen.keys().copied().collect::<Vec<_>>(), (0..90).collect::<Vec<_>>(), "covering");
        let padded: usize = global.iter().take(per * 4 - global.len()).map(Vec::len).sum();
        assert_eq!(seen.values().sum::<usize>(), 90 + padded, "repeats are only the padding");
        for b in shards.concat() {
            let atoms: usize = b.iter().map(|&i| want[i].0).sum();
            assert!(atoms <= 100);
        }
    }
}

#[test]
fn size_aware_errors() {
    assert!(is_config(SizeAwareSampler::new(vec![(1, 1)], SizeAwareOptions::default())));
    assert!(is_config(SizeAwareSampler::new(vec![(1, 1)], SizeAwareOptions::default().with_max_atoms(0))));
    assert!(is_config(SizeAwareSampler::new(vec![(1, 1)], SizeAwareOptions::default().with_max_edges(0))));
    assert!(is_config(SizeAwareSampler::new(vec![(1, 1)], SizeAwareOptions::default().with_max_batch_size(0))));
    assert!(is_config(SizeAwareSampler::new(
        vec![(1, 1)],
        SizeAwareOptions::default().with_max_atoms(5).with_pack_size(0)
    )));
    let empty = SizeAwareSampler::new(vec![], SizeAwareOptions::default().with_max_atoms(5)).unwrap();
    assert!(empty.batches(0).is_empty());
    assert!(empty.is_empty());
}

// ------------------------------------------------------ multi-dataset batches

/// Child of a global index for children of `lengths`.
fn child_of(lengths: &[usize], g: usize) -> usize {
    let mut acc = 0;
    for (d, &l) in lengths.iter().enumerate() {
        acc += l;
        if g < acc {
            return d;
        }
    }
    panic!("global index {g} out of range");
}

fn per_child(lengths: &[usize], b: &[usize]) -> Vec<usize> {
    let mut c = vec![0; lengths.len()];
    for &g in b {
        c[child_of(lengths, g)] += 1;
    }
    c
}

#[test]
fn batch_sampler_exact_allocation_in_every_batch() {
    let lengths = vec![7, 20, 13];
    let s = MultiDatasetBatchSampler::for_lengths(lengths.clone(), 6)
        .with_samples_per_dataset(vec![1usize, 3, 2])
        .with_seed(1)
        .build()
        .unwrap();
    assert_eq!(s.samples_per_dataset(), &[1, 3, 2]);
    for epoch in 0..3 {
        let b = s.batches(epoch);
        assert_eq!(b.len(), s.len());
        for batch in &b {
            assert_eq!(per_child(&lengths, batch), vec![1, 3, 2], "{batch:?}");
        }
    }
    // Ratios (floats) are allocated over the batch size by largest remainder.
    let r = MultiDatasetBatchSampler::for_lengths(lengths.clone(), 8)
        .with_samples_per_dataset(vec![0.5, 0.25, 0.25])
        .build()
        .unwrap();
    assert_eq!(r.samples_per_dataset(), &[4, 2, 2]);
    assert!(r.batches(0).iter().all(|b| per_child(&lengths, b) == vec![4, 2, 2]));
    // Default: proportional to length.
    let p = MultiDatasetBatchSampler::for_lengths(vec![10, 30], 4).build().unwrap();
    assert_eq!(p.samples_per_dataset(), &[1, 3]);
    // Explicit weights and balanced.
    let w = MultiDatasetBatchSampler::for_lengths(vec![10, 30], 10).with_weights(vec![3.0, 2.0]).build().unwrap();
    assert_eq!(w.samples_per_dataset(), &[6, 4]);
    let b = MultiDatasetBatchSampler::for_lengths(vec![10, 30, 5], 4).with_balanced_weights().build().unwrap();
    assert_eq!(b.samples_per_dataset(), &[2, 1, 1]);
    assert!(b.batches(2).iter().all(|x| per_child(&[10, 30, 5], x) == vec![2, 1, 1]));
    // A dataset with count 0 never appears.
    let z = MultiDatasetBatchSampler::for_lengths(vec![10, 30], 3)
        .with_samples_per_dataset(vec![0usize, 3])
        .build()
        .unwrap();
    assert!(z.batches(0).concat().iter().all(|&g| g >= 10));
}

#[test]
fn batch_sampler_epoch_lengths_under_each_policy() {
    let lengths = vec![10, 30];
    let mk = |policy, replacement| {
        MultiDatasetBatchSampler::for_lengths(lengths.clone(), 4)
            .with_samples_per_dataset(vec![2usize, 2])
            .with_epoch_policy(policy)
            .with_replacement(replacement)
            .build()
    };
    // With replacement: ceil(40 / 4), min(ceil(10/2), ceil(30/2)), max(...).
    assert_eq!(mk(EpochPolicy::DatasetSize, true).unwrap().len(), 10);
    assert_eq!(mk(EpochPolicy::MinSize, true).unwrap().len(), 5);
    assert_eq!(mk(EpochPolicy::MaxSize, true).unwrap().len(), 15);
    // Without: dataset size falls back to min size; max size would oversample.
    assert_eq!(mk(EpochPolicy::DatasetSize, false).unwrap().len(), 5);
    assert_eq!(mk(EpochPolicy::MinSize, false).unwrap().len(), 5);
    assert!(is_config(mk(EpochPolicy::MaxSize, false)));
    for (policy, replacement, n) in
        [(EpochPolicy::DatasetSize, true, 10), (EpochPolicy::MaxSize, true, 15), (EpochPolicy::MinSize, false, 5)]
    {
        let s = mk(policy, replacement).unwrap();
        assert_eq!(s.batches(3).len(), n);
        assert!(s.batches(3).iter().all(|b| b.len() == 4));
    }
    // Rounding: 11 samples, 2 per batch -> 6 with replacement, 5 without.
    let odd = |replacement| {
        MultiDatasetBatchSampler::for_lengths(vec![11, 40], 4)
            .with_samples_per_dataset(vec![2usize, 2])
            .with_epoch_policy(EpochPolicy::MinSize)
            .with_replacement(replacement)
            .build()
            .unwrap()
            .len()
    };
    assert_eq!((odd(true), odd(false)), (6, 5));
    // MaxSize without replacement is fine when nothing needs oversampling.
    let even = MultiDatasetBatchSampler::for_lengths(vec![10, 30], 4)
        .with_samples_per_dataset(vec![1usize, 3])
        .with_epoch_policy(EpochPolicy::MaxSize)
        .with_replacement(false)
        .build()
        .unwrap();
    assert_eq!(even.len(), 10);
    // num_batches overrides the policy.
    let n = MultiDatasetBatchSampler::for_lengths(lengths.clone(), 4)
        .with_samples_per_dataset(vec![2usize, 2])
        .with_num_batches(7)
        .build()
        .unwrap();
    assert_eq!((n.len(), n.batches(0).len()), (7, 7));
}

#[test]
fn batch_sampler_replacement_semantics() {
    let lengths = vec![10, 30];
    // Without replacement: no sample twice; MinSize uses the small child exactly once.
    let s = MultiDatasetBatchSampler::for_lengths(lengths.clone(), 4)
        .with_samples_per_dataset(vec![2usize, 2])
        .with_replacement(false)
        .with_seed(5)
        .build()
        .unwrap();
    let flat = s.batches(1).concat();
    assert_eq!(counts(flat.iter().copied()).values().max().copied(), Some(1));
    assert_eq!(sorted(flat.into_iter().filter(|&g| g < 10).collect()), (0..10).collect::<Vec<_>>());
    // With replacement, MaxSize: the small child is walked three whole times.
    let s = MultiDatasetBatchSampler::for_lengths(lengths.clone(), 4)
        .with_samples_per_dataset(vec![2usize, 2])
        .with_epoch_policy(EpochPolicy::MaxSize)
        .with_seed(5)
        .build()
        .unwrap();
    let flat = s.batches(1).concat();
    let c = counts(flat.iter().copied());
    assert!((0..10).all(|g| c[&g] == 3), "{c:?}");
    assert!((10..40).all(|g| c[&g] == 1));
    // No shuffle: children walked in order, batch layout child by child.
    let seq = MultiDatasetBatchSampler::for_lengths(lengths, 4)
        .with_samples_per_dataset(vec![2usize, 2])
        .with_shuffle(false)
        .with_epoch_policy(EpochPolicy::MaxSize)
        .build()
        .unwrap();
    let b = seq.batches(0);
    assert_eq!(b[0], vec![0, 1, 10, 11]);
    assert_eq!(b[5], vec![0, 1, 20, 21], "the small child wraps");
    assert_eq!(seq.batches(7), b);
}

#[test]
fn batch_sampler_is_seeded_per_epoch() {
    let mk = |seed| MultiDatasetBatchSampler::for_lengths(vec![17, 23], 5).with_seed(seed).build().unwrap();
    let s = mk(9);
    assert_eq!(s.batches(2), s.batches(2));
    assert_eq!(s.batches(2), mk(9).batches(2));
    assert_ne!(s.batches(2), s.batches(3));
    assert_ne!(s.batches(2), mk(10).batches(2));
}

#[test]
fn batch_sampler_rank_shards_are_disjoint_and_cover() {
    let lengths = vec![12, 36];
    let mk = |r, k, drop_last| {
        MultiDatasetBatchSampler::for_lengths(lengths.clone(), 4)
            .with_samples_per_dataset(vec![1usize, 3])
            .with_replacement(false)
            .with_seed(2)
            .with_rank(k, r)
            .with_drop_last(drop_last)
            .build()
            .unwrap()
    };
    let global = mk(1, 0, false).batches(4);
    assert_eq!(global.len(), 12);
    assert_eq!(mk(1, 0, false).global_batches(4), global);
    for r in [2usize, 3, 4] {
        let shards: Vec<Vec<Vec<usize>>> = (0..r).map(|k| mk(r, k, false).batches(4)).collect();
        assert!(shards.iter().all(|s| s.len() == 12 / r));
        assert!((0..r).all(|k| mk(r, k, false).len() == 12 / r));
        let flat = shards.concat().concat();
        assert_eq!(sorted(flat), (0..48).collect::<Vec<_>>(), "disjoint, covering, r {r}");
        for s in &shards {
            assert!(s.iter().all(|b| per_child(&lengths, b) == vec![1, 3]));
        }
    }
    // 12 batches over 5 ranks: padding repeats batches 0 and 1 ... drop_last drops 2.
    let padded: Vec<Vec<Vec<usize>>> = (0..5).map(|k| mk(5, k, false).batches(4)).collect();
    assert!(padded.iter().all(|s| s.len() == 3));
    assert_eq!(padded[2][2], global[0]);
    assert_eq!(padded[3][2], global[1]);
    let dropped: Vec<Vec<Vec<usize>>> = (0..5).map(|k| mk(5, k, true).batches(4)).collect();
    assert!(dropped.iter().all(|s| s.len() == 2));
    let flat = dropped.concat().concat();
    assert_eq!(counts(flat.iter().copied()).values().max().copied(), Some(1));
    assert_eq!(flat.len(), 40);
}

#[test]
fn batch_sampler_errors() {
    let b = || MultiDatasetBatchSampler::for_lengths(vec![10, 30], 4);
    // Counts must sum to the batch size.
    let e = b().with_samples_per_dataset(vec![1usize, 2]).build().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("sum to 3")), "{e}");
    assert!(is_config(b().with_samples_per_dataset(vec![2usize, 3]).build()));
    // Weights and counts both given.
    let e = b().with_weights(vec![1.0, 1.0]).with_samples_per_dataset(vec![2usize, 2]).build().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("mutually exclusive")), "{e}");
    assert!(is_config(b().with_balanced_weights().with_samples_per_dataset(vec![0.5, 0.5]).build()));
    // max_size without replacement needing oversampling.
    let e = b()
        .with_samples_per_dataset(vec![2usize, 2])
        .with_epoch_policy(EpochPolicy::MaxSize)
        .with_replacement(false)
        .build()
        .unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("MaxSize")), "{e}");
    // Too many batches without replacement.
    assert!(is_config(
        b().with_samples_per_dataset(vec![2usize, 2]).with_replacement(false).with_num_batches(6).build()
    ));
    assert!(b().with_samples_per_dataset(vec![2usize, 2]).with_replacement(false).with_num_batches(5).build().is_ok());
    // Rank out of range, no replicas.
    let e = b().with_rank(2, 2).build().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("rank 2")), "{e}");
    assert!(is_config(b().with_rank(0, 0).build()));
    // Shape and domain errors.
    assert!(is_config(b().with_samples_per_dataset(vec![4usize]).build()));
    assert!(is_config(b().with_weights(vec![1.0]).build()));
    assert!(is_config(b().with_weights(vec![-1.0, 2.0]).build()));
    assert!(is_config(b().with_weights(vec![0.0, 0.0]).build()));
    assert!(is_config(b().with_weights(vec![f64::NAN, 1.0]).build()));
    assert!(is_config(b().with_num_batches(0).build()));
    assert!(is_config(MultiDatasetBatchSampler::for_lengths(vec![10, 30], 0).build()));
    assert!(is_config(
        MultiDatasetBatchSampler::for_lengths(vec![0, 30], 4).with_samples_per_dataset(vec![1usize, 3]).build()
    ));
    assert!(is_config(MultiDatasetBatchSampler::for_lengths(vec![0, 30], 4).with_balanced_weights().build()));
    assert!(is_config(
        MultiDatasetBatchSampler::for_lengths(vec![1, 30], 4)
            .with_samples_per_dataset(vec![2usize, 2])
            .with_replacement(false)
            .build()
    ));
}

// ------------------------------------------------------ multi-dataset samples

#[test]
fn sampler_mixes_by_rates_exactly() {
    let lengths = vec![10, 50, 40];
    let s = MultiDatasetSampler::for_lengths(lengths.clone())
        .with_weights(vec![2.0, 1.0, 1.0])
        .with_num_samples(80)
        .with_seed(3)
        .build()
        .unwrap();
    assert_eq!(s.counts(), &[40, 20, 20]);
    assert_eq!(s.len(), 80);
    for epoch in 0..3 {
        let idx = s.indices(epoch);
        assert_eq!(idx.len(), 80);
        assert_eq!(per_child(&lengths, &idx), vec![40, 20, 20]);
        // Child 0 (10 samples, 40 draws) is used in four whole passes.
        let c = counts(idx.iter().copied().filter(|&g| g < 10));
        assert!((0..10).all(|g| c[&g] == 4));
    }
    // Defaults: proportional to length, the whole index space, each sample once.
    let d = MultiDatasetSampler::for_lengths(lengths.clone()).with_seed(1).build().unwrap();
    assert_eq!(sorted(d.indices(0)), (0..100).collect::<Vec<_>>());
    assert_eq!(d.indices(0), d.indices(0));
    assert_ne!(d.indices(0), d.indices(1));
    assert_ne!(
        d.indices(0),
        MultiDatasetSampler::for_lengths(lengths.clone()).with_seed(2).build().unwrap().indices(0)
    );
    // Interleaved when shuffled: not child by child.
    assert_ne!(d.indices(0)[..10].iter().map(|&g| child_of(&lengths, g)).collect::<Vec<_>>(), vec![0; 10]);
    // No shuffle: child by child, in order.
    let seq = MultiDatasetSampler::for_lengths(vec![3, 2])
        .with_balanced_weights()
        .with_num_samples(4)
        .with_shuffle(false)
        .build()
        .unwrap();
    assert_eq!(seq.indices(5), vec![0, 1, 3, 4]);
    // Balanced without replacement within the smallest child.
    let b = MultiDatasetSampler::for_lengths(lengths.clone())
        .with_balanced_weights()
        .with_num_samples(30)
        .with_replacement(false)
        .build()
        .unwrap();
    assert_eq!(per_child(&lengths, &b.indices(0)), vec![10, 10, 10]);
    assert_eq!(counts(b.indices(0)).values().max().copied(), Some(1));
}

#[test]
fn sampler_rank_shards_and_errors() {
    let mk = |r, k| MultiDatasetSampler::for_lengths(vec![8, 16]).with_seed(4).with_rank(k, r).build().unwrap();
    let global = mk(1, 0).indices(2);
    assert_eq!(mk(1, 0).global_indices(2), global);
    for r in [2usize, 3, 4, 5] {
        let shards: Vec<Vec<usize>> = (0..r).map(|k| mk(r, k).indices(2)).collect();
        assert!(shards.iter().all(|s| s.len() == 24usize.div_ceil(r)));
        let mut want = global.clone();
        want.extend(global.iter().take(24usize.div_ceil(r) * r - 24).copied());
        assert_eq!(counts(shards.concat()), counts(want));
        if 24 % r == 0 {
            assert_eq!(sorted(shards.concat()), (0..24).collect::<Vec<_>>());
        }
    }
    let d = MultiDatasetSampler::for_lengths(vec![8, 16])
        .with_seed(4)
        .with_rank(1, 5)
        .with_drop_last(true)
        .build()
        .unwrap();
    assert_eq!((d.len(), d.indices(2).len()), (4, 4));
    let b = || MultiDatasetSampler::for_lengths(vec![8, 16]);
    assert!(is_config(b().with_rank(3, 3).build()));
    assert!(is_config(b().with_rank(0, 0).build()));
    let e = b().with_balanced_weights().with_num_samples(20).with_replacement(false).build().unwrap_err();
    assert!(matches!(&e, Error::Config(m) if m.contains("dataset 0")), "{e}");
    assert!(is_config(b().with_num_samples(0).build()));
    assert!(is_config(b().with_weights(vec![1.0, 2.0, 3.0]).build()));
    assert!(is_config(MultiDatasetSampler::for_lengths(vec![0, 16]).with_balanced_weights().build()));
}

/// One epoch's order is pinned: it depends only on atomzarr's own shuffle
/// and seeding and on PCG-64 (rand_pcg's documented, value-stable stream),
/// so a dependency update cannot silently reorder users' epochs.
#[test]
fn an_epochs_order_is_pinned() {
    use atomzarr::sampler::{RandomSampler, Sampler};
    let got = RandomSampler::new(12, 42).indices(3);
    assert_eq!(got, PINNED_12_42_3.to_vec());
}
/// `RandomSampler::new(12, 42).indices(3)` as first computed (never regenerate it
/// to make a failing test pass: a change here reorders every user's epochs).
const PINNED_12_42_3: [usize; 12] = [7, 2, 8, 3, 1, 10, 5, 6, 9, 4, 11, 0];

#[test]
fn size_aware_batches_on_a_store_larger_than_the_cache_stay_in_the_block_pool() {
    use atomzarr::sampler::ChunkShuffleSampler;
    let dir = common::tmpdir();
    let path = dir.path().join("big.zarr");
    let n = 20_000;
    let samples = atomzarr::data::synth::generate(n, 2, 30, 5).unwrap();
    let c = atomzarr::ZarrArrayConfig::default().with_chunk_size(2048);
    AtomicDataZarrWriter::create(&path, ZarrWriteConfig::default().with_core(c)).unwrap().write(&samples).unwrap();
    let sizes: Vec<(usize, usize)> = samples.iter().map(|x| (x.num_atoms(), x.num_edges())).collect();
    let o = SizeAwareOptions::default().with_max_atoms(400).with_seed(2);
    let open = |cache: u64| {
        atomzarr::AtomicDataZarrReader::open_opt(&path, atomzarr::ReaderOptions::default().with_cache_bytes(cache))
            .unwrap()
    };
    // A cache that holds the store: today's full-epoch packing.
    let whole = SizeAwareSampler::from_reader(&open(1 << 30), o).unwrap();
    assert!(whole.block_pool().is_none());
    // A cache of a tenth of the store: packed within the block pool.
    let small = open(1 << 20);
    let s = SizeAwareSampler::from_reader(&small, o).unwrap();
    let pool = s.block_pool().expect("a block pool on a store larger than the cache");
    let k = pool.pool_blocks();
    let starts = atomzarr::source::ChunkedReader::chunk_blocks(&small);
    let block_of = |i: usize| starts.partition_point(|&b| b <= i);
    for (name, sampler) in [("full epoch", &whole), ("block pool", &s)] {
        let batches = sampler.batches(1);
        let mut all = batches.concat();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "{name}: every sample once");
        let fill: f64 =
            batches.iter().map(|b| b.iter().map(|&i| sizes[i].0).sum::<usize>() as f64 / 400.0).sum::<f64>()
                / batches.len() as f64;
        // Reported in docs/PERFORMANCE.md: the mean fill of max_atoms.
        eprintln!("{name}: {} batches, mean fill of max_atoms {fill:.4}", batches.len());
        assert!(fill > 0.97, "{name}: mean fill {fill}");
        // A window of 8 consecutive batches: within the pool (plus the
        // blocks that replace used-up ones while a packing pool of 2,048
        // samples is drawn), or all over the store.
        let touched = |w: &[Vec<usize>]| w.concat().into_iter().map(block_of).collect::<BTreeSet<_>>().len();
        let widest = batches.chunks(8).map(touched).max().unwrap();
        let smallest = starts.windows(2).map(|w| w[1] - w[0]).min().unwrap();
        if name == "block pool" {
            let bound = k + 2 * (2048 / smallest + 1);
            assert!(widest <= bound, "{widest} blocks in a window, K = {k}, at most {bound}");
        } else {
            assert!(widest > 2 * k, "{widest} blocks in a window of the full-epoch packing");
        }
    }
    // The pool is the reader's, sized from its cache.
    let want = ChunkShuffleSampler::for_reader(&small, 64).unwrap();
    assert_eq!(pool.num_blocks(), want.num_blocks());
}

/// The counts a temperature gives, computed here from the formula:
/// rates (D_i / D)^(1/T) (or tempered weights), normalised, times the
/// samples, by largest remainder (ties to the lower index).
fn tempered_counts(w: &[f64], t: f64, total: usize) -> Vec<usize> {
    let sum: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|x| if *x > 0.0 { (x / sum).powf(1.0 / t) } else { 0.0 }).collect();
    let z: f64 = p.iter().sum();
    let raw: Vec<f64> = p.iter().map(|x| x / z * total as f64).collect();
    let mut c: Vec<usize> = raw.iter().map(|r| r.floor() as usize).collect();
    let mut by_rem: Vec<usize> = (0..w.len()).filter(|&d| p[d] > 0.0).collect();
    by_rem.sort_by(|&a, &b| (raw[b] - raw[b].floor()).total_cmp(&(raw[a] - raw[a].floor())).then(a.cmp(&b)));
    for &d in by_rem.iter().take(total - c.iter().sum::<usize>()) {
        c[d] += 1;
    }
    c
}

#[test]
fn temperature_counts_equal_the_formula() {
    let lengths = vec![1_000_000, 50_000, 2_000, 0, 700];
    for t in [0.5, 1.0, 2.0, 5.0, 100.0] {
        for total in [1, 999, 100_000] {
            let s = MultiDatasetSampler::for_lengths(lengths.clone())
                .with_temperature(t)
                .with_num_samples(total)
                .build()
                .unwrap();
            let w: Vec<f64> = lengths.iter().map(|&l| l as f64).collect();
            assert_eq!(s.counts(), tempered_counts(&w, t, total), "T {t}, {total} samples");
            assert_eq!(s.counts().iter().sum::<usize>(), total);
        }
    }
    // Tempered weights, and the batch sampler's rates per batch.
    let s = MultiDatasetSampler::for_lengths(vec![10, 10, 10])
        .with_weights(vec![0.7, 0.2, 0.1])
        .with_temperature(3.0)
        .with_num_samples(1000)
        .build()
        .unwrap();
    assert_eq!(s.counts(), tempered_counts(&[0.7, 0.2, 0.1], 3.0, 1000));
    let b = MultiDatasetBatchSampler::for_lengths(vec![9_000, 1_000], 64).with_temperature(2.0).build().unwrap();
    assert_eq!(b.samples_per_dataset(), tempered_counts(&[9_000.0, 1_000.0], 2.0, 64));
    // Uniform in the limit; refused where it would mean nothing.
    let u = MultiDatasetSampler::for_lengths(vec![1_000_000, 10]).with_temperature(f64::INFINITY).build().unwrap();
    assert_eq!(u.counts(), &[500_005, 500_005]);
    assert!(MultiDatasetSampler::for_lengths(vec![5, 5]).with_temperature(0.0).build().is_err());
    let counts = MultiDatasetBatchSampler::for_lengths(vec![5, 5], 4)
        .with_samples_per_dataset(vec![2usize, 2])
        .with_temperature(2.0)
        .build();
    assert!(matches!(counts, Err(atomzarr::Error::Config(_))));
}

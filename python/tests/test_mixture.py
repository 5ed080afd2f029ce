"""Several stores mixed: MultiDataset's index space and reads, the two
mixing samplers with the toolkit's arguments (exact counts, rates, epoch
policies, replacement, ratios, ranks, reproducible epochs), and the
DataLoader over a mixture (samples equal to the child stores' own, ranks,
the sampler's epoch, resume mid-epoch)."""

import math

import numpy as np
import pytest

import atomzarr
from conftest import random_samples, write_store

LENGTHS = (12, 30, 7)


@pytest.fixture
def stores(tmp_path):
    """Three stores of different random samples (seeds 1, 2, 3)."""
    readers = []
    for k, n in enumerate(LENGTHS):
        path = tmp_path / f"child{k}.zarr"
        write_store(path, n=n, seed=k + 1, chunk_size=4)
        readers.append(atomzarr.open(str(path)))
    return readers


@pytest.fixture
def multi(stores):
    return atomzarr.MultiDataset(*stores)


def child_of(g, lengths=LENGTHS):
    """The child a global index belongs to (computed here, not asked)."""
    for d, n in enumerate(lengths):
        if g < n:
            return d
        g -= n
    raise AssertionError(f"global index out of range: {g}")


def per_child(indices, lengths=LENGTHS):
    counts = [0] * len(lengths)
    for g in indices:
        counts[child_of(g, lengths)] += 1
    return counts


def largest_remainder(weights, total):
    """The toolkit's allocation of `total` by `weights` (ties to the lower index)."""
    s = sum(weights)
    raw = [w / s * total for w in weights]
    counts = [math.floor(r) for r in raw]
    order = sorted((d for d in range(len(weights)) if weights[d] > 0), key=lambda d: (-(raw[d] - counts[d]), d))
    for d in order[: total - sum(counts)]:
        counts[d] += 1
    return counts


def assert_sample_equal(got, want, what):
    assert sorted(got) == sorted(want), what
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v, err_msg=f"{what}: {k}")


def assert_batch_from_children(batch, multi):
    """Every sample of `batch` equals its child store's own read of it."""
    ap, ep = batch["atoms_ptr"], batch["edges_ptr"]
    offsets = multi.offsets
    for k, g in enumerate(batch["indices"].tolist()):
        d = child_of(g, multi.lengths)
        want = multi.datasets[d][g - offsets[d]]
        a0, a1, e0, e1 = ap[k], ap[k + 1], ep[k], ep[k + 1]
        what = f"sample {k} (global {g}, dataset {d})"
        for name in ("positions", "forces", "atomic_numbers", "shifts"):
            rows = batch[name][a0:a1] if name != "shifts" else batch[name][e0:e1]
            np.testing.assert_array_equal(rows, want[name], err_msg=f"{what}: {name}")
        np.testing.assert_array_equal(batch["neighbor_list"][e0:e1] - a0, want["neighbor_list"], err_msg=what)
        for name in ("energy", "cell", "pbc"):
            np.testing.assert_array_equal(batch[name][k : k + 1], want[name], err_msg=f"{what}: {name}")


def epoch(loader):
    return [b["indices"].tolist() for b in loader]


# ---------------------------------------------------------------------------
# MultiDataset


def test_index_space_and_reads_are_the_childrens(stores, multi):
    assert len(multi) == sum(LENGTHS)
    assert multi.lengths == list(LENGTHS)
    assert multi.offsets == (0, 12, 42, 49)
    assert multi.datasets[1] is stores[1]
    assert multi.to_local_index(12) == (1, 0)
    assert multi.to_local_index(-1) == (2, 6)
    assert multi.to_global_index(1, 29) == 41
    assert multi.to_global_index(-1, -1) == 48
    for g in range(len(multi)):
        d = child_of(g)
        assert multi.to_local_index(g) == (d, g - multi.offsets[d])
        assert_sample_equal(multi[g], stores[d][g - multi.offsets[d]], f"global {g}")
    assert_sample_equal(multi[-1], stores[2][6], "global -1")
    batch = multi.read_many([45, 0, 20, 13])
    assert batch["indices"].tolist() == [45, 0, 20, 13]
    assert_batch_from_children(batch, multi)
    with pytest.raises(IndexError):
        multi[len(multi)]
    with pytest.raises(IndexError):
        multi.to_global_index(1, 30)
    with pytest.raises(IndexError):
        multi.to_global_index(3, 0)
    with pytest.raises(IndexError):
        multi.read_many([0, 49])
    assert multi.fields == stores[0].fields


def test_dataset_index_names_each_samples_child(stores):
    multi = atomzarr.MultiDataset(*stores, dataset_index=True)
    assert multi[13]["dataset_index"].tolist() == [1]
    assert multi[11]["dataset_index"].tolist() == [0]
    b = multi.read_many([48, 0, 12])
    assert b["dataset_index"].tolist() == [2, 0, 1]
    assert_batch_from_children(b, atomzarr.MultiDataset(*stores))
    assert multi.fields["dataset_index"] == ("system", "int64", [])


def test_shared_cache_budget_reads_the_same_samples(stores):
    multi = atomzarr.MultiDataset(*stores, cache_bytes=0)
    loader = atomzarr.DataLoader(multi, batch_size=5, sampler="random", seed=1)
    seen = []
    for b in loader:
        assert_batch_from_children(b, multi)
        seen += b["indices"].tolist()
    assert sorted(seen) == list(range(len(multi)))


def test_a_store_larger_than_its_cache_share_keeps_exact_counts(stores):
    # No cache: every store is drawn through a block pool in the loader.
    multi = atomzarr.MultiDataset(*stores, cache_bytes=0)
    s = atomzarr.MultiDatasetSampler(multi, replacement=False, seed=3)
    loader = atomzarr.DataLoader(multi, batch_size=5, sampler=s)
    seen = []
    for b in loader:
        assert_batch_from_children(b, multi)
        seen += b["indices"].tolist()
    assert sorted(seen) == list(range(len(multi)))
    bs = atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[2, 3, 1], replacement=False)
    batches = epoch(atomzarr.DataLoader(multi, batch_sampler=bs))
    assert len(batches) == 6 and all(per_child(b) == [2, 3, 1] for b in batches)
    flat = [i for b in batches for i in b]
    assert len(set(flat)) == len(flat)


def test_bad_children_are_errors(tmp_path, stores):
    from conftest import random_samples

    path = str(tmp_path / "labels.zarr")
    with atomzarr.Writer(path) as w:
        w.write(random_samples(5, 9, labels=True), levels={"magmom": "atom"})
    other = atomzarr.open(path)
    with pytest.raises(ValueError, match="output_strict"):
        atomzarr.MultiDataset(stores[0], other)
    loose = atomzarr.MultiDataset(stores[0], other, output_strict=False)
    assert len(loose) == 12 + 5 and not loose.output_strict
    with pytest.raises(ValueError, match="at least one"):
        atomzarr.MultiDataset()
    with pytest.raises(TypeError, match=r"readers\[1\]"):
        atomzarr.MultiDataset(stores[0], "child1.zarr")


# ---------------------------------------------------------------------------
# MultiDatasetSampler


@pytest.mark.parametrize(
    "weights,num_samples",
    [(None, None), ((1.0, 1.0, 1.0), 40), ((0.7, 0.2, 0.1), 100), ((3, 0, 1), 9), ((1.0, 2.0, 0.5), 1)],
)
def test_sampler_draws_exact_counts_per_child(multi, weights, num_samples):
    s = atomzarr.MultiDatasetSampler(multi, weights=weights, num_samples=num_samples, seed=4)
    n = sum(LENGTHS) if num_samples is None else num_samples
    want = largest_remainder(list(LENGTHS) if weights is None else list(weights), n)
    assert s.counts == want
    assert s.num_samples == n and len(s) == n
    for e in range(3):
        s.set_epoch(e)
        idx = list(s)
        assert len(idx) == n
        assert per_child(idx) == want, f"epoch {e}"
        assert all(0 <= g < len(multi) for g in idx)


@pytest.mark.parametrize("t", [0.5, 1.0, 3.0, 1e9])
def test_temperature_counts_equal_the_formula(multi, t):
    total = sum(LENGTHS)
    rates = [(n / total) ** (1 / t) for n in LENGTHS]
    s = atomzarr.MultiDatasetSampler(multi, num_samples=1000, temperature=t)
    assert s.counts == largest_remainder(rates, 1000)
    assert per_child(list(s)) == s.counts
    assert s.weights == pytest.approx([r / sum(rates) for r in rates])
    bs = atomzarr.MultiDatasetBatchSampler(multi, 60, temperature=t)
    assert bs.samples_per_dataset == largest_remainder(rates, 60)
    with pytest.raises(ValueError, match="temperature"):
        atomzarr.MultiDatasetSampler(multi, temperature=0.0)


def test_sampler_rates_follow_the_weights(multi):
    s = atomzarr.MultiDatasetSampler(multi, weights=[2.0, 5.0, 3.0], num_samples=1000, seed=1)
    assert s.weights == pytest.approx([0.2, 0.5, 0.3])
    idx = list(s)
    rates = [c / len(idx) for c in per_child(idx)]
    assert rates == pytest.approx([0.2, 0.5, 0.3], abs=1e-9)
    default = atomzarr.MultiDatasetSampler(multi)
    assert default.weights == pytest.approx([n / sum(LENGTHS) for n in LENGTHS])


def test_sampler_oversamples_by_whole_passes(multi):
    # 60 draws of the 7-sample child: every sample of it exactly 60 / 7 rounded
    # down or up times, never one twice before all were used once.
    s = atomzarr.MultiDatasetSampler(multi, weights=[0, 0, 1], num_samples=60, seed=2)
    idx = [g - 42 for g in s]
    counts = np.bincount(idx, minlength=7)
    assert counts.min() == 60 // 7 and counts.max() == 60 // 7 + 1
    for start in range(0, 56, 7):
        assert sorted(idx[start : start + 7]) == list(range(7)), "a pass is a permutation of the child"


def test_sampler_without_replacement_never_repeats(multi):
    s = atomzarr.MultiDatasetSampler(multi, weights=[1, 1, 1], num_samples=21, replacement=False, seed=5)
    assert s.counts == [7, 7, 7]
    for e in range(4):
        s.set_epoch(e)
        idx = list(s)
        assert len(set(idx)) == len(idx) == 21, f"epoch {e} repeats an index"
    whole = atomzarr.MultiDatasetSampler(multi, replacement=False, seed=5)
    assert sorted(whole) == list(range(len(multi)))
    with pytest.raises(ValueError, match="replacement"):
        atomzarr.MultiDatasetSampler(multi, weights=[1, 1, 1], num_samples=30, replacement=False)


def test_sampler_epochs_are_reproducible_and_differ(multi):
    s = atomzarr.MultiDatasetSampler(multi, seed=7)
    assert s.epoch == 0
    e0 = list(s)
    assert list(s) == e0, "the same epoch twice"
    s.set_epoch(1)
    assert s.epoch == 1
    e1 = list(s)
    assert e1 != e0 and sorted(e1) == sorted(e0) == list(range(len(multi)))
    s.set_epoch(0)
    assert list(s) == e0
    again = atomzarr.MultiDatasetSampler(multi, seed=7)
    assert list(again) == e0, "the same (seed, epoch) in another sampler"
    assert list(atomzarr.MultiDatasetSampler(multi, seed=8)) != e0


def test_sampler_without_shuffle_walks_children_in_order(multi):
    s = atomzarr.MultiDatasetSampler(multi, weights=[1, 1, 1], num_samples=9, shuffle=False)
    assert list(s) == [0, 1, 2, 12, 13, 14, 42, 43, 44]


def test_sampler_ranks_are_disjoint_and_cover_the_epoch(multi):
    n = len(multi)  # 49 = 3 * 16 + 1
    full = list(atomzarr.MultiDatasetSampler(multi, replacement=False, seed=3))
    kw = dict(replacement=False, seed=3, num_replicas=3, order="toolkit")
    shards = [list(atomzarr.MultiDatasetSampler(multi, rank=r, **kw)) for r in range(3)]
    assert [len(x) for x in shards] == [17, 17, 17]
    # Padded from the start of the epoch, dealt every 3rd: the toolkit's (and torch's) shards.
    padded = full + full[:2]
    assert shards == [padded[r::3] for r in range(3)]
    dropped = [
        list(atomzarr.MultiDatasetSampler(multi, replacement=False, seed=3, num_replicas=3, rank=r, drop_last=True, order="toolkit"))
        for r in range(3)
    ]
    assert [len(x) for x in dropped] == [n // 3] * 3
    flat = [i for x in dropped for i in x]
    assert len(set(flat)) == len(flat) == 48 and set(flat) <= set(full)
    s = atomzarr.MultiDatasetSampler(multi, num_replicas=3, rank=1, order="toolkit")
    assert (s.rank, s.num_replicas, len(s)) == (1, 3, 17)


def test_sampler_arguments_are_checked(multi, stores):
    with pytest.raises(ValueError, match="weights"):
        atomzarr.MultiDatasetSampler(multi, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="weights"):
        atomzarr.MultiDatasetSampler(multi, weights=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="weights"):
        atomzarr.MultiDatasetSampler(multi, weights=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="num_samples"):
        atomzarr.MultiDatasetSampler(multi, num_samples=0)
    with pytest.raises(ValueError, match="rank"):
        atomzarr.MultiDatasetSampler(multi, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas"):
        atomzarr.MultiDatasetSampler(multi, num_replicas=0)
    with pytest.raises(ValueError, match="generator"):
        atomzarr.MultiDatasetSampler(multi, generator=object())
    with pytest.raises(ValueError, match="order"):
        atomzarr.MultiDatasetSampler(multi, order="torch")
    with pytest.raises(TypeError):
        atomzarr.MultiDatasetSampler(stores[0])


def test_distributed_manager_gives_the_ranks(multi):
    class Manager:
        world_size, rank = 4, 3

        def is_initialized(self):
            return True

    s = atomzarr.MultiDatasetSampler(multi, distributed_manager=Manager(), order="toolkit")
    assert (s.rank, s.num_replicas, len(s)) == (3, 4, 13)


# ---------------------------------------------------------------------------
# MultiDatasetBatchSampler

# LENGTHS (12, 30, 7) with (2, 3, 1) per batch of 6: a child lasts 6, 10 and 7
# batches (replacement: rounded up; without: down, the same here).
POLICIES = [
    # (epoch_policy, replacement, batches)
    ("dataset_size", True, math.ceil(49 / 6)),
    ("min_size", True, 6),
    ("max_size", True, 10),
    ("dataset_size", False, 6),
    ("min_size", False, 6),
]


@pytest.mark.parametrize("policy,replacement,batches", POLICIES)
def test_epoch_policies_size_the_epoch(multi, policy, replacement, batches):
    s = atomzarr.MultiDatasetBatchSampler(
        multi, batch_size=6, samples_per_dataset=[2, 3, 1], epoch_policy=policy, replacement=replacement, seed=1
    )
    assert s.num_batches == len(s) == batches and s.epoch_policy == policy
    got = list(s)
    assert len(got) == batches
    for b in got:
        assert per_child(b) == [2, 3, 1]
    if not replacement:
        flat = [i for b in got for i in b]
        assert len(set(flat)) == len(flat), "an index repeated without replacement"


def test_epoch_policy_errors(multi):
    with pytest.raises(ValueError, match="epoch_policy"):
        atomzarr.MultiDatasetBatchSampler(
            multi, batch_size=6, samples_per_dataset=[2, 3, 1], epoch_policy="max_size", replacement=False
        )
    with pytest.raises(ValueError, match="epoch_policy"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, epoch_policy="longest")
    with pytest.raises(ValueError, match="replacement"):
        atomzarr.MultiDatasetBatchSampler(
            multi, batch_size=6, samples_per_dataset=[2, 3, 1], num_batches=7, replacement=False
        )
    # max_size without replacement where no child would be oversampled.
    even = atomzarr.MultiDatasetBatchSampler(
        multi, batch_size=7, samples_per_dataset=[2, 5, 0], epoch_policy="max_size", replacement=False
    )
    assert len(even) == 6  # 12 // 2 == 30 // 5
    assert all(per_child(b) == [2, 5, 0] for b in even)


@pytest.mark.parametrize(
    "per_dataset,batch_size,want",
    [
        ([4, 1, 1], 6, [4, 1, 1]),
        ([0, 5, 0], 5, [0, 5, 0]),
        ([0.5, 0.25, 0.25], 8, [4, 2, 2]),
        ([1.0, 1, 1], 6, [2, 2, 2]),  # one float: every entry is a ratio
        ((1, 2.0, 0), 7, [2, 5, 0]),
        (np.array([0.6, 0.3, 0.1]), 10, [6, 3, 1]),
    ],
)
def test_samples_per_dataset_counts_and_ratios_are_exact_in_every_batch(multi, per_dataset, batch_size, want):
    s = atomzarr.MultiDatasetBatchSampler(multi, batch_size=batch_size, samples_per_dataset=per_dataset, seed=2)
    assert s.samples_per_dataset == want and s.batch_size == batch_size
    for e in range(2):
        s.set_epoch(e)
        batches = list(s)
        assert len(batches) == len(s) > 0
        for b in batches:
            assert len(b) == batch_size and per_child(b) == want


def test_batch_sampler_weights_and_balanced(multi):
    w = atomzarr.MultiDatasetBatchSampler(multi, batch_size=10, weights=[3.0, 1.0, 1.0])
    assert w.samples_per_dataset == [6, 2, 2]
    default = atomzarr.MultiDatasetBatchSampler(multi, batch_size=7)
    assert default.samples_per_dataset == largest_remainder(list(LENGTHS), 7)
    b = atomzarr.MultiDatasetBatchSampler.balanced(multi, batch_size=7, seed=1)
    assert b.samples_per_dataset == [3, 2, 2]
    assert isinstance(b, atomzarr.MultiDatasetBatchSampler)
    assert all(per_child(x) == [3, 2, 2] for x in b)


def test_batch_sampler_arguments_are_checked(multi):
    with pytest.raises(ValueError, match="sum"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[2, 2, 1])
    with pytest.raises(ValueError, match="samples_per_dataset"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[3, 3])
    with pytest.raises(ValueError, match="non-negative"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[4, 3, -1])
    with pytest.raises(TypeError, match="integral"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=2, samples_per_dataset=[True, 1, 0])
    with pytest.raises(TypeError, match="integral"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=2, samples_per_dataset=["1", 1, 0])
    with pytest.raises(ValueError, match="mutually exclusive"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, weights=[1, 1, 1], samples_per_dataset=[2, 2, 2])
    with pytest.raises(ValueError, match="batch_size"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=0)
    with pytest.raises(ValueError, match="num_batches"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, num_batches=0)
    with pytest.raises(ValueError, match="rank"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="generator"):
        atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, generator=object())


def test_batch_sampler_without_replacement_never_repeats(multi):
    s = atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[2, 3, 1], replacement=False, seed=9)
    for e in range(3):
        s.set_epoch(e)
        flat = [i for b in s for i in b]
        assert len(flat) == 36 and len(set(flat)) == 36, f"epoch {e}"


def test_batch_sampler_epochs_are_reproducible_and_differ(multi):
    mk = lambda seed: atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[2, 3, 1], seed=seed)
    s = mk(3)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    assert e0 != e1
    s.set_epoch(0)
    assert list(s) == e0 == list(mk(3))
    assert list(mk(4)) != e0


def test_batch_sampler_ranks_deal_whole_batches(multi):
    kw = dict(batch_size=6, samples_per_dataset=[2, 3, 1], seed=1, order="toolkit")  # 9 batches
    full = list(atomzarr.MultiDatasetBatchSampler(multi, **kw))
    assert len(full) == 9
    shards = [list(atomzarr.MultiDatasetBatchSampler(multi, num_replicas=2, rank=r, **kw)) for r in range(2)]
    padded = full + full[:1]
    assert shards == [padded[r::2] for r in range(2)]
    dropped = [
        list(atomzarr.MultiDatasetBatchSampler(multi, num_replicas=2, rank=r, drop_last=True, **kw)) for r in range(2)
    ]
    assert dropped == [full[:8][r::2] for r in range(2)]


# ---------------------------------------------------------------------------
# The DataLoader over a MultiDataset


@pytest.mark.parametrize("prefetch", [0, 3])
def test_loader_with_a_sampler_reads_the_childrens_samples(multi, prefetch):
    s = atomzarr.MultiDatasetSampler(multi, weights=[1, 2, 1], num_samples=40, seed=6)
    loader = atomzarr.DataLoader(multi, batch_size=6, sampler=s, prefetch_factor=prefetch)
    assert len(loader) == math.ceil(40 / 6)
    for e in range(2):
        s.set_epoch(e)
        order = list(s)
        got = []
        for b in loader:
            assert_batch_from_children(b, multi)
            got.append(b["indices"].tolist())
        assert got == [order[i : i + 6] for i in range(0, 40, 6)], f"epoch {e}"
        assert per_child([i for b in got for i in b]) == s.counts


def test_loader_with_a_batch_sampler_reads_its_batches(multi):
    s = atomzarr.MultiDatasetBatchSampler(multi, batch_size=6, samples_per_dataset=[1, 4, 1], seed=2)
    loader = atomzarr.DataLoader(multi, batch_sampler=s, prefetch_factor=2)
    assert len(loader) == len(s)
    got = []
    for b in loader:
        assert_batch_from_children(b, multi)
        assert per_child(b["indices"].tolist()) == [1, 4, 1]
        got.append(b["indices"].tolist())
    assert got == list(s)
    # The loader moved on to epoch 1, and so does its order.
    s.set_epoch(1)
    assert epoch(loader) == list(s) != got


def test_loader_follows_the_samplers_epoch(multi):
    s = atomzarr.MultiDatasetSampler(multi, seed=1)
    s.set_epoch(2)
    loader = atomzarr.DataLoader(multi, batch_size=7, sampler=s)
    assert loader.epoch == 2, "a setting made before the loader was built"
    assert [i for b in epoch(loader) for i in b] == list(s)
    s.set_epoch(3)
    assert loader.epoch == 3
    assert [i for b in epoch(loader) for i in b] == list(s)
    assert loader.epoch == 4
    loader.set_epoch(0)  # the loader's own setting overrules the sampler's earlier one
    s.set_epoch(0)
    assert [i for b in epoch(loader) for i in b] == list(s)


def test_loader_string_samplers_and_shuffle_over_a_mixture(multi):
    for kw in (dict(shuffle=True), dict(sampler="random"), dict(sampler="chunk-shuffle"), dict(sampler="sequential")):
        loader = atomzarr.DataLoader(multi, batch_size=5, seed=2, **kw)
        flat = [i for b in epoch(loader) for i in b]
        assert sorted(flat) == list(range(len(multi))), kw
    b = next(iter(atomzarr.DataLoader(multi, batch_size=len(multi))))
    assert_batch_from_children(b, multi)
    assert b["indices"].tolist() == list(range(len(multi)))


@pytest.mark.parametrize("kind", ["sampler", "batch_sampler"])
def test_loader_ranks_from_the_sampler_are_disjoint_and_cover(multi, kind):
    world = 3
    loaders = []
    for r in range(world):
        if kind == "sampler":
            s = atomzarr.MultiDatasetSampler(multi, replacement=False, seed=4, num_replicas=world, rank=r)
            loaders.append(atomzarr.DataLoader(multi, batch_size=4, sampler=s))
        else:
            # 6 batches of (2, 5, 0): the first two children exactly once.
            s = atomzarr.MultiDatasetBatchSampler(
                multi, 7, samples_per_dataset=[2, 5, 0], replacement=False, seed=4, num_replicas=world, rank=r
            )
            loaders.append(atomzarr.DataLoader(multi, batch_sampler=s))
    assert len({len(x) for x in loaders}) == 1, "every rank gets as many batches"
    want = list(range(len(multi))) if kind == "sampler" else list(range(42))
    for e in range(2):
        seen = []
        for r, loader in enumerate(loaders):
            for b in loader:
                assert_batch_from_children(b, multi)
                if kind == "batch_sampler":
                    assert per_child(b["indices"].tolist()) == [2, 5, 0]
                seen += b["indices"].tolist()
        assert sorted(seen) == want, f"epoch {e}: ranks overlap or miss samples"


@pytest.mark.parametrize("kind", ["sampler", "batch_sampler"])
def test_loader_ranks_with_drop_last_cut_the_epoch_evenly(multi, kind):
    world, loaders = 2, []
    for r in range(world):
        if kind == "sampler":  # 49 samples: 24 for each rank, 6 full batches
            s = atomzarr.MultiDatasetSampler(
                multi, replacement=False, seed=2, num_replicas=world, rank=r, drop_last=True
            )
            loaders.append(atomzarr.DataLoader(multi, batch_size=4, sampler=s))
        else:  # 9 batches: 4 for each rank
            s = atomzarr.MultiDatasetBatchSampler(
                multi, batch_size=6, samples_per_dataset=[2, 3, 1], seed=2, num_replicas=world, rank=r, drop_last=True
            )
            loaders.append(atomzarr.DataLoader(multi, batch_sampler=s))
    batches = [epoch(x) for x in loaders]
    want = 6 if kind == "sampler" else 4
    assert [len(b) for b in batches] == [want, want] == [len(x) for x in loaders]
    sizes = {len(b) for rank in batches for b in rank}
    assert sizes == ({4} if kind == "sampler" else {6}), "every batch full"
    flat = [i for rank in batches for b in rank for i in b]
    if kind == "sampler":
        assert len(set(flat)) == len(flat) == 48, "ranks overlap"
    s = atomzarr.MultiDatasetSampler(multi, num_samples=1, num_replicas=2, drop_last=True)
    with pytest.raises(ValueError, match="drop_last"):
        atomzarr.DataLoader(multi, batch_size=4, sampler=s)


@pytest.mark.parametrize("cache_bytes", [None, 0], ids=["permutations", "block-pools"])
@pytest.mark.parametrize("order", ["loader", "toolkit"])
@pytest.mark.parametrize("kind", ["sampler", "batch_sampler"])
def test_iterating_a_sampler_yields_what_the_loader_reads(stores, kind, order, cache_bytes):
    multi = atomzarr.MultiDataset(*stores, cache_bytes=cache_bytes)
    for shuffle in (True, False):
        for world in (1, 2, 3):
            seen = []
            for r in range(world):
                kw = dict(seed=4, shuffle=shuffle, num_replicas=world, rank=r, order=order, replacement=False)
                if kind == "sampler":
                    s = atomzarr.MultiDatasetSampler(multi, weights=[0.3, 0.6, 0.1], num_samples=30, **kw)
                    read = [i for b in epoch(atomzarr.DataLoader(multi, batch_size=4, sampler=s)) for i in b]
                    said = list(s)
                    seen += said
                else:
                    s = atomzarr.MultiDatasetBatchSampler(multi, 6, samples_per_dataset=[1, 4, 1], **kw)
                    read = epoch(atomzarr.DataLoader(multi, batch_sampler=s))
                    said = list(s)
                    seen += [i for b in said for i in b]
                what = f"{kind} {order} shuffle={shuffle} rank {r} of {world}"
                assert read == said, what
                assert len(s) == len(said), what
                assert s.order == order
            if order == "loader":
                # The ranks together read the epoch once (no padding).
                assert len(seen) == len(set(seen)), f"{kind} shuffle={shuffle} world {world}"


def test_loader_rank_must_agree_with_the_samplers(multi):
    s = atomzarr.MultiDatasetSampler(multi, num_replicas=2, rank=1)
    atomzarr.DataLoader(multi, batch_size=4, sampler=s, rank=1, world_size=2)
    with pytest.raises(ValueError, match="rank"):
        atomzarr.DataLoader(multi, batch_size=4, sampler=s, rank=0, world_size=2)


@pytest.mark.parametrize("cache_bytes", [None, 0], ids=["permutations", "block-pools"])
@pytest.mark.parametrize("kind", ["sampler", "batch_sampler"])
def test_resume_mid_epoch_from_a_saved_state(stores, kind, cache_bytes):
    multi = atomzarr.MultiDataset(*stores, cache_bytes=cache_bytes)

    def build(seed=5):
        if kind == "sampler":
            s = atomzarr.MultiDatasetSampler(multi, weights=[1, 1, 1], num_samples=45, seed=seed)
            return atomzarr.DataLoader(multi, batch_size=4, sampler=s, prefetch_factor=3)
        s = atomzarr.MultiDatasetBatchSampler(multi, batch_size=5, samples_per_dataset=[1, 3, 1], seed=seed)
        return atomzarr.DataLoader(multi, batch_sampler=s, prefetch_factor=3)

    loader = build()
    loader.set_epoch(2)
    full = epoch(loader)
    assert len(full) > 6
    loader.set_epoch(2)
    it = iter(loader)
    head = [next(it)["indices"].tolist() for _ in range(5)]
    state = loader.state_dict()
    assert state["epoch"] == 2
    del it
    resumed = build()
    resumed.load_state_dict(state)
    rest = epoch(resumed)
    assert head + rest == full
    assert len(rest) == len(full) - 5
    # The next epoch goes on as the uninterrupted run's.
    loader.set_epoch(3)
    assert epoch(resumed) == epoch(loader)
    with pytest.raises(atomzarr.AtomzarrError, match="seed"):
        build(seed=6).load_state_dict(state)
    with pytest.raises(atomzarr.AtomzarrError, match="mixing"):
        atomzarr.DataLoader(multi, batch_size=4).load_state_dict(state)


def test_loader_arguments_with_mixing_samplers_are_checked(multi, stores):
    s = atomzarr.MultiDatasetSampler(multi)
    bs = atomzarr.MultiDatasetBatchSampler(multi, batch_size=4)
    with pytest.raises(ValueError, match="MultiDataset"):
        atomzarr.DataLoader(stores[0], batch_size=4, sampler=s)
    with pytest.raises(ValueError, match="shuffle"):
        atomzarr.DataLoader(multi, batch_size=4, sampler=s, shuffle=True)
    with pytest.raises(ValueError, match="batch_size"):
        atomzarr.DataLoader(multi, batch_size=4, batch_sampler=bs)
    with pytest.raises(ValueError, match="drop_last"):
        atomzarr.DataLoader(multi, batch_sampler=bs, drop_last=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        atomzarr.DataLoader(multi, sampler=s, batch_sampler=bs)
    with pytest.raises(TypeError, match="batch_sampler"):
        atomzarr.DataLoader(multi, sampler=bs)
    with pytest.raises(TypeError, match="batch_sampler"):
        atomzarr.DataLoader(multi, batch_sampler=[[0, 1]])
    with pytest.raises(TypeError, match="reader"):
        atomzarr.DataLoader([stores[0]])
    smaller = atomzarr.MultiDataset(stores[0], stores[1])
    with pytest.raises(ValueError, match="lengths"):
        atomzarr.DataLoader(smaller, batch_size=4, sampler=s)


def test_stores_with_different_labels_mix_as_the_union_with_flags(tmp_path):
    """A periodic store with stress (absent, NaN, on every fourth frame) and
    a molecular store without cell, pbc, shifts or stress but with an int
    label of its own: the loader's batches equal a model of the written
    samples, with `<name>_present` flags, `dataset_index` and `loss_weight`."""
    rng = np.random.default_rng(5)
    periodic = []
    for k in range(20):
        s = random_samples(1, seed=100 + k)[0]
        s["stress"] = np.full((3, 3), np.nan if k % 4 == 1 else 0.01 * k, np.float32)
        periodic.append(s)
    molecules = []
    for k in range(14):
        s = random_samples(1, seed=200 + k)[0]
        for name in ("cell", "pbc", "shifts"):
            del s[name]
        s["charge_state"] = np.array([k % 3 - 1], np.int64)
        molecules.append(s)
    for name, samples in (("p", periodic), ("m", molecules)):
        with atomzarr.Writer(str(tmp_path / f"{name}.zarr")) as w:
            w.write(samples, levels={"charge_state": "system"} if name == "m" else None)
    readers = [atomzarr.open(str(tmp_path / f"{n}.zarr")) for n in ("p", "m")]
    with pytest.raises(ValueError):
        atomzarr.MultiDataset(*readers)  # output_strict refuses different fields
    multi = atomzarr.MultiDataset(*readers, output_strict=False, dataset_index=True, loss_weights=[2.0, 0.5])
    fields = multi.fields
    assert fields["stress_present"] == ("system", "bool", [])
    assert fields["loss_weight"] == ("system", "float32", [])
    assert "energy_present" not in fields and "cell_present" not in fields
    sampler = atomzarr.MultiDatasetSampler(multi, weights=[0.5, 0.5], num_samples=34, seed=int(rng.integers(100)))
    loader = atomzarr.DataLoader(multi, batch_size=5, sampler=sampler)
    np_ = len(periodic)
    seen = 0
    for b in loader:
        for k, i in enumerate(b["indices"]):
            i = int(i)
            own = periodic[i] if i < np_ else molecules[i - np_]
            stress_here = i < np_ and not np.isnan(own["stress"]).any()
            assert bool(b["stress_present"][k]) == stress_here
            assert np.isnan(b["stress"][k]).all() == (not stress_here)
            if stress_here:
                np.testing.assert_array_equal(b["stress"][k], own["stress"])
            assert bool(b["charge_state_present"][k]) == (i >= np_)
            want_charge = own["charge_state"][0] if i >= np_ else -(2**31)
            assert int(np.ravel(b["charge_state"][k])[0]) == want_charge
            if i >= np_:
                assert not np.asarray(b["cell"][k]).any() and not np.asarray(b["pbc"][k]).any()
            assert float(b["loss_weight"][k]) == (2.0 if i < np_ else 0.5)
            assert int(b["dataset_index"][k]) == (0 if i < np_ else 1)
            seen += 1
    assert seen == 34

"""The DataLoader: every sample once per epoch, epochs reshuffled, ranks
disjoint, resume mid-epoch, neighbor lists built while loading."""

import numpy as np
import pytest

import atomzarr


def epoch(loader):
    return [b["indices"].tolist() for b in loader]


@pytest.mark.parametrize("sampler", ["random", "sequential", "chunk-shuffle"])
@pytest.mark.parametrize("prefetch", [0, 1, 4])
def test_every_sample_once_per_epoch(store, sampler, prefetch):
    loader = atomzarr.DataLoader(store, batch_size=7, seed=3, prefetch_factor=prefetch, sampler=sampler)
    batches = epoch(loader)
    assert len(batches) == len(loader) == -(-len(store) // 7)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(store)))
    if sampler == "sequential":
        assert flat == list(range(len(store)))
    else:
        assert flat != list(range(len(store)))
        second = [i for b in epoch(loader) for i in b]
        assert sorted(second) == sorted(flat) and second != flat, "each epoch has its own order"


def test_batches_hold_what_read_many_reads(store):
    loader = atomzarr.DataLoader(store, batch_size=5, shuffle=True, seed=1, prefetch_factor=2)
    for b in loader:
        want = store.read_many(b["indices"].tolist())
        assert sorted(b) == sorted(want)
        for k, v in want.items():
            np.testing.assert_array_equal(b[k], v, err_msg=k)


def test_ranks_split_every_epoch(store):
    seen = []
    for rank in range(3):
        loader = atomzarr.DataLoader(store, batch_size=4, shuffle=True, seed=9, rank=rank, world_size=3)
        seen += [i for b in epoch(loader) for i in b]
    assert sorted(seen) == list(range(len(store)))


def test_in_order_ranks_read_contiguous_ranges_or_the_toolkits_rounds(store):
    n, world, b = len(store), 3, 4
    for rank in range(world):
        ranges = [i for x in epoch(atomzarr.DataLoader(store, batch_size=b, rank=rank, world_size=world)) for i in x]
        assert ranges == list(range(n * rank // world, n * (rank + 1) // world)), f"rank {rank}: its own range"
        rounds = epoch(
            atomzarr.DataLoader(store, batch_size=b, rank=rank, world_size=world, sampler="sequential-interleaved")
        )
        # Rounds of world * b samples, rank r taking the r-th part of each.
        want, start = [], 0
        while start < n:
            size = min(world * b, n - start)
            want.append(list(range(start + size * rank // world, start + size * (rank + 1) // world)))
            start += size
        assert rounds == want, f"rank {rank}: the toolkit's rounds"


def test_set_epoch_replays_an_epochs_order(store):
    loader = atomzarr.DataLoader(store, batch_size=6, shuffle=True, seed=2)
    first, second = epoch(loader), epoch(loader)
    assert loader.epoch == 2
    loader.set_epoch(1)
    assert epoch(loader) == second
    loader.set_epoch(0)
    assert epoch(loader) == first


def test_resume_mid_epoch_from_a_saved_state(store):
    loader = atomzarr.DataLoader(store, batch_size=6, shuffle=True, seed=5, prefetch_factor=3)
    loader.set_epoch(2)
    full = epoch(loader)
    loader.set_epoch(2)
    it = iter(loader)
    head = [next(it)["indices"].tolist() for _ in range(4)]
    state = loader.state_dict()
    assert state["epoch"] == 2
    del it
    resumed = atomzarr.DataLoader(store, batch_size=6, shuffle=True, seed=5, prefetch_factor=3)
    resumed.load_state_dict(state)
    assert head + epoch(resumed) == full
    other = atomzarr.DataLoader(store, batch_size=6, shuffle=True, seed=6)
    with pytest.raises(atomzarr.AtomzarrError, match="seed"):
        other.load_state_dict(state)


def test_bad_loader_options_are_errors(store):
    with pytest.raises(ValueError, match="sampler"):
        atomzarr.DataLoader(store, sampler="nope")
    with pytest.raises(ValueError, match="choose one"):
        atomzarr.DataLoader(store, sampler="sequential", shuffle=True)
    with pytest.raises(atomzarr.AtomzarrError, match="rank"):
        atomzarr.DataLoader(store, rank=2, world_size=2)
    with pytest.raises(atomzarr.AtomzarrError, match="cutoff"):
        atomzarr.DataLoader(store, cutoff=-1.0)


def test_lists_built_while_loading_equal_lists_stored_at_import(assets, tmp_path):
    files = [str(assets / "import" / f) for f in ("bulk_triclinic.extxyz", "slab.extxyz", "molecule.extxyz")]
    stored, plain = str(tmp_path / "edges.zarr"), str(tmp_path / "plain.zarr")
    report = atomzarr.import_files(files, stored, cutoff=4.0)
    assert report["edges"] > 0 and report["frames"] == len(atomzarr.open(stored))
    atomzarr.import_files(files, plain)
    a = atomzarr.DataLoader(atomzarr.open(plain), batch_size=3, cutoff=4.0)
    b = atomzarr.DataLoader(atomzarr.open(stored), batch_size=3)
    for x, y in zip(a, b):
        for k in ("neighbor_list", "shifts", "edges_ptr", "positions"):
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def test_split_and_stats_as_the_command_line(assets, tmp_path):
    path = str(tmp_path / "s.zarr")
    atomzarr.import_files([str(assets / "import" / "stats.extxyz")], path)
    n = len(atomzarr.open(path))
    sp = atomzarr.split(path, fractions="train=0.5,val=0.5", seed=1, save="main")
    parts = sp["splits"]
    assert sorted(parts["train"] + parts["val"]) == list(range(n))
    assert atomzarr.split(path, fractions="train=0.5,val=0.5", seed=1)["splits"] == parts
    whole = atomzarr.stats(path)
    train = atomzarr.stats(path, split="main", part="train")
    assert whole["num_samples"] == n and train["num_samples"] == len(parts["train"])


def test_batches_view_the_rust_buffers_without_a_copy(store):
    b = next(iter(atomzarr.DataLoader(store, batch_size=8)))
    for k in ("positions", "atomic_numbers", "neighbor_list", "atoms_ptr"):
        a = b[k]
        # numpy does not own the memory: the Rust buffer, moved into the
        # array's base object, is what it views.
        root = a
        while isinstance(root, np.ndarray):
            assert not root.flags["OWNDATA"], k
            root = root.base
        assert root is not None and not isinstance(root, np.ndarray), k
        assert a.flags["C_CONTIGUOUS"], k


def test_batch_buffers_come_back_when_python_frees_them_and_held_ones_stay(tmp_path):
    import gc

    from conftest import write_store

    write_store(tmp_path / "pool.zarr", n=3000, chunk_size=64)
    r = atomzarr.open(str(tmp_path / "pool.zarr"))
    loader = atomzarr.DataLoader(r, batch_size=1000, seed=2, shuffle=True, prefetch_factor=2)
    held = list(loader)  # one epoch's batches, kept alive
    keys = ("positions", "forces", "neighbor_list")
    copies = [{k: b[k].copy() for k in keys} for b in held]
    for _ in range(3):
        for _b in loader:  # later epochs, each batch freed before the next
            pass
    gc.collect()
    assert r.batch_buffer_bytes() > 0, "freed batches gave no buffer back"
    for b, c in zip(held, copies):
        ref = r.read_many(b["indices"].tolist())  # an independent read
        for k in keys:
            np.testing.assert_array_equal(b[k], c[k], err_msg=f"{k} of a held batch changed")
            np.testing.assert_array_equal(b[k], ref[k], err_msg=f"{k} differs from read_many")


def test_the_cache_reports_what_it_holds_within_its_budget(tmp_path):
    from conftest import write_store

    write_store(tmp_path / "held.zarr", n=600, chunk_size=64)
    path = str(tmp_path / "held.zarr")
    for budget in (0, 4096, 1 << 30):
        r = atomzarr.open(path, cache_bytes=budget)
        assert r.cache_bytes_held() == 0, "nothing read yet"
        for _b in atomzarr.DataLoader(r, batch_size=64, shuffle=True, seed=1):
            pass
        held = r.cache_bytes_held()
        assert held <= budget
        if budget == 1 << 30:
            assert held > 0, "a cache larger than the store keeps what was read"
    # A mixture's caches: the sum of its children's.
    a, b = atomzarr.open(path), atomzarr.open(path)
    ds = atomzarr.MultiDataset(a, b)
    for _b in atomzarr.DataLoader(ds, batch_size=64, shuffle=True, seed=1):
        pass
    assert a.cache_bytes_held() > 0 and b.cache_bytes_held() > 0
    assert ds.cache_bytes_held() == a.cache_bytes_held() + b.cache_bytes_held()


def test_a_reader_holds_the_pointer_pages_it_read(tmp_path):
    from conftest import write_store

    # Pointer pages of 64 entries: ten of them for 600 samples.
    write_store(tmp_path / "pages.zarr", n=600, chunk_size=64)
    r = atomzarr.open(str(tmp_path / "pages.zarr"))
    page = 64 * 4 + 256  # a page's entries at up to 4 bytes, and its own fields
    at_open = r.pointer_bytes_held()
    assert 0 < at_open <= 2 * page, "open reads the last page of each pointer array"
    r.read_many(list(range(10)))
    first = r.pointer_bytes_held()
    assert at_open < first <= 2 * 2 * page, "the first page of each array joins the last"
    r.read_many(list(range(600)))
    assert first < r.pointer_bytes_held() <= 2 * 10 * page

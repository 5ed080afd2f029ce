"""Errors raise their own exception classes, with the Rust error's message
naming the store (missing, locked, corrupt, not a store, bad indices)."""

import os

import numpy as np
import pytest

import atomzarr


def small_store(path, n=4):
    samples = [{"atomic_numbers": [1, 8], "positions": np.full((2, 3), k, np.float32), "energy": -1.0 * k} for k in range(n)]
    config = {"core": {"codec": {"name": "none"}}}
    with atomzarr.Writer(str(path), config) as w:
        w.write(samples)


def test_a_missing_store(tmp_path):
    path = str(tmp_path / "nothing.zarr")
    with pytest.raises(atomzarr.StoreNotFoundError, match="nothing.zarr"):
        atomzarr.open(path)
    assert issubclass(atomzarr.StoreNotFoundError, atomzarr.AtomzarrError)


def test_a_locked_store(tmp_path):
    path = tmp_path / "s.zarr"
    small_store(path)
    w = atomzarr.Writer(str(path))
    with pytest.raises(atomzarr.StoreLockedError, match="s.zarr"):
        atomzarr.Writer(str(path))
    w.close()
    atomzarr.Writer(str(path)).close()  # free again


def test_a_corrupt_chunk_is_a_checksum_error(tmp_path):
    path = tmp_path / "s.zarr"
    small_store(path)
    chunks = sorted(p for p in (path / "core" / "positions").rglob("*") if p.is_file() and p.name != "zarr.json")
    assert chunks
    data = bytearray(chunks[0].read_bytes())
    data[len(data) // 3] ^= 0x40
    chunks[0].write_bytes(bytes(data))
    r = atomzarr.open(str(path), cache_bytes=0)
    with pytest.raises(atomzarr.ChecksumError, match="core/positions"):
        r[0]
    with pytest.raises(atomzarr.ChecksumError):
        r.read_many([0, 1])
    with pytest.raises(atomzarr.ChecksumError):
        list(atomzarr.DataLoader(r, batch_size=2))


def test_verify_lists_every_corrupt_chunk_and_nothing_on_a_clean_store(tmp_path):
    path = tmp_path / "s.zarr"
    small_store(path, n=4)
    assert atomzarr.open(str(path)).verify() == []
    flipped = []
    for field in ("positions", "energy"):
        chunks = sorted(p for p in (path / "core" / field).rglob("*") if p.is_file() and p.name != "zarr.json")
        data = bytearray(chunks[0].read_bytes())
        data[-1] ^= 0x40
        chunks[0].write_bytes(bytes(data))
        flipped.append("core/" + field)
    faults = atomzarr.open(str(path), cache_bytes=0).verify()
    assert sorted(f["array"] for f in faults) == sorted(flipped)
    for f in faults:
        assert f["store"] == str(path) and f["chunk"] == 0 and f["sample"] is None
        assert "checksum" in f["reason"]


def test_not_a_store_and_bad_indices(tmp_path):
    os.makedirs(tmp_path / "plain")
    (tmp_path / "plain" / "zarr.json").write_text("{not json")
    with pytest.raises(atomzarr.AtomzarrError, match="plain"):
        atomzarr.open(str(tmp_path / "plain"))
    path = tmp_path / "s.zarr"
    small_store(path)
    r = atomzarr.open(str(path))
    with pytest.raises(IndexError, match="out of range"):
        r[4]
    with pytest.raises(IndexError):
        r[-5]
    with pytest.raises(IndexError, match="4"):
        r.read_many([0, 4])
    with pytest.raises(OverflowError):
        r.read_many([-1])


def test_bad_write_configs(tmp_path):
    with pytest.raises(ValueError, match="write config"):
        atomzarr.Writer(str(tmp_path / "a.zarr"), {"core": {"codec": {"name": "lzma"}}})
    with pytest.raises(atomzarr.AtomzarrError, match="shard_size"):
        atomzarr.Writer(str(tmp_path / "b.zarr"), {"core": {"chunk_size": 10, "shard_size": 15}})
    assert not (tmp_path / "a.zarr").exists() and not (tmp_path / "b.zarr").exists()

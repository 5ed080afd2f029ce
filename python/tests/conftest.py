import pathlib

import pytest

ASSETS = pathlib.Path(__file__).resolve().parents[2] / "assets"


@pytest.fixture
def assets():
    return ASSETS


def write_store(path, n=60, seed=0, chunk_size=8):
    """A store of `n` random small structures (chunks of `chunk_size`
    samples' rows), for the loader tests."""
    import numpy as np

    import atomzarr

    rng = np.random.default_rng(seed)
    samples = []
    for k in range(n):
        atoms = int(rng.integers(2, 12))
        edges = int(rng.integers(1, 20))
        samples.append(
            {
                "atomic_numbers": rng.integers(1, 90, atoms),
                "positions": rng.normal(size=(atoms, 3)).astype(np.float32),
                "forces": rng.normal(size=(atoms, 3)).astype(np.float32),
                "energy": float(k),
                "cell": np.eye(3) * 10.0,
                "pbc": [False, False, False],
                "neighbor_list": rng.integers(0, atoms, (edges, 2)),
                "shifts": np.zeros((edges, 3), np.float32),
            }
        )
    config = {"core": {"chunk_size": chunk_size * 8}, "meta": {"chunk_size": chunk_size}}
    with atomzarr.Writer(str(path), config) as w:
        w.write(samples)
    return samples


@pytest.fixture
def store(tmp_path):
    import atomzarr

    write_store(tmp_path / "loader.zarr")
    return atomzarr.open(str(tmp_path / "loader.zarr"))

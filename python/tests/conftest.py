import pathlib

import pytest

ASSETS = pathlib.Path(__file__).resolve().parents[2] / "assets"


@pytest.fixture
def assets():
    return ASSETS


def random_samples(n, seed=0, labels=False):
    """`n` random small structures with energies, forces, a cell and
    neighbor lists; with `labels`, string labels (`config_type`, per-atom
    `site`) and a custom atom field `magmom` too."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        atoms = int(rng.integers(1, 12))
        edges = int(rng.integers(0, 20))
        s = {
            "atomic_numbers": rng.integers(1, 90, atoms),
            "positions": rng.normal(size=(atoms, 3)).astype(np.float32),
            "forces": rng.normal(size=(atoms, 3)).astype(np.float32),
            "energy": float(rng.normal()),
            "cell": np.eye(3) * 5.0,
            "pbc": [True, True, k % 2 == 0],
            "neighbor_list": rng.integers(0, atoms, (edges, 2)),
            "shifts": np.zeros((edges, 3), np.float32),
        }
        if labels:
            s["magmom"] = rng.normal(size=(atoms, 1)).astype(np.float32)
            s["config_type"] = f"type{k % 3}"
            s["site"] = [f"s{j}" for j in range(atoms)]
        out.append(s)
    return out


def write_store(path, n=60, seed=0, chunk_size=8):
    """A store of `random_samples(n)` in chunks of about `chunk_size`
    samples (the loader tests)."""
    import atomzarr

    config = {"core": {"chunk_size": chunk_size * 8}, "meta": {"chunk_size": chunk_size}}
    with atomzarr.Writer(str(path), config) as w:
        w.write(random_samples(n, seed))


@pytest.fixture
def store(tmp_path):
    import atomzarr

    write_store(tmp_path / "loader.zarr")
    return atomzarr.open(str(tmp_path / "loader.zarr"))

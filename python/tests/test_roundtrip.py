"""Writer → reader round trips against the samples written (a model of the
expected state), soft deletes, string labels, custom fields and ase.Atoms."""

import numpy as np
import pytest

import atomzarr
from conftest import random_samples


def make_samples(n, seed=0):
    return random_samples(n, seed, labels=True)


def assert_sample(got, want, what):
    assert got["config_type"] == want["config_type"], what
    assert got["site"] == want["site"], what
    np.testing.assert_array_equal(got["atomic_numbers"], np.asarray(want["atomic_numbers"], np.int64), err_msg=what)
    assert got["atomic_numbers"].dtype == np.int64
    np.testing.assert_array_equal(got["positions"], want["positions"], err_msg=what)
    np.testing.assert_array_equal(got["forces"], want["forces"], err_msg=what)
    np.testing.assert_array_equal(got["energy"], np.float32(want["energy"]).reshape(1, 1), err_msg=what)
    np.testing.assert_array_equal(got["cell"], (np.eye(3) * 5.0).astype(np.float32).reshape(1, 3, 3), err_msg=what)
    np.testing.assert_array_equal(got["pbc"], np.array([want["pbc"]]), err_msg=what)
    np.testing.assert_array_equal(got["neighbor_list"], want["neighbor_list"].reshape(-1, 2), err_msg=what)
    np.testing.assert_array_equal(got["magmom"], want["magmom"], err_msg=what)


def test_write_append_delete_read(tmp_path):
    path = str(tmp_path / "s.zarr")
    samples = make_samples(30)
    with atomzarr.Writer(path, {"core": {"codec": {"name": "zstd", "level": 5}, "chunk_size": 8}}) as w:
        w.write(samples[:20], levels={"magmom": "atom"})
    with atomzarr.Writer(path) as w:
        w.append(samples[20:], levels={"magmom": "atom"})
        w.delete([3, 17])
    kept = [s for i, s in enumerate(samples) if i not in (3, 17)]
    r = atomzarr.open(path)
    assert len(r) == len(kept)
    for i, want in enumerate(kept):
        assert_sample(r[i], want, f"sample {i}")
    b = r.read_many([5, 0, 27])
    assert b["config_type"] == [kept[i]["config_type"] for i in (5, 0, 27)]
    np.testing.assert_array_equal(b["positions"], np.concatenate([kept[i]["positions"] for i in (5, 0, 27)]))


def test_a_written_sample_is_what_a_second_reader_sees_after_refresh(tmp_path):
    path = str(tmp_path / "s.zarr")
    samples = make_samples(4)
    w = atomzarr.Writer(path)
    w.write(samples[:2], levels={"magmom": "atom"})
    r = atomzarr.open(path)
    assert len(r) == 2
    w.append(samples[2:], levels={"magmom": "atom"})
    w.close()
    r.refresh()
    assert len(r) == 4
    assert_sample(r[3], samples[3], "appended")


def test_bad_samples_are_refused_with_the_sample_named(tmp_path):
    w = atomzarr.Writer(str(tmp_path / "s.zarr"))
    with pytest.raises(ValueError, match="sample 1"):
        w.write([make_samples(1)[0], {"positions": np.zeros((1, 3))}])
    with pytest.raises(TypeError):
        w.write([object()])
    s = make_samples(1)[0]
    s["mystery"] = np.zeros(len(s["atomic_numbers"]) + 7)
    with pytest.raises(ValueError, match="mystery"):
        w.write([s])
    w.close()
    with pytest.raises(atomzarr.AtomzarrError, match="closed"):
        w.write(make_samples(1))


def test_ase_atoms_are_written_with_their_labels(tmp_path):
    ase = pytest.importorskip("ase")
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = ase.Atoms("H2O", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]], cell=[4, 4, 4], pbc=True)
    atoms.calc = SinglePointCalculator(atoms, energy=-14.2, forces=np.arange(9.0).reshape(3, 3))
    atoms.info["config_type"] = "water"
    path = str(tmp_path / "a.zarr")
    with atomzarr.Writer(path) as w:
        w.write([atoms])
    s = atomzarr.open(path)[0]
    np.testing.assert_array_equal(s["atomic_numbers"], [1, 1, 8])
    np.testing.assert_allclose(s["positions"], atoms.positions, rtol=1e-6)
    np.testing.assert_allclose(s["forces"], np.arange(9.0).reshape(3, 3))
    np.testing.assert_allclose(s["energy"], [[-14.2]], rtol=1e-6)
    assert s["config_type"] == "water"
    assert s["pbc"].tolist() == [[True, True, True]]

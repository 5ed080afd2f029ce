"""The toolkit's own stores (assets/, written by nvalchemi-toolkit 0.3.0) read
exactly as its reader returns them (assets/*.expected.json)."""

import json

import numpy as np
import pytest

import atomzarr

FIXTURES = ["nva_default", "nva_sharded_zstd", "nva_custom_deleted"]


def expected(assets, name):
    return json.loads((assets / f"{name}.expected.json").read_text())


def assert_field(got, want, what):
    assert got.dtype == np.dtype(want["dtype"]), what
    assert list(got.shape) == want["shape"], what
    np.testing.assert_array_equal(got.reshape(-1), np.array(want["data"], dtype=want["dtype"]), err_msg=what)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_sample_equals_the_toolkits(assets, name):
    want = expected(assets, name)
    r = atomzarr.open(str(assets / f"{name}.zarr"), skip_validation=True)
    assert len(r) == want["num_samples"]
    for i, ws in enumerate(want["samples"]):
        s = r[i]
        assert sorted(s) == sorted(ws), f"{name}[{i}]"
        for field, wf in ws.items():
            assert_field(s[field], wf, f"{name}[{i}].{field}")
    # Negative indices count from the end, as for a list.
    np.testing.assert_array_equal(r[-1]["positions"], r[len(r) - 1]["positions"])
    levels = {k: v[0] for k, v in r.fields.items()}
    assert levels == want["fields"]


@pytest.mark.parametrize("name", FIXTURES)
def test_read_many_concatenates_samples_and_rebases_edges(assets, name):
    want = expected(assets, name)["samples"]
    r = atomzarr.open(str(assets / f"{name}.zarr"), skip_validation=True)
    # The toolkit wrote the second half with `append`, whose neighbor lists
    # are off by the first half's atoms (its append bug): a batch refuses them.
    with pytest.raises(atomzarr.AtomzarrError, match="append bug"):
        r.read_many([0, len(want) - 1])
    idx = [7, 0, 3, len(want) // 2 - 3, 3]
    b = r.read_many(idx)
    assert b["num_graphs"] == len(idx)
    np.testing.assert_array_equal(b["indices"], idx)
    atoms = [len(want[i]["atomic_numbers"]["data"]) for i in idx]
    edges = [want[i]["neighbor_list"]["shape"][0] for i in idx]
    np.testing.assert_array_equal(b["atoms_ptr"], np.concatenate([[0], np.cumsum(atoms)]))
    np.testing.assert_array_equal(b["edges_ptr"], np.concatenate([[0], np.cumsum(edges)]))
    np.testing.assert_array_equal(b["graph_index"], np.repeat(np.arange(len(idx)), atoms))
    for field in ["positions", "atomic_numbers", "energy", "cell", "shifts"]:
        parts = [np.array(want[i][field]["data"], dtype=want[i][field]["dtype"]).reshape(want[i][field]["shape"]) for i in idx]
        np.testing.assert_array_equal(b[field], np.concatenate(parts), err_msg=field)
    # Neighbor lists: each sample's local indices moved by its first atom.
    nl = [np.array(want[i]["neighbor_list"]["data"]).reshape(-1, 2) + off for i, off in zip(idx, b["atoms_ptr"][:-1])]
    np.testing.assert_array_equal(b["neighbor_list"], np.concatenate(nl))

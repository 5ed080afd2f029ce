"""atomzarr.torch.to_torch: tensors that share the batch's memory on the CPU."""

import numpy as np
import pytest

import atomzarr

torch = pytest.importorskip("torch", reason="no torch wheel for this platform: to_torch not tested")
from atomzarr.torch import to_torch  # noqa: E402


def test_to_torch_shares_memory_on_the_cpu(store):
    b = next(iter(atomzarr.DataLoader(store, batch_size=8, shuffle=True, seed=1)))
    t = to_torch(b, "cpu")
    assert t["num_graphs"] == b["num_graphs"] == 8
    for k, v in b.items():
        if isinstance(v, np.ndarray):
            assert isinstance(t[k], torch.Tensor), k
            assert t[k].numpy().dtype == v.dtype, k
            np.testing.assert_array_equal(t[k].numpy(), v, err_msg=k)
    assert t["positions"].dtype == torch.float32 and t["neighbor_list"].dtype == torch.int64
    b["positions"][0, 0] = 123.0
    assert t["positions"][0, 0].item() == 123.0, "no copy on the CPU"
    # A disjoint-graph sum over atoms per graph, as a model's readout does it.
    per_graph = torch.zeros(8).index_add_(0, t["graph_index"], torch.ones(len(t["graph_index"])))
    np.testing.assert_array_equal(per_graph.numpy(), np.diff(b["atoms_ptr"]))

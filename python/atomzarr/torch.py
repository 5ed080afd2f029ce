"""Batches as torch tensors. torch is imported here only, so the rest of
atomzarr works without it."""

from typing import Any, Dict, Union

import numpy as np
import torch


class TorchBatch(dict):
    """A batch of tensors: a dict whose items are also attributes
    (``batch.positions``), with the toolkit ``Batch``'s names for the graph
    layout as well: ``batch_idx`` (``graph_index``) and ``batch_ptr``
    (``atoms_ptr``), the same tensors. Code written against the toolkit's
    batches reads these unchanged."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def to_torch(
    batch: Dict[str, Any],
    device: Union[str, "torch.device"] = "cpu",
    pin_memory: bool = True,
    non_blocking: bool = True,
) -> TorchBatch:
    """Every numpy array of ``batch`` as a tensor on ``device``; other values
    (string labels, ``num_graphs``) as they are. The result is a
    :class:`TorchBatch`.

    On the CPU the tensors share the arrays' memory (``torch.from_numpy``: no
    copy). For a CUDA device each array is copied once into pinned memory
    (``pin_memory``) and sent with ``non_blocking`` copies, which overlap
    the training step; without a CUDA runtime, ``pin_memory`` is ignored.
    """
    device = torch.device(device)
    pin = pin_memory and device.type == "cuda" and torch.cuda.is_available()
    out = TorchBatch()
    for k, v in batch.items():
        if isinstance(v, np.ndarray):
            t = torch.from_numpy(v)
            if device.type != "cpu":
                if pin:
                    t = t.pin_memory()
                t = t.to(device, non_blocking=non_blocking and pin)
            out[k] = t
        else:
            out[k] = v
    if "graph_index" in out:
        out["batch_idx"] = out["graph_index"]
    if "atoms_ptr" in out:
        out["batch_ptr"] = out["atoms_ptr"]
    return out

"""atomzarr from Python: fast reads of nvalchemi-toolkit Zarr stores.

The reader, loader, writer and import are atomzarr's Rust code (reads run on
Rust threads with the GIL released); samples and batches are dicts of numpy
arrays that own the Rust buffers (no second copy).

>>> import atomzarr
>>> r = atomzarr.open("train.zarr")                      # doctest: +SKIP
>>> sample = r[0]                                        # doctest: +SKIP
>>> loader = atomzarr.DataLoader(r, batch_size=64, shuffle=True, prefetch_factor=16)  # doctest: +SKIP
>>> for batch in loader: ...                             # doctest: +SKIP

Several stores mix through a ``MultiDataset`` and the toolkit's samplers:

>>> multi = atomzarr.MultiDataset(atomzarr.open("a.zarr"), atomzarr.open("b.zarr"))  # doctest: +SKIP
>>> sampler = atomzarr.MultiDatasetBatchSampler(multi, batch_size=4, samples_per_dataset=(3, 1))  # doctest: +SKIP
>>> loader = atomzarr.DataLoader(multi, batch_sampler=sampler)  # doctest: +SKIP
"""

from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

import numpy as np

from ._atomzarr import (
    AtomzarrError,
    ChecksumError,
    DataLoader,
    MultiDataset,
    MultiDatasetBatchSampler,
    MultiDatasetSampler,
    Reader,
    StoreLockedError,
    StoreNotFoundError,
    ValidationError,
    __version__,
    _Writer,
    import_files,
    open,
    split,
    stats,
)

__all__ = [
    "AtomzarrError",
    "ChecksumError",
    "DataLoader",
    "MultiDataset",
    "MultiDatasetBatchSampler",
    "MultiDatasetSampler",
    "Reader",
    "StoreLockedError",
    "StoreNotFoundError",
    "ValidationError",
    "Writer",
    "import_files",
    "open",
    "split",
    "stats",
    "__version__",
]

# The toolkit's dtype for each of its own fields (what its reader returns).
_DTYPES = {
    "atomic_numbers": np.int64,
    "atom_categories": np.int64,
    "neighbor_list": np.int64,
    "pbc": np.bool_,
}
# System fields and the shape of one sample's value in the toolkit's layout.
_SYSTEM_SHAPES = {
    "energy": (1, 1),
    "cell": (1, 3, 3),
    "stress": (1, 3, 3),
    "virial": (1, 3, 3),
    "pbc": (1, 3),
    "dipole": (1, 3),
    "charge": (1, 1),
    "spin": (1, 1),
}


def _from_atoms(atoms: Any) -> Dict[str, Any]:
    """An ``ase.Atoms`` as a sample dict: numbers, positions, cell, pbc,
    the calculator's energy, forces and stress when it has them, and the
    ``info`` entries that are numbers or strings."""
    from ase.stress import voigt_6_to_full_3x3_stress

    d: Dict[str, Any] = {
        "atomic_numbers": atoms.get_atomic_numbers(),
        "positions": atoms.get_positions(),
        "cell": np.asarray(atoms.get_cell()),
        "pbc": atoms.get_pbc(),
    }
    calc = atoms.calc
    if calc is not None:
        results = getattr(calc, "results", {})
        if "energy" in results:
            d["energy"] = results["energy"]
        if "forces" in results:
            d["forces"] = results["forces"]
        if "stress" in results:
            s = np.asarray(results["stress"])
            d["stress"] = voigt_6_to_full_3x3_stress(s) if s.shape == (6,) else s
    for k, v in atoms.info.items():
        if k in d:
            continue
        if isinstance(v, str):
            d[k] = v
        elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            d[k] = v
    return d


def _prepare(samples: Iterable[Any]) -> List[Dict[str, Any]]:
    """Samples normalized for the native writer; a bad one is named."""
    out = []
    for k, s in enumerate(samples):
        try:
            out.append(_normalize(s))
        except (TypeError, ValueError) as e:
            raise type(e)(f"sample {k}: {e}") from e
    return out


def _normalize(sample: Any) -> Dict[str, Any]:
    """A sample as the native writer takes it: arrays in the toolkit's
    dtypes and shapes (positions and other floats as float32)."""
    if not isinstance(sample, Mapping):
        if type(sample).__name__ == "Atoms" and hasattr(sample, "get_positions"):
            sample = _from_atoms(sample)
        else:
            raise TypeError(f"a sample is a dict of arrays or an ase.Atoms, not {type(sample).__name__}")
    out: Dict[str, Any] = {}
    for name, value in sample.items():
        if isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(x, str) for x in value)):
            out[name] = value
            continue
        a = np.asarray(value)
        if name in _DTYPES:
            a = a.astype(_DTYPES[name], copy=False)
        elif a.dtype == np.float64:
            a = a.astype(np.float32)
        elif a.dtype.kind in "iu" and a.dtype.itemsize < 8 and a.ndim == 0:
            a = a.astype(np.int64)
        if name in _SYSTEM_SHAPES:
            a = a.reshape(_SYSTEM_SHAPES[name])
        elif a.ndim == 0:
            a = a.reshape(1)
        out[name] = np.ascontiguousarray(a)
    return out


class Writer:
    """Writes a store: created when ``path`` has none, else opened to append.
    Holds the store's lock (one writer at a time) until ``close()`` or the end
    of a ``with`` block.

    ``config``: the write configuration as a dict (or JSON string), the
    serialized ``ZarrWriteConfig``, e.g. ``{"core": {"codec": {"zstd": {"level": 9}}}}``.
    Samples are dicts ``{field: array | str}`` or ``ase.Atoms``; ``levels``
    names the level (``"atom"``, ``"edge"``, ``"system"``) of custom fields
    whose rows do not tell it.
    """

    def __init__(self, path: str, config: Optional[Union[Mapping[str, Any], str]] = None):
        self._w = _Writer(str(path), config)

    @property
    def path(self) -> str:
        return self._w.path

    def write(self, samples: Iterable[Any], levels: Optional[Mapping[str, str]] = None) -> None:
        """Writes the first samples of a new store."""
        self._w.write(_prepare(samples), dict(levels) if levels else None)

    def append(self, samples: Iterable[Any], levels: Optional[Mapping[str, str]] = None) -> None:
        """Appends samples to a store that has some."""
        self._w.append(_prepare(samples), dict(levels) if levels else None)

    def delete(self, indices: Iterable[int]) -> None:
        """Soft-deletes samples by physical index (position among all samples
        ever written, deleted ones included)."""
        self._w.delete([int(i) for i in indices])

    def close(self) -> None:
        """Releases the store's lock."""
        self._w.close()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def to_numpy_samples(reader: Reader, indices: Optional[Iterable[int]] = None) -> List[Dict[str, Any]]:
    """Samples ``indices`` (default: all) of ``reader`` as a list of dicts."""
    idx = range(len(reader)) if indices is None else indices
    return [reader[int(i)] for i in idx]

#!/usr/bin/env python3
"""Shuffled reads from Python: atomzarr's Python DataLoader against
nvalchemi-toolkit's DataLoader on the same stores (the "From Python, against the toolkit"
table of docs/PERFORMANCE.md).

Two stores, written by the atomzarr CLI (stores already in --dir are reused):

* `reference`: `atomzarr roundtrip -n 10000` (the toolkit's benchmark
  structures: 10-100 random atoms, 1-4 edges per atom);
* `bulk`: `atomzarr roundtrip --preset bulk --min-atoms 100 --max-atoms 300
  -n 4000` (fcc metal cells, neighbor lists at 5 Å);
* `scale`: `atomzarr roundtrip -n 10000000 --min-atoms 2 --max-atoms 4`
  (3.2 GB decoded, over twice the default cache: atomzarr's `shuffle=True`
  reads it through the block pool). Pass `--toolkit-max-batches 300` for
  it: the toolkit reads a few hundred samples a second there.

Each loader reads one shuffled epoch (batch 64, prefetch 16) in a fresh
process, --runs times, in turns:

* `toolkit`: `DataLoader(Dataset(AtomicDataZarrReader(S), device="cpu",
  skip_validation=...), batch_size=64, shuffle=True, prefetch_factor=16)`;
* `numpy`: `atomzarr.DataLoader(atomzarr.open(S, skip_validation=...),
  batch_size=64, shuffle=True, prefetch_factor=16)`, batches as numpy;
* `torch`: the same, each batch through `atomzarr.torch.to_torch(b, "cpu")`.

The table's figure is the first epoch, loader construction included (imports
excluded); each JSON line also has the time to the first batch, the rate
after it (`after_first_samples_per_s`, the loader's steady state), and a
second, warm epoch
(`warm_samples_per_s`: the store's chunks cached, the toolkit's kernels
compiled).

Prints one JSON line per run, then the medians (samples/s) and the ratios to
the toolkit as a Markdown table. Needs one virtualenv with both packages:

    python3 -m venv /tmp/venv-tk && /tmp/venv-tk/bin/pip install nvalchemi-toolkit==0.3.0 ./python
    cargo build --release
    /tmp/venv-tk/bin/python scripts/python_vs_toolkit.py --bin target/release/atomzarr --dir /tmp/py-bench [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

STORES = {
    "reference": ["roundtrip", "-n", "10000"],
    "scale": ["roundtrip", "-n", "10000000", "--min-atoms", "2", "--max-atoms", "4"],
    "bulk": ["roundtrip", "--preset", "bulk", "--min-atoms", "100", "--max-atoms", "300", "-n", "4000"],
}
LOADERS = ["toolkit", "numpy", "torch"]


def measure(loader: str, store: str, batch: int, prefetch: int, validate: bool, max_batches: int | None = None) -> dict:
    """One shuffled epoch in this process (imports done before the clock
    starts), or its first `max_batches` batches: samples/s and peak RSS."""
    import itertools
    import resource

    epochs = 2 if max_batches is None else 1
    # When the first batch arrived, and how many samples it held: the rate
    # after it is the loader's steady state, without its start-up.
    first: list[tuple[float, int]] = []

    def mark(n: int) -> int:
        if not first:
            first.append((time.perf_counter(), n))
        return n
    if loader == "toolkit":
        import torch
        from nvalchemi.data.datapipes import AtomicDataZarrReader, DataLoader, Dataset

        torch.manual_seed(0)
        start = time.perf_counter()
        ds = Dataset(AtomicDataZarrReader(store), device="cpu", skip_validation=not validate)
        dl = DataLoader(ds, batch_size=batch, shuffle=True, prefetch_factor=prefetch)

        def epoch() -> int:
            return sum(mark(int(b.num_graphs)) for b in itertools.islice(dl, max_batches))
    else:
        import atomzarr

        if loader == "torch":
            from atomzarr.torch import to_torch
        start = time.perf_counter()
        dl = atomzarr.DataLoader(atomzarr.open(store, skip_validation=not validate), batch_size=batch, shuffle=True, seed=0, prefetch_factor=prefetch)

        def epoch() -> int:
            batches = itertools.islice(dl, max_batches)
            if loader == "torch":
                return sum(mark(int(to_torch(b, "cpu")["num_graphs"])) for b in batches)
            return sum(mark(int(b["num_graphs"])) for b in batches)

    n = epoch()
    end = time.perf_counter()
    took = end - start
    t_first, n_first = first[0] if first else (end, 0)
    steady = (n - n_first) / (end - t_first) if end > t_first else None
    warm = []
    for _ in range(epochs - 1):
        t0 = time.perf_counter()
        warm.append(epoch() / (time.perf_counter() - t0))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"loader": loader, "store": store, "samples": n, "seconds": took, "samples_per_s": n / took, "first_batch_s": t_first - start, "after_first_samples_per_s": steady, "warm_samples_per_s": warm[-1] if warm else None, "peak_rss": rss}


def store_path(bin_: str, root: str, name: str) -> str:
    out = os.path.join(root, name)
    if os.path.isdir(out):
        found = [f for f in os.listdir(out) if f.endswith(".zarr")]
        if found:
            return os.path.join(out, found[0])
    rows = json.loads(subprocess.run([bin_, *STORES[name], "--output-dir", out, "--json"], check=True, capture_output=True, text=True).stdout)
    row = rows[0] if isinstance(rows, list) else rows
    return row["store"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="target/release/atomzarr", help="the atomzarr CLI (writes the stores)")
    p.add_argument("--dir", default="/tmp/py-bench")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--prefetch", type=int, default=16)
    p.add_argument("--validate", action="store_true", help="both loaders check every sample (default: skip_validation, as both benchmark CLIs)")
    p.add_argument("--stores", default="reference,bulk")
    p.add_argument("--loaders", default=",".join(LOADERS))
    p.add_argument("--max-batches", type=int, help="time only the first N batches of the epoch")
    p.add_argument("--toolkit-max-batches", type=int, help="as --max-batches, for the toolkit's loader alone (its whole epoch of the scale store takes hours; atomzarr's block pool ramps up over its first batches, so time its whole epoch)")
    p.add_argument("--measure", nargs=2, metavar=("LOADER", "STORE"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.measure:
        print(json.dumps(measure(a.measure[0], a.measure[1], a.batch_size, a.prefetch, a.validate, a.max_batches)))
        return 0
    os.makedirs(a.dir, exist_ok=True)
    rates: dict[tuple[str, str], list[float]] = {}
    rss: dict[tuple[str, str], list[int]] = {}
    stores = a.stores.split(",")
    loaders = a.loaders.split(",")
    for name in stores:
        path = store_path(a.bin, a.dir, name)
        for _ in range(a.runs):
            for loader in loaders:
                cmd = [sys.executable, __file__, "--measure", loader, path, "--batch-size", str(a.batch_size), "--prefetch", str(a.prefetch)]
                if a.validate:
                    cmd.append("--validate")
                limit = a.toolkit_max_batches if loader == "toolkit" and a.toolkit_max_batches else a.max_batches
                if limit:
                    cmd += ["--max-batches", str(limit)]
                row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
                row["name"] = name
                print(json.dumps(row), flush=True)
                rates.setdefault((name, loader), []).append(row["samples_per_s"])
                rss.setdefault((name, loader), []).append(row["peak_rss"])
    print()
    print("| store | " + " | ".join(f"{l} samples/s" for l in loaders) + " | " + " | ".join(f"{l}/toolkit" for l in loaders if l != "toolkit") + " |")
    print("|" + "---|" * (1 + len(loaders) + len([l for l in loaders if l != "toolkit"])))
    for name in stores:
        med = {l: statistics.median(rates[(name, l)]) for l in loaders}
        cells = [f"{med[l]:,.0f} ({max(rss[(name, l)]) / 1e6:,.0f} MB)" for l in loaders]
        ratios = [f"{med[l] / med['toolkit']:.1f}x" for l in loaders if l != "toolkit" and "toolkit" in med]
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Neighbor lists on one core: atomzarr against vesin on the same structures,
in the same run.

Writes three sets with ASE as extended XYZ (kept in --dir):

* `fcc256`: 500 rattled fcc Cu cells of 256 atoms;
* `bulk`: 4,000 rattled fcc cells of Cu, Ni and Al, 108 or 256 atoms (the
  `ase` store of scripts/bulk_vs_toolkit.py);
* `molecules`: 5,000 random 20-atom molecules without a cell;

then times `vesin.NeighborList(cutoff, full_list=True).compute(points, box,
periodic, quantities="ijS")` over each set (best of 3 passes; vesin runs on
one thread) and the `neighbors` bench of this crate on the same files
(`cargo bench --bench neighbors` with ATOMZARR_NEIGHBOR_SETS), and prints
millions of edges per second of both, their ratio, and whether the edge
counts (which may differ by a few pairs at the cutoff: atomzarr
builds from float32 geometry, as stored).

    python3 -m venv /tmp/venv-nl && /tmp/venv-nl/bin/pip install ase vesin numpy
    /tmp/venv-nl/bin/python scripts/neighbors_vs_vesin.py --dir /tmp/nl-bench [--cutoff 5.0]

Run from the repository root (it calls cargo).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def write_sets(d: str) -> dict[str, str]:
    """The three sets as extended XYZ in `d` (each written once, then reused)."""
    import numpy as np
    from ase import Atoms
    from ase.build import bulk
    from ase.io import write

    from bulk_vs_toolkit import ase_cells

    rng = np.random.default_rng(0)

    def fcc256(path: str) -> None:
        frames = []
        for _ in range(500):
            a = bulk("Cu", "fcc", a=3.615, cubic=True).repeat((4, 4, 4))
            a.rattle(stdev=0.08, seed=int(rng.integers(1 << 31)))
            frames.append(a)
        write(path, frames, format="extxyz")

    def molecules(path: str) -> None:
        write(path, [Atoms("C20", positions=rng.uniform(0, 7.0, size=(20, 3))) for _ in range(5000)], format="extxyz")

    makers = {"fcc256": fcc256, "bulk": lambda path: ase_cells(path, 4000, seed=0), "molecules": molecules}
    sets = {}
    for name, make in makers.items():
        sets[name] = os.path.join(d, f"{name}.extxyz")
        if not os.path.exists(sets[name]):
            make(sets[name])
    return sets


def vesin_rate(path: str, cutoff: float) -> tuple[float, int]:
    from ase.io import read
    from vesin import NeighborList

    frames = read(path, ":")
    data = [(f.positions.copy(), f.cell.array.copy(), bool(f.pbc.all())) for f in frames]
    nl = NeighborList(cutoff=cutoff, full_list=True)
    best, edges = float("inf"), 0
    for _ in range(3):
        t = time.perf_counter()
        n = 0
        for points, box, periodic in data:
            i, j, s = nl.compute(points=points, box=box, periodic=periodic, quantities="ijS")
            n += len(i)
        best = min(best, time.perf_counter() - t)
        edges = n
    return edges / best / 1e6, edges


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--cutoff", type=float, default=5.0)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    sets = write_sets(a.dir)
    env = dict(os.environ, ATOMZARR_NEIGHBOR_SETS=",".join(f"{k}={v}" for k, v in sets.items()),
               ATOMZARR_NEIGHBOR_CUTOFF=str(a.cutoff))
    out = subprocess.run(["cargo", "bench", "--bench", "neighbors"], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    ours = {r["set"]: r for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
    # Edge counts can differ by a few pairs within float32 rounding of the
    # cutoff: atomzarr builds from the store's float32 geometry, vesin from
    # ASE's float64.
    print(f"{'set':<10} {'vesin edges':>12} {'atomzarr edges':>15} {'vesin M/s':>10} {'atomzarr M/s':>13} {'ratio':>6}")
    for name, path in sets.items():
        rate, edges = vesin_rate(path, a.cutoff)
        r = ours[name]
        print(f"{name:<10} {edges:>12} {r['edges']:>15} {rate:>10.2f} {r['medges_per_s']:>13.2f} "
              f"{r['medges_per_s'] / rate:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

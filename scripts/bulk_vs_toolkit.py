#!/usr/bin/env python3
"""Shuffled reads of bulk stores: atomzarr against nvalchemi-toolkit, and
atomzarr against its own decode floor (the bulk tables of
docs/PERFORMANCE.md).

Two stores of bulk materials, where neighbor lists are most of the bytes:

* `preset`: `atomzarr roundtrip --preset bulk -n N` (fcc Cu/Ni/Al cells and
  their alloys, 50-300 atoms, rattled and strained, neighbor lists at 5 Å
  built by atomzarr);
* `ase`: N rattled fcc cells of Cu, Ni and Al (108 and 256 atoms) built by
  ASE, written by ASE to extended XYZ and imported with
  `atomzarr import FILE S --cutoff 5.0`.

Each store is read in a shuffled order by fresh processes, --runs times each:
`atomzarr read S --read-order shuffle --read-mode {batch,raw} --decode-floor
--epochs 2 --json` (the first epoch, default cache, and a warm second one,
with the minor page faults of each) and, when --chunk-cache is given,
`--read-order chunk-shuffle --cache-bytes C`; then the toolkit's
`nvalchemi-io-test read S --read-order shuffle` (batch 64, prefetch 16, its
defaults) unless --no-toolkit. Prints the median samples/s of each, the
fraction of the decode floor, peak RSS, the toolkit's median and the ratio,
one JSON line per row and then a table.

    cargo build --release
    python3 -m venv /tmp/venv-tk && /tmp/venv-tk/bin/pip install nvalchemi-toolkit==0.3.0 ase
    /tmp/venv-tk/bin/python scripts/bulk_vs_toolkit.py --bin target/release/atomzarr \\
        --toolkit /tmp/venv-tk/bin/nvalchemi-io-test --dir /tmp/bulk-bench [--runs 5]

Needs ASE (and numpy) for the `ase` store; the toolkit is optional
(--no-toolkit). Stores already in --dir are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def ase_cells(path: str, n: int, seed: int) -> None:
    """N rattled fcc cells (Cu, Ni, Al; 3x3x3 or 4x4x4 conventional cells,
    108 or 256 atoms) with random energies and forces, as extended XYZ."""
    import numpy as np
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.io import write

    rng = np.random.default_rng(seed)
    frames = []
    for k in range(n):
        symbol, a = [("Cu", 3.615), ("Ni", 3.524), ("Al", 4.050)][k % 3]
        reps = 3 if rng.random() < 0.5 else 4
        atoms = bulk(symbol, "fcc", a=a, cubic=True).repeat((reps, reps, reps))
        atoms.rattle(stdev=0.08, seed=int(rng.integers(1 << 31)))
        atoms.calc = SinglePointCalculator(
            atoms,
            energy=float(-3.5 * len(atoms) + rng.normal()),
            forces=rng.normal(scale=0.5, size=(len(atoms), 3)),
        )
        frames.append(atoms)
    write(path, frames, format="extxyz")


def run_json(cmd: list[str]) -> list[dict]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def toolkit_rate(cmd: list[str]) -> float:
    """samples/s from the toolkit's table: read time and sample count."""
    env = dict(os.environ, COLUMNS="400")
    # The table goes to stderr or stdout depending on the terminal: take both.
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env).stdout
    for line in out.splitlines():
        cells = [c for c in re.split(r"\s{2,}|│", line.strip()) if c.strip()]
        if len(cells) >= 8 and cells[1].strip() == "batch":
            samples = int(cells[0].replace(",", ""))
            seconds = float(cells[6].rstrip("s"))
            return samples / seconds
    raise RuntimeError(f"no result row in the toolkit's output:\n{out}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="the atomzarr binary")
    p.add_argument("--toolkit", default="nvalchemi-io-test", help="the toolkit's nvalchemi-io-test")
    p.add_argument("--no-toolkit", action="store_true")
    p.add_argument("--dir", required=True, help="where the stores go (kept)")
    p.add_argument("-n", type=int, default=4000, help="cells per store")
    p.add_argument("--runs", type=int, default=5, help="fresh processes per measurement")
    p.add_argument("--chunk-cache", type=int, default=0, help="also chunk-shuffle with this cache (bytes)")
    p.add_argument("--only", choices=["preset", "ase"], action="append")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    stores = {}
    if not a.only or "preset" in a.only:
        s = os.path.join(a.dir, f"bench_{a.n}.zarr")
        if not os.path.exists(s):
            run_json([a.bin, "roundtrip", "--preset", "bulk", "-n", str(a.n), "--output-dir", a.dir,
                      "--read-mode", "single", "--max-samples", "1", "--json"])
        stores["preset"] = s
    if not a.only or "ase" in a.only:
        s = os.path.join(a.dir, f"ase_{a.n}.zarr")
        if not os.path.exists(s):
            xyz = os.path.join(a.dir, f"ase_{a.n}.extxyz")
            if not os.path.exists(xyz):
                ase_cells(xyz, a.n, seed=0)
            subprocess.run([a.bin, "import", xyz, s, "--cutoff", "5.0"], check=True, capture_output=True)
        stores["ase"] = s

    rows = []
    for name, store in stores.items():
        tk = None
        if not a.no_toolkit:
            rates = [toolkit_rate([a.toolkit, "read", store, "--read-order", "shuffle"]) for _ in range(a.runs)]
            tk = statistics.median(rates)
            rows.append({"store": name, "reader": "toolkit", "order": "shuffle", "samples_per_s": tk,
                         "runs": rates})
        orders = [("shuffle", [])]
        if a.chunk_cache:
            orders.append(("chunk-shuffle", ["--cache-bytes", str(a.chunk_cache)]))
        for order, extra in orders:
            for mode in ["batch", "raw"]:
                # Two epochs a run: the first (decoding, fresh memory) and a
                # warm one (the cache holds the store; batch memory recycled).
                both = [run_json([a.bin, "read", store, "--read-order", order, "--read-mode", mode,
                                  "--decode-floor", "--epochs", "2", "--json", *extra]) for _ in range(a.runs)]
                got = [b[0] for b in both]
                warm = [b[1] for b in both]
                rate = statistics.median(g["read_samples_per_s"] for g in got)
                rows.append({
                    "store": name, "reader": f"atomzarr {mode}", "order": order, "samples_per_s": rate,
                    "runs": [g["read_samples_per_s"] for g in got],
                    "of_floor": statistics.median(g["floor_fraction"] for g in got),
                    "floor_per_s": statistics.median(g["decode_floor_samples_per_s"] for g in got),
                    "peak_rss_mb": statistics.median(g["peak_rss_bytes"] for g in got) / 1e6,
                    "decode_amp": statistics.median(g["decode_amplification"] for g in got),
                    "edges_per_sample": got[0]["avg_edges"], "disk_mb": got[0]["disk_bytes"] / 1e6,
                    "vs_toolkit": rate / tk if tk and order == "shuffle" else None,
                    "second_epoch_per_s": statistics.median(w["read_samples_per_s"] for w in warm),
                    "faults_first": statistics.median(g["minor_faults"] for g in got),
                    "faults_second": statistics.median(w["minor_faults"] for w in warm),
                })
    for r in rows:
        print(json.dumps(r))
    print(f"\n{'store':<7} {'reader':<15} {'order':<14} {'samples/s':>10} {'of floor':>9} {'RSS MB':>8} "
          f"{'vs toolkit':>10} {'faults':>9} {'2nd epoch':>10} {'faults':>8}")
    for r in rows:
        of = f"{r['of_floor']:.2f}" if r.get("of_floor") is not None else ""
        rss = f"{r['peak_rss_mb']:.0f}" if r.get("peak_rss_mb") is not None else ""
        vs = f"{r['vs_toolkit']:.1f}x" if r.get("vs_toolkit") else ""
        f1 = f"{r['faults_first']:.0f}" if r.get("faults_first") is not None else ""
        e2 = f"{r['second_epoch_per_s']:.0f}" if r.get("second_epoch_per_s") is not None else ""
        f2 = f"{r['faults_second']:.0f}" if r.get("faults_second") is not None else ""
        print(f"{r['store']:<7} {r['reader']:<15} {r['order']:<14} {r['samples_per_s']:>10.0f} {of:>9} {rss:>8} "
              f"{vs:>10} {f1:>9} {e2:>10} {f2:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

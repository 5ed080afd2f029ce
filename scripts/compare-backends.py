#!/usr/bin/env python3
"""Compare train_mlip's numbers on a device backend with the CPU backend.

Runs the `train_mlip` example binary (built with `--features wgpu` or
`--features cuda`) on one store and seed, on `flex` (the CPU) and on the
device backend, each with `--metrics`, for each model of `--forces`
(default both: `conservative,direct`), and fails (exit 1) unless:

* every epoch's validation baselines (energy and force MAE of the
  predict-the-mean baseline, which depend on the validation batches alone)
  are equal on both backends to a relative 1e-5;
* every loss and MAE of every run is finite (a NaN or Inf anywhere fails);
* the final validation energy and force MAEs of the two backends are
  within 25% of each other;
* with --rss-epochs N: a device run of N epochs reports its resident
  memory per epoch (a report, not a check: on a software device the
  model's kernels and memory pools live in host memory and grow while new
  batch shapes still compile kernels; the loader's own memory is checked
  by `gpu_check --memory-only`);
* with --full: a short run on the full-size store (--structures 300
  --epochs 2) on the device backend is finite.

    scripts/compare-backends.py BIN --backend wgpu --work DIR [--runs 3]
        [--rss-epochs 20] [--full] [--forces conservative,direct]

Only the Python standard library is needed.
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

FAILURES = []


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    FAILURES.append(msg)


def run(binary, store, metrics, backend, extra, timeout):
    """Runs train_mlip; returns its epochs (a list of dicts), or None on failure."""
    cmd = [str(binary), "--store", str(store), "--backend", backend, "--metrics", str(metrics), *extra]
    print("$ " + " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{backend}: no result within {timeout} s")
        return None
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        fail(f"{backend} {' '.join(extra)}: exit {p.returncode}")
        return None
    epochs = [json.loads(line) for line in Path(metrics).read_text().splitlines() if line.strip()]
    if not epochs:
        fail(f"{backend}: no epochs in {metrics}")
    return epochs


def finite(epochs, what):
    keys = ["train_loss", "val_energy_mae", "val_force_mae", "baseline_energy_mae", "baseline_force_mae"]
    ok = True
    for e in epochs:
        for k in keys:
            v = e.get(k)
            # json.loads reads NaN/Infinity as floats; serde_json writes them as null.
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                fail(f"{what}: epoch {e['epoch']} {k} = {v}")
                ok = False
    return ok


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def compare(cpu, dev, backend, run_no):
    what = f"run {run_no}"
    if len(cpu) != len(dev):
        fail(f"{what}: {len(cpu)} epochs on flex, {len(dev)} on {backend}")
        return
    for c, d in zip(cpu, dev):
        for k in ["baseline_energy_mae", "baseline_force_mae"]:
            if rel(c[k], d[k]) > 1e-5:
                fail(f"{what}: epoch {c['epoch']} {k}: flex {c[k]!r}, {backend} {d[k]!r}")
    for k in ["val_energy_mae", "val_force_mae"]:
        a, b = cpu[-1][k], dev[-1][k]
        if rel(a, b) > 0.25:
            fail(f"{what}: final {k}: flex {a!r}, {backend} {b!r} (more than 25% apart)")
    print(
        f"{what}: {len(cpu)} epochs, baselines equal in each; final energy MAE flex {cpu[-1]['val_energy_mae']:.5f} "
        f"{backend} {dev[-1]['val_energy_mae']:.5f}, force MAE flex {cpu[-1]['val_force_mae']:.5f} "
        f"{backend} {dev[-1]['val_force_mae']:.5f}",
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", type=Path, help="the train_mlip example binary")
    ap.add_argument("--backend", default="wgpu", choices=["wgpu", "cuda"])
    ap.add_argument("--work", type=Path, required=True, help="folder for the stores and metrics")
    ap.add_argument("--runs", type=int, default=3, help="tiny runs on each backend")
    ap.add_argument("--rss-epochs", type=int, default=0, help="report the resident memory of a device run of this many tiny epochs")
    ap.add_argument("--full", action="store_true", help="also a short full-size device run (300 structures, 2 epochs)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--forces", default="conservative,direct", help="the models compared (train_mlip --forces), comma-separated")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    store = args.work / "tiny.zarr"
    tiny = ["--tiny", "--seed", "0"]

    rebuild = ["--rebuild"]
    for forces in args.forces.split(","):
        head = [*tiny, "--forces", forces]
        cpu = run(args.binary, store, args.work / f"flex_{forces}.jsonl", "flex", [*head, *rebuild], args.timeout)
        rebuild = []
        if cpu is not None:
            finite(cpu, f"flex {forces}")
        for k in range(1, args.runs + 1):
            metrics = args.work / f"{args.backend}_{forces}{k}.jsonl"
            dev = run(args.binary, store, metrics, args.backend, head, args.timeout)
            if dev is not None and cpu is not None and finite(dev, f"{args.backend} {forces} run {k}"):
                compare(cpu, dev, args.backend, f"{forces} {k}")

    if args.rss_epochs:
        metrics = args.work / f"{args.backend}_rss.jsonl"
        dev = run(args.binary, store, metrics, args.backend, [*tiny, "--epochs", str(args.rss_epochs)], args.timeout)
        if dev is not None and finite(dev, f"{args.backend} {args.rss_epochs} epochs"):
            rss = [e["rss_bytes"] for e in dev]
            if None in rss:
                print("no resident memory reported (needs Linux /proc/self/status)", flush=True)
            else:
                mib = " ".join(f"{r / 2**20:.0f}" for r in rss)
                print(f"{args.backend}: resident memory (MiB) after each of {len(rss)} epochs: {mib}", flush=True)

    if args.full:
        full = args.work / "full.zarr"
        extra = ["--structures", "300", "--epochs", "2", "--rebuild", "--seed", "0"]
        dev = run(args.binary, full, args.work / f"{args.backend}_full.jsonl", args.backend, extra, args.timeout)
        if dev is not None and finite(dev, f"{args.backend} full-size"):
            print(f"{args.backend} full-size: finite in every epoch: {dev[-1]}", flush=True)

    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed:\n  " + "\n  ".join(FAILURES), flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

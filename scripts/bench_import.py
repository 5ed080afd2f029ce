#!/usr/bin/env python3
"""Import throughput, atomzarr against the usual Python route, side by side
on generated files (the throughput table of docs/FORMATS.md).

Run by hand (needs the fixture generator's packages: ase, h5py, numpy, lmdb,
orjson, pymatgen):

    cargo build --release
    /tmp/venv-import/bin/python scripts/bench_import.py --bin target/release/atomzarr \\
        --dir /tmp/import-bench --frames 100000 [--only extxyz npz ...]

For each format it writes one file of --frames frames (small molecules and
crystals, 8-24 atoms), then times
- `atomzarr import FILE STORE` (wall clock of the whole command: parse,
  convert, write the store), and
- the Python route: ase.io.read(FILE, ":") for extxyz and the ASE db;
  fairchem's row decode (lmdb + zlib + orjson + AtomsRow.toatoms) for
  aselmdb; h5py and a loop over conformers for HDF5; numpy.load and an ASE Atoms per
  frame for npz; json.load for MPtrj (and json.load plus
  pymatgen's Structure.from_dict per frame),
and prints frames per second of each, their ratio, and the ratio of CPU
seconds (load-independent on a shared machine: the Python routes use one
core, atomzarr several), as one JSON line per format and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fn):
    """Wall and CPU seconds of fn() (this process's CPU: the routes are single-threaded)."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def children_cpu():
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def frames_of(n, rng):
    from ase import Atoms
    from ase.calculators.singlepoint import SinglePointCalculator

    out = []
    for i in range(n):
        k = int(rng.integers(8, 25))
        z = rng.integers(1, 30, k)
        periodic = i % 2 == 0
        cell = np.diag(rng.uniform(8, 10, 3)) if periodic else None
        a = Atoms(numbers=z, positions=rng.uniform(0, 8, (k, 3)), cell=cell, pbc=periodic)
        res = {"energy": float(rng.normal(-5 * k, 1)), "forces": rng.normal(0, 0.5, (k, 3))}
        if periodic:
            res["stress"] = rng.normal(0, 0.01, 6)
        a.calc = SinglePointCalculator(a, **res)
        a.info["config_type"] = "bulk" if periodic else "molecule"
        out.append(a)
    return out


def gen_extxyz(path, n, rng):
    from ase.io import write

    write(path, frames_of(n, rng), format="extxyz")


def gen_asedb(path, n, rng):
    from ase.db import connect

    db = connect(path)
    with db:
        for a in frames_of(n, rng):
            db.write(a, config_type=a.info["config_type"])


def gen_aselmdb(path, n, rng):
    import lmdb
    import orjson
    from ase.db.row import AtomsRow

    env = lmdb.open(path, map_size=1 << 34, subdir=False, meminit=False, map_async=True)
    txn = env.begin(write=True)
    for i, a in enumerate(frames_of(n, rng)):
        row = AtomsRow(a)
        dct = {k: row[k] for k in row.__dict__ if k[0] != "_" and k not in row._keys and k != "id"}
        dct["key_value_pairs"] = {"sid": f"s{i}"}
        dct["cell"] = np.asarray(dct["cell"])
        txn.put(f"{i + 1}".encode(), zlib.compress(orjson.dumps(dct, option=orjson.OPT_SERIALIZE_NUMPY)))
    txn.put(b"nextid", zlib.compress(orjson.dumps(n + 1)))
    txn.commit()
    env.close()
    if os.path.exists(path + "-lock"):
        os.remove(path + "-lock")


def gen_spice(path, n, rng):
    import h5py

    per = 50
    with h5py.File(path, "w") as f:
        for g in range(n // per):
            k = int(rng.integers(8, 25))
            grp = f.create_group(f"mol{g}")
            grp.create_dataset("atomic_numbers", data=rng.integers(1, 10, k).astype(np.int16))
            grp.create_dataset("conformations", data=rng.normal(0, 3, (per, k, 3)).astype(np.float32), compression="gzip")
            grp.create_dataset("dft_total_energy", data=rng.normal(-100, 1, per))
            grp.create_dataset("dft_total_gradient", data=rng.normal(0, 0.02, (per, k, 3)).astype(np.float32), compression="gzip")
            grp.create_dataset("smiles", data=["C" * k], dtype=h5py.string_dtype())
            grp.create_dataset("subset", data=["bench"], dtype=h5py.string_dtype())


def gen_npz(path, n, rng):
    k = 21
    np.savez(path, nuclear_charges=rng.integers(1, 10, k), coords=rng.normal(0, 1.5, (n, k, 3)),
             energies=rng.normal(-97000, 2, n), forces=rng.normal(0, 20, (n, k, 3)))


def gen_mptrj(path, n, rng):
    from import_reference import mptrj_doc

    per = 25
    with open(path, "w") as fh:
        json.dump(mptrj_doc(n // per, per, rng, with_magmom_every=3), fh)


# ------------------------------------------------------------ Python routes
def py_ase_read(path):
    from ase.io import read

    return len(read(path, ":"))


def py_aselmdb(path):
    import lmdb
    import orjson
    from ase.db.row import AtomsRow

    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    n = 0
    with env.begin() as t:
        nextid = orjson.loads(zlib.decompress(t.get(b"nextid")))
        for i in range(1, nextid):
            dct = orjson.loads(zlib.decompress(t.get(f"{i}".encode())))
            dct["id"] = i
            AtomsRow(dct).toatoms()
            n += 1
    return n


def py_h5(path):
    import h5py
    from ase import units

    n = 0
    with h5py.File(path, "r") as f:
        for name in f:
            g = f[name]
            z = g["atomic_numbers"][()]
            for k in range(g["conformations"].shape[0]):
                _ = (z, g["conformations"][k] * units.Bohr, g["dft_total_energy"][k] * units.Hartree,
                     -g["dft_total_gradient"][k] * units.Hartree / units.Bohr, g["smiles"][0])
                n += 1
    return n


def py_npz(path):
    """numpy.load, then an ASE Atoms with its labels per frame (in eV/A),
    as a conversion to any other format starts."""
    from ase import Atoms, units
    from ase.calculators.singlepoint import SinglePointCalculator

    d = np.load(path)
    z, R, E, F = d["nuclear_charges"], d["coords"], d["energies"], d["forces"]
    kcal = units.kcal / units.mol
    n = 0
    for k in range(len(E)):
        a = Atoms(numbers=z, positions=R[k])
        a.calc = SinglePointCalculator(a, energy=E[k] * kcal, forces=F[k] * kcal)
        n += 1
    return n


def py_json_load(path):
    with open(path) as fh:
        doc = json.load(fh)
    return sum(len(v) for v in doc.values())


def py_json_pymatgen(path):
    from pymatgen.core import Structure

    with open(path) as fh:
        doc = json.load(fh)
    n = 0
    for frames in doc.values():
        for fr in frames.values():
            Structure.from_dict(fr["structure"])
            n += 1
    return n


FORMATS = {
    "extxyz": ("bench.extxyz", gen_extxyz, [("ase.io.read(':')", py_ase_read)]),
    "asedb": ("bench.db", gen_asedb, [("ase.io.read(':')", py_ase_read)]),
    "aselmdb": ("bench.aselmdb", gen_aselmdb, [("lmdb+zlib+orjson, AtomsRow.toatoms", py_aselmdb)]),
    "hdf5": ("bench.hdf5", gen_spice, [("h5py + loop over conformers", py_h5)]),
    "npz": ("bench.npz", gen_npz, [("numpy.load + ASE Atoms per frame", py_npz)]),
    "mptrj": ("bench.json", gen_mptrj, [("json.load", py_json_load), ("json.load + Structure.from_dict", py_json_pymatgen)]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/atomzarr")
    ap.add_argument("--dir", default="/tmp/import-bench")
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--keep", action="store_true", help="reuse generated files")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    for fmt, (name, gen, routes) in FORMATS.items():
        if a.only and fmt not in a.only:
            continue
        path = os.path.join(a.dir, name)
        if not (a.keep and os.path.exists(path)):
            if os.path.exists(path):
                os.remove(path)
            gen(path, a.frames, rng)
        size = os.path.getsize(path)
        store = os.path.join(a.dir, fmt + ".zarr")
        shutil.rmtree(store, ignore_errors=True)
        c0 = children_cpu()
        out = subprocess.run([a.bin, "import", path, store, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        ours_cpu = children_cpu() - c0
        rep = json.loads(out.stdout)
        ours = rep["frames"] / rep["seconds"]
        for label, fn in routes:
            n = [0]
            secs, cpu = timed(lambda: n.__setitem__(0, fn(path)))
            theirs = n[0] / secs
            load = os.getloadavg()[0]
            row = {"format": fmt, "frames": rep["frames"], "file_mb": round(size / 1e6, 1),
                   "atomzarr_s": round(rep["seconds"], 2), "atomzarr_cpu_s": round(ours_cpu, 2),
                   "atomzarr_frames_per_s": round(ours),
                   "python_route": label, "python_s": round(secs, 2), "python_cpu_s": round(cpu, 2),
                   "python_frames_per_s": round(theirs),
                   "ratio": round(ours / theirs, 1), "cpu_ratio": round(cpu / max(ours_cpu, 1e-9), 1),
                   "load_average": round(load, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| format | frames | file | atomzarr import | Python route | ratio (wall) | ratio (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['frames']} | {r['file_mb']} MB | {r['atomzarr_frames_per_s']:,} frames/s "
              f"({r['atomzarr_s']} s, {r['atomzarr_cpu_s']} s CPU) | {r['python_route']}: "
              f"{r['python_frames_per_s']:,} frames/s ({r['python_s']} s) | {r['ratio']}x | {r['cpu_ratio']}x |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Regenerates the ASE reference files under assets/import/.

Run by hand, never by CI (CI must not need ASE):

    python3 -m venv /tmp/venv-ase && /tmp/venv-ase/bin/pip install ase
    /tmp/venv-ase/bin/python scripts/ase_reference.py

Writes
- neighbors.ase.json: structures (positions, cell, pbc, cutoff) and ASE's
  `neighbor_list('ijS', atoms, cutoff)` for each (triclinic bulk, a cell
  smaller than the cutoff, unwrapped positions, a molecule, slabs, a wire);
- *.extxyz: small extended-XYZ files written by ASE (plus one hand-written
  with a Voigt-6 stress) and *.ase.json: what ASE reads back from each;
- stats.ase.json: dataset statistics of stats.extxyz computed with numpy
  (E0s by least squares, energy per atom, force RMS, neighbors at 3.0 A).

Coordinates and cells are rounded to float32 first, so the f32 store and
ASE see exactly the same numbers.
"""
import json
import os

import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write
from ase.io.extxyz import key_val_str_to_dict_regex
from ase.neighborlist import neighbor_list

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "import")
rng = np.random.default_rng(16)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def atoms(numbers, positions, cell=None, pbc=False):
    a = Atoms(numbers=numbers, positions=f32(positions), cell=None if cell is None else f32(cell), pbc=pbc)
    return a


def random_in_cell(n, cell, lo=0.0, hi=1.0, min_dist=0.9):
    """n atoms at random fractional coordinates in [lo, hi), kept apart."""
    cell = np.asarray(cell, dtype=float)
    pts = []
    while len(pts) < n:
        f = rng.uniform(lo, hi, 3)
        p = f @ cell
        if all(np.linalg.norm(p - q) > min_dist for q in pts):
            pts.append(p)
    return np.array(pts)


# ----------------------------------------------------------------- neighbors
def neighbor_cases():
    cases = []
    tri = np.array([[5.1, 0.0, 0.0], [1.7, 4.6, 0.0], [-1.2, 0.9, 5.3]])
    cases.append(("triclinic_bulk", atoms(rng.integers(1, 30, 14), random_in_cell(14, tri), tri, True), 4.0))
    small = np.array([[2.3, 0.0, 0.0], [0.9, 2.1, 0.0], [0.4, -0.6, 2.6]])
    cases.append(("cutoff_larger_than_cell", atoms([14, 8], random_in_cell(2, small, min_dist=0.5), small, True), 5.5))
    cases.append(("one_atom_cell", atoms([29], [[0.3, 0.2, 0.1]], np.diag([2.0, 2.5, 3.0]), True), 4.2))
    cases.append(("unwrapped_bulk", atoms(rng.integers(1, 30, 10), random_in_cell(10, tri, -1.4, 2.3), tri, True), 3.7))
    mol = rng.uniform(-4.0, 4.0, (24, 3))
    cases.append(("molecule", atoms(rng.integers(1, 10, 24), mol), 3.0))
    slab_cell = np.array([[4.8, 0.0, 0.0], [2.4, 4.1, 0.0], [0.0, 0.0, 20.0]])
    slab = random_in_cell(16, slab_cell, 0.0, 1.0, min_dist=0.8)
    slab[:, 2] = rng.uniform(5.0, 11.0, 16)
    slab[:3, 0] += 7.0  # outside the cell along a periodic direction
    cases.append(("slab_ttf", atoms(rng.integers(1, 30, 16), slab, slab_cell, [True, True, False]), 4.5))
    # A slab whose non-periodic cell vector is zero (as many files have it).
    slab0 = slab_cell.copy()
    slab0[2] = 0.0
    cases.append(("slab_zero_c", atoms(rng.integers(1, 30, 16), slab, slab0, [True, True, False]), 4.5))
    wire_cell = np.array([[3.1, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    wire = np.column_stack([rng.uniform(0, 3.1, 6), rng.uniform(-1.5, 1.5, 6), rng.uniform(-1.5, 1.5, 6)])
    cases.append(("wire_tff", atoms([6] * 6, wire, wire_cell, [True, False, False]), 3.3))
    out = []
    for name, a, cutoff in cases:
        i, j, S = neighbor_list("ijS", a, cutoff)
        out.append({
            "name": name,
            "cutoff": cutoff,
            "positions": a.positions.tolist(),
            "cell": np.asarray(a.cell).tolist(),
            "pbc": [bool(x) for x in a.pbc],
            "edges": [[int(x), int(y)] + [int(s) for s in sv] for x, y, sv in zip(i, j, S)],
        })
        print(f"neighbors {name}: {len(a)} atoms, {len(i)} edges")
    with open(os.path.join(OUT, "neighbors.ase.json"), "w") as fh:
        json.dump(out, fh, separators=(",", ":"))


# -------------------------------------------------------------------- extxyz
def labelled(a, energy, forces, stress=None):
    kw = {"energy": energy, "forces": f32(forces)}
    if stress is not None:
        kw["stress"] = stress
    a.calc = SinglePointCalculator(a, **kw)
    return a


def ase_values(frames):
    """What ASE read: the reference the Rust import is compared against."""
    out = []
    for a in frames:
        d = {
            "numbers": a.numbers.tolist(),
            "positions": a.positions.tolist(),
            "cell": np.asarray(a.cell).tolist(),
            "pbc": [bool(x) for x in a.pbc],
            "info": {},
            "arrays": {},
        }
        if a.calc is not None:
            r = a.calc.results
            if "energy" in r:
                d["energy"] = float(r["energy"])
            if "forces" in r:
                d["forces"] = r["forces"].tolist()
            if "stress" in r:
                d["stress"] = a.get_stress(voigt=False).tolist()
        d["strings"] = {}
        for k, v in a.info.items():
            if isinstance(v, str):
                d["strings"][k] = v
                continue
            v = np.asarray(v)
            if v.dtype.kind in "ifb":
                d["info"][k] = v.tolist()
        for k, v in a.arrays.items():
            if k in ("numbers", "positions"):
                continue
            if v.dtype.kind in "ifb":
                d["arrays"][k] = v.tolist()
            elif v.dtype.kind in "UO":
                d["strings"][k] = v.tolist()
        out.append(d)
    return out


def write_case(name, frames, text_edit=None, parser=None):
    path = os.path.join(OUT, name + ".extxyz")
    write(path, frames, format="extxyz")
    if text_edit is not None:
        with open(path) as fh:
            text = fh.read()
        with open(path, "w") as fh:
            fh.write(text_edit(text))
    kw = {} if parser is None else {"properties_parser": parser}
    back = read(path, ":", format="extxyz", **kw)
    with open(os.path.join(OUT, name + ".ase.json"), "w") as fh:
        json.dump(ase_values(back), fh, separators=(",", ":"))
    print(f"extxyz {name}: {len(back)} frames")
    return back


def extxyz_cases():
    tri = np.array([[5.1, 0.0, 0.0], [1.7, 4.6, 0.0], [-1.2, 0.9, 5.3]])
    frames = []
    for k in range(3):
        n = 6 + k
        a = atoms(rng.integers(1, 30, n), random_in_cell(n, tri), tri, True)
        s = rng.normal(0, 0.05, (3, 3))
        labelled(a, float(-3.5 * n + rng.normal()), rng.normal(0, 1, (n, 3)), f32(s + s.T))
        a.info["step"] = 10 * k
        a.info["temperature"] = 300.0 + k
        a.info["ref_vector"] = f32(rng.normal(0, 1, 3))
        a.info["config_type"] = "bulk"
        a.new_array("ref_charges", f32(rng.normal(0, 0.3, n)))
        a.new_array("site_id", np.arange(n, dtype=np.int64))
        a.new_array("ref_dipoles", f32(rng.normal(0, 1, (n, 3))))
        a.new_array("label", np.array([f"s{i}" for i in range(n)]))
        frames.append(a)
    write_case("bulk_triclinic", frames)

    frames = []
    for k, n in enumerate([5, 9, 3]):
        a = atoms(rng.integers(1, 10, n), rng.uniform(-3, 3, (n, 3)))
        labelled(a, float(-2.0 * n + rng.normal()), rng.normal(0, 1, (n, 3)))
        frames.append(a)
    write_case("molecule", frames)

    slab_cell = np.array([[4.8, 0.0, 0.0], [2.4, 4.1, 0.0], [0.0, 0.0, 18.0]])
    frames = []
    for k in range(2):
        pos = random_in_cell(8, slab_cell, 0.0, 1.0, 0.8)
        pos[:, 2] = rng.uniform(4.0, 10.0, 8)
        a = atoms(rng.integers(1, 30, 8), pos, slab_cell, [True, True, False])
        labelled(a, float(-4.0 * 8 + rng.normal()), rng.normal(0, 1, (8, 3)))
        frames.append(a)
    write_case("slab", frames)

    # Voigt-6 stress ("xx yy zz yz xz xy"), as many MLIP exports write it.
    # ASE's default parser refuses a 6-value stress; its regex parser reads it.
    cub = np.diag([3.6, 3.6, 3.6])
    frames = []
    voigts = []
    for k in range(2):
        a = atoms([29] * 4, random_in_cell(4, cub, min_dist=1.5), cub, True)
        v = f32(rng.normal(0, 0.02, 6))
        voigts.append(v)
        labelled(a, float(-14.0 + rng.normal()), rng.normal(0, 1, (4, 3)))
        frames.append(a)

    def to_voigt(text):
        lines = text.split("\n")
        k = 0
        for i, line in enumerate(lines):
            if line.startswith("Lattice="):
                lines[i] = line + ' stress="' + " ".join(repr(float(x)) for x in voigts[k]) + '"'
                k += 1
        return "\n".join(lines)

    write_case("voigt_stress", frames, to_voigt, key_val_str_to_dict_regex)


def stats_case():
    """Molecules of H, C, N, O with energies from per-element E0s plus noise."""
    e0 = {1: -13.6, 6: -1029.0, 7: -1484.0, 8: -2041.0}
    frames = []
    for k in range(14):
        n = int(rng.integers(3, 12))
        z = rng.choice([1, 6, 7, 8], n)
        pos = []
        while len(pos) < n:
            p = rng.uniform(-2.5, 2.5, 3)
            if all(np.linalg.norm(p - q) > 0.9 for q in pos):
                pos.append(p)
        a = atoms(z, np.array(pos))
        energy = float(np.float32(sum(e0[int(x)] for x in z) + rng.normal(0, 0.5)))
        labelled(a, energy, rng.normal(0, 0.7, (n, 3)))
        frames.append(a)
    back = write_case("stats", frames)
    elements = sorted({int(x) for a in back for x in a.numbers})
    A = np.array([[np.sum(a.numbers == z) for z in elements] for a in back], dtype=float)
    # The store holds energies and forces as float32: compute from those.
    E = np.array([np.float32(a.get_potential_energy()) for a in back], dtype=float)
    F = np.concatenate([f32(a.get_forces()) for a in back])
    sol, *_ = np.linalg.lstsq(A, E, rcond=None)
    natoms = np.array([len(a) for a in back])
    epa = E / natoms
    cutoff = 3.0
    edges = np.array([len(neighbor_list("i", a, cutoff)) for a in back])
    stats = {
        "cutoff": cutoff,
        "num_samples": len(back),
        "num_atoms": int(natoms.sum()),
        "num_edges": int(edges.sum()),
        "atoms_per_sample": [int(natoms.min()), float(natoms.mean()), int(natoms.max())],
        "edges_per_sample": [int(edges.min()), float(edges.mean()), int(edges.max())],
        "elements": elements,
        "element_counts": [int(np.sum(A[:, k])) for k in range(len(elements))],
        "e0s": [float(x) for x in sol],
        "energy_per_atom_mean": float(epa.mean()),
        "energy_per_atom_std": float(epa.std()),
        "force_rms": float(np.sqrt(np.mean(F ** 2))),
        "avg_neighbors": float(edges.sum() / natoms.sum()),
    }
    with open(os.path.join(OUT, "stats.ase.json"), "w") as fh:
        json.dump(stats, fh, indent=1)
    print("stats", stats)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    neighbor_cases()
    extxyz_cases()
    stats_case()

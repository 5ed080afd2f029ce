#!/usr/bin/env python3
"""Writes the import fixtures under assets/import/formats/: one small file per
format, written by that format's own Python tool, and NAME.ref.json: the
frames as that tool reads them back, converted to eV, Å, eV/Å and eV/Å³
with ase.units (f64). cli/tests/import_formats.rs imports each file and checks
its dump against the reference.

Run by hand, never by CI (CI must not need these packages):

    python3 -m venv /tmp/venv-import
    /tmp/venv-import/bin/pip install ase h5py numpy lmdb orjson pymatgen
    /tmp/venv-import/bin/python scripts/import_reference.py

Also writes units.ase.json (ase.units' constants, to check atomzarr's) and
generates large benchmark inputs with --bench DIR N (see docs/FORMATS.md).

What each fixture holds:
- partial.extxyz (+ .gz, .xz, .bz2): ASE's bulk Ni (initial magmoms) and Cu
  (none), some frames with stress and some without, config_type strings, a
  per-atom string column; written by ase.io.write.
- asedb.db: ASE's SQLite database (ase.db.connect), with calculators,
  key_value_pairs (numbers and strings), a row without forces.
- fairchem.aselmdb: LMDB, subdir=False, key "<id>" -> zlib(orjson(row)) as
  fairchem's LMDBDatabase writes it, with nextid, metadata and a deleted id.
- spice.hdf5: the SPICE layout (a group per molecule: atomic_numbers,
  conformations in bohr, dft_total_energy in hartree, dft_total_gradient in
  hartree/bohr, smiles, subset), gzip-compressed chunked datasets, written by
  h5py.
- ani1x.h5: the ANI-1x layout (a group per formula: atomic_numbers,
  coordinates in Å, wb97x_dz.energy / .forces in hartree(/Å), ccsd(t)_cbs.energy
  NaN where missing).
- rmd17.npz and sgdml.npz: the rMD17 and sGDML key sets (kcal/mol, Å),
  written by numpy (sgdml compressed).
- mptrj.json: MPtrj's layout {mp_id: {frame_id: {structure (pymatgen's
  Structure.as_dict), corrected_total_energy, uncorrected_total_energy,
  force, stress (kBar, VASP sign), magmom, ...}}}.
- stress_voigt.* and stress_3x3.* (job `stress`, --only stress): the same
  three small periodic cells (NaCl, GaAs, CaF2; triclinic strain, energies,
  forces, a stress with six different components) with the stress as ASE's
  6-vector (xx yy zz yz xz xy) or as a 3x3 matrix, per format; the
  reference of FILE is FILE.ref.json (stress as 3x3, eV/Å³). What ASE 3.29
  writes (cli/tests/import_stress.rs checks each):
  - .extxyz: ase.io.write always writes a calculator's stress as 9 numbers
    (3x3 in Fortran order; a 6-vector is expanded first), so
    stress_3x3.extxyz (3x3 on the calculator) holds `stress="9 numbers"`
    and is byte-for-byte what a 6-vector calculator gives. A 6-number
    `stress=` comes from a 6-vector in atoms.info written with
    write_results=False: stress_voigt.extxyz. ASE's default extxyz parser
    refuses a 6-number stress (ValueError "expecting special 3x3 matrix");
    its reference is read with key_val_str_to_dict_regex, ASE's other
    parser. ASE's reader keeps only the upper triangle of a 9-number stress
    (it makes a 6-vector), so the extxyz stresses are symmetric.
  - .db (SQLite): `stress` is the array's raw float64 blob, 48 bytes for a
    6-vector, 72 for a 3x3 (row-major); ASE reads the 72 back as a flat
    9-vector (and get_stress() then fails), the reference reshapes it.
  - .aselmdb: orjson writes the 3x3 as a nested list [[..],[..],[..]]; no
    key_value_pairs, data, metadata or deleted_ids (fairchem writes those
    only when given).
  In the .db and .aselmdb 3x3 files the third cell's stress is not
  symmetric (ASE keeps it as written there), so a transposed matrix is
  caught too.
"""
import argparse
import bz2
import gzip
import json
import lzma
import os
import shutil
import sqlite3
import zlib

import numpy as np
from ase import Atoms, units
from ase.build import bulk, molecule
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import read, write

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "import", "formats")
rng = np.random.default_rng(23)


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def tolist(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return x


def ref_frame(numbers, positions, cell, pbc, fields=None, strings=None):
    """One reference frame: fields in the store's units (f64)."""
    out = {
        "numbers": [int(z) for z in numbers],
        "positions": np.asarray(positions, dtype=float).tolist(),
        "cell": np.asarray(cell, dtype=float).reshape(3, 3).tolist(),
        "pbc": [bool(p) for p in pbc],
        "fields": {k: tolist(np.asarray(v)) for k, v in (fields or {}).items()},
        "strings": dict(strings or {}),
    }
    return out


def voigt_to_3x3(s):
    xx, yy, zz, yz, xz, xy = s
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def ase_fields(a):
    """What an ASE Atoms carries, as the importer names it."""
    f = {}
    calc = a.calc
    if calc is not None:
        res = calc.results
        if "energy" in res:
            f["energy"] = [res["energy"]]
        if "free_energy" in res:
            f["free_energy"] = [res["free_energy"]]
        if "forces" in res:
            f["forces"] = res["forces"]
        if "stress" in res:
            s = np.asarray(res["stress"])
            # ASE's SQLite db hands a 3x3 stress back flat (9 values, row-major).
            f["stress"] = voigt_to_3x3(s) if s.shape == (6,) else s.reshape(3, 3)
        if "magmoms" in res:
            f["magmoms"] = res["magmoms"]
        if "magmom" in res:
            f["magmom"] = [res["magmom"]]
        if "dipole" in res:
            f["dipole"] = res["dipole"]
        if "charges" in res:
            f["charges"] = res["charges"]
    if a.has("initial_magmoms"):
        f["initial_magmoms"] = a.get_initial_magnetic_moments()
    if a.has("tags"):
        f["tags"] = a.get_tags()
    return f


def no_nan(x):
    """NaN (an absent label) as null: strict JSON readers refuse NaN."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, list):
        return [no_nan(v) for v in x]
    if isinstance(x, dict):
        return {k: no_nan(v) for k, v in x.items()}
    return x


def row_frame(row, row_id):
    """An ASE database row as the importer keeps it: the Atoms' fields,
    numeric key-value pairs as fields, string ones as labels, the id."""
    a = row.toatoms()
    fields = ase_fields(a)
    strings = {}
    for k, v in row.key_value_pairs.items():
        if isinstance(v, str):
            strings[k] = v
        else:
            fields[k] = [v]
    fields["ase_id"] = [row_id]
    return ref_frame(a.numbers, a.positions, a.cell.array, a.pbc, fields, strings)


def write_json(name, obj):
    with open(os.path.join(OUT, name), "w") as fh:
        json.dump(no_nan(obj), fh, indent=None, separators=(",", ":"), allow_nan=False)


# ------------------------------------------------------------------ extxyz
def partial_frames():
    frames = []
    for i, (sym, a0) in enumerate([("Ni", 3.52), ("Cu", 3.61), ("Ni", 3.50), ("Cu", 3.63), ("Al", 4.05)]):
        a = bulk(sym, "fcc", a=a0, cubic=True)
        a.positions = f32(a.positions + rng.normal(0, 0.05, a.positions.shape))
        a.cell = f32(a.cell)
        if sym == "Ni":
            a.set_initial_magnetic_moments(f32(rng.uniform(0.5, 0.7, len(a))))
        res = {"energy": float(f32(-4.0 * len(a) + rng.normal())), "forces": f32(rng.normal(0, 0.3, (len(a), 3)))}
        if i in (0, 3):
            res["stress"] = f32(rng.normal(0, 0.01, 6))
        a.calc = SinglePointCalculator(a, **res)
        a.info["config_type"] = "bulk_" + sym.lower()
        if i == 2:
            a.info["note"] = "hand picked"
        a.new_array("site", np.array([f"s{k}" for k in range(len(a))]))
        frames.append(a)
    return frames


def extxyz():
    path = os.path.join(OUT, "partial.extxyz")
    write(path, partial_frames(), format="extxyz")
    raw = open(path, "rb").read()
    for ext, mod in (("gz", gzip), ("xz", lzma), ("bz2", bz2)):
        with open(path + "." + ext, "wb") as fh:
            fh.write(mod.compress(raw))
    ref = []
    for a in read(path, ":"):
        strings = {k: v for k, v in a.info.items() if isinstance(v, str)}
        fields = ase_fields(a)
        for k, v in a.info.items():
            if not isinstance(v, str):
                fields[k] = np.atleast_1d(v)
        ref.append(ref_frame(a.numbers, a.positions, a.cell.array, a.pbc, fields, strings | {"site": list(a.arrays["site"])}))
    write_json("partial.ref.json", ref)


# ------------------------------------------------------------------- ASE db
def db_atoms():
    out = []
    for i in range(4):
        if i % 2 == 0:
            a = molecule(["H2O", "CH4", "NH3", "CO2"][i])
            a.positions = f32(a.positions + rng.normal(0, 0.02, a.positions.shape))
            a.center(vacuum=0.0)
        else:
            a = bulk(["Si", "Fe", "Cu", "Al"][i], cubic=False)
            a.positions = f32(a.positions)
            a.cell = f32(a.cell)
        res = {"energy": float(f32(rng.normal(-10, 1)))}
        if i != 2:
            res["forces"] = f32(rng.normal(0, 0.2, (len(a), 3)))
        if a.pbc.any():
            res["stress"] = f32(rng.normal(0, 0.01, 6))
        a.calc = SinglePointCalculator(a, **res)
        if i == 3:
            a.set_tags(np.arange(len(a)))
        out.append(a)
    return out


def asedb():
    from ase.db import connect

    path = os.path.join(OUT, "asedb.db")
    if os.path.exists(path):
        os.remove(path)
    db = connect(path)
    for i, a in enumerate(db_atoms()):
        db.write(a, config_type=["molecule", "bulk"][i % 2], weight=float(i) + 0.5, step=i)
    ref = []
    for row in db.select():
        ref.append(row_frame(row, row.id))
    write_json("asedb.ref.json", ref)


# ---------------------------------------------------------------- aselmdb
def fairchem_row(a, ctime, mtime):
    """The row dict fairchem's LMDBDatabase._write stores for atoms `a`."""
    from ase.db.row import AtomsRow

    row = AtomsRow(a)
    row.ctime = ctime
    row.user = "fixture"
    dct = {}
    for key in row.__dict__:
        if key[0] == "_" or key in row._keys or key == "id":
            continue
        dct[key] = row[key]
    dct["mtime"] = mtime
    dct["cell"] = np.asarray(dct["cell"])
    return dct


def fresh_lmdb(path, map_size):
    """A new LMDB file at `path` (any old one and its lock file removed)."""
    import lmdb

    for p in (path, path + "-lock"):
        if os.path.exists(p):
            os.remove(p)
    return lmdb.open(path, map_size=map_size, subdir=False, meminit=False, map_async=True)


def close_lmdb(env, path):
    """Closes a written LMDB file and removes its lock file."""
    env.close()
    if os.path.exists(path + "-lock"):
        os.remove(path + "-lock")


def aselmdb():
    """As fairchem's LMDBDatabase._write stores rows (see its source)."""
    import lmdb
    import orjson
    from ase.db.row import AtomsRow

    path = os.path.join(OUT, "fairchem.aselmdb")
    env = fresh_lmdb(path, 1 << 24)
    txn = env.begin(write=True)
    nextid = 1
    kvps = []
    for i, a in enumerate(db_atoms() + db_atoms()[:2]):
        dct = fairchem_row(a, 1.0 + i, 2.0 + i)
        kvp = {"sid": f"sys-{100 + i}", "fid": i, "oc_energy": float(i) * 0.25}
        dct["key_value_pairs"] = kvp
        dct["data"] = {"note": "kept out", "arr": np.arange(3)}
        txn.put(f"{nextid}".encode("ascii"), zlib.compress(orjson.dumps(dct, option=orjson.OPT_SERIALIZE_NUMPY)))
        kvps.append((nextid, kvp))
        nextid += 1
    txn.put(b"nextid", zlib.compress(orjson.dumps(nextid)))
    deleted = [3]
    txn.delete(b"3")
    txn.put(b"deleted_ids", zlib.compress(orjson.dumps(deleted)))
    txn.put(b"metadata", zlib.compress(orjson.dumps({"natoms": "varies"})))
    txn.commit()
    close_lmdb(env, path)
    # Read back as fairchem does: ids 1..nextid without the deleted ones.
    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    ref = []
    with env.begin() as t:
        nextid = orjson.loads(zlib.decompress(t.get(b"nextid")))
        deleted = orjson.loads(zlib.decompress(t.get(b"deleted_ids")))
        for i in range(1, nextid):
            if i in deleted:
                continue
            dct = orjson.loads(zlib.decompress(t.get(f"{i}".encode("ascii"))))
            dct["id"] = i
            ref.append(row_frame(AtomsRow(dct), i))
    env.close()
    write_json("fairchem.ref.json", ref)


# ----------------------------------------------------------------- stress
def stress_cells():
    """Three small periodic cells, each with an energy, forces and a Voigt
    stress (xx yy zz yz xz xy) whose six components all differ; positions,
    cells and labels rounded to float32. Their own generator, so that
    `--only stress` and a full run write the same files."""
    g = np.random.default_rng(61)
    out = []
    for name, kind, a0 in (("NaCl", "rocksalt", 5.64), ("GaAs", "zincblende", 5.65), ("CaF2", "fluorite", 5.46)):
        a = bulk(name, kind, a=a0)
        strain = np.eye(3) + g.normal(0, 0.02, (3, 3))
        a.set_cell(f32(a.cell.array @ strain), scale_atoms=True)
        a.positions = f32(a.positions + g.normal(0, 0.04, a.positions.shape))
        energy = float(f32(g.normal(-4.0 * len(a), 0.5)))
        forces = f32(g.normal(0, 0.3, (len(a), 3)))
        # Magnitudes 0.003..0.05 eV/A^3 (ASE prints them without an exponent;
        # its regex parser would read "5e-05" as an integer), signs mixed.
        voigt = f32(g.uniform(0.003, 0.05, 6) * g.choice([-1.0, 1.0], 6))
        out.append((a, energy, forces, voigt))
    return out


def stress_3x3(voigt, k, symmetric):
    m = voigt_to_3x3(voigt)
    if not symmetric and k == 2:
        m = f32(m + np.array([[0.0, 0.0041, -0.0023], [-0.0017, 0.0, 0.0036], [0.0029, -0.0052, 0.0]]))
    return m


def stress_calc_atoms(shape, symmetric):
    """The cells with a SinglePointCalculator holding the stress as `shape`."""
    frames = []
    for k, (a, energy, forces, voigt) in enumerate(stress_cells()):
        a = a.copy()
        s = voigt if shape == "voigt" else stress_3x3(voigt, k, symmetric)
        a.calc = SinglePointCalculator(a, energy=energy, forces=forces, stress=s)
        frames.append(a)
    return frames


def extxyz_ref(atoms_list):
    ref = []
    for a in atoms_list:
        fields = ase_fields(a)
        strings = {}
        for k, v in a.info.items():
            if isinstance(v, str):
                strings[k] = v
            else:
                fields[k] = np.atleast_1d(v)
        ref.append(ref_frame(a.numbers, a.positions, a.cell.array, a.pbc, fields, strings))
    return ref


def stress():
    import lmdb
    import orjson
    from ase.db import connect
    from ase.db.row import AtomsRow
    from ase.io.extxyz import key_val_str_to_dict_regex

    def out(name):
        return os.path.join(OUT, name)

    # extxyz, 3x3 on the calculator: ASE writes stress="9 numbers" (Fortran
    # order), the same bytes as a 6-vector calculator gives.
    path = out("stress_3x3.extxyz")
    write(path, stress_calc_atoms("3x3", True), format="extxyz")
    other = out("stress_voigt_calc.tmp.extxyz")
    write(other, stress_calc_atoms("voigt", True), format="extxyz")
    assert open(other).read() == open(path).read(), "ASE wrote a 6-vector calculator stress differently"
    os.remove(other)
    write_json("stress_3x3.extxyz.ref.json", extxyz_ref(read(path, ":", format="extxyz")))

    # extxyz, Voigt: a 6-vector in atoms.info, written with write_results=False
    # (energy and forces as info / arrays, which ASE reads back as results).
    path = out("stress_voigt.extxyz")
    frames = []
    for a, energy, forces, voigt in stress_cells():
        a = a.copy()
        a.info["energy"] = energy
        a.info["stress"] = voigt
        a.new_array("forces", forces)
        frames.append(a)
    write(path, frames, format="extxyz", write_results=False)
    try:
        read(path, ":", format="extxyz")
        raise AssertionError("ASE's default parser now reads a 6-number stress: drop the regex parser")
    except ValueError:
        pass
    back = read(path, ":", format="extxyz", properties_parser=key_val_str_to_dict_regex)
    for a, (_, _, _, voigt) in zip(back, stress_cells()):
        assert a.calc.results["stress"].shape == (6,) and np.array_equal(a.calc.results["stress"], voigt)
    write_json("stress_voigt.extxyz.ref.json", extxyz_ref(back))

    # ASE's SQLite database: the stress blob is 6 or 9 float64.
    for shape, nbytes in (("voigt", 48), ("3x3", 72)):
        path = out(f"stress_{shape}.db")
        if os.path.exists(path):
            os.remove(path)
        db = connect(path)
        for a in stress_calc_atoms(shape, False):
            db.write(a)
        with sqlite3.connect(path) as c:
            lens = [n for (n,) in c.execute("SELECT length(stress) FROM systems ORDER BY id")]
        assert lens == [nbytes] * 3, lens
        write_json(f"stress_{shape}.db.ref.json", [row_frame(row, row.id) for row in db.select()])

    # fairchem's .aselmdb: LMDBDatabase._write's row dict, zlib(orjson(...)).
    for shape in ("voigt", "3x3"):
        path = out(f"stress_{shape}.aselmdb")
        env = fresh_lmdb(path, 1 << 22)
        txn = env.begin(write=True)
        nextid = 1
        for i, a in enumerate(stress_calc_atoms(shape, False)):
            dct = fairchem_row(a, 10.0 + i, 20.0 + i)
            txn.put(f"{nextid}".encode("ascii"), zlib.compress(orjson.dumps(dct, option=orjson.OPT_SERIALIZE_NUMPY)))
            nextid += 1
            txn.put(b"nextid", zlib.compress(orjson.dumps(nextid, option=orjson.OPT_SERIALIZE_NUMPY)))
        txn.commit()
        close_lmdb(env, path)
        env = lmdb.open(path, subdir=False, readonly=True, lock=False)
        ref = []
        with env.begin() as t:
            for i in range(1, orjson.loads(zlib.decompress(t.get(b"nextid")))):
                dct = orjson.loads(zlib.decompress(t.get(f"{i}".encode("ascii"))))
                s = dct["stress"]
                assert (len(s) == 6 and all(isinstance(x, float) for x in s)) if shape == "voigt" else (
                    len(s) == 3 and all(isinstance(r, list) and len(r) == 3 for r in s)), s
                dct["id"] = i
                ref.append(row_frame(AtomsRow(dct), i))
        env.close()
        write_json(f"stress_{shape}.aselmdb.ref.json", ref)


# ------------------------------------------------------------------- HDF5
def spice():
    import h5py

    path = os.path.join(OUT, "spice.hdf5")
    mols = [("water", "[H]O[H]", [8, 1, 1], 3), ("methane", "[H]C([H])([H])[H]", [6, 1, 1, 1, 1], 2)]
    ref = []
    with h5py.File(path, "w") as f:
        for name, smiles, z, m in mols:
            g = f.create_group(name)
            n = len(z)
            g.create_dataset("atomic_numbers", data=np.array(z, dtype=np.int16))
            conf = rng.normal(0, 1.5, (m, n, 3)).astype(np.float32)
            e = rng.normal(-76.0, 0.1, m)
            grad = rng.normal(0, 0.02, (m, n, 3)).astype(np.float32)
            q = rng.normal(0, 0.3, (m, n, 1)).astype(np.float32)
            g.create_dataset("conformations", data=conf, compression="gzip", chunks=(1, n, 3))
            g.create_dataset("dft_total_energy", data=e)
            g.create_dataset("dft_total_gradient", data=grad, compression="gzip")
            g.create_dataset("formation_energy", data=e + 75.0)
            g.create_dataset("mbis_charges", data=q)
            g.create_dataset("smiles", data=[smiles], dtype=h5py.string_dtype())
            g.create_dataset("subset", data=["SPICE PubChem Set 1"], dtype=h5py.string_dtype())
    # Read back the usual way: h5py and a loop over conformers.
    with h5py.File(path, "r") as f:
        for name in f:
            g = f[name]
            z = g["atomic_numbers"][()]
            for k in range(g["conformations"].shape[0]):
                pos = g["conformations"][k].astype(np.float64) * units.Bohr
                fields = {
                    "energy": [g["dft_total_energy"][k] * units.Hartree],
                    "forces": -g["dft_total_gradient"][k].astype(np.float64) * units.Hartree / units.Bohr,
                    "formation_energy": [g["formation_energy"][k] * units.Hartree],
                    "mbis_charges": g["mbis_charges"][k],
                }
                strings = {
                    "molecule": name,
                    "smiles": g["smiles"][0].decode(),
                    "subset": g["subset"][0].decode(),
                }
                ref.append(ref_frame(z, pos, np.zeros((3, 3)), [False] * 3, fields, strings))
    write_json("spice.ref.json", ref)


def ani1x():
    import h5py

    path = os.path.join(OUT, "ani1x.h5")
    ref = []
    groups = [("C1H4", [6, 1, 1, 1, 1], 3), ("H2O1", [8, 1, 1], 2)]
    with h5py.File(path, "w") as f:
        for formula, z, m in groups:
            g = f.create_group(formula)
            n = len(z)
            g.create_dataset("atomic_numbers", data=np.array(z, dtype=np.uint8))
            g.create_dataset("coordinates", data=rng.normal(0, 0.8, (m, n, 3)).astype(np.float32), compression="gzip")
            g.create_dataset("wb97x_dz.energy", data=rng.normal(-40.0, 0.1, m))
            g.create_dataset("wb97x_dz.forces", data=rng.normal(0, 0.03, (m, n, 3)).astype(np.float32), compression="gzip")
            cc = rng.normal(-40.2, 0.1, m)
            cc[0] = np.nan
            g.create_dataset("ccsd(t)_cbs.energy", data=cc)
    with h5py.File(path, "r") as f:
        for formula in f:
            g = f[formula]
            z = g["atomic_numbers"][()]
            for k in range(g["coordinates"].shape[0]):
                fields = {
                    "energy": [g["wb97x_dz.energy"][k] * units.Hartree],
                    "forces": g["wb97x_dz.forces"][k].astype(np.float64) * units.Hartree,
                    "ccsd(t)_cbs.energy": [g["ccsd(t)_cbs.energy"][k] * units.Hartree],
                }
                ref.append(ref_frame(z, g["coordinates"][k], np.zeros((3, 3)), [False] * 3, fields, {"formula": formula}))
    write_json("ani1x.ref.json", ref)


# -------------------------------------------------------------------- npz
def npz():
    kcal = units.kcal / units.mol
    m, z = 4, np.array([6, 6, 8, 1, 1, 1, 1, 1, 1])
    n = len(z)
    coords = rng.normal(0, 1.2, (m, n, 3))
    energies = rng.normal(-97000.0, 2.0, m)
    forces = rng.normal(0, 20.0, (m, n, 3))
    np.savez(os.path.join(OUT, "rmd17.npz"), nuclear_charges=z, coords=coords, energies=energies, forces=forces,
             old_indices=np.arange(m) * 10, old_energies=energies + 1.0, old_forces=forces * 0.5)
    d = np.load(os.path.join(OUT, "rmd17.npz"))
    ref = []
    for k in range(m):
        fields = {
            "energy": [d["energies"][k] * kcal],
            "forces": d["forces"][k] * kcal,
            "old_indices": [d["old_indices"][k]],
            "old_energies": [d["old_energies"][k] * kcal],
            "old_forces": d["old_forces"][k] * kcal,
        }
        ref.append(ref_frame(d["nuclear_charges"], d["coords"][k], np.zeros((3, 3)), [False] * 3, fields))
    write_json("rmd17.ref.json", ref)

    R = rng.normal(0, 1.2, (m, n, 3))
    E = rng.normal(-97000.0, 2.0, (m, 1))
    F = rng.normal(0, 20.0, (m, n, 3))
    np.savez_compressed(os.path.join(OUT, "sgdml.npz"), z=z, R=R, E=E, F=F, name=np.array("ethanol"),
                        theory=np.array("CCSD(T)/cc-pVTZ"), r_unit=np.array("Ang"), e_unit=np.array("kcal/mol"),
                        type=np.array("d"), md5=np.array("0123456789abcdef"))
    d = np.load(os.path.join(OUT, "sgdml.npz"))
    ref = []
    for k in range(m):
        fields = {"energy": [d["E"][k][0] * kcal], "forces": d["F"][k] * kcal}
        strings = {"name": str(d["name"]), "theory": str(d["theory"])}
        ref.append(ref_frame(d["z"], d["R"][k], np.zeros((3, 3)), [False] * 3, fields, strings))
    write_json("sgdml.ref.json", ref)


# ------------------------------------------------------------------ MPtrj
def mptrj_doc(n_materials, frames_per, rng, with_magmom_every=2):
    from pymatgen.core import Lattice, Structure

    doc = {}
    for i in range(n_materials):
        mp = f"mp-{1000 + i}"
        doc[mp] = {}
        els = ["Li", "O"] if i % 2 == 0 else ["Fe", "O", "O"]
        for j in range(frames_per):
            lat = Lattice(f32(np.diag(rng.uniform(3.0, 5.0, 3)) + rng.normal(0, 0.1, (3, 3))))
            s = Structure(lat, els, f32(rng.uniform(0, 1, (len(els), 3))))
            n = len(s)
            e_unc = float(rng.normal(-5.0 * n, 1.0))
            frame = {
                "structure": s.as_dict(),
                "uncorrected_total_energy": e_unc,
                "corrected_total_energy": e_unc - 0.7,
                "energy_per_atom": e_unc / n,
                "ef_per_atom": float(rng.normal(-1, 0.1)),
                "e_per_atom_relaxed": e_unc / n - 0.01,
                "ef_per_atom_relaxed": float(rng.normal(-1, 0.1)),
                "force": rng.normal(0, 0.5, (n, 3)).tolist(),
                "stress": rng.normal(0, 5.0, (3, 3)).tolist(),
                "magmom": rng.uniform(0, 3, n).tolist() if (i + j) % with_magmom_every == 0 else None,
                "bandgap": float(rng.uniform(0, 2)),
                "mp_id": mp,
            }
            doc[mp][f"{mp}-{j}-{i}"] = frame
    return doc


def mptrj():
    from pymatgen.core import Structure

    path = os.path.join(OUT, "mptrj.json")
    with open(path, "w") as fh:
        json.dump(mptrj_doc(3, 2, rng), fh)
    ref = []
    with open(path) as fh:
        doc = json.load(fh)
    for mp, frames in doc.items():
        for fid, fr in frames.items():
            s = Structure.from_dict(fr["structure"])
            fields = {
                "energy": [fr["corrected_total_energy"]],
                "uncorrected_total_energy": [fr["uncorrected_total_energy"]],
                "forces": np.array(fr["force"]),
                # VASP's kBar, compressive positive -> ASE's sign, eV/A^3.
                "stress": np.array(fr["stress"]) * (-0.1 * units.GPa),
                "magmoms": np.full(len(s), np.nan) if fr["magmom"] is None else np.array(fr["magmom"]),
            }
            for k in ("energy_per_atom", "ef_per_atom", "e_per_atom_relaxed", "ef_per_atom_relaxed", "bandgap"):
                fields[k] = [fr[k]]
            strings = {"mp_id": mp, "frame_id": fid}
            ref.append(ref_frame(s.atomic_numbers, s.cart_coords, s.lattice.matrix, s.lattice.pbc, fields, strings))
    write_json("mptrj.ref.json", ref)


def units_ref():
    names = ["Bohr", "Hartree", "kcal", "kJ", "mol", "GPa", "bar", "Rydberg"]
    write_json("units.ase.json", {k: float(getattr(units, k)) for k in names})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    jobs = {"extxyz": extxyz, "asedb": asedb, "aselmdb": aselmdb, "spice": spice, "ani1x": ani1x, "npz": npz,
            "mptrj": mptrj, "units": units_ref, "stress": stress}
    for name, job in jobs.items():
        if a.only and name not in a.only:
            continue
        job()
        print("wrote", name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes two small EMT data sets for a multi-task training example.

Run by hand, never by CI (CI must not need ASE):

    python3 -m venv /work/venv-ase && /work/venv-ase/bin/pip install ase numpy
    /work/venv-ase/bin/python scripts/make_multitask_sets.py --out assets/multitask

Writes (extended XYZ, via ase.io.write with a SinglePointCalculator):
- periodic.extxyz: 240 periodic bulk frames (pbc=True, a Lattice cell), each
  with energy (eV), forces (eV/A) and stress (eV/A^3, as ASE stores it).
  fcc Cu, Ni, Au, Al and random binary alloys of them; cubic 4-atom cells or
  2x1x1 8-atom cells (about half each); random isotropic plus shear strain of
  up to +-3 %; atoms rattled with a stdev drawn from 0.05-0.1 A.
  Alloys use the composition-weighted lattice constant (Vegard's law).
- molecules.extxyz: 240 molecular frames, no cell and pbc=False (no Lattice
  key), each with energy and forces but no stress. Small molecules from
  ase.build.molecule made of H, C, N, O only, rattled with a stdev drawn from
  0.03-0.08 A.

To mimic a different level of theory, each molecular energy is the EMT energy
plus a per-element reference offset (eV per atom):

    H -0.5, C -1.2, N -0.9, O -1.0

Forces are EMT's, unchanged (a constant per-element offset has no gradient).
The periodic energies are plain EMT.

All randomness comes from numpy.random.default_rng(0); the output is
deterministic.
"""
import argparse
import os

import numpy as np
from ase.build import bulk, molecule
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.data import atomic_numbers, reference_states
from ase.io import write

N_PERIODIC = 240
N_MOLECULES = 240

METALS = ["Cu", "Ni", "Au", "Al"]
MOLECULES = [
    "CH4", "NH3", "H2O", "C2H6", "C2H4", "CH3OH", "HCN", "CO2", "N2", "H2CO",
    "C2H2", "CH3CHO", "CO", "H2", "O2", "NO", "N2O", "HCOOH", "CH3CN", "H2O2",
    "N2H4", "CH3OCH3", "C3H8", "CH3CH2OH",
]
OFFSETS = {"H": -0.5, "C": -1.2, "N": -0.9, "O": -1.0}


def lattice_constant(sym):
    return reference_states[atomic_numbers[sym]]["a"]


def periodic_frame(rng):
    if rng.random() < 0.4:
        a_sym = b_sym = METALS[rng.integers(len(METALS))]
    else:
        a_sym, b_sym = rng.choice(METALS, size=2, replace=False)
    atoms = bulk(a_sym, "fcc", a=1.0, cubic=True)
    if rng.random() < 0.5:
        atoms = atoms.repeat((2, 1, 1))
    n = len(atoms)
    n_b = 0
    if b_sym != a_sym:
        # at least one atom of each element
        n_b = int(rng.integers(1, n))
        symbols = [a_sym] * (n - n_b) + [b_sym] * n_b
        atoms.set_chemical_symbols([symbols[i] for i in rng.permutation(n)])
    # Vegard's law: lattice constant linear in the composition
    a = ((n - n_b) * lattice_constant(a_sym) + n_b * lattice_constant(b_sym)) / n
    atoms.set_cell(atoms.cell[:] * a, scale_atoms=True)
    # isotropic plus shear strain, each component within +-3 %
    eps = rng.uniform(-0.03, 0.03) * np.eye(3)
    shear = rng.uniform(-0.03, 0.03, size=(3, 3))
    eps += 0.5 * (shear + shear.T) - np.trace(shear) / 3.0 * np.eye(3)
    eps = np.clip(eps, -0.03, 0.03)
    atoms.set_cell(atoms.cell[:] @ (np.eye(3) + eps), scale_atoms=True)
    atoms.positions += rng.normal(0.0, rng.uniform(0.05, 0.1), size=(n, 3))
    atoms.pbc = True
    atoms.calc = EMT()
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    stress = atoms.get_stress()  # Voigt, eV/A^3
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces, stress=stress)
    return atoms


def molecule_frame(rng):
    atoms = molecule(MOLECULES[rng.integers(len(MOLECULES))])
    atoms.info.clear()
    atoms.positions += rng.normal(0.0, rng.uniform(0.03, 0.08), size=(len(atoms), 3))
    atoms.pbc = False
    atoms.cell = np.zeros((3, 3))
    atoms.calc = EMT()
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    energy += sum(OFFSETS[s] for s in atoms.get_chemical_symbols())
    atoms.calc = SinglePointCalculator(atoms, energy=energy, forces=forces)
    return atoms


def main():
    here = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(here, "assets", "multitask"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.default_rng(0)
    periodic = [periodic_frame(rng) for _ in range(N_PERIODIC)]
    molecules = [molecule_frame(rng) for _ in range(N_MOLECULES)]

    for name, frames in (("periodic.extxyz", periodic), ("molecules.extxyz", molecules)):
        path = os.path.join(args.out, name)
        write(path, frames, format="extxyz")
        atoms = sum(len(f) for f in frames)
        print(f"{path}: {len(frames)} frames, {atoms} atoms, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()

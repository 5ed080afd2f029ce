#!/usr/bin/env python3
"""The split hash of atomzarr (`fnv1a64-splitmix64/1`), in plain Python.

`atomzarr split` assigns each group of samples (a label's value, or the
sample's physical index in decimal) to a part from this hash of (seed, key),
so a split can be rebuilt from the rule alone, here as well as in Rust. See
`atomzarr::data::hash` for the algorithm in words.

    python3 scripts/split_hash.py                 # writes assets/split/hash_vectors.json
    python3 scripts/split_hash.py --seed 0 --key mp-149 --fractions train=0.8,val=0.1,test=0.1

The test vectors are the fixture tests/split.rs compares the Rust values
with; the Rust side never ran this script's code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

M = (1 << 64) - 1


def fnv1a64(h: int, data: bytes) -> int:
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M
    return h


def splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def split_unit(seed: int, key: str) -> float:
    h = fnv1a64(fnv1a64(0xCBF29CE484222325, seed.to_bytes(8, "little")), key.encode())
    return (splitmix64(h) >> 11) / 2.0**53


def part(seed: int, key: str, fractions: list[tuple[str, float]]) -> str:
    u, c = split_unit(seed, key), 0.0
    for name, f in fractions:
        c += f
        if u < c:
            return name
    return fractions[-1][0]


def parse_fractions(s: str) -> list[tuple[str, float]]:
    out = []
    for item in s.split(","):
        name, f = item.split("=")
        out.append((name, float(f)))
    return out


def vectors() -> dict:
    fractions = [("train", 0.8), ("val", 0.1), ("test", 0.1)]
    keys = ["mp-149", "mp-13", "", "0", "1", "999999", "CCO", "c1ccccc1", "aimd", "Ar₂ dimer", "x" * 100]
    seeds = [0, 1, 42, 2**63 + 5, M]
    rows = []
    for seed in seeds:
        for key in keys:
            rows.append({"seed": seed, "key": key, "unit": split_unit(seed, key), "part": part(seed, key, fractions)})
    # Samples keyed by physical index, as a split without --by keys them.
    names = [n for n, _ in fractions]
    index_parts = "".join(str(names.index(part(7, str(i), fractions))) for i in range(200))
    return {
        "hash": "fnv1a64-splitmix64/1",
        "fractions": fractions,
        "vectors": rows,
        "seed7_indices_0_200_parts": index_parts,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--key")
    ap.add_argument("--fractions", default="train=0.8,val=0.1,test=0.1")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "assets/split/hash_vectors.json")
    a = ap.parse_args()
    if a.key is not None:
        seed = a.seed or 0
        print(json.dumps({"unit": split_unit(seed, a.key), "part": part(seed, a.key, parse_fractions(a.fractions))}))
        return
    a.out.parent.mkdir(parents=True, exist_ok=True)
    v = vectors()
    rows = ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in v.pop("vectors"))
    head = json.dumps(v, ensure_ascii=False)[:-1]
    a.out.write_text(f'{head}, "vectors": [\n  {rows}\n]}}\n')
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

"""Samples/s of a weighted mixture read through `atomzarr.DataLoader` from
Python, shuffled and unshuffled (the same sampler with `shuffle=False`),
keeping only each batch's `indices` while timing: what to set beside
`atomzarr read STORE... --weights ... --num-samples N --read-order shuffle`
(the CLI's figure for the same mixture). One JSON line per run.

    python scripts/mixture_python.py --weights 0.7,0.2,0.1 --num-samples 4000000 \\
        --shuffle true 10M.zarr 1M.zarr 100k.zarr
"""

import argparse
import json
import time

import atomzarr


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stores", nargs="+")
    p.add_argument("--weights", required=True)
    p.add_argument("--num-samples", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--prefetch-factor", type=int, default=16)
    p.add_argument("--shuffle", choices=["true", "false"], default="true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-bytes", type=int, default=None, help="the mixture's decoded-chunk budget (as read --cache-bytes)")
    a = p.parse_args()
    t0 = time.perf_counter()
    # output_strict off: stores with different labels mix as their union.
    multi = atomzarr.MultiDataset(*[atomzarr.open(s) for s in a.stores], output_strict=False, cache_bytes=a.cache_bytes)
    sampler = atomzarr.MultiDatasetSampler(
        multi,
        weights=[float(w) for w in a.weights.split(",")],
        num_samples=a.num_samples,
        shuffle=a.shuffle == "true",
        seed=a.seed,
    )
    loader = atomzarr.DataLoader(multi, batch_size=a.batch_size, sampler=sampler, prefetch_factor=a.prefetch_factor)
    n, first = 0, None
    for b in loader:
        n += len(b["indices"])
        if first is None:
            first = time.perf_counter() - t0
    took = time.perf_counter() - t0
    print(json.dumps({"shuffle": a.shuffle == "true", "samples": n, "seconds": took,
                      "samples_per_s": n / took, "first_batch_s": first}))


if __name__ == "__main__":
    main()

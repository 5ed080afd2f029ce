"""Memory and time of one data-parallel rank reading a store from Python.

    python scripts/rank_memory.py STORE [--rank R] [--world-size W] [--order shuffle|sequential]
                                        [--batches 200] [--batch-size 64] [--prefetch 16] [--epoch]

Prints, for the points a rank passes (after `open`, after the first batch,
after `--batches` more), the resident memory (VmRSS) above the bare
interpreter's, what the reader's chunk cache holds (`cache_bytes_held()`)
and the memory beyond it, the pointer pages held (`pointer_bytes_held()`,
part of the memory beyond the cache), and the seconds from `import
atomzarr`. `--epoch` then reads the rest of the rank's epoch and prints its
rate (samples per second from the first batch on). One JSON
line at the end holds the same figures. Run it in a fresh process per
measurement: the figures are the process's.
"""

import argparse
import json
import time


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world-size", type=int, default=8)
    p.add_argument("--order", choices=["shuffle", "sequential"], default="shuffle")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--prefetch", type=int, default=16)
    p.add_argument("--epoch", action="store_true", help="read the rest of the rank's epoch and report its rate")
    a = p.parse_args()

    base = rss_bytes()
    t0 = time.perf_counter()
    import atomzarr

    t_import = time.perf_counter() - t0
    r = atomzarr.open(a.store, skip_validation=True)
    points = []

    def point(name):
        rss = rss_bytes() - base
        held = r.cache_bytes_held()
        points.append(
            {
                "point": name,
                "seconds": round(time.perf_counter() - t0, 3),
                "rss_above_interpreter_mb": round(rss / 1e6, 1),
                "cache_held_mb": round(held / 1e6, 1),
                "beyond_cache_mb": round((rss - held) / 1e6, 1),
                "pointers_mb": round(r.pointer_bytes_held() / 1e6, 1),
            }
        )
        print("{point:>18}: {seconds:6.3f} s, {rss_above_interpreter_mb:8.1f} MB above the interpreter, "
              "cache {cache_held_mb:7.1f} MB, beyond it {beyond_cache_mb:7.1f} MB "
              "(pointer pages {pointers_mb:5.1f} MB)".format(**points[-1]))

    point("open")
    loader = atomzarr.DataLoader(
        r,
        batch_size=a.batch_size,
        shuffle=a.order == "shuffle",
        seed=0,
        prefetch_factor=a.prefetch,
        rank=a.rank,
        world_size=a.world_size,
    )
    it = iter(loader)
    next(it)
    t_first = time.perf_counter()
    point("first batch")
    read = 0
    for _ in range(a.batches):
        if next(it, None) is None:
            break
        read += 1
    point(f"{a.batches} more batches")
    epoch = None
    if a.epoch:
        for _ in it:
            read += 1
        seconds = time.perf_counter() - t_first
        # Full batches (the rank's last may be short by less than one).
        total = (read + 1) * a.batch_size
        epoch = {"batches": read + 1, "seconds": round(seconds, 2), "samples_per_s": round(total / seconds)}
        point("epoch end")
        print("epoch: {batches} batches in {seconds} s, {samples_per_s} samples/s".format(**epoch))
    print(json.dumps({"store": a.store, "rank": a.rank, "world_size": a.world_size, "order": a.order,
                      "import_s": round(t_import, 3), "points": points, "epoch": epoch}))


if __name__ == "__main__":
    main()

"""Times one soft delete with NVIDIA's Python toolkit (nvalchemi-toolkit),
on the indices that `examples/delete_bench.rs --indices-out FILE` drew.

    python scripts/delete_bench_toolkit.py STORE INDICES_FILE

STORE is changed: run it on a copy. INDICES_FILE holds one decimal
physical index a line. The toolkit's `AtomicDataZarrWriter(STORE)` is
constructed first; only its `delete(indices)` call is timed (wall time,
and the process's CPU time, user + system of all threads, over the call).
Prints one line:

    toolkit delete of N samples: S s (cpu C s)

`scripts/delete_bench.sh` runs it when TOOLKIT_PYTHON names a Python
that has the toolkit installed.
"""

import sys
import time


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: delete_bench_toolkit.py STORE INDICES_FILE", file=sys.stderr)
        return 2
    store, indices_file = sys.argv[1], sys.argv[2]

    import torch
    from nvalchemi.data.datapipes.backends.zarr import AtomicDataZarrWriter

    with open(indices_file) as f:
        indices = [int(line) for line in f if line.strip()]
    writer = AtomicDataZarrWriter(store)
    tensor = torch.tensor(indices, dtype=torch.long)
    cpu = time.process_time()
    wall = time.perf_counter()
    writer.delete(tensor)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    print(f"toolkit delete of {len(indices)} samples: {wall:.3f} s (cpu {cpu:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Times soft deletes of random samples on fresh copies of a store: for each
# COUNT, three runs (seeds 1, 2, 3), each on a new copy, then the median of
# the call's wall time and of the process's CPU time (user + system).
# The store itself is never changed.
#
#   cargo build --release --example delete_bench
#   ./target/release/atomzarr roundtrip -n 1000000 --output-dir D    # the 1M reference store
#   scripts/delete_bench.sh D/bench_1000000.zarr 100 1000 10000 100000
#
# BIN: the delete_bench binary (default target/release/examples/delete_bench);
# COPY: where the copies go (default: beside the store, <store>.delete-bench).
# TOOLKIT_PYTHON: a Python with NVIDIA's toolkit (nvalchemi-toolkit)
# installed; when set, each run also deletes the same indices (the ones
# delete_bench drew with that seed) from another fresh copy with the
# toolkit's AtomicDataZarrWriter.delete (scripts/delete_bench_toolkit.py;
# its CPU time is that of the call, not of the process), prints both, and
# the toolkit's medians follow ours.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/delete_bench.sh STORE COUNT..." >&2
  exit 2
fi
store=${1%/}
shift
bin=${BIN:-target/release/examples/delete_bench}
copy=${COPY:-$store.delete-bench}
toolkit=${TOOLKIT_PYTHON:-}
script_dir=$(cd "$(dirname "$0")" && pwd)
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
fresh_copy() {
  rm -rf "$copy"
  cp -r "$store" "$copy"
  sync
}
for n in "$@"; do
  walls=()
  cpus=()
  tk_walls=()
  tk_cpus=()
  for seed in 1 2 3; do
    fresh_copy
    TIMEFORMAT='%U %S'
    { time "$bin" "$copy" "$n" "$seed" --indices-out "$copy.indices" > "$copy.out"; } 2> "$copy.cpu"
    line=$(cat "$copy.out")
    wall=$(sed -E 's/.*: ([0-9.]+) s .*/\1/' <<< "$line")
    cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$copy.cpu")
    echo "$line; cpu $cpu s"
    walls+=("$wall")
    cpus+=("$cpu")
    if [ -n "$toolkit" ]; then
      fresh_copy
      # The toolkit's imports print banners: keep only the result line.
      line=$("$toolkit" "$script_dir/delete_bench_toolkit.py" "$copy" "$copy.indices" 2> "$copy.err" | grep '^toolkit delete') || {
        cat "$copy.err" >&2
        exit 1
      }
      echo "$line (seed $seed)"
      tk_walls+=("$(sed -E 's/.*: ([0-9.]+) s .*/\1/' <<< "$line")")
      tk_cpus+=("$(sed -E 's/.*cpu ([0-9.]+) s.*/\1/' <<< "$line")")
    fi
  done
  echo "== $n deletes: median $(median "${walls[@]}") s wall, $(median "${cpus[@]}") s cpu"
  if [ -n "$toolkit" ]; then
    echo "== $n deletes, toolkit: median $(median "${tk_walls[@]}") s wall, $(median "${tk_cpus[@]}") s cpu"
  fi
done
rm -rf "$copy" "$copy.out" "$copy.cpu" "$copy.indices" "$copy.err"

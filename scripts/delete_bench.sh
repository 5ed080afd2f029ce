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
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/delete_bench.sh STORE COUNT..." >&2
  exit 2
fi
store=${1%/}
shift
bin=${BIN:-target/release/examples/delete_bench}
copy=${COPY:-$store.delete-bench}
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
for n in "$@"; do
  walls=()
  cpus=()
  for seed in 1 2 3; do
    rm -rf "$copy"
    cp -r "$store" "$copy"
    sync
    TIMEFORMAT='%U %S'
    { time "$bin" "$copy" "$n" "$seed" > "$copy.out"; } 2> "$copy.cpu"
    line=$(cat "$copy.out")
    wall=$(sed -E 's/.*: ([0-9.]+) s .*/\1/' <<< "$line")
    cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$copy.cpu")
    echo "$line; cpu $cpu s"
    walls+=("$wall")
    cpus+=("$cpu")
  done
  echo "== $n deletes: median $(median "${walls[@]}") s wall, $(median "${cpus[@]}") s cpu"
done
rm -rf "$copy" "$copy.out" "$copy.cpu"

#!/usr/bin/env bash
# Shuffle quality on an adversarial order: the example's Lennard-Jones set
# written sorted by energy per atom, in chunks of 256 rows (hundreds of chunk
# blocks), read through a 1 MiB cache (far below an eighth of the store), so
# that the loader's default shuffle takes the block pool. Trains the example
# potential with a full permutation under two seeds (the noise), then with the
# default shuffle under the first seed, same epochs and steps, and prints the
# final validation MAEs.
#
#   scripts/shuffle-quality.sh [EPOCHS] [SEEDS...]     (default: 12 epochs, seeds 0 1)
#
# Needs the release example: cargo build --release --example train_mlip.
set -euo pipefail
EPOCHS=${1:-12}
shift || true
SEEDS=("${@:-0}")
[ ${#SEEDS[@]} -ge 2 ] || SEEDS=(0 1)
BIN=${BIN:-target/release/examples/train_mlip}
STORE=${STORE:-target/train_mlip/lj_ar_kr_sorted_c256.zarr}
common=(--store "$STORE" --sort-by-energy --chunk-rows 256 --cache-mib 1 --epochs "$EPOCHS")
field() { grep -o "$1=[^ ]*" | head -1 | cut -d= -f2; }
printf '%-8s %-5s %-24s %15s %15s\n' shuffle seed order val_energy_mae val_force_mae
run() { # shuffle seed
    local out
    out=$("$BIN" "${common[@]}" --shuffle "$1" --seed "$2")
    printf '%-8s %-5s %-24s %15s %15s\n' "$1" "$2" \
        "$(echo "$out" | grep '^train order:' | grep -o 'block pool, [0-9]* blocks\|full permutation')" \
        "$(echo "$out" | grep '^final:' | field val_energy_mae)" "$(echo "$out" | grep '^final:' | field val_force_mae)"
}
for seed in "${SEEDS[@]}"; do run full "$seed"; done
for seed in "${SEEDS[@]}"; do run default "$seed"; done

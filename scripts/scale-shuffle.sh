#!/usr/bin/env bash
# Shuffled epochs on stores several times larger than the chunk cache: makes
# the scale stores (once) and reads each in whole epochs, fresh process per
# run, printing the median of RUNS runs per store and order.
#
#   scripts/scale-shuffle.sh DIR [RUNS]
#
# Stores (about 7 GB on disk together; 2-3 minutes each to write):
#   DIR/tiny    10,000,000 structures of 2-4 atoms, default layout (3.2 GB decoded)
#   DIR/ref      1,000,000 reference structures, default layout (4.6 GB decoded)
#   DIR/tiny_small, DIR/ref_small: the same, small chunks in shards
# Orders: sequential, default-shuffle (what `with_shuffle(true)` reads) and
# chunk-shuffle; ORDERS overrides. The default cache (1,280 MiB) holds less
# than half of each store. Needs only the release binary (cargo build
# --release --bin atomzarr); BIN overrides its path.
set -euo pipefail
DIR=${1:?usage: scripts/scale-shuffle.sh DIR [RUNS]}
RUNS=${2:-3}
BIN=${BIN:-target/release/atomzarr}
ORDERS=${ORDERS:-"sequential default-shuffle chunk-shuffle"}
SMALL=(--chunk-size 1024 --shard-size 1048576 --edge-chunk-size 2048 --edge-shard-size 2097152)
make() { # name, roundtrip args...
    local name=$1
    shift
    [ -d "$DIR/$name" ] || "$BIN" roundtrip "$@" --output-dir "$DIR/$name" >/dev/null
}
mkdir -p "$DIR"
make tiny -n 10000000 --min-atoms 2 --max-atoms 4
make ref -n 1000000
make tiny_small -n 10000000 --min-atoms 2 --max-atoms 4 "${SMALL[@]}"
make ref_small -n 1000000 "${SMALL[@]}"
field() { grep -o "\"$1\":[^,}]*" | head -1 | cut -d: -f2; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-11s %-16s %12s %10s %9s %9s\n' store order samples/s decode-amp 1st-batch peak-RSS
for store in tiny ref tiny_small ref_small; do
    path=$(ls -d "$DIR/$store"/*.zarr)
    for order in $ORDERS; do
        rates=() amps=() firsts=() rss=()
        for _ in $(seq "$RUNS"); do
            line=$("$BIN" read "$path" --read-mode batch --read-order "$order" --json 2>/dev/null | tail -1)
            echo "$line" >>"$DIR/scale-shuffle.jsonl"
            rates+=("$(echo "$line" | field read_samples_per_s)")
            amps+=("$(echo "$line" | field decode_amplification)")
            firsts+=("$(echo "$line" | field first_batch_s)")
            rss+=("$(echo "$line" | field peak_rss_bytes)")
        done
        printf '%-11s %-16s %12.0f %10.3f %8.2fs %7.0fMB\n' "$store" "$order" \
            "$(printf '%s\n' "${rates[@]}" | median)" "$(printf '%s\n' "${amps[@]}" | median)" \
            "$(printf '%s\n' "${firsts[@]}" | median)" "$(printf '%s\n' "${rss[@]}" | median | awk '{print $1 / 1e6}')"
    done
done

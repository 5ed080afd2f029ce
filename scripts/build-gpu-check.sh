#!/usr/bin/env bash
# Builds, on any machine with the Rust toolchain (no GPU, no CUDA toolkit,
# no network once the crates are fetched), the two binaries that
# scripts/gpu-check.sh runs on a GPU machine, into target/gpu-check/carry/:
# release code, no debug info, stripped (the `gpu-check` cargo profile),
# xz-compressed. Prints the size of all a GPU machine is given and fails
# over 60 MiB.
#
# cudarc picks the CUDA version it loads at build time: from
# CUDARC_CUDA_VERSION, else from `nvcc --version`, else the newest it knows
# (13.4). The driver of the GPU machine must support that version, so set it
# to the machine's (`nvidia-smi` prints "CUDA Version: 13.0" as 13000; 13000
# is the default here).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
cargo build -p atomzarr --profile gpu-check --features cuda --example gpu_check --example train_mlip
out="${CARGO_TARGET_DIR:-target}/gpu-check"
mkdir -p "$out/carry"
rm -f "$out/carry/"*
# Stripped, the two binaries are about 80 MiB together (the burn and CubeCL
# stacks twice over); xz brings them to about a quarter of that.
# scripts/gpu-check.sh unpacks them on the GPU machine.
for b in gpu_check train_mlip; do
    xz -6 -T0 -c "$out/examples/$b" >"$out/carry/$b.xz"
done
echo "$CUDARC_CUDA_VERSION" > "$out/carry/CUDA_VERSION"
# What the device machine is given: the tracked (and untracked, not
# ignored) files of the working tree, plus the carried binaries. It takes
# 64 MiB in all; stay under 60 MiB to leave room.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
bin_bytes=$(du -cb "$out/carry/gpu_check.xz" "$out/carry/train_mlip.xz" | tail -1 | cut -f1)
total=$((tree + bin_bytes))
ls -l "$out/carry"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "binaries, stripped: gpu_check $(mib "$(stat -c %s "$out/examples/gpu_check")") MiB, train_mlip $(mib "$(stat -c %s "$out/examples/train_mlip")") MiB"
echo "carried to the GPU machine: binaries xz-compressed $(mib "$bin_bytes") MiB (gpu_check.xz $(mib "$(stat -c %s "$out/carry/gpu_check.xz")"), train_mlip.xz $(mib "$(stat -c %s "$out/carry/train_mlip.xz")")) + tree $(mib "$tree") MiB = $(mib "$total") MiB (limit 60)"
echo "built for CUDA $CUDARC_CUDA_VERSION: $out/carry"
if [ "$total" -gt $((60 * 1048576)) ]; then
    echo "the binaries and the tree are $total bytes together, over the 60 MiB budget of a GPU machine (64 MiB)" >&2
    exit 1
fi

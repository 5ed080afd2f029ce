#!/usr/bin/env bash
# Builds, on any machine with the Rust toolchain (no GPU, no CUDA toolkit,
# no network once the crates are fetched), the two binaries that
# scripts/gpu-check.sh runs on a GPU machine, into target/gpu-check/carry/:
# release code, no debug info, stripped (the `gpu-check` cargo profile).
#
# cudarc picks the CUDA version it loads at build time: from
# CUDARC_CUDA_VERSION, else from `nvcc --version`, else the newest it knows
# (13.4). The driver of the GPU machine must support that version, so set it
# to the machine's (`nvidia-smi` prints "CUDA Version: 13.0" as 13000; 13000
# is the default here).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
cargo build --profile gpu-check --features cuda --example gpu_check --example train_mlip
out="${CARGO_TARGET_DIR:-target}/gpu-check"
mkdir -p "$out/carry"
cp "$out/examples/gpu_check" "$out/examples/train_mlip" "$out/carry/"
echo "$CUDARC_CUDA_VERSION" > "$out/carry/CUDA_VERSION"
bytes=$(du -cb "$out/carry/gpu_check" "$out/carry/train_mlip" | tail -1 | cut -f1)
echo "built for CUDA $CUDARC_CUDA_VERSION: $out/carry ($((bytes / 1048576)) MiB)"
ls -l "$out/carry"
if [ "$bytes" -ge $((64 * 1048576)) ]; then
    echo "the binaries are $bytes bytes together, over the 64 MiB a GPU machine takes" >&2
    exit 1
fi

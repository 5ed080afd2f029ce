#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the binaries scripts/build-gpu-check.sh
# built (no Rust toolchain, no network needed here) and prints, in order:
#   1. device and driver;
#   2. batch equality on every dtype (bool, int as int32, float as f32),
#      device batches against the written samples;
#   3. upload GB/s, pinned against pageable (uploads alone, device bytes,
#      every stream synced, epochs after the first, alternating order);
#   4. loader-alone samples/s;
#   5. train_mlip samples/s and data wait on the GPU against the CPU run.
# Takes about 5 minutes on an H200 machine (16 cores); each step has a time
# limit so that the whole stays under 8 minutes.
#
#   scripts/gpu-check.sh [BIN_DIR]     (default target/gpu-check/carry)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/gpu-check/carry}"
for b in gpu_check train_mlip CUDA_VERSION; do
    [ -e "$bin/$b" ] || { echo "$bin/$b missing: run scripts/build-gpu-check.sh first" >&2; exit 1; }
done

echo "== 1. device and driver"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    || { echo "no NVIDIA driver found" >&2; exit 1; }
driver_cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -1)
read -r dmaj dmin <<<"$driver_cuda"
built=$(cat "$bin/CUDA_VERSION")
echo "driver supports CUDA $dmaj.$dmin; binaries built for CUDA ${built:0:2}.${built:3:1} (CUDARC_CUDA_VERSION=$built)"
if [ $((dmaj * 1000 + dmin * 10)) -lt "$built" ]; then
    echo "the driver is older than the CUDA version the binaries load: rebuild with CUDARC_CUDA_VERSION=${dmaj}0${dmin}0" >&2
    exit 1
fi
# cubecl compiles its kernels at run time with NVRTC: it needs the toolkit's
# headers (CUDA_PATH) and libnvrtc of the built major version.
if [ -z "${CUDA_PATH:-}" ]; then
    if command -v nvcc >/dev/null; then
        CUDA_PATH=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else
        for d in /usr/local/cuda /usr/local/cuda-*; do
            [ -e "$d/include/cuda.h" ] && { CUDA_PATH=$d; break; }
        done
    fi
fi
[ -n "${CUDA_PATH:-}" ] && [ -e "$CUDA_PATH/include/cuda.h" ] \
    || { echo "no CUDA toolkit found (set CUDA_PATH to the folder holding include/cuda.h)" >&2; exit 1; }
export CUDA_PATH
export LD_LIBRARY_PATH="$CUDA_PATH/lib64:$CUDA_PATH/lib:${LD_LIBRARY_PATH:-}"
echo "CUDA_PATH=$CUDA_PATH"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== 2-4. batch equality, uploads, loader alone"
timeout 240 "$bin/gpu_check" --backend cuda --samples 20000 --epochs 4

echo "== 5. train_mlip: the same store and settings on the CPU, then on the GPU"
train() { # NAME ARGS...: runs and prints it, keeps its summary in $work/NAME
    local name=$1
    shift
    timeout 150 "$bin/train_mlip" --store "$work/lj.zarr" --structures 2000 --epochs 3 "$@" | tee "$work/$name.out"
    grep '^final:' "$work/$name.out" \
        | sed -E 's/.*data_wait=([0-9.]+%) samples_per_s=([0-9.]+).*/\2 samples\/s, data wait \1/' >"$work/$name"
}
train cpu --backend flex
train gpu --backend cuda
echo "train_mlip, epochs after the first: GPU $(cat "$work/gpu"); CPU $(cat "$work/cpu")"

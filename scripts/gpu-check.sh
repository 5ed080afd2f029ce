#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the binaries scripts/build-gpu-check.sh
# built (no Rust toolchain, no network needed here) and prints, in order:
#   1. device and driver;
#   2. batch equality on every dtype (bool, int as int32, float as f32),
#      device batches against the written samples;
#   3. upload GB/s, pinned against pageable (uploads alone, device bytes,
#      every stream synced, epochs after the first, alternating order);
#   4. loader-alone samples/s;
#   5. host memory over the epochs of a pinned loader (resident and
#      driver-mapped bytes after each epoch; fails past 10% growth over the
#      second half);
#   6. train_mlip on the GPU against the CPU run: samples/s and data wait,
#      and its numbers: finite, validation baselines equal, final MAEs within
#      25% (fails otherwise; train_mlip itself stops on a non-finite loss).
# Takes about 5 minutes on an H200 machine (16 cores); each step has a time
# limit so that the whole stays under 8 minutes.
#
#   scripts/gpu-check.sh [BIN_DIR]     (default target/gpu-check/carry)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/gpu-check/carry}"
for b in gpu_check.xz train_mlip.xz CUDA_VERSION; do
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
# The binaries travel xz-compressed (scripts/build-gpu-check.sh); unpack
# them here, with xz or, without it, Python's lzma.
for b in gpu_check train_mlip; do
    if command -v xz >/dev/null; then
        xz -dc "$bin/$b.xz" >"$work/$b"
    else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$bin/$b.xz" "$work/$b"
    fi
    chmod +x "$work/$b"
done
bin=$work

echo "== 2-5. batch equality, uploads, loader alone, host memory"
timeout 240 "$bin/gpu_check" --backend cuda --samples 20000 --epochs 4

echo "== 6. train_mlip: the same store and settings on the CPU, then on the GPU"
train() { # NAME ARGS...: runs and prints it, keeps its final line in $work/NAME.final
    local name=$1
    shift
    timeout 150 "$bin/train_mlip" --store "$work/lj.zarr" --structures 2000 --epochs 3 "$@" | tee "$work/$name.out"
    grep '^final:' "$work/$name.out" >"$work/$name.final" || { echo "train_mlip $name printed no final line" >&2; exit 1; }
}
train cpu --backend flex
train gpu --backend cuda
# KEY from a final line.
field() { sed -E "s/.*[ :]$2=([^ ]+).*/\1/" "$work/$1.final"; }
echo "train_mlip, epochs after the first: GPU $(field gpu samples_per_s) samples/s, data wait $(field gpu data_wait); CPU $(field cpu samples_per_s) samples/s, data wait $(field cpu data_wait)"
# The GPU's numbers must be finite and near the CPU's: the same data and
# seed, so the validation baselines are equal and the final MAEs within 25%.
for k in val_energy_mae val_force_mae baseline_energy_mae baseline_force_mae; do
    c=$(field cpu $k)
    g=$(field gpu $k)
    tol=0.25
    case $k in baseline_*) tol=0.0001 ;; esac # printed with 5 decimals
    if ! awk -v c="$c" -v g="$g" -v t="$tol" 'BEGIN { d = c - g; if (d < 0) d = -d; m = (c > g ? c : g);
            exit !(c == c + 0 && g == g + 0 && c !~ /nan|inf/ && g !~ /nan|inf/ && d <= t * m) }' </dev/null; then
        echo "train_mlip $k: CPU $c, GPU $g (allowed relative difference $tol)" >&2
        exit 1
    fi
    echo "train_mlip $k: CPU $c, GPU $g: within $tol"
done
echo "gpu-check passed"

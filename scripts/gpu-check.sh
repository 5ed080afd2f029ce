#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the binaries scripts/build-gpu-check.sh
# built (no Rust toolchain, no network needed here) on each backend they
# were built for: wgpu on the NVIDIA Vulkan driver always, CUDA where its
# binaries exist. Prints, failing on any mismatch:
#   1. device and driver;
# then for each backend:
#   2. batch equality on every dtype (bool, int as int32, float as f32),
#      device batches against the written samples;
#   3. upload GB/s, pinned against pageable (uploads alone, device bytes,
#      every stream synced, epochs after the first, alternating order);
#   4. loader-alone samples/s;
#   5. host memory over the epochs of a pinned loader (resident and
#      driver-mapped bytes after each epoch; fails past 10% growth over the
#      second half);
#   6. train_mlip on the GPU against a CPU run with the same store and seed:
#      samples/s and data wait, and its numbers: finite, validation
#      baselines equal, final MAEs within 25% (fails otherwise; train_mlip
#      itself stops on a non-finite loss).
# On wgpu it also fails when the GPU's memory stayed untouched (wgpu picked
# another Vulkan device, a software one say).
#
# Each step has a time limit: a backend takes at most 6.5 minutes, the CPU
# run 2.5. Where one command may run 10 minutes at most, check one backend
# per call: GPU_CHECK_BACKENDS=wgpu, then GPU_CHECK_BACKENDS=cuda.
#
#   scripts/gpu-check.sh [BIN_DIR]     (default target/gpu-check/carry)
#
# wgpu needs the Vulkan loader (libvulkan.so.1) and NVIDIA's Vulkan driver
# (an ICD file, nvidia_icd.json). Where `ldconfig -p` lists no loader, the
# script unpacks the .deb files in GPU_CHECK_DEBS (default .gl/) into a
# temporary folder and loads them from there: libvulkan1, and libglvnd0
# (the GL dispatch library the driver's Vulkan library links), libglx0 and
# libegl1, fetched on a Debian or Ubuntu x86-64 machine with
# `mkdir -p .gl && cd .gl && apt-get download libvulkan1 libglvnd0 libglx0 libegl1`.
# Where no ICD is installed under /usr/share or /etc, it uses
# /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json (VK_DRIVER_FILES,
# when set, wins). CUBECL_WGPU_DEFAULT_DEVICE=DiscreteGpu(0) makes wgpu take
# the NVIDIA card (set it yourself to pick another).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-${CARGO_TARGET_DIR:-target}/gpu-check/carry}"
debs="${GPU_CHECK_DEBS:-.gl}"
fail() { echo "gpu-check FAILED: $*" >&2; exit 1; }
if [ -n "${GPU_CHECK_BACKENDS:-}" ]; then
    backends=$GPU_CHECK_BACKENDS
else
    backends=wgpu
    [ -e "$bin/gpu_check-cuda.xz" ] && backends="wgpu cuda"
fi
for backend in $backends; do
    case $backend in wgpu | cuda) ;; *) fail "GPU_CHECK_BACKENDS: $backend is neither wgpu nor cuda" ;; esac
    for b in "gpu_check-$backend.xz" "train_mlip-$backend.xz"; do
        [ -e "$bin/$b" ] || fail "$bin/$b missing: run scripts/build-gpu-check.sh first (the CUDA binaries build only where its LLVM download is reachable)"
    done
done
echo "backends: $backends (binaries in $bin)"

echo "== 1. device and driver"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    || fail "no NVIDIA driver found"
# The driver's libraries, where a container mounts them outside the
# loader's paths (libcuda for CUDA, libGLX_nvidia for its Vulkan driver).
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done

work=$(mktemp -d)
watcher=
trap '[ -n "$watcher" ] && kill "$watcher" 2>/dev/null; rm -rf "$work"' EXIT
# The binaries travel xz-compressed (scripts/build-gpu-check.sh); unpack
# them here, with xz or, without it, Python's lzma.
for backend in $backends; do
    for b in gpu_check train_mlip; do
        if command -v xz >/dev/null; then
            xz -dc "$bin/$b-$backend.xz" >"$work/$b-$backend"
        else
            python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
                "$bin/$b-$backend.xz" "$work/$b-$backend"
        fi
        chmod +x "$work/$b-$backend"
    done
done

setup_wgpu() {
    echo "-- Vulkan"
    local installed icd f
    if ! ldconfig -p | grep 'libvulkan\.so\.1 ' >/dev/null; then
        ls "$debs"/*.deb >/dev/null 2>&1 \
            || fail "no Vulkan loader (libvulkan.so.1): install libvulkan1, or put its .deb (and libglvnd0's, libglx0's, libegl1's) in $debs"
        command -v dpkg >/dev/null || fail "no Vulkan loader (libvulkan.so.1) and no dpkg to unpack $debs/*.deb"
        for f in "$debs"/*.deb; do dpkg -x "$f" "$work/gl"; done
        export LD_LIBRARY_PATH="$work/gl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "Vulkan loader and GL dispatch libraries from $debs/*.deb"
    fi
    installed=$(ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json 2>/dev/null || true)
    if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -z "$installed" ]; then
        icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        [ -e "$icd" ] || fail "no NVIDIA Vulkan driver (nvidia_icd.json) found: set VK_DRIVER_FILES to it"
        # VK_ICD_FILENAMES for loaders older than VK_DRIVER_FILES.
        export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
    fi
    echo "Vulkan driver: ${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-$installed}}"
    export CUBECL_WGPU_DEFAULT_DEVICE="${CUBECL_WGPU_DEFAULT_DEVICE:-DiscreteGpu(0)}"
    echo "CUBECL_WGPU_DEFAULT_DEVICE=$CUBECL_WGPU_DEFAULT_DEVICE"
}

setup_cuda() {
    echo "-- CUDA"
    local driver_cuda dmaj dmin built
    driver_cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | head -1)
    read -r dmaj dmin <<<"$driver_cuda"
    [ -e "$bin/CUDA_VERSION" ] || fail "$bin/CUDA_VERSION missing: rebuild with scripts/build-gpu-check.sh"
    built=$(cat "$bin/CUDA_VERSION")
    echo "driver supports CUDA $dmaj.$dmin; binaries built for CUDA ${built:0:2}.${built:3:1} (CUDARC_CUDA_VERSION=$built)"
    if [ $((dmaj * 1000 + dmin * 10)) -lt "$built" ]; then
        fail "the driver is older than the CUDA version the binaries load: rebuild with CUDARC_CUDA_VERSION=${dmaj}0${dmin}0"
    fi
    # cubecl-cuda compiles kernels to PTX through LLVM (linked in), so no
    # CUDA toolkit is needed; the driver loads the PTX.
}

# Used GPU memory (MiB, every GPU) sampled every half second while a
# backend's steps run: a wgpu run that never touches it ran elsewhere.
watch_start() {
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$work/smi.log" 2>/dev/null &
    watcher=$!
}
watch_stop() {
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    watcher=
}
used_now() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sort -n | tail -1; }

train() { # NAME BINARY ARGS...: runs and prints it, keeps its final line in $work/NAME.final
    local name=$1 binary=$2
    shift 2
    timeout 150 "$binary" --store "$work/lj.zarr" --structures 2000 --epochs 3 "$@" | tee "$work/$name.out" \
        || fail "train_mlip $name failed or ran past 150 s"
    grep '^final:' "$work/$name.out" >"$work/$name.final" || fail "train_mlip $name printed no final line"
}
# KEY from a final line.
field() { sed -E "s/.*[ :]$2=([^ ]+).*/\1/" "$work/$1.final"; }

echo "== 6 (reference). train_mlip on the CPU; each backend's run below uses the same store and settings"
first=${backends%% *}
train cpu "$work/train_mlip-$first" --backend flex

for backend in $backends; do
    echo "==== $backend"
    "setup_$backend"
    idle=$(used_now)
    watch_start
    echo "== 2-5. $backend: batch equality, uploads, loader alone, host memory"
    timeout 240 "$work/gpu_check-$backend" --backend "$backend" --samples 20000 --epochs 4 \
        || fail "gpu_check on $backend failed or ran past 240 s"
    echo "== 6. $backend: train_mlip with the CPU run's store and settings"
    train "$backend" "$work/train_mlip-$backend" --backend "$backend"
    watch_stop
    peak=$(sort -n "$work/smi.log" | tail -1)
    echo "GPU memory used: ${idle:-?} MiB before, at most ${peak:-?} MiB during the $backend steps"
    if [ "$backend" = wgpu ] && [ -n "$idle" ] && [ -n "$peak" ] && [ "$peak" -lt $((idle + 64)) ]; then
        fail "the wgpu steps left the NVIDIA GPU's memory untouched: wgpu ran on another device (set CUBECL_WGPU_DEFAULT_DEVICE or VK_DRIVER_FILES)"
    fi
    echo "train_mlip, epochs after the first: $backend $(field "$backend" samples_per_s) samples/s, data wait $(field "$backend" data_wait); CPU $(field cpu samples_per_s) samples/s, data wait $(field cpu data_wait)"
    # The GPU's numbers must be finite and near the CPU's: the same data and
    # seed, so the validation baselines are equal and the final MAEs within 25%.
    for k in val_energy_mae val_force_mae baseline_energy_mae baseline_force_mae; do
        c=$(field cpu $k)
        g=$(field "$backend" $k)
        tol=0.25
        case $k in baseline_*) tol=0.0001 ;; esac # printed with 5 decimals
        if ! awk -v c="$c" -v g="$g" -v t="$tol" 'BEGIN { d = c - g; if (d < 0) d = -d; m = (c > g ? c : g);
                exit !(c == c + 0 && g == g + 0 && c !~ /nan|inf/ && g !~ /nan|inf/ && d <= t * m) }' </dev/null; then
            fail "train_mlip $k: CPU $c, $backend $g (allowed relative difference $tol)"
        fi
        echo "train_mlip $k: CPU $c, $backend $g: within $tol"
    done
done
echo "gpu-check passed: $backends"

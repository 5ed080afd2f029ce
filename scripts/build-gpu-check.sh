#!/usr/bin/env bash
# Builds, on any machine with the Rust toolchain (no GPU needed), the
# binaries that scripts/gpu-check.sh runs on a machine with an NVIDIA GPU,
# into target/gpu-check/carry/: the gpu_check and train_mlip examples,
# release code without debug info, stripped (the `gpu-check` cargo
# profile), xz-compressed:
#
# * with `--features wgpu`, always (`gpu_check-wgpu.xz`,
#   `train_mlip-wgpu.xz`): Burn's wgpu device, run on the GPU machine's
#   Vulkan driver. Needs nothing beyond the fetched crates.
# * with `--features cuda` when it builds (`gpu_check-cuda.xz`,
#   `train_mlip-cuda.xz`, `CUDA_VERSION`). cubecl-cuda compiles kernels
#   through LLVM, and the build script of tracel-llvm-bundler (under
#   cubecl-llvm) downloads that LLVM bundle from github.com/tracel-ai/tracel-llvm
#   into ~/.cache/tracel and ~/.local/share/tracel once per machine. Where
#   the download fails, the CUDA binaries are left out and the script says
#   so; any other failure of the CUDA build fails the script.
#   GPU_CHECK_CUDA=0 skips the CUDA build, GPU_CHECK_CUDA=1 fails without it.
#
# Prints the size of all a GPU machine is given and fails over 60 MiB.
#
# cudarc picks the CUDA version it loads at build time: from
# CUDARC_CUDA_VERSION, else from `nvcc --version`, else the newest it knows
# (13.4). The driver of the GPU machine must support that version, so set it
# to the machine's (`nvidia-smi` prints "CUDA Version: 13.0" as 13000; 13000
# is the default here).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_mode="${GPU_CHECK_CUDA:-auto}"
cuda_version="${CUDARC_CUDA_VERSION:-13000}"
case $cuda_mode in 0 | 1 | auto) ;; *) echo "GPU_CHECK_CUDA must be 0, 1 or auto (got $cuda_mode)" >&2; exit 1 ;; esac
out="${CARGO_TARGET_DIR:-target}/gpu-check"
mkdir -p "$out/carry"
rm -f "$out/carry/"*
build=(cargo build -p atomzarr --profile gpu-check --example gpu_check --example train_mlip)
# Both features build into the same examples/ paths: each pair is
# compressed before the next build replaces it. scripts/gpu-check.sh
# unpacks them on the GPU machine.
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
pack() { # FEATURE
    for b in gpu_check train_mlip; do
        xz -6 -T0 -c "$out/examples/$b" >"$out/carry/$b-$1.xz"
        echo "$b ($1): stripped $(mib "$(stat -c %s "$out/examples/$b")") MiB, xz $(mib "$(stat -c %s "$out/carry/$b-$1.xz")") MiB"
    done
}

echo "== --features wgpu"
"${build[@]}" --features wgpu
pack wgpu

cuda=no
if [ "$cuda_mode" != 0 ]; then
    echo "== --features cuda (CUDARC_CUDA_VERSION=$cuda_version)"
    log=$(mktemp)
    set +e
    CUDARC_CUDA_VERSION="$cuda_version" "${build[@]}" --features cuda 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -eq 0 ]; then
        pack cuda
        echo "$cuda_version" >"$out/carry/CUDA_VERSION"
        cuda=yes
    elif [ "$cuda_mode" = auto ] && grep -q 'failed to run custom build command for `\(tracel-llvm-bundler\|cubecl-llvm\)' "$log"; then
        echo "NOTE: the CUDA build needs the LLVM bundle that tracel-llvm-bundler's build script downloads, and the download failed:" >&2
        grep -E "panicked at|Error|error|downloading" "$log" | grep -v '^warning' | head -5 >&2
        echo "NOTE: carrying the wgpu binaries only (build where github.com is reachable for the CUDA ones)" >&2
    else
        rm -f "$log"
        echo "the CUDA build failed (above)" >&2
        exit 1
    fi
    rm -f "$log"
fi

# What the device machine is given: the tracked (and untracked, not
# ignored) files of the working tree, plus the carried binaries. It takes
# 64 MiB in all; stay under 60 MiB to leave room.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)
bin_bytes=$(du -cb "$out/carry/"*.xz | tail -1 | cut -f1)
total=$((tree + bin_bytes))
ls -l "$out/carry"
echo "carried to the GPU machine: binaries xz-compressed $(mib "$bin_bytes") MiB + tree $(mib "$tree") MiB = $(mib "$total") MiB (limit 60)"
if [ "$cuda" = yes ]; then
    echo "built for wgpu and for CUDA $cuda_version: $out/carry"
else
    echo "built for wgpu only: $out/carry"
fi
if [ "$total" -gt $((60 * 1048576)) ]; then
    echo "the binaries and the tree are $total bytes together, over the 60 MiB budget of a GPU machine (64 MiB)" >&2
    exit 1
fi

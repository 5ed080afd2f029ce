#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build with CUDA, check that GPU batches
# equal the CPU ones, and print upload throughput with pin_memory off and on.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || { echo "no NVIDIA driver found" >&2; exit 1; }
cargo run --release --features cuda --example gpu_check

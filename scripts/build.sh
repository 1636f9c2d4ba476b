#!/usr/bin/env bash
# Set up and build: installs Debian packages, configures (CUDA when nvcc exists), builds everything.
# Then, unless DS_NO_DEMO=1, runs the offline demo (a small random-weight model, see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${DS_CMAKE_ARGS:-}
cmake --build build -j "$jobs"
if [ -z "${DS_NO_DEMO:-}" ] && [ -f scripts/demo.sh ]; then
  bash scripts/demo.sh
fi

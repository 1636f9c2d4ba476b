#!/usr/bin/env bash
# Builds deltaserve for the H200 here (sm_90, Release) and packs what a GPU run needs into devpack/
# (git-ignored): the binaries, the non-system shared libraries they load, and a copy of the fixtures.
# The device machine has CUDA 13 but none of the Debian dev packages, so nothing is built there.
# Usage: tools/devpack.sh [BUILD_DIR]  (default build-dev, configured for sm_90 if new); then carry
# "devpack" to the GPU machine and run its binaries with LD_LIBRARY_PATH=devpack/lib.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-dev}
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$B" -j "$(nproc)"
rm -rf devpack && mkdir -p devpack/bin devpack/lib devpack/fixtures
cp "$B/apps/deltaserve" devpack/bin/
find "$B/tests" "$B/bench" -maxdepth 2 -type f -executable \( -name 'test_*' -o -name 'bench_*' \) \
  -exec cp {} devpack/bin/ \;
strip devpack/bin/* 2>/dev/null || true
# Shared libraries from Debian packages (fmt, spdlog, httplib, pcre2, utf8proc, gomp, ...); CUDA's own
# libraries come from the device's toolkit.
for b in devpack/bin/*; do ldd "$b" 2>/dev/null; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux|libcuda|libcublas|libcublasLt|libcudart)[.-]' |
  while read -r so; do cp -L "$so" devpack/lib/; done
cp -r ../shared/fixtures/models ../shared/fixtures/quant ../shared/fixtures/chat devpack/fixtures/
mkdir -p devpack/fixtures/tokenizer
cp ../shared/fixtures/tokenizer/*.jsonl ../shared/fixtures/tokenizer/*.xz devpack/fixtures/tokenizer/
du -sh devpack devpack/*

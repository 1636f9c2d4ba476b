#!/usr/bin/env bash
# Builds deltaserve for the H200 here (sm_90, Release) and packs what a GPU run needs into devpack/
# (git-ignored): the binaries, the non-system shared libraries they load, and a copy of the fixtures.
# The device machine has CUDA 13 but none of the Debian dev packages, so nothing is built there.
# Usage: tools/devpack.sh [extra cmake args]; then carry "devpack" and run devpack/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "$@" >/dev/null
cmake --build build-dev -j "$(nproc)"
rm -rf devpack && mkdir -p devpack/bin devpack/lib devpack/fixtures
cp build-dev/apps/deltaserve devpack/bin/
find build-dev/tests build-dev/bench -maxdepth 2 -type f -executable \( -name 'test_*' -o -name 'bench_*' \) \
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

#!/usr/bin/env bash
# Builds the libFuzzer target for the GGUF reader (fuzz/gguf_fuzz.cpp) with clang and runs it for
# N seconds (default 60) on a seed corpus generated from the fixtures (tools/gguf_seeds.py).
#   tools/fuzz_gguf.sh [SECONDS] [extra libFuzzer args...]
# Build tree: build-fuzz/ (override with DS_FUZZ_BUILD). The growing corpus lives in
# build-fuzz/corpus; crashes are written to build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
build=${DS_FUZZ_BUILD:-build-fuzz}
fixtures=${DS_FIXTURES:-$(pwd)/../shared/fixtures}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_FUZZ=ON \
  -DDS_CUDA=OFF -DDS_BUILD_TESTS=OFF -DDS_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target gguf_fuzz -j "${DS_JOBS:-2}"

mkdir -p "$build/corpus" "$build/seeds" "$build/artifacts"
python3 tools/gguf_seeds.py "$fixtures" "$build/seeds"
# -jobs=1 runs the fuzzer in one child process whose log is $build/fuzz-0.log (printed at the end).
cd "$build"
rm -f fuzz-0.log
rc=0
./fuzz/gguf_fuzz corpus seeds -max_total_time="$secs" -jobs=1 -workers=1 -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=artifacts/ "$@" || rc=$?
tail -n 40 fuzz-0.log 2>/dev/null || true
echo "corpus: $(ls corpus | wc -l) files, $(du -sk corpus | cut -f1) KiB; artifacts: $(ls artifacts | wc -l)"
exit $rc

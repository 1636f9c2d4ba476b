#!/usr/bin/env bash
# One GPU-machine call for everything CUDA: kernel tests, prefill-kernel tests, model tests and
# synthetic-model decode benchmarks (tools/gpu_model_check.sh), prefill timings, op benchmarks.
# Binaries come prebuilt from here: `tools/gpu_bundle.sh build gpu-bundle` (+ copy test_cuda,
# test_cuda_prefill, bench_cuda_* into gpu-bundle), carry gpu-bundle, run with OUT set.
set -u
cd "$(dirname "$0")/.."
B=$(cd "${BIN_DIR:-gpu-bundle}" && pwd)
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
step() { local name=$1 limit=$2; shift 2; echo "== $name"; timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "== $name rc=$?"; tail -5 "$OUT/$name.log"; }
[ -x "$B/test_cuda" ] && step test_cuda 150 "$B/test_cuda"
[ -x "$B/test_cuda_prefill" ] && step test_cuda_prefill 200 "$B/test_cuda_prefill"
BIN_DIR=$B OUT=$OUT bash tools/gpu_model_check.sh --no-sanitizer 2>&1 | tail -40
M=/tmp/ds_gpu_check/qwen35-9B-q4_k_m.gguf
if [ -s "$M" ]; then
  for p in 512 4096; do
    "$B/deltaserve" cuda-bench -m "$M" --prompt $p --tg 8 --reps 2 --json "$OUT/bench.jsonl" 2>&1 | grep -iE "prefill|decode" | head -4
  done
fi
[ -x "$B/bench_cuda_prefill" ] && step bench_cuda_prefill 120 "$B/bench_cuda_prefill"
[ -x "$B/bench_cuda_ops" ] && step bench_cuda_ops 120 "$B/bench_cuda_ops"
ls -la "$OUT"

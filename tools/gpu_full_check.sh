#!/usr/bin/env bash
# One GPU-machine call for everything CUDA, ordered by importance and bounded in time (the device budget is
# small): kernel tests, model tests (fixture logits: step path, precise and fast prefill), prefill-kernel
# tests, then synthetic models (made on the device, in the background while the tests run) for
# `deltaserve bench --backend cuda -p 512,4096 -n 128` (fast mode, then precise prefill), the 9B per-kernel
# decode breakdown and batched decode at 1/8/32/64 sequences.
# Binaries come prebuilt: `tools/gpu_bundle.sh build gpu-bundle`; carry it (as a .tar.xz when it is over the
# carry limit); OUT is the device tool's output folder. Environment:
#   MODELS   "size:type ..." to synthesize and bench (default: the performance.md table)
#   TESTS    test binaries to run (default: test_cuda test_cuda_model test_cuda_prefill)
#   PRECISE  1 (default) also times the precise prefill of every model
#   SAN      1: compute-sanitizer memcheck + racecheck on the fixture models after the tests (default 0: slow);
#            SAN_FILTER (gtest filter of test_cuda_model), SAN_LIMIT (seconds per tool, default 240)
#   SERVE    1: the serving benchmark (tools/serve_bench.sh, python3) on the 9B Q4_K_M at the end (default 0)
# $OUT gets at most seven files: tests.log, sanitizer.log, bench.log, bench.jsonl, breakdown.log, serve.jsonl,
# steps.log.
set -u
cd "$(dirname "$0")/.."
B=$(cd "${BIN_DIR:-gpu-bundle}" && pwd)
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
W=${WORK:-/tmp/dsgpu}; mkdir -p "$W"
MODELS=${MODELS:-"0.8B:Q4_K_M 9B:Q4_K_M 27B:Q4_K_M 0.8B:BF16 4B:Q4_K_M 9B:Q8_0"}
TESTS=${TESTS:-"test_cuda test_cuda_model test_cuda_prefill"}
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
step() {  # step NAME LIMIT_S LOGFILE cmd...
  local name=$1 limit=$2 log=$3; shift 3
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?
  say "== $name rc=$rc"; tail -3 "$log" | tee -a "$OUT/steps.log"
}
file_of() { echo "$W/qwen35-${1%%:*}-$(echo "${1##*:}" | tr 'A-Z' 'a-z').gguf"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee -a "$OUT/steps.log"

python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
  "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for m in $MODELS; do
    "$DS_BIN" synth --size "${m%%:*}" --type "${m##*:}" --vocab "$W/vocab.gguf" --threads 12 -o "$(file_of "$m")" \
      > /dev/null 2>&1 && touch "$(file_of "$m").ok"
  done ) &

for t in $TESTS; do
  [ -x "$B/$t" ] && step "$t" 120 "$OUT/tests.log" "$B/$t" --gtest_brief=1
done

if [ "${SAN:-0}" = 1 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  # One fixture end to end (all three prefill paths, graph-replayed decode), CPU vs CUDA dumps (every kernel with
  # its debug outputs), batching, snapshots and the piece prefill.
  F=${SAN_FILTER:-'AllFiles/CudaFixtureLogits.TeacherForced*/tiny_gqa_q4_k_m:Models/CudaVsCpuDumps.*:CudaState.BatchedDecodeEqualsEachAlone:CudaPrefill.FastPrefillThenDecode'}
  if [ -n "$CS" ]; then
    step memcheck "${SAN_LIMIT:-240}" "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 \
      "$B/test_cuda_model" --gtest_brief=1 --gtest_filter="$F"
    step racecheck "${SAN_LIMIT:-240}" "$OUT/sanitizer.log" "$CS" --tool racecheck --racecheck-report hazard --error-exitcode 1 \
      "$B/test_cuda_model" --gtest_brief=1 --gtest_filter="$F"
  else
    say "compute-sanitizer not found"
  fi
fi

for m in $MODELS; do
  M=$(file_of "$m")
  while [ ! -e "$M.ok" ] && [ $(( $(date +%s) - T0 )) -lt 300 ]; do sleep 1; done
  [ -e "$M.ok" ] || { say "no $M"; continue; }
  step "bench $m" 90 "$OUT/bench.log" "$DS_BIN" bench -m "$M" --backend cuda -p 512,4096 -n 128 -r 3 --json
  if [ "$m" = "9B:Q4_K_M" ]; then
    step "breakdown $m" 60 "$OUT/breakdown.log" "$DS_BIN" cuda-bench -m "$M" --tg 16 --breakdown --top 12
    for b in 1 8 32 64; do
      step "batch $b $m" 60 "$OUT/breakdown.log" "$DS_BIN" cuda-bench -m "$M" --batch $b --tg 32 --reps 2
    done
  fi
done
if [ "${PRECISE:-1}" = 1 ]; then
  for m in $MODELS; do
    M=$(file_of "$m"); [ -e "$M.ok" ] || continue
    step "precise $m" 90 "$OUT/bench.log" "$DS_BIN" bench -m "$M" --backend cuda -p 512,4096 -n 0 -r 2 --precise --json
  done
fi
if [ "${SERVE:-0}" = 1 ] && [ -e "$(file_of 9B:Q4_K_M).ok" ]; then
  say "== serve_bench 9B:Q4_K_M"
  DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 280 bash tools/serve_bench.sh "$(file_of 9B:Q4_K_M)" --budget-s 270 \
    >> "$OUT/steps.log" 2>&1
  say "== serve_bench rc=$?"
fi
grep -h '^{' "$OUT/bench.log" > "$OUT/bench.jsonl"
say "done"

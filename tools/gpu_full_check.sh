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
# $OUT gets at most five files: tests.log, bench.log, bench.jsonl, breakdown.log, steps.log.
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
grep -h '^{' "$OUT/bench.log" > "$OUT/bench.jsonl"
say "done"

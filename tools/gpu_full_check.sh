#!/usr/bin/env bash
# One GPU-machine call for everything CUDA, ordered by importance and bounded in time (the device budget is
# small): kernel tests, model tests (fixture logits: step path, precise and fast prefill), prefill-kernel
# tests, the batch-1 matvec sweep, then synthetic 0.8B/9B/27B Q4_K_M files (made on the device, in the
# background while the tests run) for `deltaserve bench --backend cuda -p 512,4096 -n 128`, the 9B per-kernel
# breakdown, batched decode at 1/8/32/64 sequences and the precise-mode prefill.
# Binaries come prebuilt: `tools/gpu_bundle.sh build gpu-bundle` (it copies every test/bench binary it finds);
# carry gpu-bundle (and devwork-mv for the matvec sweep); OUT is the device tool's output folder.
# $OUT gets at most six files: tests.log, bench.log, bench.jsonl, breakdown.log, mv.jsonl, steps.log.
set -u
cd "$(dirname "$0")/.."
B=$(cd "${BIN_DIR:-gpu-bundle}" && pwd)
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
W=${WORK:-/tmp/dsgpu}; mkdir -p "$W"
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
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee -a "$OUT/steps.log"

python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
  "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 0.8B 9B 27B; do
    "$DS_BIN" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/qwen35-$s-q4_k_m.gguf" \
      > "$W/synth-$s.log" 2>&1
  done; touch "$W/synth.done" ) &

[ -x "$B/test_cuda" ] && step test_cuda 90 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1
[ -x "$B/test_cuda_model" ] && step test_cuda_model 120 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
[ -x "$B/test_cuda_prefill" ] && step test_cuda_prefill 60 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
[ -x devwork-mv/mvbench ] && step mvbench "${MV_LIMIT:-40}" "$OUT/steps.log" sh -c "devwork-mv/mvbench > $OUT/mv.jsonl"

while [ ! -e "$W/synth.done" ] && [ $(( $(date +%s) - T0 )) -lt 300 ]; do sleep 2; done
ls -la "$W" | tee -a "$OUT/steps.log"
for s in 0.8B 9B 27B; do
  M="$W/qwen35-$s-q4_k_m.gguf"; [ -s "$M" ] || continue
  step "bench $s" 90 "$OUT/bench.log" "$DS_BIN" bench -m "$M" --backend cuda -p 512,4096 -n 128 -r 3
  timeout 90 "$DS_BIN" bench -m "$M" --backend cuda -p 512,4096 -n 128 -r 3 --json >> "$OUT/bench.jsonl" 2>> "$OUT/bench.log"
done
M="$W/qwen35-9B-q4_k_m.gguf"
if [ -s "$M" ]; then
  step "breakdown 9B" 60 "$OUT/breakdown.log" "$DS_BIN" cuda-bench -m "$M" --tg 16 --breakdown --top 40
  for b in 1 8 32 64; do
    step "batch $b 9B" 60 "$OUT/breakdown.log" "$DS_BIN" cuda-bench -m "$M" --batch $b --tg 32 --reps 2
  done
  step "precise 9B" 60 "$OUT/bench.log" "$DS_BIN" bench -m "$M" --backend cuda -p 512,4096 -n 0 -r 2 --precise
fi
say "done"

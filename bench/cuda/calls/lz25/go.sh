#!/bin/bash
# lz25 (branch lz25): persistent lazy kernels marking item kinds once per CTA; DS_GDN_LAZY_PERSIST bitmask (default 2 = state kernel persistent).
# Run as: cd devlz25 && OUT=$OUT timeout 500 bash go.sh (devlz25: b.tar.xz from tools/gpu_bundle.sh of this branch's build, and this script; it runs ../tools/serve_bench.sh)
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B.gguf
( [ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$M9" > /dev/null 2>&1; touch "$W/m9B.ok" ) &
timeout 90 "$TM" --gtest_filter='GdnLazy.*' > "$OUT/t_lazy.log" 2>&1; say "GdnLazy rc=$?"
grep -E -A4 "\[lz23\]|FAILED|PASSED|Failure|error" "$OUT/t_lazy.log" | head -60 | cut -c1-250 | tee -a "$OUT/steps.log"
DS_GDN_LAZY=8 timeout 150 "$TM" --gtest_brief=1 > "$OUT/t_model_lazy.log" 2>&1; say "test_cuda_model DS_GDN_LAZY=8 rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$OUT/t_model_lazy.log" | cut -c1-200 | tee -a "$OUT/steps.log"
DS_GDN_LAZY=4 timeout 60 "$B/test_engine" --gtest_brief=1 --gtest_filter='CudaBackendServing.*:EngineOnModel.*:Fixtures/*' > "$OUT/t_engine_lazy.log" 2>&1; say "test_engine *Cuda* DS_GDN_LAZY=4 rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$OUT/t_engine_lazy.log" | cut -c1-200 | tee -a "$OUT/steps.log"
timeout 90 compute-sanitizer --tool memcheck "$TM" --gtest_filter='GdnLazy.*' > "$OUT/memcheck.log" 2>&1; say "memcheck GdnLazy rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3 | tee -a "$OUT/steps.log"
timeout 150 compute-sanitizer --tool racecheck "$TM" --gtest_filter='GdnLazy.*' > "$OUT/racecheck.log" 2>&1; say "racecheck GdnLazy rc=$?"
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | tail -3 | tee -a "$OUT/steps.log"
DS_GDN_BENCH=1 timeout 60 "$TM" --gtest_filter='GdnBench.Time' > "$OUT/gdnbench.log" 2>&1; say "GdnBench rc=$?"
grep -E "\[lz24\]|B 64 (tma-out-smem-in|gdn_kernel) " "$OUT/gdnbench.log" | cut -c1-200 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 300 ]; do sleep 1; done
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 $2 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; }
for r in 1 2; do for e in DS_DEFAULT=1 DS_GDN_LAZY=8 "DS_GDN_LAZY=8 DS_GDN_LAZY_PERSIST=0" "DS_GDN_LAZY=8 DS_GDN_LAZY_PERSIST=3" DS_GDN_LAZY=16; do
  [ $(el) -lt 370 ] && cb "$e" ""; done; done
[ $(el) -lt 390 ] && cb DS_GDN_LAZY=8 "--breakdown --top 4"
grep -A14 "^per-kernel" "$OUT/cb.log" | tail -15 | tee -a "$OUT/steps.log"
for e in DS_DEFAULT=1 DS_GDN_LAZY=8; do [ $(el) -lt 405 ] || continue
  timeout 30 env $e "$X" bench -m "$M9" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 9B $e: $(tail -1 "$OUT/bench.jsonl" | grep -oE '"tokens_per_s": ?[0-9.]+')"; done
for e in DS_GDN_LAZY=8 DS_DEFAULT=1; do [ $(el) -lt 470 ] || continue
  env $e DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 40 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 --budget-s 32 \
    --label "session24 lz25 $e" >> "$OUT/serve.log" 2>&1; say "serve $e rc=$?"; done
[ -e "$OUT/serve.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
say done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete

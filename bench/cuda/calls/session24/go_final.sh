#!/bin/bash
# Session 24's last call (lz25 as merged: per-item lazy kernel + persistent state kernel): the lazy tests, the model
# tests with DS_GDN_LAZY=8, memcheck; 64 x 512+ default vs T = 8 vs T = 8 with the per-item state grid; on an H200
# also the default served at 1 / 8 / 32 / 64.
# Run as: cd devlz27 && OUT=$OUT timeout 230 bash go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU" | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B.gguf
( [ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$M9" > /dev/null 2>&1; touch "$W/m9B.ok" ) &
timeout 60 "$TM" --gtest_filter='GdnLazy.*' > "$OUT/t_lazy.log" 2>&1; say "GdnLazy rc=$?"
grep -E "\[lz23\]|FAILED|PASSED|Failure" "$OUT/t_lazy.log" | head -14 | cut -c1-200 | tee -a "$OUT/steps.log"
DS_GDN_LAZY=8 timeout 100 "$TM" --gtest_brief=1 > "$OUT/t_model_lazy.log" 2>&1; say "test_cuda_model DS_GDN_LAZY=8 rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$OUT/t_model_lazy.log" | cut -c1-200 | tee -a "$OUT/steps.log"
timeout 40 compute-sanitizer --tool memcheck "$TM" --gtest_filter='GdnLazy.*' > "$OUT/memcheck.log" 2>&1; say "memcheck GdnLazy rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -2 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
cb() { timeout 30 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; }
for e in DS_DEFAULT=1 DS_GDN_LAZY=8 "DS_GDN_LAZY=8 DS_GDN_LAZY_PERSIST=0"; do [ $(el) -lt 175 ] && cb "$e"; done
if echo "$GPU" | grep -q H200 && [ $(el) -lt 180 ]; then
  DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels 1,8,32,64 --budget-s 42 \
    --label "session24 H200 default" >> "$OUT/serve.log" 2>&1; say "serve rc=$?"
  [ -e "$OUT/serve.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
fi
say done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete

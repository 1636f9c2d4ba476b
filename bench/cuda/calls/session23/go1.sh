#!/bin/bash
# Session 23 call 1 (H200 wanted; issue 7's 64-client number and a regression pass of main 84d77ee):
# the CUDA tests (Q3_K direct decoder now default: the model-level dumps had not run with it), 64 x 512
# cuda-bench interleaved (default / f16 states / f16 states + f16 K V), serving at 1/8/32/64 with both f16
# options and with the default, and batch-1 tg128 for 0.8B / 9B / 27B Q4_K_M (issue 5's table).
# Run as: cd devs23 && OUT=$OUT timeout 570 bash go1.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B 27B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" > /dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
timeout 150 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/t_model.log" 2>&1; say "test_cuda_model rc=$?"
timeout 90 "$B/test_cuda" --gtest_brief=1 > "$OUT/t_cuda.log" 2>&1; say "test_cuda rc=$?"
grep -hE "^\[  (PASSED|FAILED) |^\[  FAILED" "$OUT/t_model.log" "$OUT/t_cuda.log" | cut -c1-250 | tee -a "$OUT/steps.log"
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt 300 ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
M9=$W/m9B.gguf
if waitm 9B; then
  for r in 1 2; do for e in DS_DEFAULT=1 "DS_STATE_F16=1 DS_KV_F16=1" DS_STATE_F16=1; do [ $(el) -lt 300 ] || continue
    timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
    say "batch 64 x 512 $e: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; done; done
  for e in "DS_STATE_F16=1 DS_KV_F16=1" DS_DEFAULT=1; do [ $(el) -lt 380 ] || continue
    env $e DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 60 bash "$D/../tools/serve_bench.sh" "$M9" --budget-s 50 \
      --label "session23 H200 $e" >> "$OUT/serve.log" 2>&1; say "serve $e rc=$?"; done
  [ $(el) -lt 440 ] && DS_STATE_F16=1 DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 40 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
    --budget-s 30 --label "session23 H200 DS_STATE_F16=1 DS_KV_F16=1 (again)" >> "$OUT/serve.log" 2>&1; say "serve again rc=$?"
  python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
fi
for s in 9B 0.8B 27B; do [ $(el) -lt 500 ] || continue; waitm $s || continue
  timeout 30 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 $s Q4_K_M: $(tail -1 "$OUT/bench.jsonl" | grep -oE '"tokens_per_s": ?[0-9.]+')"; done
say done

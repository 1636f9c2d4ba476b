#!/bin/bash
# st20 call 2 (after go.sh on an H100 found the bulk-copy kernels 2x slower: st_chunk took `const float4&`, and
# `odd ? m[p + 1] : m[p]` put m[] in local memory; now by value, 0 bytes stack): the kernel tests again, the default
# model tests (regression), GdnBench (f32 vs f16 kernel times), the 64 x 512 A/B and serving with both f16 options.
# Run as: cd devst20 && OUT=$OUT timeout 330 bash go2.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B-Q4_K_M.gguf
( [ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$M9" > "$OUT/synth.log" 2>&1; touch "$W/ok" ) &
timeout 100 "$TM" --gtest_brief=1 > "$OUT/t_model.log" 2>&1; say "test_cuda_model (default, all) rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|\[st20\]|\[kv19\]" "$OUT/t_model.log" | cut -c1-250 | tee -a "$OUT/steps.log"
DS_GDN_BENCH=1 timeout 40 "$TM" --gtest_filter='GdnBench.Time' > "$OUT/gdnbench.log" 2>&1; say "gdnbench rc=$?"
grep -E "9B  B 64|27B B 64" "$OUT/gdnbench.log" | grep -v "copy\|oop\|cudaMemcpy" | tee -a "$OUT/steps.log"
while [ ! -e "$W/ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
for r in 1 2; do for e in DS_DEFAULT=1 DS_STATE_F16=1 "DS_STATE_F16=1 DS_KV_F16=1"; do [ $(el) -lt 230 ] || continue
  timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $e: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; done; done
[ $(el) -lt 250 ] && DS_STATE_F16=1 DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 70 bash "$D/../tools/serve_bench.sh" "$M9" \
  --budget-s 60 --label "DS_STATE_F16=1 DS_KV_F16=1" >> "$OUT/serve.log" 2>&1; say "serve f16 states+kv rc=$?"
python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
say done

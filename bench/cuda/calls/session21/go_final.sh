#!/bin/bash
# Session 21, call 2 (after go_both.sh on an H100): the three "type without a kernel" tests that used Q2_K (now a
# CUDA type) rewritten with IQ1_S; the kv19 A/B (64 sequences after 512-token prompts, f32 vs f16 K / V caches) and
# serving at 64 clients on this machine; tg128 of the 9B Q3_K_M / Q4_K_M synths.
# Lives in devwork21/ as go_final.sh beside b.tar.xz. Run as: cd devwork21 && OUT=$OUT timeout 400 bash go_final.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for ty in Q4_K_M Q3_K_M; do "$X" synth --size 9B --type $ty --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B-$ty.gguf" > /dev/null 2>&1 && touch "$W/m9B-$ty.ok"; done ) &
timeout 120 "$B/test_cuda" --gtest_brief=1 --gtest_filter='*RejectsBadInput*:CudaInfra.*:CudaDequant.*' > "$OUT/t_rejects.log" 2>&1; say "test_cuda rejects rc=$?"
timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 --gtest_filter='PrefillGemm.*' >> "$OUT/t_rejects.log" 2>&1; say "test_cuda_prefill PrefillGemm rc=$?"
grep -E "PASSED|FAILED" "$OUT/t_rejects.log" | tee -a "$OUT/steps.log"
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt 200 ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
M9=$W/m9B-Q4_K_M.gguf
if waitm 9B-Q4_K_M; then
  for r in 1 2 3; do for e in DS_DEFAULT=1 DS_KV_F16=1; do [ $(el) -lt 250 ] || continue
    timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
    say "batch 64 x 512 $e: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; done; done
  for e in DS_KV_F16=1 DS_DEFAULT=1; do [ $(el) -lt 300 ] || continue
    env $e DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 45 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 --budget-s 35 \
      --server-args "--prefill-budget 4096" --label "$e, budget 4096" >> "$OUT/serve.log" 2>&1; say "serve $e 4096 rc=$?"; done
  [ $(el) -lt 320 ] && DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 45 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
    --budget-s 35 --label "DS_KV_F16=1, budget 512" >> "$OUT/serve.log" 2>&1; say "serve f16 512 rc=$?"
  python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
fi
for ty in Q4_K_M Q3_K_M; do [ $(el) -lt 350 ] || continue; waitm 9B-$ty || continue
  timeout 30 "$X" bench -m "$W/m9B-$ty.gguf" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 9B $ty: $(tail -1 "$OUT/bench.jsonl" | grep -oE '"tokens_per_s": ?[0-9.]+')"; done
say done

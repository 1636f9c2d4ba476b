#!/bin/bash
# st20 call 3 (H200, a short budget): 64 x 512 A/B default vs f16 states + K V, serving at 64 clients with both.
# Run as: cd devst20 && OUT=$OUT timeout 150 bash go3.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B-Q4_K_M.gguf
[ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 16 -o "$M9" > "$OUT/synth.log" 2>&1; say synth
for e in "DS_STATE_F16=1 DS_KV_F16=1" DS_DEFAULT=1; do
  timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $e: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; done
[ $(el) -lt 95 ] && DS_STATE_F16=1 DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 45 bash "$D/../tools/serve_bench.sh" "$M9" \
  --levels 64 --budget-s 38 --label "DS_STATE_F16=1 DS_KV_F16=1" >> "$OUT/serve.log" 2>&1; say "serve rc=$?"
python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
say done

#!/bin/bash
# Session 14: serving at 32 / 64 clients with prefill_budget 512 (default) / 2048 / 4096, interleaved (no code change).
set -u
cd "$(dirname "$0")"; D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_BIN="$B/deltaserve"
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
timeout 90 "$DS_BIN" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 16 -o "$W/m9B.gguf" > /dev/null 2>&1; say "synth rc=$?"
for b in 512 2048 4096 512 2048 4096; do
  [ $(( $(date +%s) - T0 )) -lt ${LIM:-200} ] || { say "skip $b"; continue; }
  say "== budget $b"
  DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 60 bash "$D/../tools/serve_bench.sh" "$W/m9B.gguf" --levels 32,64 --budget-s 50 \
    --server-args="--prefill-budget $b" --label "prefill-budget $b" >> "$OUT/serve.log" 2>&1; say "rc=$?"
  tail -2 "$OUT/serve.jsonl" | python3 -c "
import json,sys
for l in sys.stdin:
  d=json.loads(l); print(d['label'], d['concurrency'], 'batch', d['mean_decode_batch'], 'dec', d['decode_tok_s'], 'out', d['output_tok_s'], 'ttft', d['ttft_ms'], 'itl', d['itl_ms'], 'err', d['errors'])" | tee -a "$OUT/steps.log"
done
say done

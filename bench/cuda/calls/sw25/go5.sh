#!/bin/bash
# Session 25's last call (main 7a2fcc8 + this script): issue 7 with the opt-in f16 options (DS_STATE_F16=1 DS_KV_F16=1:
# f16 GDN states and K / V caches, approximations with their error measured in CudaState.F16*): 9B at 64 x 512+ default
# vs both, then served at 1 / 8 / 32 / 64 with both.
# Run as: cd devf16 && OUT=$OUT timeout 300 bash go5.sh (devf16: b.tar.xz with deltaserve only, and this script)
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B.gguf
[ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 16 -o "$M9" > "$OUT/synth.log" 2>&1; say "synth rc=$?"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; }
for e in DS_DEFAULT=1 "DS_STATE_F16=1 DS_KV_F16=1"; do cb "$e"; done
DS_STATE_F16=1 DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 70 bash "$D/../tools/serve_bench.sh" "$M9" --levels 1,8,32,64 \
  --budget-s 60 --label "session25 DS_STATE_F16=1 DS_KV_F16=1" >> "$OUT/serve.log" 2>&1; say "serve rc=$?"
[ -e "$OUT/serve.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
say done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete

#!/bin/bash
# Session 37, call 4: on an H200 only (an H100 exits at once): issue 7 and issue 5 with b0889f8 (the two-warp mma
# kernel): lockstep 64 x 512 tg64 --kv-f16 rows 0 / DS_ATTN_MMA_ROWS=128 (two interleaved rounds), served at 64
# clients (--prefill-budget 4096, --kv-f16) with each, fp32 default and --state-f16 --kv-f16 served at 64; batch-1
# tg128 9B / 0.8B / 27B.
# Bundle (deltaserve only, ~28 MB): cd devf16 && rm -rf * && DS_FIXTURES=/work/shared/fixtures bash ../tools/gpu_bundle.sh
# ../build gpu-bundle; in gpu-bundle rm test_* fixtures/models/tiny-sym fixtures/quant lib/libcublas* lib/libcudart*,
# strip deltaserve; tar cf - gpu-bundle | xz -3 -T2 > b.tar.xz; rm -rf gpu-bundle; cp this script; carry ["devf16"].
# Run as: cd devf16 && OUT=$OUT LIM=540 timeout 550 bash go6.sh
set -u
LIM=${LIM:-540}
cd "$(dirname "$0")"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$GPU" in *H200*) ;; *) echo "$GPU: not an H200, nothing run" | tee "$OUT/steps.log"; exit 0 ;; esac
. ../bench/cuda/calls/prelude.sh
synth9b_bg 8
M08=$W/m08.gguf M27=$W/m27B.gguf
( "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1
  "$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$M27" > /dev/null 2>&1; touch "$W/m27.ok" ) &
wait9b $((LIM - 60))
say synth9b
cb() { timeout 20 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_ROWS=128"; do [ $(el) -lt $((LIM - 300)) ] && cb "$v"; done
done
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
  --budget-s 40 --label "s37go6 $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"; }
[ $(el) -lt $((LIM - 230)) ] && sb "DS_KV_F16=1"
[ $(el) -lt $((LIM - 230)) ] && sb "DS_KV_F16=1 DS_ATTN_MMA_ROWS=128"
[ $(el) -lt $((LIM - 230)) ] && sb "DS_KV_F16=0"
[ $(el) -lt $((LIM - 230)) ] && sb "DS_KV_F16=1 DS_STATE_F16=1"
serve_summary
tg() { timeout 40 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
[ $(el) -lt $((LIM - 45)) ] && tg "$M9"
[ $(el) -lt $((LIM - 45)) ] && [ -e "$M08" ] && tg "$M08"
while [ ! -e "$W/m27.ok" ] && [ "$(el)" -lt $((LIM - 50)) ]; do sleep 1; done
[ $(el) -lt $((LIM - 45)) ] && [ -e "$W/m27.ok" ] && tg "$M27"
say done
pack_out

#!/bin/bash
# Session 25's last call, NOT run (no device time left; run it next): issue 7 with the opt-in f16 options
# (DS_STATE_F16=1 DS_KV_F16=1: f16 GDN states and K / V caches, approximations with their error measured in
# CudaState.F16*): 9B at 64 x 512+ default vs both, then served at 1 / 8 / 32 / 64 with both. ~200 s plus the start.
# Run as: cd devf16 && OUT=$OUT timeout 300 bash go5.sh (devf16: b.tar.xz from tools/gpu_bundle.sh (deltaserve is
# enough), and this script; it sources ../bench/cuda/calls/prelude.sh and runs ../tools/serve_bench.sh)
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b 200
say synth
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; }
for e in DS_DEFAULT=1 "DS_STATE_F16=1 DS_KV_F16=1"; do cb "$e"; done
DS_STATE_F16=1 DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 70 bash "$D/../tools/serve_bench.sh" "$M9" --levels 1,8,32,64 \
  --budget-s 60 --label "DS_STATE_F16=1 DS_KV_F16=1" >> "$OUT/serve.log" 2>&1; say "serve rc=$?"
serve_summary
say done
pack_out

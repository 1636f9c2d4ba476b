#!/bin/bash
# Session 33, call 2 (the final attention code: ring 8 removed, ring slots sized by the cache element): the attention
# and state tests, then current main's numbers for the issues' tables on this host (ideally an H200):
# issue 5's batch-1 decode (tg128, 9B and 0.8B synths) and issue 7's served table with default settings (fp32).
# Run as: cd devf16 && OUT=$OUT LIM=330 timeout 340 bash go2.sh
set -u
LIM=${LIM:-330}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
M08=$W/m08.gguf
( [ -e "$M08" ] || "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 ) &
timeout 150 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*:CudaState.*' > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -20 | tee -a "$OUT/steps.log"
wait
say synth
tg() { timeout 40 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/bench.log" | tail -1)"; }
for r in 1 2; do tg "$M9"; tg "$M08"; done
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 200 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 170 --label "session33 call2 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
[ $(el) -lt $((LIM - 120)) ] && sb "DS_X=1" 1,8,32,64 ""
serve_summary
say done
pack_out

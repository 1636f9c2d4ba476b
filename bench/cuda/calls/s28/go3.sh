#!/bin/bash
# Session 28, call 3 (branch pair28 + q6m28): the Q6_K stream kernel's multi-sequence form beside the Q4_K one: batched
# tests (MultiMatchesFloat64 on both types, the rest of CudaMatvecBatched), the 9B step at B = 1 .. 8 against the
# previous forms (DS_MVB_Q6K_QUAD=0: Q6_K in pairs; DS_MVB_PAIR=0: no multi-sequence kernel at all), a B = 4 breakdown,
# serving at 1 / 2 / 4 / 8 clients, test_cuda_model. Run as: cd devf16 && OUT=$OUT timeout 560 bash go3.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 200 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.*' > "$OUT/t_mvb.log" 2>&1
say "test CudaMatvecBatched.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t_mvb.log" | tr '\n' ' ' | cut -c1-400)"
grep -E "FAILED|Failure" "$OUT/t_mvb.log" | head -20 | tee -a "$OUT/steps.log"
wait9b 260
say synth
cb() { timeout 40 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
cb 1 4; cb 2 4; cb 2 4 DS_MVB_PAIR=0; cb 3 4; cb 4 4; cb 4 4 DS_MVB_Q6K_QUAD=0; cb 4 4 DS_MVB_PAIR=0
cb 6 4; cb 8 4; cb 8 4 DS_MVB_PAIR=0; cb 2 512; cb 4 512; cb 8 512
cb 4 4 DS_DEFAULT=1 "--breakdown --top 25"
grep -A40 "per-kernel breakdown" "$OUT/cb.log" | tail -42 > "$OUT/breakdown4.txt"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 110 --label "session28 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 1,2,4,8 ""
serve_summary
[ -x "$TM" ] && timeout 150 "$TM" --gtest_brief=1 > "$OUT/tm.log" 2>&1; say "test_cuda_model rc=$? $(tail -3 "$OUT/tm.log" | tr '\n' ' ')"
say done
pack_out

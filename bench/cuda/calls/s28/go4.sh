#!/bin/bash
# Session 28, call 4 (main after q6m28 + the per-type limit: Q6_K groups only up to 4): the multi-sequence tests, then
# compute-sanitizer racecheck and memcheck on them (bounded), the 9B step at B = 5 .. 8 against DS_MVB_PAIR=0, serving
# at 8 clients. Run as: cd devf16 && OUT=$OUT timeout 560 bash go4.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
timeout 100 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t_mvb.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t_mvb.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/t_mvb.log" | head -20 | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  DS_MVB_SAN_SHORT=1 timeout 110 "$CS" --tool $tool "$B/test_cuda" --gtest_filter='CudaMatvecBatched.MultiMatchesFloat64' > "$OUT/san_$tool.log" 2>&1
  say "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED' "$OUT/san_$tool.log" | sort | uniq -c | head -5 | tr '\n' ' ' | cut -c1-300)"
done
wait9b 300
say synth
cb() { timeout 40 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
for b in 2 5 6 7 8; do cb $b 4; cb $b 4 DS_MVB_PAIR=0; done
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 100 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 60 --label "session28 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 8 ""
serve_summary
say done
pack_out

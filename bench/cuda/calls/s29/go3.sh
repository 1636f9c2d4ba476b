#!/bin/bash
# Session 29, call 3 (fold29 with the norm weights in registers before the wait where they fit (kEarly), no prefetch; N folds at
# B <= N): the fold tests, racecheck on the short form, then the 9B step at B = 2 .. 8 with N = 8 / 4 / 0 interleaved
# (prompts of 4, twice; 512 at B = 2 / 4 / 8), a B = 4 and a B = 8 breakdown (N = 8), serving at 1 / 2 / 4 / 8 clients.
# Run as: cd devf16 && OUT=$OUT timeout 560 bash go3.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvecBatchedIn.*:CudaMatvecBatched.MultiMatchesFloat64'
timeout 200 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|folded cases' "$OUT/t.log" | tr '\n' ' ' | cut -c1-400)"
grep -E "Failure" -A4 "$OUT/t.log" | head -30 | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DS_MVB_SAN_SHORT=1 timeout 120 "$CS" --tool racecheck "$B/test_cuda" --gtest_filter='CudaMatvecBatchedIn.MultiRmsNormMatchesFloat64' > "$OUT/san_racecheck.log" 2>&1
say "racecheck rc=$? $(grep -E 'SUMMARY|PASSED|FAILED' "$OUT/san_racecheck.log" | tr '\n' ' ' | cut -c1-200)"
wait9b 300
say synth
cb() { timeout 60 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
for r in 1 2; do for b in 2 3 4 5 6 8; do cb $b 4; cb $b 4 DS_MVB_MULTI_NORM=4; cb $b 4 DS_MVB_MULTI_NORM=0; done; done
for b in 2 4 8; do cb $b 512; cb $b 512 DS_MVB_MULTI_NORM=4; cb $b 512 DS_MVB_MULTI_NORM=0; done
cb 4 4 DS_DEFAULT=1 "--breakdown --top 6"
cb 8 4 DS_DEFAULT=1 "--breakdown --top 6"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 110 --label "session29 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 1,2,4,8 ""
serve_summary
say done
pack_out

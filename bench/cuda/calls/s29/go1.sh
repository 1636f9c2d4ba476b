#!/bin/bash
# Session 29, call 1 (branch fold29: the RMSNorm inside the multi-sequence stream kernels' staging at 2 <= B <= 8):
# the new test and the multi / fold tests, compute-sanitizer on the new test's short form, test_cuda_model, then the
# 9B step at B = 2 / 3 / 4 / 8 (prompts of 4 and 512) default vs DS_MVB_MULTI_NORM=0 (interleaved), a B = 4 breakdown,
# the 64 x 512+ step (unchanged path), serving at 1 / 2 / 4 / 8 clients. Run as: cd devf16 && OUT=$OUT timeout 560 bash go1.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvecBatchedIn.*:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
timeout 200 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|folded cases' "$OUT/t.log" | tr '\n' ' ' | cut -c1-400)"
grep -E "Failure" -A4 "$OUT/t.log" | head -30 | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  DS_MVB_SAN_SHORT=1 timeout 120 "$CS" --tool $tool "$B/test_cuda" --gtest_filter='CudaMatvecBatchedIn.MultiRmsNormMatchesFloat64' > "$OUT/san_$tool.log" 2>&1
  say "$tool rc=$? $(grep -E 'SUMMARY|PASSED|FAILED' "$OUT/san_$tool.log" | tr '\n' ' ' | cut -c1-200)"
done
[ -x "$TM" ] && timeout 120 "$TM" --gtest_brief=1 > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|tests from' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
wait9b 300
say synth
cb() { timeout 60 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
for b in 2 3 4 8; do cb $b 4; cb $b 4 DS_MVB_MULTI_NORM=0; cb $b 4; cb $b 4 DS_MVB_MULTI_NORM=0; done
cb 1 4; cb 2 512; cb 2 512 DS_MVB_MULTI_NORM=0; cb 4 512; cb 4 512 DS_MVB_MULTI_NORM=0
cb 4 4 DS_DEFAULT=1 "--breakdown --top 12"
cb 64 512
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 110 --label "session29 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 1,2,4,8 ""
serve_summary
say done
pack_out

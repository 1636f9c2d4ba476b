#!/bin/bash
# Session 32, call 1 (main c067bbb's binaries = e07688d's code): on one host, ideally an H200,
# (a) the batched-product tests after e07688d's launch_min2 refactor (CudaMatvecBatched, the block kernels' paths),
# (b) the lockstep step at 64 x 512 + tg128: fp32, --kv-f16, f16 states + K / V, fp32 with DS_MVB_RED=2, interleaved,
# (d) test_cuda_model's CudaState tests (the profiled step now runs the output head) and the breakdowns at B = 64 and
# B = 1 with the head included (sessions <= 31's tables lacked it),
# (c) served at 64 clients (--prefill-budget 4096) with fp32 and with f16 states + K / V, then the default table.
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go1.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 150 "$B/test_cuda" --gtest_brief=1 \
  --gtest_filter='CudaMatvecBatched.Accumulate*:CudaMatvecBatched.ColumnIndependentOfBatch:CudaMatvecBatched.RunToRunIdentical:CudaMatvecBatched.BlockBuildFastSameBits:CudaMatvecBatched.SplitReduceSameBits:CudaMatvecBatched.BatchOneIsMatvec:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.BlockLeanSameBits:CudaMatvecBatched.PrepRegSameBits:CudaMatvecBatched.RowScalesAndOutliers' \
  > "$OUT/tc.log" 2>&1 &
TC=$!
timeout 120 "$TM" --gtest_brief=1 --gtest_filter='CudaState.*' > "$OUT/tm.log" 2>&1 &
TMP=$!
wait9b 200
say synth
wait $TC; say "test_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tc.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED" -A3 "$OUT/tc.log" | head -20 | tee -a "$OUT/steps.log"
wait $TMP; say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -20 | tee -a "$OUT/steps.log"
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 120 --label "session32 call1 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
for r in 1 2; do
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_X=1"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 60)) ] && cb "$F16"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_MVB_RED=2"
done
timeout 60 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch 64 --prompt 512 --ctx 1024 --breakdown --top 16 \
  --json "$OUT/cb_bd.jsonl" > "$OUT/bd64.log" 2>&1; say "breakdown 64 rc=$?"
timeout 40 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --batch 1 --breakdown --top 16 --json "$OUT/cb_bd.jsonl" > "$OUT/bd1.log" 2>&1
say "breakdown 1 rc=$?"
grep -A12 "^kind" "$OUT/bd64.log" "$OUT/bd1.log" | tee -a "$OUT/steps.log"
grep -E "output\[" "$OUT/bd64.log" "$OUT/bd1.log" | tee -a "$OUT/steps.log"
[ $(el) -lt $((LIM - 40)) ] && sb "$F16" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 40)) ] && sb "DS_X=1" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 40)) ] && sb "DS_KV_F16=1" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 40)) ] && sb "$F16" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 60)) ] && sb "DS_X=1" 1,8,32,64 ""
serve_summary
say done
pack_out

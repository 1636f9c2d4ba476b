#!/bin/bash
# Session 32, call 3 (run: see docs/measurements/2026-12-06-session32.txt): DS_MVB_MINW (the 2-warpgroup Q4_K block kernel's mins as one wgmma per block) on whatever card
# comes: (a) its tests (the new float64 test; the generic batched tests, CudaMatvecBatchedIn and test_cuda_model's
# CudaState with DS_MVB_MINW=1 in the environment), (b) the lockstep step at 64 x 512 + tg128, MINW 0 / 1 interleaved
# three times, (c) breakdowns at 64 with 0 and 1.
# Run as: cd devf16 && OUT=$OUT LIM=330 timeout 340 bash go2.sh
set -u
LIM=${LIM:-330}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
( timeout 150 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.MinsByWgmmaMatchFloat64' > "$OUT/t_minw.log" 2>&1
  DS_MVB_MINW=1 timeout 150 "$B/test_cuda" --gtest_brief=1 \
    --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.ColumnIndependentOfBatch:CudaMatvecBatched.RunToRunIdentical:CudaMatvecBatched.RowScalesAndOutliers:CudaMatvecBatched.SplitReduceSameBits:CudaMatvecBatched.BlockBuildFastSameBits:CudaMatvecBatched.BlockLeanSameBits:CudaMatvecBatchedIn.*' \
    > "$OUT/t_env.log" 2>&1 ) &
TC=$!
DS_MVB_MINW=1 timeout 120 "$TM" --gtest_brief=1 --gtest_filter='CudaState.*' > "$OUT/tm.log" 2>&1 &
TMP=$!
wait9b 200
say synth
wait $TMP; say "test_cuda_model (MINW=1) rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-200)"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
wait $TC
for f in t_minw t_env; do say "test_cuda $f $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/$f.log" | tr '\n' ' ' | cut -c1-200)"; done
grep -E "Failure|FAILED|mins by wgmma|worst" -A2 "$OUT/t_minw.log" "$OUT/t_env.log" | head -30 | tee -a "$OUT/steps.log"
for r in 1 2 3; do
  [ $(el) -lt $((LIM - 40)) ] && cb "DS_MVB_MINW=0"
  [ $(el) -lt $((LIM - 40)) ] && cb "DS_MVB_MINW=1"
done
for m in 1 0; do
  [ $(el) -lt $((LIM - 25)) ] || break
  timeout 40 env DS_MVB_MINW=$m "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch 64 --prompt 512 --ctx 1024 \
    --breakdown --top 12 --json "$OUT/cb_bd.jsonl" > "$OUT/bd64_$m.log" 2>&1; say "breakdown MINW=$m rc=$?"
  grep -E "^decode|matvec Q4_K" "$OUT/bd64_$m.log" | tee -a "$OUT/steps.log"
done
say done
pack_out

#!/bin/bash
# Session 32, call 4 (a warm follow-up of go2.sh on the same H100; the call wrote this file into devf16/ itself):
# CudaMatvecBatched.MatchesFloat64PerBatchRow and PrepRegSameBits with DS_MVB_MINW=1, then two more MINW 0 / 1
# lockstep pairs. Run as: cd devf16 && OUT=$OUT timeout 230 bash go3.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
DS_MVB_MINW=1 timeout 120 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.MatchesFloat64PerBatchRow:CudaMatvecBatched.PrepRegSameBits' > "$OUT/t_f64.log" 2>&1
say "test_cuda MINW=1 f64 rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t_f64.log" | tr '\n' ' ')"
grep -E "worst|Failure" "$OUT/t_f64.log" | head -12 | tee -a "$OUT/steps.log"
[ -e "$M9" ] && for r in 1 2; do for m in 0 1; do timeout 40 env DS_MVB_MINW=$m "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb.log" 2>&1; say "lockstep MINW=$m $(grep -E '^decode' "$OUT/cb.log" | cut -c1-90)"; done; done
say done

#!/bin/bash
# Session 28, call 6 (main after the review mends codes_q6 / store_red_rows): the batch-1 and multi-sequence stream
# tests, and racecheck on the multi tests' short form. Run as: cd devf16 && OUT=$OUT timeout 250 bash go6.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
F='CudaMatvec.StreamQ6KVariants:CudaMatvec.StreamQ6KLeanSameBits:CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamQ4KLeanSameBits:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
timeout 170 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/t.log" | head -20 | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DS_MVB_SAN_SHORT=1 timeout 60 "$CS" --tool racecheck "$B/test_cuda" --gtest_filter='CudaMatvecBatched.MultiMatchesFloat64' > "$OUT/san.log" 2>&1
say "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/san.log" | tr '\n' ' ' | cut -c1-200)"
pack_out

#!/bin/bash
# Session 27, call 4: the 9B step at small batches (B = 1 .. 24, short prompts; 2 and 4 also after 512-token prompts).
# Serving at 8 clients ran 6.6 ms steps (batch 1: 2.3 ms), the B = 8 breakdown has the batched Q4_K / Q6_K products at
# 725-790 GB/s: how the step grows from B = 1 to 24 says whether a B-column form of the batch-1 stream kernels (whose
# n8 mma tile holds x's digits / terms, not sequences) is the next serving lever. Branch cols27 adds DS_MVB_COLUMNS=N
# (Q4_K / Q6_K batches of <= N as N batch-1 products): its accuracy tests (test_cuda, batched tests at B <= 8 through
# it) and B = 2 / 3 / 4 with it, interleaved with the default. ~120 s plus the start.
# Run as: cd devf16 && OUT=$OUT timeout 200 bash go3.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
[ -x "$B/test_cuda" ] && DS_MVB_COLUMNS=8 timeout 120 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.MatchesFloat64PerBatchRow:CudaMatvecBatched.Accumulate:CudaMatvecBatched.RowScalesAndOutliers:CudaMatvecBatched.Q6KExtremeScalesAndCodes:CudaMatvecBatched.BatchOneIsMatvec:CudaMatvecBatched.ColumnIndependentOfBatch' > "$OUT/t_cols.log" 2>&1
say "test batched with DS_MVB_COLUMNS=8 rc=$? $(grep -E 'PASSED|FAILED' "$OUT/t_cols.log" | tr '\n' ' ' | cut -c1-300)"
wait9b 220
say synth
cb() { timeout 40 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
for b in 1 2 3 4 6 8 12 16 24; do cb $b 4; done
for b in 2 3 4; do cb $b 4 DS_MVB_COLUMNS=4; cb $b 4; done
cb 2 512; cb 2 512 DS_MVB_COLUMNS=4; cb 4 512; cb 4 512 DS_MVB_COLUMNS=4
say done
pack_out

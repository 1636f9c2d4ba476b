#!/bin/bash
# Session 28, call 1: branch cols27's DS_MVB_COLUMNS=N (Q4_K / Q6_K batches of <= N as N batch-1 products) against the
# default at B = 2 / 3 / 4 with its accuracy tests, the 9B step at B = 1 .. 16, and ncu on the batched GDN kernel
# (gdn_tma_out_kernel) at B = 64 with float and f16 states: the f16 form moves half the bytes in 80% of the time
# (62 vs 78 us a layer), so is it latency-bound per item? Run as: cd devf16 && OUT=$OUT timeout 400 bash go1.sh
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
for b in 1 2 3 4 8 16; do cb $b 4; done
for b in 2 3 4; do cb $b 4 DS_MVB_COLUMNS=4; done
cb 2 512; cb 2 512 DS_MVB_COLUMNS=4
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for f in "" --state-f16; do
  timeout 90 "$NCU" --kernel-name regex:gdn_tma_out --launch-skip 48 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section LaunchStats \
    "$X" cuda-bench -m "$M9" --tg 4 --reps 1 --select 0 --batch 64 --prompt 4 --ctx 64 --no-graphs $f > "$OUT/ncu$f.log" 2>&1
  say "ncu gdn $f rc=$? $(grep -E 'Duration|Memory Throughput|DRAM Throughput' "$OUT/ncu$f.log" | tr -s ' ' | tr '\n' ';' | cut -c1-300)"
done
say done
pack_out

#!/bin/bash
# Session 28, the last call (main's code after the duplicates clean-up: load_q6, multi_args): the batch-1 and
# multi-sequence stream tests, the small-batch steps with the multi-sequence kernels against DS_MVB_PAIR=0
# (interleaved), the 64 x 512+ step (unchanged path: a regression check), serving at 1 / 2 / 4 / 8 clients; on an H200
# where one is given. Run as: cd devf16 && OUT=$OUT timeout 480 bash go5.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvec.StreamQ6KVariants:CudaMatvec.StreamQ6KLeanSameBits:CudaMatvec.StreamQ4KVariants:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
[ -x "$B/test_cuda" ] && timeout 150 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/t.log" | head -20 | tee -a "$OUT/steps.log"
wait9b 280
say synth
cb() { timeout 60 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} >> "$OUT/cb.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-80)"; }
for b in 1 2 4 8; do cb $b 4; cb $b 4 DS_MVB_PAIR=0; done
cb 2 512; cb 4 512; cb 64 512; cb 64 512 DS_MVB_PAIR=0
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 110 --label "session28 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 1,2,4,8 ""
serve_summary
say done
pack_out

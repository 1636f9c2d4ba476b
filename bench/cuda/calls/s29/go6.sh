#!/bin/bash
# Session 29, call 6 (fold29 + the even stage count for 16 consumer warps, mvq::even_stages): the stream / multi / fold
# tests and test_cuda_model; the hang check (B = 2 with DS_MVB_MULTI_NORM=0 hung 3 of 33 times in call 5, 20 s each);
# the 9B step at B = 1 / 2 / 3 / 4 / 8 default (fold at <= 8) vs DS_MVB_MULTI_NORM=0 interleaved, 64 x 512+; serving
# at 2 / 8 clients. Run as: cd devf16 && OUT=$OUT timeout 450 bash go6.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvec.Stream*:CudaMatvecBatchedIn.*:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
timeout 200 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|folded cases' "$OUT/t.log" | tr '\n' ' ' | cut -c1-400)"
grep -E "Failure" -A4 "$OUT/t.log" | head -30 | tee -a "$OUT/steps.log"
[ -x "$TM" ] && timeout 120 "$TM" --gtest_brief=1 > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|tests from' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
wait9b 300
say synth
declare -A hangs runs
one() {  # $1 label, $2 batch, $3 env
  env $3 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch $2 --prompt 4 --ctx 1024 > "$OUT/one.log" 2>&1 &
  local pid=$! t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt 200 ]; do sleep 0.1; t=$((t + 1)); done
  runs[$1]=$(( ${runs[$1]:-0} + 1 ))
  if kill -0 $pid 2>/dev/null; then
    hangs[$1]=$(( ${hangs[$1]:-0} + 1 )); say "HANG $1 (run ${runs[$1]})"; kill -9 $pid; wait $pid 2>/dev/null
  else
    wait $pid; grep -E '^decode' "$OUT/one.log" | cut -c1-60 >> "$OUT/ok_$1.log"
  fi
}
for r in $(seq 1 40); do one n0b2 2 DS_MVB_MULTI_NORM=0; [ "$(el)" -gt 230 ] && break; done
say "n0b2: ${hangs[n0b2]:-0} hangs of ${runs[n0b2]:-0}; $(sort "$OUT/ok_n0b2.log" 2>/dev/null | sed -n '1p;$p' | tr '\n' ' ')"
cb() { timeout 40 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} > "$OUT/cb1.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-80)"; cat "$OUT/cb1.log" >> "$OUT/cb.log"; }
for r in 1 2; do for b in 2 3 4 8; do cb $b 4; cb $b 4 DS_MVB_MULTI_NORM=0; done; done
cb 1 4; cb 64 512
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 120 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 90 --label "session29 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 2,8 ""
serve_summary
say done
pack_out

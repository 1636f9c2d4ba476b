#!/bin/bash
# Session 31, call 2 (main 3787d59; deltaserve.old = 39224da, call 1's binary): (a) test_engine on the GPU (the
# CUDA backend's serving tests, constrained replies through the engine on CUDA); (b) served at 64 clients,
# --prefill-budget 4096, old vs new (each decode row's event built after the next launch), fp32 and f16 states + K / V,
# interleaved, two rounds, with gap_ms; (c) the served table with the new binary: default settings and
# --prefill-budget 4096 (fp32; f16 states + K / V).
# Run as: cd devf16 && OUT=$OUT LIM=540 timeout 540 bash go2.sh (LIM: the seconds the call may run)
set -u
LIM=${LIM:-540}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 90 "$B/test_engine" --gtest_brief=1 > "$OUT/te.log" 2>&1
say "test_engine rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/te.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|SKIPPED \]" -A3 "$OUT/te.log" | head -20 | tee -a "$OUT/steps.log"
wait9b 300
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
sb() { env $1 DS_BIN="$B/$4" DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 120 --label "session31 call2 $GPU $4 $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $4 $1 $2 $3 rc=$?"; }
ab() { sb "DS_X=1" 64 "--prefill-budget 4096" deltaserve.old; sb "DS_X=1" 64 "--prefill-budget 4096" deltaserve
  sb "$F16" 64 "--prefill-budget 4096" deltaserve.old; sb "$F16" 64 "--prefill-budget 4096" deltaserve; }
ab
[ $(el) -lt $((LIM - 40)) ] && sb "$F16" 1,8,32,64 "--prefill-budget 4096" deltaserve
[ $(el) -lt $((LIM - 75)) ] && ab
[ $(el) -lt $((LIM - 40)) ] && sb "DS_X=1" 1,8,32,64 "" deltaserve
serve_summary
say done
pack_out

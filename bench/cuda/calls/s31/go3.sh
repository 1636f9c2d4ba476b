#!/bin/bash
# Session 31, call 4 (short; the device time left): served at 64 clients on whatever card comes (an H200 wanted), main
# 3787d59's binary: f16 states + K / V and fp32, --prefill-budget 4096, alternating, as long as LIM allows.
# Run as: cd devf16 && OUT=$OUT LIM=150 timeout 160 bash go3.sh
set -u
LIM=${LIM:-150}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b $((LIM - 30))
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout $((LIM - $(el))) bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
  --budget-s 60 --label "session31 call4 $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"; }
for c in "$F16" "DS_X=1" "$F16" "DS_X=1"; do [ $(el) -lt $((LIM - 16)) ] && sb "$c"; done
serve_summary
say done

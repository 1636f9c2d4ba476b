#!/bin/bash
# NOT RUN in session 31: the one start tried for it was refused (device time ran out).
# Session 31, call 4 (short; the device time left): on whatever card comes, main 3787d59's binary: the lockstep step
# at 64 x 512 + tg128 (f16 states + K / V, fp32) and then served at 64 clients (--prefill-budget 4096) on the same
# host, so the served-vs-lockstep comparison is not across hosts.
# Run as: cd devf16 && OUT=$OUT LIM=150 timeout 160 bash go3.sh
set -u
LIM=${LIM:-150}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b $((LIM - 30))
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout $((LIM - $(el))) bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
  --budget-s 60 --label "session31 call4 $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"; }
[ $(el) -lt $((LIM - 40)) ] && cb "$F16"
[ $(el) -lt $((LIM - 20)) ] && sb "$F16"
[ $(el) -lt $((LIM - 40)) ] && cb "DS_X=1"
[ $(el) -lt $((LIM - 20)) ] && sb "DS_X=1"
serve_summary
say done

#!/bin/bash
# Session 27, call 2 (warm machine after go.sh; branch pf27): issue 7 served on the 9B synth with 512-token prompts,
# which the fast prefill now leaves finite (pf26): default at 64 with --prefill-budget 4096 (the throughput setting),
# f16 states + K / V the same, then f16 at 1 / 8 / 32 / 64 with the default budget. ~330 s.
# Run as: cd devf16 && OUT=$OUT timeout 420 bash serve.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b 220
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 100 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 70 --label "session27 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb DS_DEFAULT=1 64 "--prefill-budget 4096"
sb "$F16" 64 "--prefill-budget 4096"
[ $(el) -lt 250 ] && sb "$F16" 1,8,32,64 ""
serve_summary
say done
pack_out

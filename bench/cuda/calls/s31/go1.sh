#!/bin/bash
# Session 31, call 1 (main 39224da): (a) served at 64 clients, --prefill-budget 4096, burst_join on / off
# (DS_BURST_JOIN=1 / 0), fp32 and f16 states + K / V, interleaved, with the new gap_ms (host time from a step's
# result to the next launch); (b) the served table at 1 / 8 / 32 / 64 with burst_join (default budget and 4096);
# (c) the lockstep step at 64 x 512 + tg128 (the issue's shape, llama-batched-bench's S_TG): default, --kv-f16,
# both; (d) test_engine's GPU tests; (e) tg128 batch 1 for 9B and 0.8B.
# Run as: cd devf16 && OUT=$OUT timeout 580 bash go1.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
: # test_engine not carried (the 64 MiB limit); its CPU tests ran here
"$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 4 -o "$W/m08.gguf" > /dev/null 2>&1
wait9b 300
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 120 --label "session31 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
for r in 1 2; do
  sb "DS_BURST_JOIN=0" 64 "--prefill-budget 4096"; sb "DS_BURST_JOIN=1" 64 "--prefill-budget 4096"
  sb "$F16 DS_BURST_JOIN=0" 64 "--prefill-budget 4096"; sb "$F16 DS_BURST_JOIN=1" 64 "--prefill-budget 4096"
done
serve_summary
cb() { timeout 90 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} > "$OUT/cb1.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; cat "$OUT/cb1.log" >> "$OUT/cb.log"; }
[ $(el) -lt 400 ] && { cb 64 512; cb 64 512 DS_KV_F16=1; cb 64 512 "$F16"; }
[ $(el) -lt 420 ] && { timeout 60 "$X" bench -m "$M9" -p 0 -n 128 -r 3 --backend cuda > "$OUT/tg9.log" 2>&1; say "tg128 9B rc=$? $(grep -E 'tg128|tok/s' "$OUT/tg9.log" | tail -2 | tr '\n' ' ')"; }
[ $(el) -lt 440 ] && { timeout 40 "$X" bench -m "$W/m08.gguf" -p 0 -n 128 -r 3 --backend cuda > "$OUT/tg08.log" 2>&1; say "tg128 0.8B rc=$? $(grep -E 'tg128|tok/s' "$OUT/tg08.log" | tail -2 | tr '\n' ' ')"; }
[ $(el) -lt 450 ] && sb "" 1,8,32,64 ""
[ $(el) -lt 500 ] && sb "$F16" 1,8,32,64 "--prefill-budget 4096"
serve_summary
say done
pack_out

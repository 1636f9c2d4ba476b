#!/bin/bash
# Session 33, call 1: the decode attention's ring of 8 rows for f16 caches (the new default with --kv-f16) on one
# host, ideally an H200:
# (a) AttnRing.* (ring 8 in every same-bits check; SameBitsF16Caches new) and CudaState.*; AttnBench.CacheTypeRings
#     (ring 4 vs 8, f32 and f16 caches, the 9B serving shape),
# (b) the lockstep step at 64 x 512 + tg128, interleaved: fp32, --kv-f16 (ring 8), --kv-f16 with ring 4 (the old
#     default), fp32 with ring 8, --kv-f16 with 8 splits (DS_ATTN_SPLIT_POS=128: what the 16-split plan costs),
# (c) the breakdown at 64 with --kv-f16, (d) served at 64 clients (--prefill-budget 4096) with --kv-f16 and fp32, then
#     the table at 1 / 8 / 32 / 64 with --kv-f16 and default settings.
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go1.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 150 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*:CudaState.*' > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -20 | tee -a "$OUT/steps.log"
grep -E "default rule" "$OUT/tm.log" | tee -a "$OUT/steps.log"
DS_ATTN_BENCH=1 timeout 60 "$TM" --gtest_filter='AttnBench.CacheTypeRings' > "$OUT/ab.log" 2>&1
say "attn bench rc=$?"; grep "\[s33\]" "$OUT/ab.log" | tee -a "$OUT/steps.log"
wait9b 200
say synth
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 128 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 150 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 120 --label "session33 call1 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
round() {
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_X=1"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_KV_F16=1 DS_ATTN_RING=4"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_ATTN_RING=8"
  [ $(el) -lt $((LIM - 60)) ] && cb "DS_KV_F16=1 DS_ATTN_SPLIT_POS=128"
}
round
[ $(el) -lt $((LIM - 40)) ] && sb "DS_KV_F16=1" 64 "--prefill-budget 4096"
round
[ $(el) -lt $((LIM - 30)) ] && { timeout 40 env DS_KV_F16=1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch 64 \
  --prompt 512 --ctx 1024 --breakdown --top 16 --json "$OUT/cb_bd.jsonl" > "$OUT/bd64.log" 2>&1; say "breakdown 64 kv-f16 rc=$?"
  grep -A12 "^kind" "$OUT/bd64.log" | tee -a "$OUT/steps.log"; }
[ $(el) -lt $((LIM - 40)) ] && sb "DS_X=1" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 100)) ] && sb "DS_KV_F16=1" 1,8,32,64 ""
serve_summary
say done
pack_out

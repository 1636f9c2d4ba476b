#!/bin/bash
# The next session's call 1 (s35's call 2 never ran: the device budget went on refused starts; session 36 had no
# device time). Binaries of main after f3dd122 (session 36: the pair kernel reads both score halves from shared
# memory; the same bits): mma_issue_tile with per-lane bases (~7 instead of ~25 instructions per 16-byte copy) and
# attn_mma_pair_kernel (DS_ATTN_MMA_PAIR=1: two warps per item, the same bits), neither yet run on a GPU.
# (a) AttnRing.* (MmaWalkSameBits now also memcmp's the pair kernel); AttnBench.Mma (walk / item per warp / pair x
# rows 0 / 64, B 64 / 1); (b) lockstep 64 x 512 tg64 --kv-f16, two interleaved rounds: default (walk, rows 0) /
# PAIR ROWS=64 / WALK=0 ROWS=64 / PAIR / PAIR ALIGN=1; (c) the fastest's breakdown; (d) on an H200 only: served at
# 64 clients (--prefill-budget 4096) with the fastest and with the default.
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go3.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
timeout 60 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*' > "$OUT/tm.log" 2>&1
say "AttnRing.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tm.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -16 | tee -a "$OUT/steps.log"
DS_ATTN_BENCH=1 timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench.log" 2>&1
say "AttnBench.Mma rc=$?"; grep -E "^\[walk34\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
[ $(el) -lt $((LIM - 40)) ] && wait9b $((LIM - 40))
say synth
cb() { timeout 20 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90) $(grep -o 'nonfinite[^,]*' "$OUT/cb1.log" | head -1)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_PAIR=1 DS_ATTN_MMA_ROWS=64" "DS_KV_F16=1 DS_ATTN_MMA_WALK=0 DS_ATTN_MMA_ROWS=64" \
           "DS_KV_F16=1 DS_ATTN_MMA_PAIR=1" "DS_KV_F16=1 DS_ATTN_MMA_PAIR=1 DS_ATTN_MMA_ALIGN=1"; do
    [ $(el) -lt $((LIM - 150)) ] && cb "$v"
  done
done
BEST=$(python3 - "$OUT/steps.log" <<'PY'
import re, sys, collections
ms = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.search(r"lockstep (.*?): rc=0 .*\(([0-9.]+) ms per step", l)
    if m: ms[m.group(1)].append(float(m.group(2)))
for k in ms: print("MEAN", k, round(sum(ms[k]) / len(ms[k]), 4), ms[k], file=sys.stderr)
print(min(ms, key=lambda k: sum(ms[k]) / len(ms[k])) if ms else "DS_KV_F16=1")
PY
2>> "$OUT/steps.log")
say "best lockstep variant: $BEST"
[ $(el) -lt $((LIM - 110)) ] && { timeout 30 env $BEST "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch 64 \
  --prompt 512 --ctx 1024 --breakdown --top 4 --json "$OUT/cb_bd.jsonl" > "$OUT/bd64.log" 2>&1; say "breakdown 64 $BEST rc=$?"
  grep -E "^(decode|attention|matvec|gdn)" "$OUT/bd64.log" | head -8 | tee -a "$OUT/steps.log"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 40 --label "s35go3 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
case "$GPU" in *H200*) ;; *) say "not an H200: no serve (issue 7's number is the H200's)"; LIM=0 ;; esac
[ $(el) -lt $((LIM - 55)) ] && sb "$BEST" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 55)) ] && [ "$BEST" != "DS_KV_F16=1" ] && sb "DS_KV_F16=1" 64 "--prefill-budget 4096"
serve_summary
say done
pack_out

#!/bin/bash
# Session 37, call 2 (after b0889f8: the two-warp mma kernel is the only f16-cache attention kernel):
# (a) test_cuda_model whole (AttnRing.MmaRowsMatchFloat64 new); AttnBench.Mma (rows 0 / 64, B 64 / 1);
# (b) lockstep 64 x 512 tg64 --kv-f16, two interleaved rounds: rows 0 (default) / DS_ATTN_MMA_ROWS=64 / 128;
# (c) served at 64 clients (--prefill-budget 4096, --kv-f16) with rows 0 and the fastest rows (issue 7 on an H200);
# (d) issue 5's batch-1 tg128: 9B default, 9B --kv-f16, 0.8B default.
# Run as: cd devf16 && OUT=$OUT LIM=540 timeout 550 bash go4.sh
set -u
LIM=${LIM:-540}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 12
M08=$W/m08.gguf
( [ -e "$M08" ] || "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 ) &
timeout 150 "$TM" --gtest_brief=1 > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED)|tests ran' "$OUT/tm.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -20 | tee -a "$OUT/steps.log"
grep -E "^\[mma\]" "$OUT/tm.log" | tee -a "$OUT/steps.log"
DS_ATTN_BENCH=1 timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench.log" 2>&1
say "AttnBench.Mma rc=$?"; grep -E "^\[mma\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
wait9b $((LIM - 60))
say synth
cb() { timeout 20 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90) $(grep -o 'nonfinite[^,]*' "$OUT/cb1.log" | head -1)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_ROWS=64" "DS_KV_F16=1 DS_ATTN_MMA_ROWS=128"; do
    [ $(el) -lt $((LIM - 250)) ] && cb "$v"
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
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 40 --label "s37go4 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
[ $(el) -lt $((LIM - 160)) ] && sb "DS_KV_F16=1" 64 "--prefill-budget 4096"
[ $(el) -lt $((LIM - 160)) ] && [ "$BEST" != "DS_KV_F16=1" ] && sb "$BEST" 64 "--prefill-budget 4096"
serve_summary
wait
tg() { timeout 30 env $2 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 $(basename "$1") $2 rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
[ $(el) -lt $((LIM - 35)) ] && tg "$M9" ""
[ $(el) -lt $((LIM - 35)) ] && tg "$M9" "DS_KV_F16=1"
[ $(el) -lt $((LIM - 35)) ] && tg "$M08" ""
say done
pack_out

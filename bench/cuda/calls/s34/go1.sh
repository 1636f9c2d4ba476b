#!/bin/bash
# Session 34, call 1 (walk34: the mma attention's warps walk runs of items with one tile stream; DS_ATTN_MMA_ALIGN):
# (a) AttnRing.* (MmaWalkSameBits: the same bits at any warp count, align within float64 bounds, alone == batch) and
#     CudaState.* (also the first GPU run of session 33's review mends c023f38);
# (b) lockstep 64 x 512 + tg64 with --kv-f16: walk (default) / DS_ATTN_MMA_WALK=0 / ALIGN=1 / ROWS=64 / EVEN=1, interleaved;
#     the breakdown with --kv-f16; (c) served at 64 clients (--prefill-budget 4096) with --kv-f16;
# (d) issue 5's batch-1 tg128, 9B and 0.8B synths (default settings).
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go1.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
M08=$W/m08.gguf
( [ -e "$M08" ] || "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 ) &
timeout 150 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*:CudaState.*' > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -24 | tee -a "$OUT/steps.log"
grep -E "\[walk34\]" "$OUT/tm.log" | head -12 | tee -a "$OUT/steps.log"
wait9b 170
say synth
cb() { timeout 20 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90) $(grep -o 'nonfinite[^,]*' "$OUT/cb1.log" | head -1)"; }
for r in 1 2; do
  [ $(el) -lt $((LIM - 20)) ] && cb "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 20)) ] && cb "DS_KV_F16=1 DS_ATTN_MMA_WALK=0"
  [ $(el) -lt $((LIM - 20)) ] && cb "DS_KV_F16=1 DS_ATTN_MMA_ALIGN=1"
  [ $(el) -lt $((LIM - 20)) ] && cb "DS_KV_F16=1 DS_ATTN_MMA_ROWS=64"
  [ $(el) -lt $((LIM - 20)) ] && cb "DS_KV_F16=1 DS_ATTN_MMA_EVEN=1"
done
[ $(el) -lt $((LIM - 40)) ] && { timeout 40 env DS_KV_F16=1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch 64 \
  --prompt 512 --ctx 1024 --breakdown --top 16 --json "$OUT/cb_bd.jsonl" > "$OUT/bd64.log" 2>&1; say "breakdown 64 kv-f16 rc=$?"
  grep -iE "attention|output\[|step" "$OUT/bd64.log" | head -12 | tee -a "$OUT/steps.log"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 45 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 38 --label "session34 call1 walk34 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
# Serve with the lockstep's fastest variant (mean ms per step over its rounds).
BEST=$(python3 - "$OUT/steps.log" <<'PY'
import re, sys, collections
ms = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.search(r"lockstep (.*?): rc=0 .*\(([0-9.]+) ms per step", l)
    if m: ms[m.group(1)].append(float(m.group(2)))
print(min(ms, key=lambda k: sum(ms[k]) / len(ms[k])) if ms else "DS_KV_F16=1")
PY
)
say "best lockstep variant: $BEST"
[ $(el) -lt $((LIM - 50)) ] && sb "$BEST" 64 "--prefill-budget 4096"
wait
tg() { timeout 30 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/bench.log" | tail -1)"; }
[ $(el) -lt $((LIM - 35)) ] && tg "$M9"
[ $(el) -lt $((LIM - 35)) ] && tg "$M08"
serve_summary
say done
pack_out

#!/bin/bash
# Session 33, call 3 (branch tca33): the tensor-core decode attention for f16 caches (attn_mma.cuh).
# (a) AttnRing.* (SameBitsF16Caches: the mma kernel vs float64 at 6 shapes, alone == in the batch, differs from the
#     scalar loaders) and CudaState.* (F16KvCacheNearF32 runs the model with f16 caches through it);
# (b) lockstep 64 x 512 + tg128 with --kv-f16, mma on / off interleaved, and fp32 once; breakdown with --kv-f16;
# (c) served at 64 clients (--prefill-budget 4096) with --kv-f16.
# Run as: cd devf16 && OUT=$OUT LIM=180 timeout 190 bash go3.sh
set -u
LIM=${LIM:-180}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 90 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*:CudaState.*' > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/tm.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure|FAILED|Expected|Which is|vs float64" -A2 "$OUT/tm.log" | grep -v "^--" | grep -E "Failure|FAILED|Expected|Which|mma\)" | head -24 | tee -a "$OUT/steps.log"
wait9b 150
say synth
cb() { timeout 16 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90) $(grep -o 'nonfinite[^,]*' "$OUT/cb1.log" | head -1)"; }
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 40 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 35 --label "session33 call3 tca33 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
for r in 1 2; do
  [ $(el) -lt $((LIM - 15)) ] && cb "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 15)) ] && cb "DS_KV_F16=1 DS_ATTN_MMA=0"
done
[ $(el) -lt $((LIM - 15)) ] && cb "DS_X=1"
[ $(el) -lt $((LIM - 30)) ] && sb "DS_KV_F16=1" 64 "--prefill-budget 4096"
serve_summary
say done
pack_out

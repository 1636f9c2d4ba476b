#!/bin/bash
# Session 37, call 8: the mma attention with 3 tile buffers (DS_ATTN_MMA_STAGES=3, attn_force_mma_stages; the same
# bits): (a) AttnRing.* (MmaRowsMatchFloat64 memcmp's 2 vs 3 stages); AttnBench.Mma (rows 0 / 64 x stages 2 / 3);
# (b) ncu of the 3-stage kernel at B 64 x 528; (c) lockstep 64 x 512 tg64 --kv-f16, stages 2 / 3, three interleaved
# rounds; (d) tg128 9B --kv-f16 stages 2 / 3, two rounds; (e) on an H200: served at 64 with the faster.
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go8.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 12
timeout 60 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*' > "$OUT/tm.log" 2>&1
say "AttnRing.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tm.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -16 | tee -a "$OUT/steps.log"
DS_ATTN_BENCH=1 timeout 40 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench.log" 2>&1
say "AttnBench.Mma rc=$?"; grep -E "^\[mma\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
DS_ATTN_MMA_STAGES=3 DS_ATTN_BENCH=1 timeout 60 "$NCU" --clock-control none -k "regex:attn_mma" --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  "$TM" --gtest_filter='AttnBench.MmaProfile' > "$OUT/ncu.txt" 2>&1
say "ncu stages 3 rc=$?"
grep -E "attn_|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared|Dynamic Shared|Registers Per|Warp Cycles Per Issued|No Eligible|Local" "$OUT/ncu.txt" | tr -s ' ' | head -20 | tee -a "$OUT/steps.log"
grep -E "L1TEX" "$OUT/ncu.txt" | tr -s ' ' | head -3 >> "$OUT/steps.log"
wait9b $((LIM - 60))
say synth
cb() { timeout 20 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-90)"; }
for r in 1 2 3; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_STAGES=3"; do [ $(el) -lt $((LIM - 150)) ] && cb "$v"; done
done
tg() { timeout 30 env $1 "$X" bench -m "$M9" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 9B $1 rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_STAGES=3"; do [ $(el) -lt $((LIM - 100)) ] && tg "$v"; done
done
case "$GPU" in *H200*)
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_STAGES=3"; do
    [ $(el) -lt $((LIM - 55)) ] && { env $v DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" \
      "$M9" --levels 64 --budget-s 40 --label "s37go8 $GPU $v --prefill-budget 4096" \
      --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1; say "serve $v rc=$?"; }
  done
  serve_summary ;;
esac
say done
pack_out

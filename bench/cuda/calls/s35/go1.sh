#!/bin/bash
# Session 35, call 1: (a) AttnRing.* (the first GPU run of 9f6ea25's review mends); (b) AttnBench.Mma, also with
# DS_ATTN_MMA_CARVEOUT=1; (c) ncu of the mma attention walking and with an item per warp (+ their combines):
# occupancy, shared-memory configuration, DRAM throughput, stalls, source counters -- what bounds it;
# (d) lockstep 64 x 512 tg64 --kv-f16 with the breakdown; (e) issue 5's batch-1 tg128 (9B, 0.8B).
# Run as: cd devf16 && OUT=$OUT LIM=330 timeout 340 bash go1.sh
set -u
LIM=${LIM:-330}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 12
M08=$W/m08.gguf
( [ -e "$M08" ] || "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 ) &
timeout 60 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*' > "$OUT/tm.log" 2>&1
say "AttnRing.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tm.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -16 | tee -a "$OUT/steps.log"
export DS_ATTN_BENCH=1
timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench.log" 2>&1
say "AttnBench.Mma rc=$?"; grep -E "^\[walk34\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
DS_ATTN_MMA_CARVEOUT=1 timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench_carve.log" 2>&1
say "AttnBench.Mma carveout rc=$?"; grep -E "^\[walk34\]" "$OUT/bench_carve.log" | head -4 | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for skip in 0 2; do  # launches: mma (walk), combine, mma (item per warp), combine
  [ $(el) -lt $((LIM - 150)) ] || break
  timeout 60 "$NCU" --clock-control none -k "regex:attn_mma|attn_combine" --launch-skip $skip --launch-count $((2 - skip / 2)) \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SourceCounters \
    "$TM" --gtest_filter='AttnBench.MmaProfile' > "$OUT/ncu_$skip.txt" 2>&1
  say "ncu launch $skip rc=$?"
  grep -E "attn_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Dynamic Shared|Grid Size|Waves Per SM|Warp Cycles Per Issued|Issued Warp|Stall|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|Shared Memory Configuration|Driver Shared" "$OUT/ncu_$skip.txt" | tr -s ' ' | head -70 | tee -a "$OUT/steps.log"
  grep -iE "^ *(WRN|OPT|INF)" -A2 "$OUT/ncu_$skip.txt" | tr -s ' ' | cut -c1-400 | head -30 >> "$OUT/steps.log"
done
unset DS_ATTN_BENCH
wait9b $((LIM - 110))
say synth
[ $(el) -lt $((LIM - 60)) ] && { timeout 40 env DS_KV_F16=1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --select 0 --batch 64 \
  --prompt 512 --ctx 1024 --breakdown --top 16 --json "$OUT/cb_bd.jsonl" > "$OUT/bd64.log" 2>&1; say "lockstep+breakdown 64 kv-f16 rc=$?"
  grep -E "^decode" "$OUT/bd64.log" | tail -2 | tee -a "$OUT/steps.log"
  grep -iE "attention|output\[|step|gdn|q4_k|ffn" "$OUT/bd64.log" | head -20 | tee -a "$OUT/steps.log"; }
wait
tg() { timeout 30 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
[ $(el) -lt $((LIM - 35)) ] && tg "$M9"
[ $(el) -lt $((LIM - 35)) ] && tg "$M08"
say done
pack_out

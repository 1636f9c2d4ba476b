#!/bin/bash
# Session 34, call 2: why the mma attention runs at ~1.8-2.7 TB/s (call 1: the walk changed nothing).
# (a) AttnBench.Mma (us per launch: walk vs one item per warp, split_range's chunks vs >= 64-row tiles, B 64 / 1),
#     also with DS_ATTN_MMA_CARVEOUT=1; (b) ncu (SpeedOfLight, Occupancy, LaunchStats, WarpStateStats,
#     MemoryWorkloadAnalysis, SourceCounters) of the mma kernel walking and with an item per warp (AttnBench.MmaProfile).
# Run as: cd devf16 && OUT=$OUT LIM=200 timeout 210 bash go2.sh
set -u
LIM=${LIM:-200}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
timeout 60 "$TM" --gtest_brief=1 --gtest_filter='AttnRing.*' > "$OUT/tm.log" 2>&1  # 9f6ea25's mends on a GPU
say "AttnRing.* rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/tm.log" | tr '\n' ' ')"
export DS_ATTN_BENCH=1
timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench.log" 2>&1
say "AttnBench.Mma rc=$?"; grep -E "^\[walk34\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for skip in 0 2; do  # launches: mma (walk), combine, mma (item per warp), combine
  [ $(el) -lt $((LIM - 45)) ] || break
  timeout 60 "$NCU" --clock-control none -k "regex:attn_mma|attn_combine" --launch-skip $skip --launch-count $((2 - skip / 2)) \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SourceCounters \
    "$TM" --gtest_filter='AttnBench.MmaProfile' > "$OUT/ncu_$skip.txt" 2>&1
  say "ncu launch $skip rc=$?"
  grep -E "attn_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Dynamic Shared|Grid Size|Waves Per SM|Warp Cycles Per Issued|Issued Warp|Stall|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|Shared Memory Configuration|Driver Shared" "$OUT/ncu_$skip.txt" | tr -s ' ' | head -70 | tee -a "$OUT/steps.log"
  grep -iE "^ *(WRN|OPT|INF)" -A2 "$OUT/ncu_$skip.txt" | tr -s ' ' | cut -c1-400 | head -30 >> "$OUT/steps.log"
done
DS_ATTN_MMA_CARVEOUT=1 timeout 30 "$TM" --gtest_filter='AttnBench.Mma' > "$OUT/bench_carve.log" 2>&1
say "AttnBench.Mma carveout rc=$?"; grep -E "^\[walk34\]" "$OUT/bench_carve.log" | head -4 | tee -a "$OUT/steps.log"
say done
pack_out

#!/bin/bash
# Session 37, call 7 (any card; b0889f8's kernels): (a) ncu of attn_mma_pair_kernel at B 64 x 528 (AttnBench.MmaProfile:
# one launch + its combine): what bounds the two-warp kernel now (occupancy, issue, stalls, DRAM); (b) the batch-1 cost
# of DS_ATTN_MMA_ROWS=128 (the 64 x 512+ step's -0.5% in call 2): tg128 9B --kv-f16 rows 0 / 128, three interleaved
# rounds.
# Run as: cd devf16 && OUT=$OUT LIM=300 timeout 310 bash go7.sh
set -u
LIM=${LIM:-300}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 12
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
DS_ATTN_BENCH=1 timeout 90 "$NCU" --clock-control none -k "regex:attn_mma|attn_combine" --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats \
  "$TM" --gtest_filter='AttnBench.MmaProfile' > "$OUT/ncu.txt" 2>&1
say "ncu rc=$?"
grep -E "attn_|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Dynamic Shared|Grid Size|Waves Per SM|Warp Cycles Per Issued|Issue Slots Busy|Issued Warp|No Eligible|Eligible Warps|Active Warps Per|Stall|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|Executed Instructions " "$OUT/ncu.txt" | tr -s ' ' | head -80 | tee -a "$OUT/steps.log"
grep -iE "^ *(WRN|OPT)" -A2 "$OUT/ncu.txt" | tr -s ' ' | cut -c1-300 | head -24 >> "$OUT/steps.log"
wait9b $((LIM - 60))
say synth
tg() { timeout 30 env $1 "$X" bench -m "$M9" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 9B $1 rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
for r in 1 2 3; do
  for v in "DS_KV_F16=1" "DS_KV_F16=1 DS_ATTN_MMA_ROWS=128"; do [ $(el) -lt $((LIM - 25)) ] && tg "$v"; done
done
say done
pack_out

#!/bin/bash
# attn18 device call 1 (step 1: does the KV cache's 4 KB stride cost bandwidth?). Run from the ignored
# devwork-attn18/ in /work/main (b.tar.xz: test_cuda_model + its libraries) as OUT=$OUT bash devwork-attn18/go.sh:
#   A. AttnRing.* (incl. HeadMajorSameBits: every loader memcmp-equal with the caches as [kv head][position][dim]);
#   B. AttnBench.Layout (DS_ATTN_BENCH=1): the real kernels (pf2 / ring 4 + combine) in both layouts, the copy-only
#      ring in both layouts (16 / 4 / 1 splits, ring 4 / 8), one contiguous stream of the same bytes;
#   C. ncu of the ring 4 kernel + combine in both layouts (AttnBench.LayoutProfile).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64"
TM=$B/test_cuda_model
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
timeout 60 "$TM" --gtest_filter='AttnRing.*' > "$OUT/attnring.log" 2>&1 < /dev/null; say "AttnRing rc=$?"
grep -E "tests? ran|PASSED|FAILED|Failure|Expected|Which is|memcmp|\[attn18\].*9B|level 1" "$OUT/attnring.log" | cut -c1-200 | head -60 | tee -a "$OUT/steps.log"
env DS_ATTN_BENCH=1 timeout 70 "$TM" --gtest_filter='AttnBench.Layout' > "$OUT/layout.log" 2>&1 < /dev/null; say "Layout rc=$?"
grep -E "^\[attn18\]|FAILED|Failure" "$OUT/layout.log" | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(el) -lt 85 ]; then
  env DS_ATTN_BENCH=1 timeout 40 "$NCU" --clock-control none -k 'regex:attn_(ring_kernel|combine)' -c 4 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum \
    "$TM" --gtest_filter='AttnBench.LayoutProfile' > "$OUT/ncu.txt" 2>&1 < /dev/null; say "ncu rc=$?"
  grep -E "attn_|Duration|DRAM Throughput|dram__|sm__cycles_active|lts__t_sector_hit|inst_executed|Achieved Occupancy|Block Limit|Registers Per|Memory Throughput|L2 Hit" "$OUT/ncu.txt" | cut -c1-150 | head -80 | tee -a "$OUT/steps.log"
else say "skip ncu"; fi
say done

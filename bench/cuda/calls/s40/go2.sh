#!/bin/bash
# Session 40, call 2 (the warm H100 of call 1, main's build): why the hi-only head (ring_kernel<3, false, 4>, 500 us at
# B = 64, DRAM 56%, L2 60% in call 1) is slow: ncu sections SpeedOfLight, ComputeWorkloadAnalysis, SchedulerStats,
# WarpStateStats, MemoryWorkloadAnalysis of the certified head and of the exact head (kForm 3, DS_HEAD_CERTIFY=0).
# Run as: cd devf16 && OUT=$OUT LIM=150 timeout 160 bash go2.sh
set -u
LIM=${LIM:-150}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
wait9b 60
for c in 1 0; do
  f=$([ $c = 1 ] && echo 4 || echo 3)
  DS_KV_F16=1 DS_HEAD_CERTIFY=$c timeout 60 ncu --kernel-name-base demangled -k "regex:ring_kernel<.int.3, .bool.0, .int.$f>" \
    --launch-count 4 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
    "$X" cuda-bench -m "$M9" --tg 2 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu_form$f.txt" 2>&1
  say "form $f rc=$?"
  grep -E "ring_kernel|Duration|Throughput|Issue|Eligible|Active Warps|No Eligible|Stall|Pipe|Executed Ipc|Warp Cycles|Registers|Achieved|L1/TEX Hit|L2 Hit|Bank" "$OUT/ncu_form$f.txt" | head -30 | tee -a "$OUT/steps.log"
done
say done

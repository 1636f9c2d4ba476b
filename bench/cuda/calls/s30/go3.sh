#!/bin/bash
# (Ran on main aa0640f, where DS_GDN_TMA_OUT=3 was kOcc 2 and DS_MVB_BLK_WG=4 existed; both removed since.)
# Session 30, call 3 (short: the device time left after refused starts; no model synth): (a) GdnStep / GdnConvStep
# tests with the 2-CTA form (force 3) among the kernels, GdnBench.Time (f32 / f16, 2-CTA form as "tma-out-2cta"),
# ncu of the f16 forms 2 / 3; (b) the Q4_K block kernel with 4 warpgroups: the batched tests with DS_MVB_BLK_WG=4
# (block configs, normalised input), CudaMatvecBatched.BlockWgBench (9B shapes, B = 64, by shape vs 4).
# Run as: cd devf16 && OUT=$OUT timeout 200 bash go3.sh
set -u
cd "$(dirname "$0")"
D=$PWD
tar xJf b.tar.xz
B=$D/gpu-bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64"
TM=$B/test_cuda_model
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
timeout 60 "$TM" --gtest_filter='GdnStep.*:GdnConvStep.*' > "$OUT/tg.log" 2>&1
say "gdn tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|tests from' "$OUT/tg.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/tg.log" | head -20 | tee -a "$OUT/steps.log"
DS_MVB_BENCH=1 timeout 60 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.BlockWgBench' > "$OUT/wb.log" 2>&1
say "wg4 bench rc=$?"; grep -E '^\[wg4\]' "$OUT/wb.log" | tee -a "$OUT/steps.log"
DS_GDN_BENCH=1 timeout 40 "$TM" --gtest_filter='GdnBench.Time' > "$OUT/gb.log" 2>&1
say "gdn bench rc=$?"; grep -E 'tma-out' "$OUT/gb.log" | grep -E 'B (16|32|64)' | tee -a "$OUT/steps.log"
DS_MVB_BLK_WG=4 DS_TEST_MVB_WG=13 timeout 100 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.*:CudaMatvecBatchedIn.*' > "$OUT/t4.log" 2>&1
say "wg4 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t4.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/t4.log" | head -30 | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for K in 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLi1EE' 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLi2EE'; do
  [ $(el) -lt 150 ] || break
  DS_GDN_BENCH=1 timeout 30 "$NCU" --kernel-name-base mangled -k "regex:$K" --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy "$TM" --gtest_filter='GdnBench.Profile' > "$OUT/ncu_$K.log" 2>&1
  say "ncu $K rc=$?"; grep -E 'Duration|DRAM Throughput|Warp Cycles Per Issued|Achieved Active Warps|Registers Per' "$OUT/ncu_$K.log" | tee -a "$OUT/steps.log"
done
say done
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete)

#!/bin/bash
# (NEVER RAN: the device refused its starts; go3.sh measured the same forms op by op. Both forms were removed since.)
# Session 30, call 2: gdn_tma_out_kernel with two CTAs per SM (kOcc 2, DS_GDN_TMA_OUT=3 / force 3: f16 states at
# d_k 128, every state at d_k 64; the same bits): GdnStep / GdnConvStep tests (every kernel bit-equal, the 2-CTA form
# included), GdnBench.Time, ncu of the f16 forms 2 / 3 (one launch each), the 9B step at 64 x 512+ with f16 states +
# K / V, forms 2 / 3 interleaved, with the breakdown; served at 64 clients (--prefill-budget 4096) with f16 + form 3,
# then at 1 / 8 / 32 / 64 with f16 + form 3 and the default budget if time is left. Also the Q4_K block kernel with 4
# warpgroups (DS_MVB_BLK_WG=4: kN64 + kFast + kLean, 256-row tiles): the batched tests with it (the block configs, the
# normalised-input ones), the 9B step at 64 x 512+ default vs 4 interleaved, with the breakdown.
# Run as: cd devf16 && OUT=$OUT timeout 560 bash go2.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 150 "$TM" --gtest_filter='GdnStep.*:GdnConvStep.*:GdnLazy.*' > "$OUT/tg.log" 2>&1
say "gdn tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|tests from' "$OUT/tg.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/tg.log" | head -30 | tee -a "$OUT/steps.log"
DS_MVB_BLK_WG=4 DS_TEST_MVB_WG=13 timeout 200 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.*:CudaMatvecBatchedIn.*' > "$OUT/t4.log" 2>&1
say "wg4 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t4.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/t4.log" | head -30 | tee -a "$OUT/steps.log"
DS_GDN_BENCH=1 timeout 120 "$TM" --gtest_filter='GdnBench.Time' > "$OUT/gb.log" 2>&1
say "gdn bench rc=$?"
grep -E 'B 64|B 16' "$OUT/gb.log" | grep -E 'tma-out' | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for K in 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLi1EE' 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLi2EE'; do
  DS_GDN_BENCH=1 timeout 60 "$NCU" --kernel-name-base mangled -k "regex:$K" --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section SchedulerStats --section LaunchStats "$TM" --gtest_filter='GdnBench.Profile' > "$OUT/ncu_$K.log" 2>&1
  say "ncu $K rc=$?"; grep -E 'Duration|DRAM Throughput|Eligible Warps|Warp Cycles Per Issued|Achieved Active Warps|Registers Per' "$OUT/ncu_$K.log" | tee -a "$OUT/steps.log"
done
wait9b 300
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 60 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} > "$OUT/cb1.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-80)"; cat "$OUT/cb1.log" >> "$OUT/cb.log"; }
for r in 1 2; do cb 64 512 "$F16 DS_GDN_TMA_OUT=2"; cb 64 512 "$F16 DS_GDN_TMA_OUT=3"; done
cb 64 512 "$F16 DS_GDN_TMA_OUT=3" --breakdown
sed -n "/^per-kernel/,/^total/p" "$OUT/cb1.log" | tee -a "$OUT/steps.log"
for r in 1 2; do cb 64 512 DS_DEFAULT=1; cb 64 512 DS_MVB_BLK_WG=4; done
cb 64 512 DS_MVB_BLK_WG=4 --breakdown
sed -n "/^per-kernel/,/^total/p;/^slowest/,/^\$/p" "$OUT/cb1.log" | head -40 | tee -a "$OUT/steps.log"
# the faster setting of a pair, from the step lines above: best "A" "B" -> A or B
best() { python3 - "$OUT/steps.log" "$1" "$2" <<'PY'
import re, sys
t = {sys.argv[2]: [], sys.argv[3]: []}
for l in open(sys.argv[1]):
    m = re.match(r"\[\d+s\] batch 64 x 512 (.*?) : rc=0 .*?\(([\d.]+) ms per step", l)
    if m and m.group(1).strip() in t: t[m.group(1).strip()].append(float(m.group(2)))
a, b = (sum(v) / len(v) if v else 1e9 for v in t.values())
print(sys.argv[2] if a <= b else sys.argv[3])
PY
}
G=$(best "$F16 DS_GDN_TMA_OUT=2" "$F16 DS_GDN_TMA_OUT=3"); W=$(best DS_DEFAULT=1 DS_MVB_BLK_WG=4)
say "faster: $G / $W"
[ "$W" = DS_MVB_BLK_WG=4 ] && G="$G $W"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 110 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 80 --label "session30 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb "$G" 64 "--prefill-budget 4096"
sb "$W" 64 "--prefill-budget 4096"
[ $(el) -lt 280 ] && sb "$G" 1,8,32,64 ""
serve_summary
say done
pack_out

#!/bin/bash
# (Ran on main 18146ae, where DS_GDN_TMA_OUT=3 was kDirect; removed since, see bench/cuda/NOTES.md s30.)
# Session 30, call 1: (a) gdn_tma_out_kernel's kDirect form (DS_GDN_TMA_OUT=3: no out slot, the state stored from
# registers, one more load slot; the same bits): GdnStep / GdnConvStep tests (every kernel bit-equal, now with the
# direct form), GdnBench.Time (f32 and f16 states, 9B / 27B shapes), the 9B step at 64 x 512+ with 2 / 3, fp32 and
# f16 states + K / V, interleaved; (b) session 29's H200 numbers: the stream / multi / fold tests after the
# NormProduct refactor, the 9B step at B = 1 / 2 / 4 fold vs DS_MVB_MULTI_NORM=0; (c) served at 64 clients,
# --prefill-budget 4096, default and f16 (with DS_GDN_TMA_OUT=3 when it won the step).
# Run as: cd devf16 && OUT=$OUT timeout 560 bash go1.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
F='CudaMatvec.Stream*:CudaMatvecBatchedIn.*:CudaMatvecBatched.MultiMatchesFloat64:CudaMatvecBatched.ColumnIndependentOfBatch'
timeout 200 "$B/test_cuda" --gtest_filter="$F" > "$OUT/t.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)|folded cases' "$OUT/t.log" | tr '\n' ' ' | cut -c1-400)"
grep -E "Failure" -A4 "$OUT/t.log" | head -30 | tee -a "$OUT/steps.log"
timeout 150 "$TM" --gtest_filter='GdnStep.*:GdnConvStep.*:GdnLazy.*' > "$OUT/tg.log" 2>&1
say "gdn tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)|tests from' "$OUT/tg.log" | tr '\n' ' ' | cut -c1-300)"
grep -E "Failure" -A4 "$OUT/tg.log" | head -30 | tee -a "$OUT/steps.log"
DS_GDN_BENCH=1 timeout 120 "$TM" --gtest_filter='GdnBench.Time' > "$OUT/gb.log" 2>&1
say "gdn bench rc=$?"
grep -E 'tma-out|gdn_kernel|copy tma|dense in' "$OUT/gb.log" | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for K in 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLb0E' 'gdn_tma_out_kernelILi128ELb0ELb1E6__halfLb1E'; do
  DS_GDN_BENCH=1 timeout 60 "$NCU" --kernel-name-base mangled -k "regex:$K" --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section SchedulerStats "$TM" --gtest_filter='GdnBench.Profile' > "$OUT/ncu_$K.log" 2>&1
  say "ncu $K rc=$?"; grep -E 'Duration|Memory Throughput|DRAM Throughput|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|No Eligible' "$OUT/ncu_$K.log" | tee -a "$OUT/steps.log"
done
wait9b 300
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 60 env ${3:-DS_DEFAULT=1} "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch $1 --prompt $2 --ctx 1024 ${4:-} > "$OUT/cb1.log" 2>&1
  say "batch $1 x $2 ${3:-} ${4:-}: rc=$? $(grep -E '^decode' "$OUT/cb1.log" | tail -1 | cut -c1-80)"; cat "$OUT/cb1.log" >> "$OUT/cb.log"; }
for r in 1 2; do
  cb 64 512 DS_GDN_TMA_OUT=2; cb 64 512 DS_GDN_TMA_OUT=3
  cb 64 512 "$F16 DS_GDN_TMA_OUT=2"; cb 64 512 "$F16 DS_GDN_TMA_OUT=3"
done
cb 64 512 "$F16 DS_GDN_TMA_OUT=3" --breakdown
sed -n "/^per-kernel/,/^total/p" "$OUT/cb1.log" | tee -a "$OUT/steps.log"
for b in 2 4; do cb $b 4; cb $b 4 DS_MVB_MULTI_NORM=0; done
cb 1 4
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 110 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 80 --label "session30 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
[ $(el) -lt 400 ] && sb "$F16 DS_GDN_TMA_OUT=3" 64 "--prefill-budget 4096"
[ $(el) -lt 440 ] && sb "DS_GDN_TMA_OUT=3" 64 "--prefill-budget 4096"
serve_summary
say done
pack_out

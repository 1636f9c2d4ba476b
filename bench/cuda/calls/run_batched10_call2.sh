#!/bin/bash
# batched10 device call 2: DS_MVB_RED 1 vs 2 (one fence) vs 0, defaults re-checked with the cheap reduction
# (Q4_K n64 9, cluster 10, Q6_K block form 8, Q6_K from B 25), tests, memcheck, warm-cache ncu of two block kernels
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsb10; rm -rf "$W"/*.log; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-85}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
[ -e "$W/m9B.ok" ] || ( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
timeout 60 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.SplitReduceSameBits' > "$W/t_red.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_red.log"
say "split test: $(grep -E 'PASSED|FAILED|^rc' $W/t_red.log | tr '\n' ' ')"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 60 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-80)"; }
cb "64 red1" "DS_MVB_RED=1" --batch 64 --breakdown --top 2
cb "64 red2" "DS_MVB_RED=2" --batch 64 --breakdown --top 2
cb "64 red0" "DS_MVB_RED=0" --batch 64
cb "64 wg10 (n128 cl2)" "DS_MVB_WG=10" --batch 64 --breakdown --top 2
cb "64 q6k 8 (block)" "DS_MVB_WG_Q6K=8" --batch 64 --breakdown --top 2
cb "64 blk_wg 2 (all shapes)" "DS_MVB_BLK_WG=2" --batch 64 --breakdown --top 2
cb "64 blk_wg 3 (all shapes)" "DS_MVB_BLK_WG=3" --batch 64 --breakdown --top 2
cb "32 red1" "DS_MVB_RED=1" --batch 32
cb "32 red2" "DS_MVB_RED=2" --batch 32
cb "32 q6 min 25" "DS_MVB_WG_Q6K_MIN=25" --batch 32
cb "25 red1" "DS_MVB_RED=1" --batch 25
cb "25 q6 min 25" "DS_MVB_WG_Q6K_MIN=25" --batch 25
cb "64 red1 again" "DS_MVB_RED=1" --batch 64
cb "64 red2 again" "DS_MVB_RED=2" --batch 64
grep -E "^(====|decode|matvec|gdn|total|rms|swiglu|conv)" $W/cb.log > $OUT/cb_summary.txt
( DS_TEST_MVB_WG=-1 timeout 50 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*-*SplitReduce*' > "$W/t_def.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_def.log" ) &
( timeout 60 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( DS_TEST_MVB_WG=12,q6 timeout 60 "$CS" --tool memcheck "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck.log" ) &
wait
say "tests: $(grep -hE 'PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_def.log $W/t_model.log $W/t_memcheck.log | tr '\n' ' ')"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(el) -lt 110 ]; then
  timeout 30 "$NCU" --clock-control none --cache-control none --kernel-name-base demangled -k "regex:wgb::block_kernel" --launch-skip 20 --launch-count 5 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --metrics sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,smsp__pcsamp_warps_issue_stalled_long_scoreboard,lts__t_sectors_srcunit_tex.sum \
    --graph-profiling node "$X" cuda-bench -m "$W/m9B.gguf" --tg 2 --reps 1 --batch 64 --select 0 > "$OUT/ncu_warm.txt" 2>&1
  say "ncu rc=$?"
fi
cd $W && tar czf "$OUT/all.tgz" *.log 2>/dev/null
say done

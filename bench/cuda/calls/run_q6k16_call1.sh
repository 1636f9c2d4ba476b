#!/bin/bash
# q6k16 device call 1: the Q6_K scaled-A form (DS_MVB_WG_Q6K=11; 12 = the same with 3 A sets in flight) vs the
# sub-block form 9 (main's default). Tests with DS_MVB_WG_Q6K=11 in the environment (CudaMatvecBatched.* in 7 processes:
# MatchesFloat64PerBatchRow split by DS_TEST_MVB_WG config sets, the rest in 5 GTEST shards; test_cuda_model with 11 and
# 12; memcheck of config q11), mvb_bench checkdef6 / timedef q6_k 9 / 11 / 12 interleaved, ncu of ring_kernel<3,false,3>
# and <3,false,4> on the output head (B = 64), the 9B step at B = 64 short / long and B = 32, 9 / 11 / 12 interleaved.
# Run from the ignored devwork-q6k16/ in /work/main as OUT=$OUT bash devwork-q6k16/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsq6k16; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 25 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "wg6r11ring_kernel" | grep -oE "(ring_kernelI[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
  timeout 25 "$CO" -sass -fun '_ZN2ds4cuda4wg6r11ring_kernelILi3ELb0ELi3EEEvNS0_3wg64ArgsE14CUtensorMap_st' "$T" > "$W/sass11.txt" 2>&1
  timeout 25 "$CO" -sass -fun '_ZN2ds4cuda4wg6r11ring_kernelILi3ELb0ELi2EEEvNS0_3wg64ArgsE14CUtensorMap_st' "$T" > "$W/sass9.txt" 2>&1 ) &
export DS_MVB_WG_Q6K=11
REST='CudaMatvecBatched.*-CudaMatvecBatched.MatchesFloat64PerBatchRow'
tp() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 120 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
tp m1 "-1" 'CudaMatvecBatched.MatchesFloat64PerBatchRow'
tp m2 "0,2,3,4,9,12,13,q0,q1,q2,q3,q4,q6,q8,q9,q11" 'CudaMatvecBatched.MatchesFloat64PerBatchRow'
for i in 0 1 2 3 4; do tp s$i "" "$REST" GTEST_TOTAL_SHARDS=5 GTEST_SHARD_INDEX=$i; done
( timeout 120 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model11.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model11.log" ) &
( DS_MVB_WG_Q6K=12 timeout 120 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model12.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model12.log" ) &
( timeout 60 "$M" checkdef6 > "$W/check11.log" 2>&1; echo "rc $?" >> "$W/check11.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( DS_TEST_MVB_WG=q11 timeout 90 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck11.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck11.log" ) &
wait
for f in m1 m2 s0 s1 s2 s3 s4; do say "test_cuda $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for f in model11 model12; do say "test_cuda_$f: $(grep -E 'PASSED|FAILED|^rc' $W/t_$f.log | tr '\n' ' ')"; done
say "memcheck q11: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck11.log | tr '\n' ' ')"
say "checkdef6 11: $(grep -E 'check|BAD|worst|^rc' $W/check11.log | tail -4 | tr '\n' ' ')"
grep -hE "FAILED|Failure|worst|odd large" $W/t_*.log | sort | uniq -c | head -120 > "$OUT/test_summary.txt"
td() { local tag=$1 e=$2; [ $(el) -lt 110 ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 20 "$M" timedef q6_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td q9 "DS_MVB_WG_Q6K=9"
td q11 "DS_MVB_WG_Q6K=11"
td q12 "DS_MVB_WG_Q6K=12"
td q9b "DS_MVB_WG_Q6K=9"
td q11b "DS_MVB_WG_Q6K=11"
td q12b "DS_MVB_WG_Q6K=12"
cp "$W/td.log" "$OUT/" 2>/dev/null
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 q9" "DS_MVB_WG_Q6K=9" --batch 64 --breakdown
cb "64 q11" "DS_MVB_WG_Q6K=11" --batch 64 --breakdown
cb "64 q12" "DS_MVB_WG_Q6K=12" --batch 64
cb "64L q9" "DS_MVB_WG_Q6K=9" --batch 64 --prompt 512 --ctx 1024
cb "64L q11" "DS_MVB_WG_Q6K=11" --batch 64 --prompt 512 --ctx 1024
cb "32 q9" "DS_MVB_WG_Q6K=9" --batch 32
cb "32 q11" "DS_MVB_WG_Q6K=11" --batch 32
cb "32 q12" "DS_MVB_WG_Q6K=12" --batch 32
cb "64 q9b" "DS_MVB_WG_Q6K=9" --batch 64
cb "64 q11b" "DS_MVB_WG_Q6K=11" --batch 64
cb "64 q12b" "DS_MVB_WG_Q6K=12" --batch 64
cb "64L q12" "DS_MVB_WG_Q6K=12" --batch 64 --prompt 512 --ctx 1024
cp "$W/cb.log" "$OUT/" 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 e=$2 k=$3 skip=$4 ty=$5; [ $(el) -lt 165 ] || { say "skip ncu $tag"; return; }
  env $e timeout 14 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    -o "$W/ncu_$tag" -f "$M" timedef $ty > "$W/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$?"
  timeout 8 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page details --print-details all > "$W/ncu_details_$tag.txt" 2>&1
  say "ncu $tag: $(grep -E 'Duration|Pipe Tensor Cycles Active|Issue Slots Busy|Eligible Warps Per|Executed Instructions  ' $W/ncu_details_$tag.txt | head -5 | tr -s ' ' | tr '\n' ';')"; }
nc out11 "DS_MVB_WG_Q6K=11" 'ring_kernelILi3ELb0ELi3E' 69 q6_k
nc out12 "DS_MVB_WG_Q6K=12" 'ring_kernelILi3ELb0ELi4E' 69 q6_k
cp "$W/cb.log" "$W/td.log" "$OUT/" 2>/dev/null
cd "$W" && tar czf "$OUT/logs.tgz" t_*.log check*.log ncu_details_*.txt ncu_run_*.txt cb.jsonl sass*.txt 2>/dev/null
say done

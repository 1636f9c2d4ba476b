#!/bin/bash
# mvb15 device call 2: DS_MVB_WG=13 (Q4_K block kernel, mins as one mma.sync per n-tile on sub-block sums) vs 12.
# Tests (CudaMatvecBatched shards incl. config 13 and SplitReduceSameBits with 13, test_cuda_model with 12 and 13,
# memcheck of config 13), mvb_bench checkdef / timedef q4_k 12 / 13 twice, ncu of block_kernel<3,false,true> on
# ffn_gate_up B = 64, the 9B step at B = 64 short / long and B = 32, 12 vs 13 interleaved.
# Run from the ignored devwork-mvb15/ in /work/main as OUT=$OUT bash devwork-mvb15/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsmvb15; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-86}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "wgb12block_kernel" | grep -oE "(block_kernelI[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$W/res.txt" 2>&1
NC='CudaMatvecBatched.*-*SplitReduce*:*WgmmaRing*:*BatchOne*:*RejectsBad*'
sh() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 55 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "13" 'CudaMatvecBatched.*-*WgmmaRing*'
sh b1 "-1" 'CudaMatvecBatched.MatchesFloat64PerBatchRow'
sh b2 "-1" "$NC:-*MatchesFloat64*"
sh c "12,9,4" "$NC"
sh e "x" 'CudaMatvecBatched.WgmmaRing*:CudaMatvecBatched.BatchOne*:CudaMatvecBatched.RejectsBad*'
( timeout 55 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model12.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model12.log" ) &
( DS_MVB_WG=13 timeout 55 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model13.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model13.log" ) &
( DS_MVB_WG=13 timeout 50 "$M" checkdef > "$W/check13.log" 2>&1; echo "rc $?" >> "$W/check13.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( DS_TEST_MVB_WG=13 timeout 55 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck13.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck13.log" ) &
wait
for f in a b1 b2 c e; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for f in model12 model13; do say "test_cuda_$f: $(grep -E 'PASSED|FAILED|^rc' $W/t_$f.log | tr '\n' ' ')"; done
say "memcheck 13: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck13.log | tr '\n' ' ')"
say "checkdef 13: $(grep -E 'check|BAD|worst|^rc' $W/check13.log | tail -4 | tr '\n' ' ')"
grep -hE "FAILED|Failure|worst" $W/t_*.log | sort | uniq -c | head -80 > "$W/test_summary.txt"
td() { local tag=$1 e=$2; [ $(el) -lt 62 ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 20 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
cp "$W/test_summary.txt" "$W/res.txt" "$OUT/" 2>/dev/null
td w12 "DS_MVB_WG=12"
td w13 "DS_MVB_WG=13"
td w12b "DS_MVB_WG=12"
td w13b "DS_MVB_WG=13"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 80 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 20 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 w12" "DS_MVB_WG=12" --batch 64 --breakdown
cb "64 w13" "DS_MVB_WG=13" --batch 64 --breakdown
cb "64L w12" "DS_MVB_WG=12" --batch 64 --prompt 512 --ctx 1024
cb "64L w13" "DS_MVB_WG=13" --batch 64 --prompt 512 --ctx 1024
cb "32 w12" "DS_MVB_WG=12" --batch 32
cb "32 w13" "DS_MVB_WG=13" --batch 32
cb "64 w12b" "DS_MVB_WG=12" --batch 64
cb "64 w13b" "DS_MVB_WG=13" --batch 64
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 e=$2 k=$3 skip=$4 ty=$5; [ $(el) -lt 84 ] || { say "skip ncu $tag"; return; }
  env $e timeout 14 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    -o "$W/ncu_$tag" -f "$M" timedef $ty > "$W/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$?"
  timeout 8 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page details --print-details all > "$W/ncu_details_$tag.txt" 2>&1
  say "ncu $tag: $(grep -E 'Duration|Pipe Tensor Cycles Active|Issue Slots Busy|Eligible Warps Per' $W/ncu_details_$tag.txt | head -4 | tr -s ' ' | tr '\n' ';')"; }
nc gate_up13 "DS_MVB_WG=13" 'block_kernelILi3ELb0ELb1E' 36 q4_k
cp "$W/cb.log" "$W/td.log" "$W/res.txt" "$W/test_summary.txt" "$OUT/" 2>/dev/null
cd "$W" && tar czf "$OUT/logs.tgz" t_*.log check*.log ncu_details_*.txt ncu_run_*.txt cb.jsonl 2>/dev/null
say done

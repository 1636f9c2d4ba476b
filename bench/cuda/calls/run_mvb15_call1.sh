#!/bin/bash
# mvb15 device call 1: Q4_K block kernel with two row tiles per CTA (DS_MVB_WG=13; 14 = only where <= 4 splits) vs 12.
# Tests (4 shard processes + test_cuda_model with 12 and 13), mvb_bench timedef q4_k 12 / 13 / 14 / 13 with 2 warpgroups
# everywhere, ncu of block_kernel<2,false,1> (12) and <2,false,2> (13) on ffn_down B = 64 and of the Q6_K output head
# ring_kernel<3,false,2>, then the 9B step at B = 64 short / long and B = 32, 12 vs 13 (vs 14) interleaved.
# Run from the ignored devwork-mvb15/ in /work/main as OUT=$OUT bash devwork-mvb15/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsmvb15; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-118}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "block_kernel|ring_kernelILi3ELb0ELi2E" | grep -oE "(_Z[^ ]*(block|ring)_kernel[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
NC='CudaMatvecBatched.*-*SplitReduce*:*WgmmaRing*:*BatchOne*:*RejectsBad*:*PairTiles*'
sh() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 62 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "13" 'CudaMatvecBatched.*-*WgmmaRing*'
sh b1 "-1" 'CudaMatvecBatched.MatchesFloat64PerBatchRow'
sh b2 "-1" "$NC:-*MatchesFloat64*"
sh c "12,9,4" "$NC"
sh d "q9" "$NC"
( timeout 62 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model12.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model12.log" ) &
( DS_MVB_WG=13 timeout 62 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model13.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model13.log" ) &
( DS_MVB_WG=13 timeout 55 "$M" checkdef > "$W/check13.log" 2>&1; echo "rc $?" >> "$W/check13.log" ) &
wait
for f in a b1 b2 c d; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for f in model12 model13; do say "test_cuda_$f: $(grep -E 'PASSED|FAILED|^rc' $W/t_$f.log | tr '\n' ' ')"; done
say "checkdef 13: $(grep -E 'check|BAD|worst|^rc' $W/check13.log | tail -4 | tr '\n' ' ')"
grep -hE "FAILED|Failure|worst|pair vs" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
cp $W/t_*.log $W/check*.log "$OUT/" 2>/dev/null
td() { local tag=$1 e=$2; [ $(el) -lt 85 ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 20 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td w12 "DS_MVB_WG=12"
td w13 "DS_MVB_WG=13"
td w14 "DS_MVB_WG=14"
td w13bw2 "DS_MVB_WG=13 DS_MVB_BLK_WG=2"
cp "$W/td.log" "$OUT/" 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 e=$2 k=$3 skip=$4 ty=$5; [ $(el) -lt 98 ] || { say "skip ncu $tag"; return; }
  env $e timeout 25 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats \
    --section SourceCounters --import-source no -o "$OUT/ncu_$tag" -f "$M" timedef $ty > "$OUT/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$?"
  timeout 10 "$NCU" -i "$OUT/ncu_$tag.ncu-rep" --page details --print-details all > "$OUT/ncu_details_$tag.txt" 2>&1
  timeout 10 "$NCU" -i "$OUT/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_source_$tag.csv" 2>&1
  say "ncu $tag pages rc=$? $(grep -E 'Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Issue Slots Busy' $OUT/ncu_details_$tag.txt | head -5 | tr -s ' ' | tr '\n' ';')"; }
# timedef q4_k: ffn_gate_up (3 WG), then ffn_down: 31 launches at B = 32, 31 at B = 64 -> skip 36 = a warm B = 64 one
nc ffn_down12 "DS_MVB_WG=12" 'block_kernelILi2ELb0ELi1E' 36 q4_k
nc ffn_down13 "DS_MVB_WG=13" 'block_kernelILi2ELb0ELi2E' 36 q4_k
# timedef q6_k: 62 launches of the 24576-row shape, 6 of the output at B = 32, then B = 64
nc out_q6k "DS_MVB_WG_Q6K=9" 'ring_kernelILi3ELb0ELi2E' 69 q6_k
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 110 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 20 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 w12" "DS_MVB_WG=12" --batch 64 --breakdown
cb "64 w13" "DS_MVB_WG=13" --batch 64 --breakdown
cb "64 w14" "DS_MVB_WG=14" --batch 64
cb "64L w12" "DS_MVB_WG=12" --batch 64 --prompt 512 --ctx 1024
cb "64L w13" "DS_MVB_WG=13" --batch 64 --prompt 512 --ctx 1024
cb "32 w12" "DS_MVB_WG=12" --batch 32
cb "32 w13" "DS_MVB_WG=13" --batch 32
cp "$W/cb.log" "$OUT/" 2>/dev/null
say done

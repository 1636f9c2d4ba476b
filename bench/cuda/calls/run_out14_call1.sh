#!/bin/bash
# out14 device call 1 (the only one): the Q6_K output head. ncu of ring_kernel<3, false, 2> (the default sub-block
# form, DS_MVB_WG_Q6K=9) on the output shape 248320 x 4096 at B = 64 (mvb_bench timedef q6_k: launches 0..61 are the
# 24576-row shape, 62..67 the output at B = 32, 68.. at B = 64; skip 69), against the carried form (=10, same bits as 9):
# CudaMatvecBatched.* in every config (4 shard processes, q10 config and Q6KCarriedSameBits included), test_cuda_model
# with 9 and 10, memcheck of Accumulate + RunToRunIdentical (12,q9 and 12,q10), mvb_bench checkdef6 and timedef q6_k for
# 9 / 10, the 9B step at B = 64 / 32 / 25 for 9 / 10 alternating (the ncu of 9 before the steps; steps not started
# after 100 s). Run from the ignored devwork-out14/ in /work/main as
# OUT=$OUT bash devwork-out14/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsout14; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-100}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 4 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "wg6r" | grep -oE "(_Z[^ ]*wg6r[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
NC='CudaMatvecBatched.*-*SplitReduce*:*WgmmaRing*:*BatchOne*:*RejectsBad*:*Q6KCarried*'
sh() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 70 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "-1" 'CudaMatvecBatched.*'
sh b "0,2,3,4" "$NC"
sh c "9,12,q0,q2,q6" "$NC"
sh d "q3,q4,q1,q8,q9,q10" "$NC"
( timeout 70 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model9.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model9.log" ) &
( DS_MVB_WG_Q6K=10 timeout 70 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model10.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model10.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for q in q9 q10; do
( DS_TEST_MVB_WG=12,$q timeout 70 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck_$q.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck_$q.log" ) &
done
for q in 9 10; do ( DS_MVB_WG_Q6K=$q timeout 70 "$M" checkdef6 > "$W/check_q$q.log" 2>&1; echo "rc $?" >> "$W/check_q$q.log" ) & done
wait
for f in a b c d; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for f in model9 model10; do say "test_cuda_$f: $(grep -E 'PASSED|FAILED|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for q in q9 q10; do say "memcheck $q: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck_$q.log | tr '\n' ' ')"; done
for q in 9 10; do say "checkdef6 q$q: $(grep -E 'check|BAD|^rc' $W/check_q$q.log | tr '\n' ' ')"; done
grep -hE "FAILED|Failure|worst" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
cp $W/t_*.log $W/check_*.log "$OUT/" 2>/dev/null
td() { local tag=$1 e=$2; [ $(el) -lt 65 ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 20 "$M" timedef q6_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*output.*B 64" $W/td.log | tail -1)"; }
td q9 "DS_MVB_WG_Q6K=9"
td q10 "DS_MVB_WG_Q6K=10"
td q9b "DS_MVB_WG_Q6K=9"
td q10b "DS_MVB_WG_Q6K=10"
cp "$W/td.log" "$OUT/" 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 q=$2 k=$3; [ $(el) -lt 80 ] || { say "skip ncu $tag"; return; }
  DS_MVB_WG_Q6K=$q timeout 30 "$NCU" --clock-control none --kernel-name-base demangled -k "regex:$k" --launch-skip 69 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section SourceCounters --import-source no -o "$OUT/ncu_$tag" -f "$M" timedef q6_k > "$OUT/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$?"
  timeout 10 "$NCU" -i "$OUT/ncu_$tag.ncu-rep" --page details --print-details all > "$OUT/ncu_details_$tag.txt" 2>&1
  timeout 10 "$NCU" -i "$OUT/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_source_$tag.csv" 2>&1
  say "ncu $tag pages rc=$? $(grep -E 'Duration|Issue Slots Busy|Warp Cycles Per Issued|Stall' $OUT/ncu_details_$tag.txt | head -4 | tr -s ' ' | tr '\n' ';')"; }
nc q9 9 'ring_kernel<3, false, 2>'
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 80 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 15 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 q9" "DS_MVB_WG_Q6K=9" --batch 64
cb "64 q10" "DS_MVB_WG_Q6K=10" --batch 64
cb "32 q9" "DS_MVB_WG_Q6K=9" --batch 32
cb "32 q10" "DS_MVB_WG_Q6K=10" --batch 32
cb "25 q9" "DS_MVB_WG_Q6K=9" --batch 25
cb "25 q10" "DS_MVB_WG_Q6K=10" --batch 25
cp "$W/cb.log" "$OUT/" 2>/dev/null
cd "$OUT" && tar czf all.tgz *.log *.txt 2>/dev/null; ls -la "$OUT" | head -40
say done

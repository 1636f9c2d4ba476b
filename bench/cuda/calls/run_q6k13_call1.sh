#!/bin/bash
# q6k13 device call 1 (the only one): the Q6_K ring's sub-block form (DS_MVB_WG_Q6K=9, built as the default) against
# the ring (=6): CudaMatvecBatched.* in every config (4 shard processes, q9 config included), test_cuda_model with 9 and
# with 6, compute-sanitizer memcheck of Accumulate + RunToRunIdentical (configs 12,q9 and 12,q6), mvb_bench checkdef6
# (float64 accuracy) and timedef q6_k (per product) for 6 / 9, the 9B step at B = 64 / 32 / 25 for 6 / 9 alternating,
# registers of the ring kernels. Run from the ignored devwork-q6k13/ in /work/main (b.tar.xz = gpu_bundle output plus
# mvb_bench, packed with xz -9 -T1: the 64 MB dictionary shares the kernels the four binaries have in common, 41 MB
# instead of 69 with -6 -T2) as OUT=$OUT bash devwork-q6k13/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsq6k13; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-165}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 4 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "wg6r" | grep -oE "(_Z[^ ]*wg6r[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
NC='CudaMatvecBatched.*-*SplitReduce*:*WgmmaRing*:*BatchOne*:*RejectsBad*'
sh() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 100 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "-1" 'CudaMatvecBatched.*'
sh b "0,2,3,4" "$NC"
sh c "9,12,q0,q2,q6" "$NC"
sh d "q3,q4,q1,q8,q9" "$NC"
( timeout 100 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model9.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model9.log" ) &
( DS_MVB_WG_Q6K=6 timeout 100 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model6.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model6.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for q in q9 q6; do
( DS_TEST_MVB_WG=12,$q timeout 100 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck_$q.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck_$q.log" ) &
done
for q in 6 9; do ( DS_MVB_WG_Q6K=$q timeout 100 "$M" checkdef6 > "$W/check_q$q.log" 2>&1; echo "rc $?" >> "$W/check_q$q.log" ) & done
wait
for f in a b c d; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for f in model9 model6; do say "test_cuda_$f: $(grep -E 'PASSED|FAILED|^rc' $W/t_$f.log | tr '\n' ' ')"; done
for q in q9 q6; do say "memcheck $q: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck_$q.log | tr '\n' ' ')"; done
for q in 6 9; do say "checkdef6 q$q: $(grep -E 'check|BAD|^rc' $W/check_q$q.log | tr '\n' ' ')"; done
grep -hE "FAILED|Failure|worst" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
td() { local tag=$1 e=$2; [ $(el) -lt $LIM ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 30 "$M" timedef q6_k >> "$W/td.log" 2>&1; say "td $tag rc=$?"; }
td q6 "DS_MVB_WG_Q6K=6"
td q9 "DS_MVB_WG_Q6K=9"
td q6b "DS_MVB_WG_Q6K=6"
td q9b "DS_MVB_WG_Q6K=9"
td q8 "DS_MVB_WG_Q6K=8"
cp "$W/td.log" "$OUT/" 2>/dev/null
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 q6" "DS_MVB_WG_Q6K=6" --batch 64 --breakdown --top 12
cb "64 q9" "DS_MVB_WG_Q6K=9" --batch 64 --breakdown --top 12
cb "64 q6 b" "DS_MVB_WG_Q6K=6" --batch 64
cb "64 q9 b" "DS_MVB_WG_Q6K=9" --batch 64
cb "32 q6" "DS_MVB_WG_Q6K=6" --batch 32
cb "32 q9" "DS_MVB_WG_Q6K=9" --batch 32
cb "25 q6" "DS_MVB_WG_Q6K=6" --batch 25
cb "25 q9" "DS_MVB_WG_Q6K=9" --batch 25
cb "64 q9 c" "DS_MVB_WG_Q6K=9" --batch 64
cb "64 q6 c" "DS_MVB_WG_Q6K=6" --batch 64
grep -E "^(====|decode|matvec|gdn|total|rms|swiglu|conv|  )" $W/cb.log > $OUT/cb_summary.txt
cd $W && tar czf "$OUT/all.tgz" *.log 2>/dev/null
say done

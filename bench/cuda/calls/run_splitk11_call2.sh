#!/bin/bash
# splitk11 device call 2 (binaries of 82e961a: final code, built-in defaults unchanged, DS_MVB_RED=3 behind its switch,
# the x-cluster forms removed): CudaMatvecBatched.* in every config (4 shard processes), test_cuda_model,
# compute-sanitizer memcheck of Accumulate + RunToRunIdentical (configs 12, q6) with DS_MVB_RED=1 and =3, then the 9B
# step at B = 64 (default and RED=3 alternating), 32 and 25. Run from the ignored devwork-splitk11/ in /work/main
# (b.tar.xz = gpu_bundle output) as OUT=$OUT bash devwork-splitk11/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dssk11; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda
LIM=${LIM:-125}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 4 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
NC='CudaMatvecBatched.*-*SplitReduce*:*WgmmaRing*:*BatchOne*:*RejectsBad*'
sh() { local name=$1 sel=$2 filt=$3; shift 3; ( env DS_TEST_MVB_WG=$sel "$@" timeout 95 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "-1" 'CudaMatvecBatched.*'
sh b "0,2,3,4" "$NC"
sh c "9,12,q0,q2,q6" "$NC"
sh d "q3,q4,q1,q8" "$NC"
( timeout 95 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for r in 1 3; do
( DS_MVB_RED=$r DS_TEST_MVB_WG=12,q6 timeout 95 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck_red$r.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck_red$r.log" ) &
done
wait
for f in a b c d; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
say "test_cuda_model: $(grep -E 'PASSED|FAILED|^rc' $W/t_model.log | tr '\n' ' ')"
for r in 1 3; do say "memcheck red$r: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck_red$r.log | tr '\n' ' ')"; done
grep -hE "FAILED|Failure|worst|\[split reduce\]" $W/t_*.log | sort | uniq -c | head -60 > "$OUT/test_summary.txt"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 110 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 def" "DS_MVB_RED=1" --batch 64 --breakdown --top 4
cb "64 red3" "DS_MVB_RED=3" --batch 64
cb "64 def b" "DS_MVB_RED=1" --batch 64
cb "64 red3 b" "DS_MVB_RED=3" --batch 64
cb "32 def" "DS_MVB_RED=1" --batch 32
cb "32 red3" "DS_MVB_RED=3" --batch 32
cb "25 def" "DS_MVB_RED=1" --batch 25
grep -E "^(====|decode|matvec|gdn|total|rms|swiglu|conv)" $W/cb.log > $OUT/cb_summary.txt
cd $W && tar czf "$OUT/all.tgz" *.log 2>/dev/null
say done

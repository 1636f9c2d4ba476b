#!/bin/bash
# fold17 device call 1: the RMSNorm / SwiGLU inside the Q4_K block kernel's x preparation (matvec_batched_in, DS_STEP_FOLD,
# default on in this build). Tests first, several processes at once while the 9B synthesizes (the new
# CudaMatvecBatchedIn.*, CudaMatvecBatched.* in 3 shards, test_cuda_model with the fold (default) and with
# DS_STEP_FOLD=0, memcheck of CudaMatvecBatchedIn.*), then the 9B step old vs new interleaved (DS_STEP_FOLD=0 / 1; B = 64
# short and --prompt 512 --ctx 1024, two runs each, breakdowns; B = 32 one each).
# Run from the ignored devwork-fold17/ in /work/main as OUT=$OUT bash devwork-fold17/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsf17; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "prep_reg_kernel" | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
tc() { local name=$1 bin=$2 filt=$3 e=$4; shift 4; ( env $e "$@" timeout 100 "$B/$bin" --gtest_brief=1 --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
tc new test_cuda 'CudaMatvecBatchedIn.*' X=0
for i in 0 1 2; do tc mvb$i test_cuda 'CudaMatvecBatched.*' "GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i"; done
tc model test_cuda_model '*' X=0
tc model0 test_cuda_model 'CudaState.*:CudaFixture*' DS_STEP_FOLD=0
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( timeout 80 "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatchedIn.*' > "$W/t_memcheck.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck.log" ) &
wait
for f in new mvb0 mvb1 mvb2 model model0 memcheck; do say "$f: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? ran|ERROR SUMMARY|^rc' $W/t_$f.log | tr '\n' ' ')"; done
grep -hE "FAILED|Failure|worst|matvec_batched_in" $W/t_*.log | sort | uniq -c | head -60 | tee "$OUT/test_summary.txt"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-100)"; }
cb "64 old" "DS_STEP_FOLD=0" --batch 64 --breakdown --top 12
cb "64 new" "DS_STEP_FOLD=1" --batch 64 --breakdown --top 12
cb "64 old" "DS_STEP_FOLD=0" --batch 64
cb "64 new" "DS_STEP_FOLD=1" --batch 64
cb "64L old" "DS_STEP_FOLD=0" --batch 64 --prompt 512 --ctx 1024 --breakdown --top 12
cb "64L new" "DS_STEP_FOLD=1" --batch 64 --prompt 512 --ctx 1024 --breakdown --top 12
cb "64L old" "DS_STEP_FOLD=0" --batch 64 --prompt 512 --ctx 1024
cb "64L new" "DS_STEP_FOLD=1" --batch 64 --prompt 512 --ctx 1024
cb "32 old" "DS_STEP_FOLD=0" --batch 32
cb "32 new" "DS_STEP_FOLD=1" --batch 32
cp "$W/cb.log" "$OUT/" 2>/dev/null
cd "$W" && tar czf "$OUT/logs.tgz" t_*.log cb.jsonl 2>/dev/null
say done

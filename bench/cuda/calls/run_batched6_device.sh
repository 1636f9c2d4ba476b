#!/bin/bash
# Record of the batched6 helper's final device call (2026-12-03): carried as devwork-b6/ with b.tar.xz =
# tools/gpu_bundle.sh output (deltaserve, test_cuda, test_cuda_model, libs without cuBLAS/cudart, fixtures) and
# mvb_bench (bench/cuda/matvec_batched_bench_standalone.cu, nvcc -arch=sm_90a -DDS_HAVE_SM90A=1); run as OUT=$OUT bash go2.sh.
# batched6 call 2 (final): tests, batched decode with the new default (wgmma kernel at B >= 25) and the old
# one (DS_MVB_WG=0), breakdown at 64, kernel times, memcheck on the batched tests, serving if time is left.
set -u
cd "$(dirname "$0")/.."
D=$PWD/devwork-b6; B=$D/bundle; W=/tmp/dsf; mkdir -p "$W"
[ -x "$B/deltaserve" ] || (cd "$D" && tar xJf b.tar.xz)
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-200 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
if [ ! -e "$W/m9B.ok" ]; then
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
  ( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
fi
step "timeq q4_k" 30 "$OUT/mvb.log" "$D/mvb_bench" timeq q4_k
grep -E "^time .*B (32|64) (fold2|wg)" "$OUT/mvb.log" >> "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 60 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
step "breakdown 64" 30 "$OUT/cb.log" $C --batch 64 --breakdown --top 16
for b in 1 8 32; do step "batch $b" 25 "$OUT/cb.log" $C --batch $b; done
for b in 32 64; do DS_MVB_WG=0 step "old batch $b" 25 "$OUT/cb.log" $C --batch $b; done
step "batch 25" 25 "$OUT/cb.log" $C --batch 25
DS_MVB_WG=0 step "old batch 25" 25 "$OUT/cb.log" $C --batch 25
grep -E "^decode" "$OUT/cb.log" | tee -a "$OUT/steps.log"
step "test_cuda" 110 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1
grep -E "^matvec_batched" "$OUT/tests.log" >> "$OUT/steps.log"
step "test_cuda_model" 50 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.*:CudaSelect.*'
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ] && [ $(el) -lt 165 ]; then
  step "memcheck model 40" $(( 195 - $(el) )) "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.BatchOf40*'
fi
if [ -n "$CS" ] && [ $(el) -lt 180 ]; then
  step "memcheck batched" $(( 205 - $(el) )) "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.ColumnIndependentOfBatch'
fi
say done

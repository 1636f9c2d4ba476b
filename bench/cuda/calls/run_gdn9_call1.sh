#!/bin/bash
# gdn9 device call (issue 7, GDN step split over thread-block clusters): GPU tests with the new default and
# with other DS_GDN_SPLIT variants, 9B logits bit-compare old vs new kernels (DK 128), cuda-bench B = 64
# breakdown per variant, B = 8 / 32, batch 1 breakdown + tg128, memcheck / racecheck on the model tests.
# Run as OUT=$OUT bash devwork-gdn9/go.sh (carry devwork-gdn9 holding b.tar.xz + this file).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-215}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
END=${END:-242}  # hard end of the whole script (the call's timeout is a little longer)
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return; }
  local rem=$((END - $(el))); [ $rem -lt $limit ] && limit=$rem; [ $limit -gt 4 ] || { say "skip $name (end)"; return; }
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
step "test_cuda_model default" 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 30 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
step "test_cuda CudaOps" 30 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaOps.*'
for v in "DS_GDN_SPLIT=0" "DS_GDN_PERSIST=1" "DS_GDN_PERSIST=1 DS_GDN_SPLIT=8 DS_GDN_CS=1" "DS_GDN_SPLIT=8 DS_GDN_REGCAP=1" "DS_GDN_SPLIT=2 DS_GDN_REGCAP=2 DS_GDN_CS=1" "DS_GDN_REGCAP=2"; do
  step "test_cuda_model $v" 40 "$OUT/tests.log" env $v "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='-CudaCli.*'
done
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
M=$W/m9B.gguf
python3 -c "print(' '.join(str(1000 + 37 * i) for i in range(40)))" > "$W/ids.txt"
i=0; for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1" "DS_GDN_SPLIT=8 DS_GDN_REGCAP=1"; do
  step "logits $v" 30 "$OUT/logits.log" env $v "$X" logits --backend cuda -m "$M" --tokens-file "$W/ids.txt" --out "$W/l$i.f32" --decode-from 8
  [ $i -gt 0 ] && { cmp "$W/l0.f32" "$W/l$i.f32" && say "logits $v: bit-equal to split 0" || say "logits $v: DIFFERENT from split 0"; }
  i=$((i + 1)); done
C="$X cuda-bench -m $M --tg 32 --reps 2"
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1" "DS_GDN_REGCAP=1" "DS_GDN_REGCAP=2" "DS_GDN_CS=1" "DS_GDN_SPLIT=8" "DS_GDN_SPLIT=8 DS_GDN_REGCAP=1" "DS_GDN_SPLIT=2" "DS_GDN_PERSIST=1 DS_GDN_CS=1" "DS_GDN_PERSIST=1 DS_GDN_SPLIT=8" "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1"; do
  step "B64 $v" 25 "$OUT/cb.log" env $v $C --batch 64 --breakdown --top 2
  grep -E "^decode|^gdn rule|^conv" "$OUT/cb.log" | tail -3 | tee -a "$OUT/steps.log"; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
F='CudaState.BatchedDecodeEqualsEachAlone:CudaFixtureLogits.TeacherForcedStepsMatchReference/*'
if [ -n "$CS" ]; then
  step "memcheck" 35 "$OUT/san.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter="$F"
  grep -E "ERROR SUMMARY" "$OUT/san.log" | tail -1 | tee -a "$OUT/steps.log"
  step "racecheck" 35 "$OUT/san.log" "$CS" --tool racecheck --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone'
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/san.log" | tail -1 | tee -a "$OUT/steps.log"
fi
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1" "DS_GDN_SPLIT=8"; do
  step "B1 $v" 25 "$OUT/cb.log" env $v "$X" cuda-bench -m "$M" --tg 16 --breakdown --top 2
  grep -E "^decode|^gdn rule|^conv" "$OUT/cb.log" | tail -3 | tee -a "$OUT/steps.log"; done
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_SPLIT=0" "DS_DEFAULT=1"; do
  step "tg128 $v" 25 "$OUT/bench.log" env $v "$X" bench -m "$M" --backend cuda -p 0 -n 128 -r 3
  grep -E "tok/s" "$OUT/bench.log" | tail -1 | tee -a "$OUT/steps.log"; done
for b in 8 32; do for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1"; do
  step "B$b $v" 25 "$OUT/cb.log" env $v $C --batch $b --breakdown --top 2
  grep -E "^decode|^gdn rule|^conv" "$OUT/cb.log" | tail -3 | tee -a "$OUT/steps.log"; done; done
if [ -n "$CS" ]; then
  step "memcheck persist" 30 "$OUT/san.log" env DS_GDN_PERSIST=1 "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone'
  grep -E "ERROR SUMMARY" "$OUT/san.log" | tail -1 | tee -a "$OUT/steps.log"
fi
say done

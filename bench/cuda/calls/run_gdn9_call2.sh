#!/bin/bash
# gdn9 device call 2 (binaries of 38c3f37): tests with the new default (split 4, 64 registers) and the
# persistent kernel, 9B logits bit-compare, cuda-bench B = 64 / 32 / 8 / 1 per variant, tg128, memcheck,
# racecheck. Run as OUT=$OUT bash devwork-gdn9/go.sh (carry devwork-gdn9: b.tar.xz + this file).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
END=${END:-128}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step() { local name=$1 limit=$2 log=$3; shift 3
  local rem=$((END - $(el))); [ $rem -lt $limit ] && limit=$rem; [ $limit -gt 4 ] || { say "skip $name (end)"; return; }
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
g() { grep -E "^decode|^gdn rule" "$OUT/cb.log" | tail -2 | tee -a "$OUT/steps.log"; }
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
step "test_cuda_model default" 30 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 25 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
for v in "DS_GDN_PERSIST=1" "DS_GDN_PERSIST=1 DS_GDN_REGCAP=0"; do
  step "test_cuda_model $v" 30 "$OUT/tests.log" env $v "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='-CudaCli.*'
done
step "memcheck default" 30 "$OUT/san.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone:*TeacherForcedStepsMatchReference*q8*'
step "memcheck persist" 30 "$OUT/san.log" env DS_GDN_PERSIST=1 "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone:*TeacherForcedStepsMatchReference*q8*'
step "racecheck" 40 "$OUT/san.log" "$CS" --tool racecheck --error-exitcode 1 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='*TeacherForcedStepsMatchReference*q8*'
grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$OUT/san.log" | tail -3 | tee -a "$OUT/steps.log"
grep -E "FAILED|PASSED|tests ran|ERROR SUMMARY" "$OUT/tests.log" "$OUT/san.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 100 ]; do sleep 1; done
M=$W/m9B.gguf
python3 -c "print(' '.join(str(1000 + 37 * i) for i in range(40)))" > "$W/ids.txt"
i=0; for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1"; do
  step "logits $v" 20 "$OUT/logits.log" env $v "$X" logits --backend cuda -m "$M" --tokens-file "$W/ids.txt" --out "$W/l$i.f32" --decode-from 8
  [ $i -gt 0 ] && { cmp "$W/l0.f32" "$W/l$i.f32" && say "logits $v: bit-equal to split 0" || say "logits $v: DIFFERENT from split 0"; }
  i=$((i + 1)); done
C="$X cuda-bench -m $M --tg 32 --reps 2"
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1" "DS_GDN_PERSIST=1 DS_GDN_REGCAP=0"; do
  step "B64 $v" 20 "$OUT/cb.log" env $v $C --batch 64 --breakdown --top 1; g; done
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1"; do
  step "B1 $v" 20 "$OUT/cb.log" env $v "$X" cuda-bench -m "$M" --tg 16 --breakdown --top 1; g; done
for b in 8 32; do for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1"; do
  step "B$b $v" 20 "$OUT/cb.log" env $v $C --batch $b --breakdown --top 1; g; done; done
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1"; do
  step "tg128 $v" 20 "$OUT/bench.log" env $v "$X" bench -m "$M" --backend cuda -p 0 -n 128 -r 3
  grep -E "tok/s" "$OUT/bench.log" | tail -1 | tee -a "$OUT/steps.log"; done
for v in "DS_GDN_SPLIT=0" "DS_DEFAULT=1" "DS_GDN_PERSIST=1"; do
  step "B64 $v" 20 "$OUT/cb.log" env $v $C --batch 64 --breakdown --top 1; g; done
say done

#!/bin/bash
# Carried folder F (git-ignored, e.g. devwork-decode6) = this script + bundle.tar.xz: `tools/gpu_bundle.sh build /tmp/x/bundle`
# (DS_FIXTURES=/work/shared/fixtures from a worktree) with lib/libcublas* and lib/libcudart* removed and the stripped
# mvbench (nvcc line in bench/cuda/matvec_bench_standalone.cu) added to bundle/, packed `tar cf - bundle | xz -9`
# (~38 MB). Run: bash F/run_stream_device.sh (~150 s + the cold start).
# decode6 check of the streamed Q4_K kernel (src/cuda/matvec_stream.cuh): mvbench --stream checks, test_cuda
# CudaMatvec.* (prints [tc] / [stream] worst errors), tg128 of synthetic 9B / 27B Q4_K_M with the kernel by shape
# (default) and off (DS_MATVEC_STREAM=0), 9B breakdown, memcheck on the int8 wide-range case, then test_cuda_model
# with the kernel forced on every shape it fits (DS_MATVEC_STREAM=1) in the time left. Results under $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-300 | tee -a "$OUT/steps.log"; }
W=/tmp/d6; mkdir -p "$W"; cd "$W"
tar xJf "$D/bundle.tar.xz" || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall('.')" "$D/bundle.tar.xz"
B=$W/bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
say extracted
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 27B 0.8B; do "$B/deltaserve" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 14 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
step "mvbench check" 40 "$OUT/mv.log" sh -c "'$B/mvbench' --stream --check-only > '$OUT/mv_check.jsonl'"
grep -v '"ok":true' "$OUT/mv_check.jsonl" | head -8 | tee -a "$OUT/steps.log"
python3 - "$OUT/mv_check.jsonl" <<'PY' | tee -a "$OUT/steps.log"
import json,sys
w={}
for l in open(sys.argv[1]):
    try: d=json.loads(l)
    except Exception: continue
    if 'worst' in d: w[d['check']]=max(w.get(d['check'],0),d['worst'])
print(w)
PY
step "test_cuda CudaMatvec" 70 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.*'
grep -E '^\[(tc|stream)\]' "$OUT/tests.log" | tee -a "$OUT/steps.log"
bench() { step "bench $1 $2" 30 "$OUT/bench.log" env $3 "$B/deltaserve" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2 $3" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'], d['min'], d['max'])" | tee -a "$OUT/steps.log"; }
for s in 9B 27B; do
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt 200 ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no $s"; continue; }
  [ $(el) -lt 205 ] || { say "skip $s"; continue; }
  bench $s stream-default DS_X=1
  bench $s stream-off DS_MATVEC_STREAM=0
  if [ $s = 9B ]; then
    step "breakdown 9B" 20 "$OUT/breakdown.log" "$B/deltaserve" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14
  fi
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck WideRangeX (stream int8 case)" 25 "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.TensorCoreQ4KWideRangeX'
grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" | tee -a "$OUT/steps.log"
L=$(( 140 - $(el) ))
if [ $L -gt 15 ]; then DS_MATVEC_STREAM=1 step "test_cuda_model stream forced" $L "$OUT/tests.log" "$B/test_cuda_model"; fi
grep -cE '^\[       OK \]' "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[  FAILED  \]' "$OUT/tests.log" | head | tee -a "$OUT/steps.log"
say done

#!/bin/bash
# decode7 check of the streamed Q6_K kernel (src/cuda/matvec_stream_q6.cuh), one device call (~150 s + the cold
# start). Carried folder F (git-ignored, e.g. devwork-decode7) = this script + bundle.tar.xz: `DS_FIXTURES=/work/
# shared/fixtures tools/gpu_bundle.sh build /tmp/x/bundle` with lib/libcublas* and lib/libcudart* removed and the
# stripped mvbench (nvcc line in bench/cuda/matvec_bench_standalone.cu) added to bundle/, packed
# `tar cf - bundle | xz -9`. Run: bash F/run_stream_q6_device.sh
# Steps: mvbench --stream6 checks (stream6 variants vs the float64 reference) and timings (Q6_K shapes: the
# kernel's variants vs the previous fused SwiGLU / RMSNorm choice and tc3), test_cuda CudaMatvec.* (prints
# [stream q6] worst errors), tg128 of synthetic 9B / 27B / 0.8B Q4_K_M with the Q6_K stream kernel by shape
# (default), off (DS_MATVEC_STREAM_Q6K=0) and forced (=1, 9B), 9B and 0.8B breakdowns, memcheck on the
# wide-range case, test_cuda_model with the kernel forced on every shape it fits, in the time left.
# Call 1 ran the version of 50064a5 (9B kc variants instead of kc8 / q4stream-off, no 0.8B A/B, no Q4_K check);
# this version (Q4_K stream checks incl. stage2, 0.8B PDL / stream A/B) was refused a machine: not run yet.
# For the DS_MATVEC_STREAM_STAGE2=1 A/B add e.g. `bench 9B stage2 DS_MATVEC_STREAM_STAGE2=1`.
set -u
D=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-300 | tee -a "$OUT/steps.log"; }
W=/tmp/d7; mkdir -p "$W"; cd "$W"
tar xJf "$D/bundle.tar.xz" || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall('.')" "$D/bundle.tar.xz"
B=$W/bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
say extracted
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B 27B; do "$B/deltaserve" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
step "mvbench check" 60 "$OUT/mv.log" sh -c "'$B/mvbench' --stream6 --check-only > '$OUT/mv_check.jsonl'"
grep -v '"ok":true' "$OUT/mv_check.jsonl" | head -8 | tee -a "$OUT/steps.log"
python3 - "$OUT/mv_check.jsonl" <<'PY' | tee -a "$OUT/steps.log"
import json,sys
w={}
for l in open(sys.argv[1]):
    try: d=json.loads(l)
    except Exception: continue
    if 'worst' in d: w[d['check']+' '+d['type']]=max(w.get(d['check']+' '+d['type'],0),d['worst'])
print(w)
PY
step "mvbench check q4k stream" 60 "$OUT/mv.log" sh -c "'$B/mvbench' --stream --check-only > '$OUT/mv_check4.jsonl'"
grep -v '"ok":true' "$OUT/mv_check4.jsonl" | head -4 | tee -a "$OUT/steps.log"
step "mvbench time" 90 "$OUT/mv.log" sh -c "'$B/mvbench' --stream6 --time-only > '$OUT/mv_time.jsonl'"
python3 - "$OUT/mv_time.jsonl" <<'PY' | tee -a "$OUT/steps.log"
import json,sys
rows={}
for l in open(sys.argv[1]):
    try: d=json.loads(l)
    except Exception: continue
    if d.get('op')=='d2d_copy': print('d2d', d['gb_s'])
    if d.get('op')!='matvec': continue
    rows.setdefault(d['model']+' '+d['tensor'],[]).append('%s=%.1f/%.0f'%(d['path'],d['us'],d['gb_s']))
for k,v in rows.items(): print(k,' '.join(v))
PY
step "test_cuda CudaMatvec" 150 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.*'
grep -E '^\[(stream q6|stream|tc)\]' "$OUT/tests.log" | tee -a "$OUT/steps.log"
bench() { step "bench $1 $2" 40 "$OUT/bench.log" env $3 "$B/deltaserve" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2 $3" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'], d['min'], d['max'])" | tee -a "$OUT/steps.log"; }
for s in 9B 0.8B 27B; do
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt 330 ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no $s"; continue; }
  [ $(el) -lt 340 ] || { say "skip $s"; continue; }
  bench $s q6stream-default DS_X=1
  bench $s q6stream-off DS_MATVEC_STREAM_Q6K=0
  if [ $s = 9B ]; then
    bench $s q6stream-forced DS_MATVEC_STREAM_Q6K=1
    bench $s q6stream-kc8 DS_MATVEC_STREAM_Q6K_KC=8
    bench $s q4stream-off DS_MATVEC_STREAM=0
    step "breakdown 9B" 25 "$OUT/breakdown.log" "$B/deltaserve" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14
    step "breakdown 9B q6 off" 25 "$OUT/breakdown.log" env DS_MATVEC_STREAM_Q6K=0 "$B/deltaserve" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 4
  fi
  if [ $s = 27B ]; then
    bench $s q6stream-kc8 DS_MATVEC_STREAM_Q6K_KC=8
  fi
  if [ $s = 0.8B ]; then
    bench $s pdl-off DS_MATVEC_PDL=0
    bench $s q4stream-off DS_MATVEC_STREAM=0
    bench $s q4stream-forced DS_MATVEC_STREAM=1
    bench $s q6stream-forced DS_MATVEC_STREAM_Q6K=1
    step "breakdown 0.8B" 25 "$OUT/breakdown.log" "$B/deltaserve" cuda-bench -m "$W/m0.8B.gguf" --tg 16 --breakdown --top 24
  fi
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[ -n "$CS" ] && step "memcheck WideRangeX (stream q6 case)" 40 "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.TensorCoreQ4KWideRangeX'
grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" | tee -a "$OUT/steps.log"
L=$(( ${DS_CALL_BUDGET:-300} - $(el) ))
if [ $L -gt 15 ]; then DS_MATVEC_STREAM_Q6K=1 step "test_cuda_model q6 stream forced" $L "$OUT/tests.log" "$B/test_cuda_model"; fi
grep -cE '^\[       OK \]' "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[  FAILED  \]' "$OUT/tests.log" | head | tee -a "$OUT/steps.log"
say done

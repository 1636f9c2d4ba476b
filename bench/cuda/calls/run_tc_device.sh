#!/bin/bash
# decode4 (issue 5): one device call for the tensor-core Q4_K batch-1 kernel (src/cuda/matvec_tc.cuh) against
# the older kernels: mvbench timings per shape (tc3 / tc2 / ks and grid variants vs smem / smem_async / direct),
# the Q4_K checks, test_cuda (prints "[tc]" worst errors), test_cuda_model, tg128 of synthetic 9B / 0.8B / 27B
# Q4_K_M with DS_MATVEC_TC=1 and =0 (9B also DS_MATVEC_PDL_REGISTER=1 and 2 terms) and the 9B breakdown.
# Prepare a carried folder F (git-ignored, e.g. devwork-decode4) holding this script, `mvbench` (nvcc line in
# bench/cuda/matvec_bench_standalone.cu) and bundle.tar.xz = `tools/gpu_bundle.sh build /tmp/x/bundle` with
# lib/libcublas* and lib/libcudart* removed (the device has them), packed as `tar cJf F/bundle.tar.xz -C /tmp/x
# bundle` (~38 MB). Run: bash F/run_tc_device.sh (MODELS="9B 0.8B 27B" by default). ~300 s with a cold start.
set -u
D=$(cd "$(dirname "$0")" && pwd)
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
step() {  # step NAME LIMIT_S LOGFILE cmd...
  local name=$1 limit=$2 log=$3; shift 3
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?
  say "== $name rc=$rc"; tail -2 "$log" | tee -a "$OUT/steps.log"
}
W=/tmp/d4; mkdir -p "$W"; cd "$W"
tar xJf "$D/bundle.tar.xz"
B=$W/bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
  "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
MODELS=${MODELS:-"9B 0.8B 27B"}
( for s in $MODELS; do
    "$DS_BIN" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" > /dev/null 2>&1 \
      && touch "$W/m$s.ok"
  done ) &
step "mvbench time" 60 "$OUT/steps.log" sh -c "'$D/mvbench' --quick --q4k --time-only > '$OUT/mv_time.jsonl'"
python3 - "$OUT/mv_time.jsonl" <<'PY' | tee -a "$OUT/steps.log"
import json, sys
rows = {}
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    if d.get('op') == 'matvec' and 'us' in d: rows.setdefault((d['model'], d['tensor']), []).append('%s=%.1f' % (d['path'], d['us']))
for k, v in rows.items(): print(*k, ' '.join(v))
PY
step "mvbench check" 60 "$OUT/steps.log" sh -c "'$D/mvbench' --quick --q4k --check-only > '$OUT/mv_check.jsonl'"
grep -v '"ok":true' "$OUT/mv_check.jsonl" | head -5 | tee -a "$OUT/steps.log"
step test_cuda 120 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1
grep '^\[tc\]' "$OUT/tests.log" | tee -a "$OUT/steps.log"
step test_cuda_model 150 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
for s in $MODELS; do
  while [ ! -e "$W/m$s.ok" ] && [ $(( $(date +%s) - T0 )) -lt 420 ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no $s"; continue; }
  step "bench $s tc" 60 "$OUT/bench.log" "$DS_BIN" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  DS_MATVEC_TC=0 step "bench $s no-tc" 60 "$OUT/bench.log" "$DS_BIN" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  if [ "$s" = 9B ]; then
    DS_MATVEC_TC=0 DS_MATVEC_PDL_REGISTER=1 step "bench $s no-tc pdl-register" 60 "$OUT/bench.log" "$DS_BIN" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json
    DS_MATVEC_TC_TERMS=2 step "bench $s tc 2 terms" 60 "$OUT/bench.log" "$DS_BIN" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json
    step "breakdown $s" 60 "$OUT/breakdown.log" "$DS_BIN" cuda-bench -m "$W/m$s.gguf" --tg 16 --breakdown --top 14
  fi
done
grep -h '^{' "$OUT/bench.log" | cut -c1-400 | tee -a "$OUT/steps.log"
say done

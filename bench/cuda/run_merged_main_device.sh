#!/bin/bash
# Record of the session 6 coordinator's final H200 call (2026-12-03, commit c212796): carried as devwork-v6/ with
# b.tar.xz = tools/gpu_bundle.sh output (deltaserve, test_cuda, test_cuda_model, test_cuda_prefill, fixtures; lib/ without
# libcublas*/libcudart*, binaries stripped), run as `OUT=$OUT bash devwork-v6/final.sh` (~230 s + the cold start).
# Output: docs/measurements/2026-12-03-h200-session6-final.txt. Keep at most 8 files under $OUT (the device tool's limit):
# the last line packs everything into all.tgz. Since then: test_cuda needs ~160 s (limit raised from 130 to 200), and
# DS_GDN_MINB was reverted (its two A/B lines now run the default).
# Coordinator's final H200 check of merged main (decode7 + batched7 + GDN two-blocks switch): every GPU test,
# tg128 9B/27B/0.8B (+ 9B with the Q6_K stream kernel off and with DS_GDN_MINB=2), 9B breakdown, batched decode
# 8/32/64 (+ 64 with DS_GDN_MINB=2), serving at 1/8/32/64 clients, memcheck on the new kernels' tests.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 27B 0.8B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
step test_cuda 200 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1
grep -E '^\[(tc|stream|stream6)\]|^matvec_batched|worst' "$OUT/tests.log" | head -40 > "$OUT/errors.txt"
step test_cuda_model 60 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step test_cuda_prefill 40 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
bench() { step "bench $1 $2" 40 "$OUT/bench.log" env $2 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
for s in 9B 27B 0.8B; do
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt 400 ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no $s"; continue; }
  bench $s DS_DEFAULT=1
  if [ $s = 9B ]; then
    bench 9B DS_MATVEC_STREAM_Q6K=0
    bench 9B DS_GDN_MINB=2
    bench 9B DS_MATVEC_STREAM_STAGE2=1
    step "breakdown 9B" 30 "$OUT/breakdown.log" "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14
    C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
    step "breakdown 64" 30 "$OUT/cb.log" $C --batch 64 --breakdown --top 12
    for b in 8 32; do step "batch $b" 25 "$OUT/cb.log" $C --batch $b; done
    DS_GDN_MINB=2 step "batch 64 gdn minb 2" 30 "$OUT/cb.log" $C --batch 64 --breakdown --top 2
    grep -E "^decode|gdn rule" "$OUT/cb.log" | tee -a "$OUT/steps.log"
    say "== serve"; DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 90 bash "$D/../tools/serve_bench.sh" "$W/m9B.gguf" --levels 1,8,32,64 --budget-s 80 >> "$OUT/serve.log" 2>&1; say "== serve rc=$?"; tail -3 "$OUT/serve.log" | cut -c1-200 | tee -a "$OUT/steps.log"
  fi
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ] && [ $(el) -lt 430 ]; then
  step "memcheck new kernels" $(( 480 - $(el) )) "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamQ6K*:CudaMatvecBatched.Q6KExtreme*:CudaMatvecBatched.ColumnIndependentOfBatch'
  grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" | tee -a "$OUT/steps.log"
fi
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz . && find . -type f ! -name all.tgz ! -name steps.log -delete)

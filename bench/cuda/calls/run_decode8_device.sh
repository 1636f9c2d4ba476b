#!/bin/bash
# Record of the decode8 H200 call (2026-12-03; output docs/measurements/2026-12-03-h200-decode8-call1.txt). Carried as
# devwork-decode8/ (in the checkout the device tool copies: /work/main) with b.tar.xz = tools/gpu_bundle.sh output, this
# script as go.sh and the A/B lines below as lines9B.txt / lines_0.8B.txt / lines_27B.txt. Run as
# OUT=$OUT LIM=150 TC_LIM=90 TC_FILTER='CudaMatvec.Stream*:CudaMatvec.FusedInputMatchesCpu:CudaMatvec.TensorCoreQ4KWideRangeX' bash devwork-decode8/go.sh
# (~150 s + the cold start). Lines (one env setting per bench line):
#   lines9B.txt:
#     DS_STEP_PDL=0
#     DS_DEFAULT=1
#     DS_MATVEC_PREFETCH_KB=8192
#     DS_MATVEC_PREFETCH_KB=16384
#     DS_MATVEC_PREFETCH_KB=4096
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1 DS_MATVEC_STREAM_Q6K_CTAS=-1 DS_MATVEC_PREFETCH_KB=8192
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1 DS_MATVEC_STREAM_Q6K_CTAS=-1
#     DS_STEP_CARVEOUT=1
#     DS_MATVEC_PREFETCH_KB=8192 DS_STEP_CARVEOUT=1
#     DS_STEP_PDL=0 DS_MATVEC_PREFETCH_KB=8192
#     DS_STEP_PDL=0
#     DS_DEFAULT=1
#     DS_MATVEC_PREFETCH_KB=8192
#     DS_MATVEC_PREFETCH_KB=32768
#     DS_MATVEC_STREAM_STAGE2=1 DS_MATVEC_PREFETCH_KB=8192
#     DS_MATVEC_STREAM=1 DS_MATVEC_STREAM_Q6K=1 DS_MATVEC_PREFETCH_KB=8192
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_Q6K_CTAS=-1
#   lines_0.8B.txt:
#     DS_STEP_PDL=0
#     DS_DEFAULT=1
#     DS_MATVEC_PREFETCH_KB=4096
#     DS_MATVEC_PREFETCH_KB=8192
#     DS_STEP_CARVEOUT=1
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1 DS_MATVEC_STREAM_Q6K_CTAS=-1
#   lines_27B.txt:
#     DS_STEP_PDL=0
#     DS_DEFAULT=1
#     DS_MATVEC_PREFETCH_KB=8192
#     DS_MATVEC_PREFETCH_KB=16384
#     DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1 DS_MATVEC_STREAM_Q6K_CTAS=-1 DS_MATVEC_PREFETCH_KB=8192
# decode8 call: tests (CudaMatvec.*, test_cuda_model under the candidate settings, prefill), tg128 A/B lines.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-240}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in ${SIZES:-9B 0.8B 27B}; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
( timeout ${TC_LIM:-120} "$B/test_cuda" --gtest_brief=1 --gtest_filter="${TC_FILTER:-CudaMatvec.*}" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda rc=$?" >> "$OUT/test_cuda.log" ) &
TCP=$!
C1="DS_MATVEC_PREFETCH_KB=8192 DS_STEP_CARVEOUT=1"
C2="DS_MATVEC_PREFETCH_KB=8192 DS_STEP_CARVEOUT=1 DS_MATVEC_STREAM_CTAS=-1 DS_MATVEC_STREAM_Q6K_CTAS=-1"
step "test_cuda_model default x2" 60 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1 --gtest_repeat=2
step "test_cuda_model $C1" 60 "$OUT/tests.log" env $C1 "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_model $C2" 60 "$OUT/tests.log" env $C2 "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 40 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
wait $TCP; say "$(tail -1 "$OUT/test_cuda.log")"
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" "$OUT/test_cuda.log" | tee -a "$OUT/steps.log"
grep -E '^\[(tc|stream|stream q6)\]' "$OUT/test_cuda.log" >> "$OUT/steps.log"
bench() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  step "bench $1 $2" 40 "$OUT/bench.log" env $2 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
waitm 9B && while read -r l; do bench 9B "$l"; done < "$D/lines9B.txt"
for s in 0.8B 27B; do waitm $s || { say "no $s"; continue; }
  while read -r l; do bench $s "$l"; done < "$D/lines_$s.txt"; done
for e in DS_DEFAULT=1 DS_MATVEC_PREFETCH_KB=8192; do
  [ $(el) -lt $LIM ] && step "breakdown 9B $e" 30 "$OUT/breakdown.log" env $e "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14; done
[ $(el) -lt $LIM ] && step "breakdown 0.8B" 30 "$OUT/breakdown.log" env DS_MATVEC_PREFETCH_KB=4096 "$X" cuda-bench -m "$W/m0.8B.gguf" --tg 16 --breakdown --top 10
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz . && find . -type f ! -name all.tgz ! -name steps.log -delete)

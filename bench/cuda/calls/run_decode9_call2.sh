#!/bin/bash
# Record of the decode9 H200 call 2 (output docs/measurements/2026-12-03-h200-decode9-call2.txt); b.tar.xz built from
# b129f82 as in run_decode9_call1.sh. Run: OUT=$OUT LIM=80 bash devwork-decode9/go.sh (57 s on a warm machine).
# decode9 call 2: the Q4_K one-CTA rule (DS_MATVEC_STREAM_ONE_NB, default 32) on top of call 1's 16-warp kernels.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-80}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
( timeout 50 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamWideSmall:CudaMatvec.FusedInputMatchesCpu:CudaMatvec.StreamPrefetchHint' > "$OUT/tc.log" 2>&1; echo "test_cuda rc=$?" >> "$OUT/tc.log" ) &
TCP=$!
step "test_cuda_model default" 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 30 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
wait $TCP; cat "$OUT/tc.log" >> "$OUT/tests.log"; rm -f "$OUT/tc.log"
grep -E "FAILED|PASSED|tests ran|rc=" "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[(stream|stream wide)\]' "$OUT/tests.log" >> "$OUT/steps.log"
bench() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  step "bench $1 $2" 30 "$OUT/bench.log" env $2 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
waitm 9B && for l in DS_DEFAULT=1 DS_MATVEC_STREAM_ONE_NB=0 DS_DEFAULT=1 DS_MATVEC_STREAM_ONE_NB=0 "DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0"; do bench 9B "$l"; done
[ $(el) -lt $LIM ] && step "breakdown 9B default" 20 "$OUT/breakdown.log" "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 220
waitm 0.8B && bench 0.8B DS_DEFAULT=1
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . ; find . -type f ! -name all.tgz ! -name steps.log -delete)

#!/bin/bash
# host13 call 1 (issue 7: the server's host work per decode step overlapped with the next step). Carried as
# devwork-host13/ (b.tar.xz = tools/gpu_bundle.sh output with test_engine; this script as go.sh). Run as
# `OUT=$OUT bash devwork-host13/go.sh`. Steps, each under `timeout`, skipped once LIM seconds have passed:
#   1. GPU tests: test_engine CudaBackendServing.* (the async step and device-kept snapshot logits among them) and
#      the engine's CPU tests again, test_cuda_model (decode_select / save / run_step changed), while the 9B synthesizes;
#   2. tools/serve_bench.sh (9B, --parallel 64 --ctx 1024, 512-token prompts, 128 generated) at 1 / 8 / 32 / 64:
#      the new path (defaults: DS_ASYNC_STEP=1, reply-end logits kept on the device) vs the old one
#      (DS_ASYNC_STEP=0 DS_SNAPSHOT_LOGITS=0), then A/B lines at 64 only.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-165}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return; }; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
step "test_engine CudaBackendServing" 30 "$OUT/tests.log" "$B/test_engine" --gtest_brief=1 --gtest_filter="CudaBackendServing.*"
step "test_engine Engine*" 30 "$OUT/tests.log" "$B/test_engine" --gtest_brief=1 --gtest_filter="Engine*"
step test_cuda_model 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
grep -E "FAILED|PASSED|tests ran|SKIPPED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
[ -e "$W/m9B.ok" ] || { say "no 9B model"; exit 1; }
# serve_bench: SB LABEL ENV [--levels L] [--server-args ...]
SB() { local label=$1 envs=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip serve $label"; return; }
  say "== serve $label"; echo "==== serve $label ($envs $*)" >> "$OUT/serve.log"
  env $envs DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 60 bash "$D/../tools/serve_bench.sh" "$W/m9B.gguf" --budget-s 55 --label "host13 call 1: $label" "$@" >> "$OUT/serve.log" 2>&1
  say "== serve $label rc=$?"
  tail -n 4 "$OUT/serve.jsonl" 2>/dev/null | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l)
    if d['label'].endswith('$label'): print('  c%d dec %s out %s mb %s ttft %s/%s itl %s/%s eng %s' % (d['concurrency'], d['decode_tok_s'], d['output_tok_s'], d['mean_decode_batch'], d['ttft_ms']['p50'], d['ttft_ms']['p99'], d['itl_ms']['p50'], d['itl_ms']['p99'], d['engine_ms_per_step']))" | tee -a "$OUT/steps.log"; }
SB "async (defaults)" "DS_DEFAULT=1"
SB "old (DS_ASYNC_STEP=0 DS_SNAPSHOT_LOGITS=0)" "DS_ASYNC_STEP=0 DS_SNAPSHOT_LOGITS=0"
SB "async again (64)" "DS_DEFAULT=1" --levels 64
SB "old again (64)" "DS_ASYNC_STEP=0 DS_SNAPSHOT_LOGITS=0" --levels 64
SB "async, DS_SNAPSHOT_LOGITS=0 (64)" "DS_SNAPSHOT_LOGITS=0" --levels 64
SB "async --prefix-cache-mb 0 (64)" "DS_DEFAULT=1" --levels 64 --server-args "--prefix-cache-mb 0"
grep -E "serve_bench\] (server up|done)" "$OUT/serve.log" | tee -a "$OUT/steps.log"
say done

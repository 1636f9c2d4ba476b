#!/bin/bash
# serve11 call 1 (issue 7: the server's decode rate at 64 clients vs the engine's own step). Carried as
# devwork-serve11/ (b.tar.xz = tools/gpu_bundle.sh output + test_engine; this script as go.sh). Run as
# `OUT=$OUT bash devwork-serve11/go.sh`. Steps, each under `timeout`, skipped once LIM seconds have passed:
#   1. GPU tests with the new defaults (test_cuda_model, test_cuda_prefill, test_engine's CUDA backend tests), and
#      test_cuda_model with DS_ATTN_PREFETCH=2, while the 9B synthesizes;
#   2. cuda-bench at the server's context (--prompt 512 --ctx 1024, B = 64, --select 0, breakdown): attention with
#      the kernels before serve11 (DS_ATTN_KG=8), the default (kG 4), DS_ATTN_PREFETCH=2; and B = 64 --prompt 0;
#   3. tools/serve_bench.sh (9B, --parallel 64 --ctx 1024, 512-token prompts, 128 generated): before (every serve11
#      switch off), after (defaults), after + --prefill-first, after + --prefill-budget 512, and A/B lines at 64.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-160}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return; }; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
step test_cuda_model 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step test_cuda_prefill 30 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
step "test_engine CudaBackendServing" 30 "$OUT/tests.log" "$B/test_engine" --gtest_brief=1 --gtest_filter="CudaBackendServing.*"
step "test_cuda_model DS_ATTN_PREFETCH=2" 40 "$OUT/tests.log" env DS_ATTN_PREFETCH=2 "$B/test_cuda_model" --gtest_brief=1
grep -E "FAILED|PASSED|tests ran|SKIPPED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
[ -e "$W/m9B.ok" ] || { say "no 9B model"; exit 1; }
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 1 --select 0 --json $OUT/cb.jsonl"
step "cb64 p512 ctx1024 DS_ATTN_KG=8" 40 "$OUT/cb.log" env DS_ATTN_KG=8 $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 6
step "cb64 p512 ctx1024 default" 40 "$OUT/cb.log" $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 6
step "cb64 p512 ctx1024 DS_ATTN_PREFETCH=2" 40 "$OUT/cb.log" env DS_ATTN_PREFETCH=2 $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 6
step "cb64 p0" 30 "$OUT/cb.log" $C --batch 64 --reps 2
grep -E "^decode|^attention|^prefill pp|^matvec|^gdn rule|^qk norm|^rms_norm|^total" "$OUT/cb.log" | tee -a "$OUT/steps.log"
# serve_bench: SB LABEL ENV [--levels L] [--server-args ...]
SB() { local label=$1 envs=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip serve $label"; return; }
  say "== serve $label"; echo "==== serve $label ($envs $*)" >> "$OUT/serve.log"
  env $envs DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 60 bash "$D/../tools/serve_bench.sh" "$W/m9B.gguf" --budget-s 55 --label "serve11 call 1: $label" "$@" >> "$OUT/serve.log" 2>&1
  say "== serve $label rc=$?"
  tail -n 4 "$OUT/serve.jsonl" 2>/dev/null | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l)
    if d['label'].endswith('$label'): print('  c%d dec %s out %s mb %s ttft %s/%s itl %s/%s eng %s' % (d['concurrency'], d['decode_tok_s'], d['output_tok_s'], d['mean_decode_batch'], d['ttft_ms']['p50'], d['ttft_ms']['p99'], d['itl_ms']['p50'], d['itl_ms']['p99'], d['engine_ms_per_step']))" | tee -a "$OUT/steps.log"; }
OLD="DS_ATTN_KG=8 DS_SNAPSHOT_POOL=0 DS_GRAPH_WARMUP=0"
SB "before (serve11 switches off: $OLD)" "$OLD"
SB "after (defaults)" "DS_DEFAULT=1"
SB "after --prefill-first" "DS_DEFAULT=1" --server-args "--prefill-first"
SB "after --prefill-budget 512" "DS_DEFAULT=1" --server-args "--prefill-budget 512"
SB "after DS_SNAPSHOT_POOL=0 (64)" "DS_SNAPSHOT_POOL=0" --levels 64
SB "after --prefill-first --prefill-budget 512" "DS_DEFAULT=1" --server-args "--prefill-first --prefill-budget 512"
SB "after --prefix-cache-mb 0 (64)" "DS_DEFAULT=1" --levels 64 --server-args "--prefix-cache-mb 0"
SB "after DS_GRAPH_WARMUP=0 (64)" "DS_GRAPH_WARMUP=0" --levels 64
grep -E "serve_bench\] (server up|done)" "$OUT/serve.log" | tee -a "$OUT/steps.log"
say done

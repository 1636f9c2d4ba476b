#!/bin/bash
# sw25 call 4: the SwiGLU inside the gate / up tile (swiglu_tile: each CTA loads the gate's and the up rows' halves, act
# made through shared memory, y not written) vs the swiglu kernel (DS_STEP_SWIGLU=0): 9B at 64 x 512+ interleaved with
# logits digests, op-by-op breakdowns; CudaMatvecBatched*, test_cuda_model, memcheck of the new test; on an H200 the
# default served at 1 / 8 / 32 / 64.
# Run as: cd devsw25 && OUT=$OUT timeout 420 bash go4.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B.gguf
( [ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$M9" > /dev/null 2>&1; touch "$W/m9B.ok" ) &
timeout 150 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched*' > "$OUT/t_cuda.log" 2>&1 &
P1=$!
timeout 150 "$TM" --gtest_brief=1 > "$OUT/t_model.log" 2>&1 &
P2=$!
wait $P1; say "test_cuda CudaMatvecBatched* rc=$?"; wait $P2; say "test_cuda_model rc=$?"
for f in t_cuda t_model; do grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|matvec_batched_in swiglu|Failure" "$OUT/$f.log" | head -12 | cut -c1-220 | sed "s/^/$f: /" | tee -a "$OUT/steps.log"; done
timeout 60 compute-sanitizer --tool memcheck "$B/test_cuda" --gtest_filter='CudaMatvecBatchedIn.Swiglu*' > "$OUT/memcheck_sw.log" 2>&1; say "memcheck swiglu rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck_sw.log" | tail -2 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 250 ]; do sleep 1; done
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 $2 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200) | $(grep -E '^logits digest' "$OUT/cb.log" | tail -1)"; }
for r in 1 2; do for e in DS_DEFAULT=1 DS_STEP_SWIGLU=0; do [ $(el) -lt 300 ] && cb "$e" ""; done; done
for e in DS_DEFAULT=1 DS_STEP_SWIGLU=0; do [ $(el) -lt 350 ] || continue
  timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 4 --reps 1 --select 0 --batch 64 --prompt 512 --ctx 1024 --breakdown --top 5 --json "$OUT/bd.jsonl" > "$OUT/bd_$e.log" 2>&1
  say "breakdown $e: $(grep -E '^per-kernel' "$OUT/bd_$e.log")"
  python3 -c "
import json,re,sys,collections
d=[json.loads(l) for l in open(sys.argv[1])][-1]
t=collections.defaultdict(float); c=collections.Counter()
for o in d['ops']:
    m=re.match(r'L[0-9]+[.](.*)', o['op']); n=re.sub(r'\\[.*','',m.group(1)) if m else o['op']
    t[n]+=o['us']; c[n]+=1
for n in sorted(t): print('  %s %-26s ops %3d sum %8.1f us mean %6.2f' % (sys.argv[2], n, c[n], t[n], t[n]/c[n]))" "$OUT/bd.jsonl" "$e" | tee -a "$OUT/steps.log"
done
 if echo "$GPU" | grep -q H200 && [ $(el) -lt 330 ]; then
  DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 55 bash "$D/../tools/serve_bench.sh" "$M9" --levels 1,8,32,64 --budget-s 46 \
    --label "session25 sw25 H200 default" >> "$OUT/serve.log" 2>&1; say "serve rc=$?"
  [ -e "$OUT/serve.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
fi
say done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete

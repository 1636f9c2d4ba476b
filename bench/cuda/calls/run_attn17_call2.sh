#!/bin/bash
# attn17 device call 2: DS_ATTN_SKIP_EMPTY (empty splits write only (M, L); the combine skips A of weight-0
# splits; the same bits) on (default) vs off, same binary. Run from the ignored devwork-attn17/ in /work/main as
# LIM=75 OUT=$OUT bash devwork-attn17/go.sh. Steps under `timeout`:
#   A. beside the 9B synth: AttnRing.* default and SKIP_EMPTY=0; test_cuda_model --gtest_brief=1; test_cuda_prefill;
#      CudaOps attention tests; compute-sanitizer memcheck of AttnRing.SameBitsSmallShapes + EmptySplitsSkipped;
#   B. cuda-bench 9B: B = 64 short on / off / off / on, B = 64 --prompt 512 --ctx 1024 on / off, tg128 on / off /
#      on / off; C. AttnBench.Time (DS_ATTN_BENCH=2) if fewer than LIM seconds have passed.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsattn17; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-75}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
P=()
t attnring_on timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t attnring_off DS_ATTN_SKIP_EMPTY=0 timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t model timeout 60 "$TM" --gtest_brief=1 & P+=($!)
t prefill timeout 50 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
t cudaops timeout 50 "$B/test_cuda" --gtest_filter='CudaOps.*Attention*' & P+=($!)
t memcheck timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes:AttnRing.EmptySplitsSkipped' & P+=($!)
wait "${P[@]}"
TL="attnring_on attnring_off model prefill cudaops memcheck"
for f in $TL; do { head -3 "$W/t_$f.log"; grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|SKIPPED \]|^\[attn1|Failure|Expected|Which is|Value of|memcmp' "$W/t_$f.log" | head -150; } >> "$OUT/tests.log"; done
for f in $TL; do say "$f | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[attn17\]|Failure|Expected|Which is" "$W/t_attnring_on.log" | cut -c1-200 | head -20 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 60 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^attention' $OUT/cb.log | tail -1 | cut -c1-80)"; }
tg() { local name=$1 e=$2; env $e timeout 20 "$X" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 2 > "$W/tg.log" 2>&1 < /dev/null; say "tg128 $name rc=$? $(grep -E 'tg128' $W/tg.log | tail -1 | cut -c1-200)"; cat "$W/tg.log" >> "$OUT/tg.log"; }
ON="DS_ATTN_SKIP_EMPTY=1"; OFF="DS_ATTN_SKIP_EMPTY=0"
if [ -e "$W/m9B.ok" ]; then
  cb "64 short on a" "$ON" --batch 64 --breakdown; cb "64 short off a" "$OFF" --batch 64 --breakdown
  cb "64 short off b" "$OFF" --batch 64 --breakdown; cb "64 short on b" "$ON" --batch 64 --breakdown
  cb "64 p512 on" "$ON" --batch 64 --prompt 512 --ctx 1024 --breakdown; cb "64 p512 off" "$OFF" --batch 64 --prompt 512 --ctx 1024 --breakdown
  tg "on a" "$ON"; tg "off a" "$OFF"; tg "on b" "$ON"; tg "off b" "$OFF"
else say "no 9B model"; fi
if [ $(el) -lt $LIM ]; then
  env DS_ATTN_BENCH=2 timeout 30 "$TM" --gtest_filter='AttnBench.Time' > "$W/ab.log" 2>&1 < /dev/null; say "bench rc=$?"
  grep -E "^\[attn17\]" "$W/ab.log" | tee -a "$OUT/steps.log" >> "$OUT/bench.log"
else say "skip bench"; fi
wait
say done

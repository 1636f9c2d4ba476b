#!/bin/bash
# attn17 device call 1 (the only one): DS_ATTN_LONG=64 / 128 (rows per split from 256 keys: fewer, longer splits)
# and DS_ATTN_MINB=5 (the ring kernel at <= 96 registers with the largest shared-memory carveout: 5 blocks per SM)
# vs the defaults of the same binary (empty splits exit early and the combine merges only splits with rows in both).
# Run from the ignored devwork-attn17/ in /work/main (b.tar.xz = tools/gpu_bundle.sh output) as
# LIM=125 OUT=$OUT bash devwork-attn17/go.sh. Steps under `timeout`, later ones skipped once LIM seconds have passed:
#   A. in parallel beside the 9B synth: AttnRing.* default / new (LONG=64 MINB=5); test_cuda_model --gtest_brief=1
#      default and new; test_cuda_prefill new; CudaOps attention tests (test_cuda); compute-sanitizer memcheck and
#      racecheck of AttnRing.SameBitsSmallShapes with the new env; SASS of the 9B ring kernels (cuobjdump, CPU);
#   B. cuda-bench 9B B = 64 --prompt 512 --ctx 1024: base / minb5 / long64 / long128 / long64 minb5 / base; the
#      fastest new form is "best" below;
#   C. AttnBench.Time (DS_ATTN_BENCH=2: register loop pf2 and ring 4, every form at every shape);
#   E. cuda-bench B = 64 short and B = 32 --prompt 512 --ctx 1024, base / best;
#   D. ncu of AttnBench.Profile's ring / combine kernels in every form; F. tg128 9B base.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsattn17; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-125}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
COD=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 40 "$COD" -sass "$TM" 2>/dev/null | awk '/Function : /{p = ($0 ~ /attn_ring_kernelILi8ELi4ELi4ELi[15]E/)} p' > "$OUT/sass_ring.txt"; echo "[$(el)s] sass done" >> "$OUT/steps.log" ) &
NEW="DS_ATTN_LONG=64 DS_ATTN_MINB=5"
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
P=()
t attnring_def timeout 60 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t attnring_new $NEW timeout 60 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t model_def timeout 75 "$TM" --gtest_brief=1 & P+=($!)
t model_new $NEW timeout 75 "$TM" --gtest_brief=1 & P+=($!)
t prefill_new $NEW timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
t cudaops_def timeout 60 "$B/test_cuda" --gtest_filter='CudaOps.*Attention*' & P+=($!)
t cudaops_new $NEW timeout 60 "$B/test_cuda" --gtest_filter='CudaOps.*Attention*' & P+=($!)
t memcheck_new $NEW timeout 75 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
t racecheck_new $NEW timeout 75 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
wait "${P[@]}"
TL="attnring_def attnring_new model_def model_new prefill_new cudaops_def cudaops_new memcheck_new racecheck_new"
for f in $TL; do { head -3 "$W/t_$f.log"; grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SKIPPED \]|^\[attn1|Failure|Expected|Which is|Value of|memcmp' "$W/t_$f.log" | head -150; } >> "$OUT/tests.log"; done
for f in $TL; do say "$f | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[attn13\].*(9B|level 1|default|growing)|Failure|Expected|Which is" "$W/t_attnring_def.log" | cut -c1-200 | head -40 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 90 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
CBL=$LIM
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $CBL ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; local r=$?; local ms=$(grep -E '^decode' $OUT/cb.log | tail -1 | sed -E 's/.*\(([0-9.]+) ms per step.*/\1/'); echo "$ms $name" >> "$W/ms.txt"; say "cb $name rc=$r $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^attention' $OUT/cb.log | tail -1 | cut -c1-80)"; }
declare -A FORM=([base]="DS_ATTN_LONG=0" [minb5]="DS_ATTN_MINB=5" [long64]="DS_ATTN_LONG=64" [long128]="DS_ATTN_LONG=128" [long64minb5]="DS_ATTN_LONG=64 DS_ATTN_MINB=5" [long128minb5]="DS_ATTN_LONG=128 DS_ATTN_MINB=5")
BEST=long64
if [ -e "$W/m9B.ok" ]; then
  P512="--batch 64 --prompt 512 --ctx 1024 --breakdown"
  for f in base minb5 long64 long128 long64minb5; do cb "64p512 $f a" "${FORM[$f]}" $P512; done
  cb "64p512 base b" "${FORM[base]}" $P512
  BEST=$(grep -v base "$W/ms.txt" | grep -E '^[0-9.]+ ' | sort -n | head -1 | awk '{print $3}'); BEST=${BEST:-long64}
  say "best new form at 64 x 512+: $BEST"
fi
if [ $(el) -lt $LIM ]; then
  env DS_ATTN_BENCH=2 timeout 40 "$TM" --gtest_filter='AttnBench.Time' > "$W/ab.log" 2>&1 < /dev/null; say "bench rc=$?"
  grep -E "^\[attn17\]" "$W/ab.log" | tee -a "$OUT/steps.log" >> "$OUT/bench.log"
else say "skip bench"; fi
CBL=$((LIM + 25))
if [ -e "$W/m9B.ok" ]; then
  cb "64 short base" "${FORM[base]}" --batch 64 --breakdown; cb "64 short $BEST" "${FORM[$BEST]}" --batch 64 --breakdown
  cb "32 p512 base" "${FORM[base]}" --batch 32 --prompt 512 --ctx 1024 --breakdown
  cb "32 p512 $BEST" "${FORM[$BEST]}" --batch 32 --prompt 512 --ctx 1024 --breakdown
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(el) -lt $((LIM + 35)) ]; then
  say "== ncu (forms in kForms order: base, minb5, long64, long128, long64 minb5, long128 minb5)"
  env DS_ATTN_BENCH=2 timeout 40 "$NCU" --clock-control none -k 'regex:attn_(ring_kernel|combine)' -c 12 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,sm__ctas_launched.sum \
    "$TM" --gtest_filter='AttnBench.Profile' > "$OUT/ncu.txt" 2>&1 < /dev/null; say "ncu rc=$?"
  grep -E "attn_|Duration|DRAM Throughput|dram__|Achieved Occupancy|Block Limit|Registers Per|Warp Cycles Per Issued|Issue Slots|inst_executed|ctas_launched|Dynamic Shared|Driver Shared" "$OUT/ncu.txt" | cut -c1-150 | head -140 | tee -a "$OUT/steps.log"
else say "skip ncu"; fi
if [ -e "$W/m9B.ok" ]; then
  if [ $(el) -lt $((LIM + 45)) ]; then
    say "== tg128 9B base"; timeout 30 "$X" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 2 > "$W/tg.log" 2>&1 < /dev/null
    say "tg128 base rc=$? $(grep -E 'tg128' $W/tg.log | tail -1 | cut -c1-200)"; cat "$W/tg.log" >> "$OUT/tg.log"
  else say "skip tg128"; fi
else say "no 9B model"; fi
wait
say done

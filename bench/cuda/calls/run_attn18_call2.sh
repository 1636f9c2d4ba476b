#!/bin/bash
# attn18 device call 2: three same-bits switches (DS_ATTN_PAIR=1 ring kernel two rows at a time, DS_ATTN_EVICT=1
# cached rows with L2 evict_first, DS_ATTN_CMB=1 the combine's A loaded before its weights) vs the defaults.
# Run from the ignored devwork-attn18/ in /work/main (b.tar.xz = tools/gpu_bundle.sh output) as
# LIM=92 OUT=$OUT bash devwork-attn18/go.sh. Steps under `timeout`, later ones skipped past LIM seconds:
#   A. beside the 9B synth: AttnRing.* default and ALL (every switch; "[attn18 bits]" hashes compared between the
#      two runs); test_cuda_model --gtest_brief=1 ALL; test_cuda_prefill ALL; CudaOps attention ALL; memcheck and
#      racecheck of AttnRing.SameBitsSmallShapes (+ EmptySplitsSkipped for memcheck) ALL;
#   B. AttnBench.StepShape (B = 64 at 512-639 positions) per form; C. cuda-bench 9B B = 64 --prompt 512 --ctx 1024
#      base / all / pair / evict+cmb / base / all; D. ncu (warp states) of the ring kernel base vs pair.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsattn18; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-92}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ALL="DS_ATTN_PAIR=1 DS_ATTN_EVICT=1 DS_ATTN_CMB=1"
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
P=()
t attnring_def timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t attnring_all $ALL timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t model_all $ALL timeout 60 "$TM" --gtest_brief=1 & P+=($!)
t prefill_all $ALL timeout 50 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
[ -x "$B/test_cuda" ] && { t cudaops_all $ALL timeout 50 "$B/test_cuda" --gtest_filter='CudaOps.*Attention*' & P+=($!); }
t memcheck_all $ALL timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes:AttnRing.EmptySplitsSkipped' & P+=($!)
t racecheck_all $ALL timeout 60 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
wait "${P[@]}"
TL="attnring_def attnring_all model_all prefill_all cudaops_all memcheck_all racecheck_all"
for f in $TL; do [ -e "$W/t_$f.log" ] || continue; { head -3 "$W/t_$f.log"; grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SKIPPED \]|^\[attn1[38]\]|Failure|Expected|Which is|Value of|memcmp' "$W/t_$f.log" | head -150; } >> "$OUT/tests.log"; done
for f in $TL; do [ -e "$W/t_$f.log" ] && say "$f | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[attn18 bits\]" "$W/t_attnring_def.log" > "$W/bits_def.txt"; grep -E "^\[attn18 bits\]" "$W/t_attnring_all.log" > "$W/bits_all.txt"
say "bits lines def $(wc -l < $W/bits_def.txt) all $(wc -l < $W/bits_all.txt); diff lines: $(diff $W/bits_def.txt $W/bits_all.txt | wc -l)"
diff "$W/bits_def.txt" "$W/bits_all.txt" | head -20 | tee -a "$OUT/steps.log"
grep -E "^\[attn13\].*(9B|growing)|Failure|Expected|Which is" "$W/t_attnring_all.log" | cut -c1-200 | head -24 | tee -a "$OUT/steps.log"
declare -A FORM=([base]="DS_ATTN_PAIR=0" [all]="$ALL" [pair]="DS_ATTN_PAIR=1" [evict]="DS_ATTN_EVICT=1" [cmb]="DS_ATTN_CMB=1" [evictcmb]="DS_ATTN_EVICT=1 DS_ATTN_CMB=1")
for f in base pair evict cmb all; do
  [ $(el) -lt $((LIM - 30)) ] || { say "skip StepShape $f"; continue; }
  env ${FORM[$f]} DS_ATTN_BENCH=1 timeout 20 "$TM" --gtest_filter='AttnBench.StepShape' > "$W/ss_$f.log" 2>&1 < /dev/null
  say "StepShape $f rc=$? | $(grep -E '^\[attn18\]' $W/ss_$f.log | sed -E 's/.*step shape //' | tr -s ' ' | tr '\n' ';')"
done
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 70 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; local r=$?; say "cb $name rc=$r $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^attention' $OUT/cb.log | tail -1 | cut -c1-80)"; }
if [ -e "$W/m9B.ok" ]; then
  P512="--batch 64 --prompt 512 --ctx 1024 --breakdown"
  for f in base all pair evictcmb; do cb "64p512 $f a" "${FORM[$f]}" $P512; done
  cb "64p512 all b" "${FORM[all]}" $P512; cb "64p512 base b" "${FORM[base]}" $P512
else say "no 9B model"; fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for f in base pair; do
  [ $(el) -lt $((LIM + 5)) ] || { say "skip ncu $f"; continue; }
  env ${FORM[$f]} DS_ATTN_BENCH=1 timeout 25 "$NCU" --clock-control none -k 'regex:attn_ring_kernel' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics 'smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    "$TM" --gtest_filter='AttnBench.StepShape' > "$OUT/ncu_$f.txt" 2>&1 < /dev/null; r=$?; say "ncu $f rc=$r"
  [ $r -eq 0 ] || { env ${FORM[$f]} DS_ATTN_BENCH=1 timeout 25 "$NCU" --clock-control none -k 'regex:attn_ring_kernel' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy "$TM" --gtest_filter='AttnBench.StepShape' > "$OUT/ncu_$f.txt" 2>&1 < /dev/null; say "ncu (sections only) $f rc=$?"; }
  grep -A3 -E "CPIStall|stalled waiting|Stall" "$OUT/ncu_$f.txt" | cut -c1-240 | head -12 | tee -a "$OUT/steps.log"
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|inst_executed|stalled" "$OUT/ncu_$f.txt" | awk '!/stalled/ || $NF+0 >= 0.1' | cut -c1-160 | head -40 | tee -a "$OUT/steps.log"
done
wait
say done

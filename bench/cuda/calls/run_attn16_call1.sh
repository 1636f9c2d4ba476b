#!/bin/bash
# attn16 device call 1 (the only one): DS_ATTN_EXP2=1 (attn16's form of the decode attention kernels) vs the form
# before (default in this binary), and DS_ATTN_MINB=5 (the new ring kernel at <= 96 registers, 5 blocks per SM).
# Run from the ignored devwork-attn16/ in /work/main (b.tar.xz = tools/gpu_bundle.sh output) as
# LIM=140 OUT=$OUT bash devwork-attn16/go.sh. Steps under `timeout`, later ones skipped once LIM seconds have passed:
#   A. in parallel beside the 9B synth: AttnRing.* old / new / new + MINB 5; test_cuda_model --gtest_brief=1 old and
#      new; test_cuda_prefill --gtest_brief=1 old and new; compute-sanitizer memcheck and racecheck of
#      AttnRing.SameBitsSmallShapes with the new form (MINB 1 and 5); SASS of the 9B ring kernels (cuobjdump, CPU);
#   B. cuda-bench 9B B = 64 --prompt 512 --ctx 1024 new / old / new5, two rounds in opposite orders;
#   C. AttnBench.Time (DS_ATTN_BENCH=2: register loop pf2 and ring 4) old / new / new5;
#   D. cuda-bench B = 64 short and B = 32 --prompt 512 --ctx 1024, new / old / new5; E. tg128 9B new / old;
#   F. ncu of AttnBench.Profile's ring / combine kernels new / old / new5.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsattn16; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-140}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
COD=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 40 "$COD" -sass "$TM" 2>/dev/null | awk '/Function : /{p = ($0 ~ /attn_ring_kernelILi8ELi4ELi4ELb/)} p' > "$OUT/sass_ring.txt"; echo "[$(el)s] sass done" >> "$OUT/steps.log" ) &
NEW="DS_ATTN_EXP2=1"; OLD="DS_ATTN_EXP2=0"; NEW5="DS_ATTN_EXP2=1 DS_ATTN_MINB=5"
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
P=()
t attnring_old $OLD timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t attnring_new $NEW timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t attnring_new5 $NEW5 timeout 50 "$TM" --gtest_filter='AttnRing.*' & P+=($!)
t model_old $OLD timeout 70 "$TM" --gtest_brief=1 & P+=($!)
t model_new $NEW timeout 70 "$TM" --gtest_brief=1 & P+=($!)
t prefill_old $OLD timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
t prefill_new $NEW timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
t memcheck_new $NEW timeout 70 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
t racecheck_new $NEW timeout 70 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
t memcheck_new5 $NEW5 timeout 70 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
t racecheck_new5 $NEW5 timeout 70 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P+=($!)
wait "${P[@]}"
for f in "$W"/t_*.log; do { head -3 "$f"; grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SKIPPED \]|^\[attn1|Failure|Expected|Which is|Value of|memcmp' "$f" | head -120; } >> "$OUT/tests.log"; done
for f in attnring_old attnring_new attnring_new5 model_old model_new prefill_old prefill_new memcheck_new racecheck_new memcheck_new5 racecheck_new5; do say "$f | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[attn13\].*(9B|level 1|default|growing)|Failure|Expected|Which is" "$W/t_attnring_new.log" | cut -c1-200 | head -30 | tee -a "$OUT/steps.log"
grep -E "^\[attn13\].*(9B|growing)" "$W/t_attnring_old.log" | grep -E "pf2|ring4 |level" | cut -c1-200 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 90 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^attention' $OUT/cb.log | tail -1 | cut -c1-80)"; }
ab() { local name=$1 e=$2; [ $(el) -lt $LIM ] || { say "skip bench $name"; return; }; env $e DS_ATTN_BENCH=2 timeout 30 "$TM" --gtest_filter='AttnBench.Time' > "$W/ab_$name.log" 2>&1 < /dev/null; say "bench $name rc=$?"; grep -E "^\[attn13\]" "$W/ab_$name.log" | sed "s/^/$name /" | tee -a "$OUT/steps.log" >> "$OUT/bench.log"; }
if [ -e "$W/m9B.ok" ]; then
  P512="--batch 64 --prompt 512 --ctx 1024 --breakdown"
  cb "64 p512 new a" "$NEW" $P512; cb "64 p512 old a" "$OLD" $P512; cb "64 p512 new5 a" "$NEW5" $P512
  cb "64 p512 new5 b" "$NEW5" $P512; cb "64 p512 old b" "$OLD" $P512; cb "64 p512 new b" "$NEW" $P512
fi
ab old "$OLD"; ab new "$NEW"; ab new5 "$NEW5"
if [ -e "$W/m9B.ok" ]; then
  cb "64 short new" "$NEW" --batch 64 --breakdown; cb "64 short old" "$OLD" --batch 64 --breakdown; cb "64 short new5" "$NEW5" --batch 64 --breakdown
  cb "32 p512 new" "$NEW" --batch 32 --prompt 512 --ctx 1024 --breakdown; cb "32 p512 old" "$OLD" --batch 32 --prompt 512 --ctx 1024 --breakdown
  cb "32 p512 new5" "$NEW5" --batch 32 --prompt 512 --ctx 1024 --breakdown
  for f in new old; do
    if [ $(el) -lt $((LIM + 5)) ]; then
      [ $f = new ] && e="$NEW" || e="$OLD"
      say "== tg128 9B $f"; env $e timeout 30 "$X" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 3 > "$W/tg_$f.log" 2>&1 < /dev/null
      say "tg128 $f rc=$? $(grep -E 'tg128' $W/tg_$f.log | tail -1 | cut -c1-200)"; cat "$W/tg_$f.log" >> "$OUT/tg.log"
    else say "skip tg128 $f"; fi
  done
else say "no 9B model"; fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for f in new old new5; do
  if [ $(el) -lt $((LIM + 10)) ]; then
    [ $f = new ] && e="$NEW"; [ $f = old ] && e="$OLD"; [ $f = new5 ] && e="$NEW5"
    say "== ncu $f"
    env $e DS_ATTN_BENCH=1 timeout 20 "$NCU" --clock-control none -k 'regex:attn_(ring_kernel|combine)' -s 4 -c 4 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
      --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
      "$TM" --gtest_filter='AttnBench.Profile' > "$OUT/ncu_$f.txt" 2>&1 < /dev/null; say "ncu $f rc=$?"
    grep -E "attn_|Duration|DRAM Throughput|dram__|Achieved Occupancy|Block Limit|Registers Per|Warp Cycles Per Issued|Executed Ipc|Issue Slots|inst_executed|Dynamic Shared" "$OUT/ncu_$f.txt" | cut -c1-150 | head -60 | tee -a "$OUT/steps.log"
  else say "skip ncu $f"; fi
done
wait
say done

#!/bin/bash
# attn15 device call 1 (the only one): attn_seq_kernel (one block per (kv head, token) over all splits, partials
# merged in shared memory) vs the ring + combine kernels. Run from the ignored devwork-attn15/ in /work/main
# (b.tar.xz = tools/gpu_bundle.sh output) as OUT=$OUT bash devwork-attn15/go.sh. Steps, each under `timeout`, the
# later ones skipped once LIM seconds have passed (cap 250 s of device time with the cold start):
#   1. in parallel (GPU tests beside the 9B synth): AttnRing.* (every variant's bits, float64, alone vs batch),
#      test_cuda_model --gtest_brief=1 and test_cuda_prefill --gtest_brief=1 with the defaults (seq at B = 64),
#      memcheck and racecheck of AttnRing.SameBitsSmallShapes (every variant, the seq kernel too); the model and
#      prefill tests again with DS_ATTN_RING=4 DS_ATTN_SEQ=1 (the seq kernel at every batch);
#   2. AttnBench.Time (kernel A/B: split kernels vs seq at B 64 / 56 / 48 / 32 / 8 / 1, mixed contexts, 27B heads);
#   3. cuda-bench 9B at B = 64 --prompt 512 --ctx 1024 new / old (DS_ATTN_SEQ=0) interleaved, B = 64 short,
#      B = 8 --prompt 512 --ctx 1024; 4. tg128 of the 9B; 5. ncu of AttnBench.Profile's ring / seq / combine kernels.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsattn15; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-130}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
t attnring timeout 40 "$TM" --gtest_filter='AttnRing.*' & P1=$!
t model timeout 60 "$TM" --gtest_brief=1 & P2=$!
t prefill timeout 50 "$B/test_cuda_prefill" --gtest_brief=1 & P3=$!
t memcheck timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P4=$!
t racecheck timeout 60 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes' & P5=$!
t model_seq DS_ATTN_RING=4 DS_ATTN_SEQ=1 timeout 60 "$TM" --gtest_brief=1 & P6=$!
t prefill_seq DS_ATTN_RING=4 DS_ATTN_SEQ=1 timeout 50 "$B/test_cuda_prefill" --gtest_brief=1 & P7=$!
wait $P1 $P2 $P3 $P4 $P5 $P6 $P7
cat "$W"/t_*.log > "$OUT/tests.log"
for f in attnring model prefill model_seq prefill_seq memcheck racecheck; do say "$(head -1 $W/t_$f.log | cut -c1-70) | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[attn13\].*(9B|level 1|default)|Failure|Expected|Which is|memcmp" "$W/t_attnring.log" | cut -c1-200 | head -30 | tee -a "$OUT/steps.log"
say "== AttnBench.Time"
DS_ATTN_BENCH=1 timeout 45 "$TM" --gtest_filter='AttnBench.Time' > "$OUT/bench.log" 2>&1 < /dev/null; say "bench rc=$?"
grep -E "^\[attn1[35]\]" "$OUT/bench.log" | grep -E "attn15|ring4|seq|pf2" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 90 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^attention' $OUT/cb.log | tail -1 | cut -c1-80)"; }
if [ -e "$W/m9B.ok" ]; then
  for r in a b; do
    cb "64 p512 new $r" "DS_ATTN_SEQ_UNSET=1" --batch 64 --prompt 512 --ctx 1024 --breakdown
    cb "64 p512 old $r" "DS_ATTN_SEQ=0" --batch 64 --prompt 512 --ctx 1024 --breakdown
  done
  cb "64 short new" "DS_ATTN_SEQ_UNSET=1" --batch 64 --breakdown
  cb "64 short old" "DS_ATTN_SEQ=0" --batch 64 --breakdown
  cb "8 p512 new" "DS_ATTN_SEQ_UNSET=1" --batch 8 --prompt 512 --ctx 1024 --breakdown
  cb "8 p512 old" "DS_ATTN_SEQ=0" --batch 8 --prompt 512 --ctx 1024 --breakdown
  if [ $(el) -lt $((LIM + 5)) ]; then
    say "== tg128 9B"; timeout 30 "$X" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 3 > "$OUT/tg.log" 2>&1 < /dev/null
    say "tg128 rc=$? $(grep -E 'tg128|tok/s' $OUT/tg.log | tail -2 | tr '\n' ' ' | cut -c1-200)"
  else say "skip tg128"; fi
else say "no 9B model"; fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(el) -lt $((LIM + 10)) ]; then
  say "== ncu"
  DS_ATTN_BENCH=1 timeout 30 "$NCU" --clock-control none -k 'regex:attn_(ring_kernel|seq_kernel|combine)' -c 8 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$TM" --gtest_filter='AttnBench.Profile' > "$OUT/ncu.txt" 2>&1 < /dev/null; say "ncu rc=$?"
  grep -E "attn_|Duration|DRAM Throughput|dram__|Achieved Occupancy|Block Limit Shared|Registers Per|Stall Long|Warp Cycles Per Issued|Dynamic Shared" "$OUT/ncu.txt" | cut -c1-150 | head -90 | tee -a "$OUT/steps.log"
else say "skip ncu"; fi
say done

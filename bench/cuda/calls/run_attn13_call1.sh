#!/bin/bash
# attn13 call 1 (issue 7: decode attention at serving contexts). Carried as devwork-attn13/ (b.tar.xz =
# tools/gpu_bundle.sh output; this script as go.sh). Run as `OUT=$OUT bash devwork-attn13/go.sh`. Steps, each
# under `timeout`, skipped once LIM seconds have passed (the cap is 250 s of device time with the cold start):
#   1. AttnRing.* (bits of every loader vs the register loop and float64, alone vs batch), AttnBench.Time;
#   2. test_cuda_model with DS_ATTN_RING=4, test_cuda_prefill with it (test_cuda left out: the carry limit);
#   3. cuda-bench 9B B = 64 at --prompt 512 --ctx 1024 (default, DS_ATTN_RING=4, + DS_ATTN_FUSED=1) and --prompt 0;
#   4. compute-sanitizer memcheck + racecheck on AttnRing.SameBitsSmallShapes; test_cuda_model default;
#   5. ncu of AttnBench.Profile's kernels; the SASS of the two partial kernels at hd 256, G 4.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-105}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return; }; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
step "AttnRing.*" 20 "$OUT/tests.log" "$TM" --gtest_filter='AttnRing.*'
grep -E "^\[attn13\]|FAILED|PASSED" "$OUT/tests.log" | grep -E "9B|FAILED|PASSED|same bits" | cut -c1-160 | head -20 | tee -a "$OUT/steps.log"
step "AttnBench.Time" 25 "$OUT/bench.log" env DS_ATTN_BENCH=1 "$TM" --gtest_filter='AttnBench.Time'
grep "^\[attn13\]" "$OUT/bench.log" | tee -a "$OUT/steps.log"
step "test_cuda_model DS_ATTN_RING=4" 30 "$OUT/tests.log" env DS_ATTN_RING=4 "$TM" --gtest_brief=1
step "test_cuda_prefill DS_ATTN_RING=4" 25 "$OUT/tests.log" env DS_ATTN_RING=4 "$B/test_cuda_prefill" --gtest_brief=1
grep -E "FAILED|PASSED|tests ran|SKIPPED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
if [ -e "$W/m9B.ok" ]; then
  C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 1 --select 0 --json $OUT/cb.jsonl"
  step "cb64 p512 ctx1024 default" 20 "$OUT/cb.log" $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 4
  step "cb64 p512 ctx1024 DS_ATTN_RING=4" 20 "$OUT/cb.log" env DS_ATTN_RING=4 $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 4
  step "cb64 p0 DS_ATTN_RING=4" 15 "$OUT/cb.log" env DS_ATTN_RING=4 $C --batch 64 --breakdown --top 4
  step "cb64 p0 default" 15 "$OUT/cb.log" $C --batch 64 --breakdown --top 4
  step "cb64 p512 ctx1024 DS_ATTN_RING=4 DS_ATTN_FUSED=1" 20 "$OUT/cb.log" env DS_ATTN_RING=4 DS_ATTN_FUSED=1 $C --batch 64 --prompt 512 --ctx 1024 --breakdown --top 4
  grep -E "^==== |^decode|^attention" "$OUT/cb.log" | tee -a "$OUT/steps.log"
else say "no 9B model"; fi
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step "memcheck AttnRing.SameBitsSmallShapes (ring 4 env)" 25 "$OUT/san.log" env DS_ATTN_RING=4 "$CS" --tool memcheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes'
step "racecheck AttnRing.SameBitsSmallShapes" 25 "$OUT/san.log" "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='AttnRing.SameBitsSmallShapes'
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED" "$OUT/san.log" | tee -a "$OUT/steps.log"
step "test_cuda_model default" 30 "$OUT/tests.log" "$TM" --gtest_brief=1
tail -3 "$OUT/tests.log" | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step "ncu AttnBench.Profile" 30 "$OUT/ncu.txt" env DS_ATTN_BENCH=1 "$NCU" --clock-control none -k regex:attn_ -c 11 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --metrics dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__warps_active.avg.per_cycle_active \
  "$TM" --gtest_filter='AttnBench.Profile'
grep -E "attn_|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Stall Long|dram__bytes|Warp Cycles Per Issued" "$OUT/ncu.txt" | cut -c1-150 | head -80 | tee -a "$OUT/steps.log"
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 10 "$CO" -sass "$TM" 2>/dev/null | awk '/Function : .*attn_(partial|ring)_kernelILi8ELi4ELi[24]E/{p=1} /Function : /&&!/attn_(partial|ring)_kernelILi8ELi4ELi[24]E/{p=0} p' > "$OUT/sass.txt"
say "sass $(wc -l < $OUT/sass.txt) lines"
say done

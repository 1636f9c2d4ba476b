#!/bin/bash
# conv14 device call 1 (the only one): conv_warp_kernel (DS_CONV_WARP=1 / 2 / 4 sequences per warp) vs conv_kernel.
# ConvStep.* (all variants' bits equal, float64), test_cuda_model and test_cuda_prefill with DS_CONV_WARP=1 (and the
# model tests with =2), memcheck of ConvStep.*, ConvStep.Bench (kernel A/B at B = 16 / 32 / 64), the 9B step at
# B = 64 / 16 old vs new interleaved, ncu of one launch of conv_kernel<1> / conv_warp_kernel<4,4,1> at B = 64.
# Run from the ignored devwork-conv14/ in /work/main (b.tar.xz = gpu_bundle output) as OUT=$OUT bash devwork-conv14/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsconv14; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
LIM=${LIM:-80}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1; shift; echo "==== $name $*" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
t convstep timeout 40 "$TM" --gtest_filter='ConvStep.*:GdnStep.*' & P1=$!
t model_w1 DS_CONV_WARP=1 timeout 50 "$TM" --gtest_brief=1 --gtest_filter='-GdnBench.*' & P2=$!
t model_w2 DS_CONV_WARP=2 timeout 50 "$TM" --gtest_brief=1 --gtest_filter='-GdnBench.*' & P3=$!
t prefill_w1 DS_CONV_WARP=1 timeout 50 "$B/test_cuda_prefill" --gtest_brief=1 & P4=$!
t memcheck timeout 50 "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='ConvStep.*' & P5=$!
wait $P1 $P2 $P3 $P4 $P5
cat "$W"/t_*.log > "$OUT/tests.log"
for f in convstep model_w1 model_w2 prefill_w1 memcheck; do say "$(head -1 $W/t_$f.log | cut -c1-60) | $(grep -E '^rc|tests? ran|PASSED|FAILED|ERROR SUMMARY' $W/t_$f.log | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[gdn11\] conv|Failure|Expected|Which is" "$W/t_convstep.log" | head -20 | tee -a "$OUT/steps.log"
DS_CONV_BENCH=1 timeout 20 "$TM" --gtest_filter='ConvStep.Bench' > "$W/bench1.log" 2>&1 < /dev/null; say "bench rc=$?"
DS_CONV_BENCH=1 timeout 20 "$TM" --gtest_filter='ConvStep.Bench' > "$W/bench2.log" 2>&1 < /dev/null; say "bench2 rc=$?"
grep -h "^\[conv14\]" "$W/bench1.log" "$W/bench2.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 50 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 20 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-75) | $(grep -E '^conv' $W/cb.log | tail -1)"; }
for r in a b; do
  cb "64 old $r" "DS_CONV_WARP=0" --batch 64 --breakdown
  cb "64 w1 $r" "DS_CONV_WARP=1" --batch 64 --breakdown
  cb "64 w2 $r" "DS_CONV_WARP=2" --batch 64 --breakdown
done
cb "16 old" "DS_CONV_WARP=0" --batch 16 --breakdown
cb "16 w1" "DS_CONV_WARP=1" --batch 16 --breakdown
cb "64 w4" "DS_CONV_WARP=4" --batch 64 --breakdown
cb "16 w2" "DS_CONV_WARP=2" --batch 16 --breakdown
grep -E "^(====|decode|gdn|conv|total)" $W/cb.log > $OUT/cb_summary.txt
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for k in conv_kernel conv_warp_kernel; do
  [ $(el) -lt 78 ] || { say "skip ncu $k"; continue; }
  DS_CONV_BENCH=64 timeout 10 "$NCU" --clock-control none --launch-skip 5 --launch-count 1 -k regex:$k "$TM" --gtest_filter='ConvStep.Bench' > "$OUT/ncu_$k.txt" 2>&1; say "ncu $k rc=$?"
  grep -E "conv_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Waves Per SM" "$OUT/ncu_$k.txt" | head -12 | tee -a "$OUT/steps.log"
done
cd $W && tar czf "$OUT/all.tgz" *.log 2>/dev/null
say done

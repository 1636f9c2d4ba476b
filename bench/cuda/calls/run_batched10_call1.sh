#!/bin/bash
# batched10 device call 1 (binaries of ab76833): split-K reduction A/B (DS_MVB_RED 1 vs 0) in the 9B step at B 64 / 32 /
# 25, the new SplitReduceSameBits test, the default-config batched tests and test_cuda_model, SASS of the block kernels,
# ncu with SourceCounters (stall sampling per SASS line) of the first two wgb::block_kernel launches after 20.
# Run from an ignored devwork-batched10/ in /work/main (b.tar.xz = tools/gpu_bundle.sh output) as OUT=$OUT bash go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsb10; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-230}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
[ -e "$W/m9B.ok" ] || ( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
( timeout 120 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.SplitReduceSameBits' > "$OUT/t_red.log" 2>&1 < /dev/null; echo "rc $?" >> "$OUT/t_red.log" ) &
TP1=$!
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 100 ]; do sleep 1; done
wait $TP1
say "split test: $(grep -E 'PASSED|FAILED|^rc' $OUT/t_red.log | tr '\n' ' ')"
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-90)"; }
cb "64 red1" "DS_MVB_RED=1" --batch 64 --breakdown --top 12
cb "64 red0" "DS_MVB_RED=0" --batch 64 --breakdown --top 12
cb "32 red1" "DS_MVB_RED=1" --batch 32 --breakdown --top 4
cb "32 red0" "DS_MVB_RED=0" --batch 32 --breakdown --top 4
cb "25 red1" "DS_MVB_RED=1" --batch 25
cb "25 red0" "DS_MVB_RED=0" --batch 25
cb "64 red1 again" "DS_MVB_RED=1" --batch 64
cb "64 red0 again" "DS_MVB_RED=0" --batch 64
( cd "$OUT" && grep -E "^(====|decode|matvec|gdn|total|rms|swiglu|conv)" cb.log > cb_summary.txt )
( DS_TEST_MVB_WG=-1 timeout 70 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*-*SplitReduce*' > "$OUT/t_def.log" 2>&1 < /dev/null; echo "rc $?" >> "$OUT/t_def.log" ) &
( timeout 70 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$OUT/t_model.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 60 "$CO" -sass "$X" 2>/dev/null | awk '/Function : .*block_kernel/ {p=1} /Function : / && !/block_kernel/ {p=0} p' > "$OUT/sass_block.txt"
say "sass lines $(wc -l < $OUT/sass_block.txt)"
wait
say "tests: $(grep -hE 'PASSED|FAILED|^rc' $OUT/t_def.log $OUT/t_model.log | tr '\n' ' ')"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ $(el) -lt $LIM ]; then
  say "== ncu"
  DS_MVB_RED=1 timeout 90 "$NCU" --clock-control none --kernel-name-base demangled -k "regex:wgb::block_kernel" --launch-skip 20 --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --import-source no \
    --metrics sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_elapsed.max,smsp__pcsamp_sample_count \
    --graph-profiling node -o "$OUT/rep" -f "$X" cuda-bench -m "$W/m9B.gguf" --tg 2 --reps 1 --batch 64 --select 0 > "$OUT/ncu_run.txt" 2>&1
  say "ncu rc=$?"
  timeout 30 "$NCU" -i "$OUT/rep.ncu-rep" --page details --print-details all > "$OUT/ncu_details.txt" 2>&1
  timeout 30 "$NCU" -i "$OUT/rep.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_source.csv" 2>&1
  say "ncu pages rc=$? $(wc -c < $OUT/ncu_source.csv)"
fi
cd "$OUT" && tar czf all.tgz *.log *.txt *.csv 2>/dev/null; ls -la "$OUT"
say done

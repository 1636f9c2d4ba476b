#!/bin/bash
# gdn11 device call 2: gdn_tma_kernel's register-store form (DS_GDN_TMA_STORE=reg, the new default) and conv_kernel
# with 2 / 4 sequences per block (DS_CONV_SEQS, ConvStep.*) through the
# bit-equality tests, test_cuda_model (default, and tma at every batch), test_cuda_prefill, then GdnBench.Time for
# reg vs bulk stores. LONG=1 (only when the machine is already warm): the 9B cuda-bench B = 64 / 16 and memcheck +
# racecheck as well. Run from an ignored devwork-gdn11/ in /work/main (b.tar.xz + this file as go.sh) as
# OUT=$OUT bash devwork-gdn11/go.sh.
# (Record of what ran at 3cb586d: DS_GDN_TMA_STORE was removed afterwards, the register-store form having lost.)
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsg11; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
END=${END:-40}; LONG=${LONG:-0}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
left() { local l=$1 rem=$((END - $(el))); [ $rem -lt $l ] && l=$rem; echo $l; }
"$X" --version 2>&1 | head -1 | tee -a "$OUT/steps.log"
if [ "$LONG" = 1 ]; then
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
  ( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
fi
t() { local name=$1; shift; echo "==== $name" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
t gdnstep timeout 40 "$TM" --gtest_filter='GdnStep.*:ConvStep.*' & P0=$!
t model_default timeout 40 "$TM" --gtest_brief=1 --gtest_filter='-Gdn*' & P1=$!
t model_tma_min1_conv4 DS_GDN_TMA_MIN=1 DS_CONV_SEQS=4 timeout 40 "$TM" --gtest_brief=1 --gtest_filter='-Gdn*' & P2=$!
t prefill timeout 40 "$B/test_cuda_prefill" --gtest_brief=1 & P3=$!
wait $P0 $P1 $P2 $P3
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do say "$(head -1 $f) $(grep -E '^rc|tests ran|PASSED|FAILED' $f | tr '\n' ' ' | cut -c1-300)"; done
grep -E "^\[gdn11\]|Failure|Expected|Which is" "$W/t_gdnstep.log" | head -20 | tee -a "$OUT/steps.log"
for v in reg bulk; do
  echo "==== DS_GDN_TMA_STORE=$v" >> "$OUT/gdn.log"
  DS_GDN_TMA_STORE=$v DS_GDN_BENCH=1 timeout $(left 15) "$TM" --gtest_filter='GdnBench.Time' >> "$OUT/gdn.log" 2>&1 < /dev/null; say "bench $v rc=$?"
  grep -A60 "DS_GDN_TMA_STORE=$v" "$OUT/gdn.log" | grep -E "^\[gdn11\] B" | sed "s/^/$v /" | tee -a "$OUT/steps.log"
done
if [ "$LONG" = 1 ]; then
  while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 45 ]; do sleep 1; done
  cb() { local name=$1 e=$2 b=$3; local l=$(left 20); [ $l -gt 5 ] || { say "skip $name"; return; }
    echo "==== $name ($e, batch $b)" >> "$OUT/cb.log"; env $e timeout $l "$X" cuda-bench -m "$W/m9B.gguf" --batch $b --tg 32 --reps 2 --select 0 --breakdown --top 8 >> "$OUT/cb.log" 2>&1 < /dev/null
    say "cb $name rc=$? | $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^gdn rule' $OUT/cb.log | tail -1)"; }
  cb "B64 reg" DS_DEFAULT=1 64; cb "B64 bulk" DS_GDN_TMA_STORE=bulk 64; cb "B64 reg conv4" DS_CONV_SEQS=4 64
  cb "B64 reg conv2" DS_CONV_SEQS=2 64; cb "B16 reg" DS_DEFAULT=1 16; cb "B64 old" DS_GDN_TMA=0 64
  grep -E "^====|^decode|^gdn rule|^conv" "$OUT/cb.log" | tee -a "$OUT/steps.log"
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  DS_GDN_TMA_MIN=1 timeout $(left 30) "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone:GdnStep.KernelsGiveSameBitsMultiToken' > "$OUT/san.log" 2>&1
  say "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $OUT/san.log | tail -1)"
  DS_GDN_TMA_MIN=1 timeout $(left 60) "$CS" --tool racecheck --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone' >> "$OUT/san.log" 2>&1
  say "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $OUT/san.log | tail -1)"
fi
say done

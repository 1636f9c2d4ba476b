#!/bin/bash
# clean20 call 1 (H200): four same-bits clean-ups (gdn_conv_kernel<DK, KC, kS> merged with the split kernel, one sreg<>
# helper in matvec_wgmma_block.cuh, the Q6_K item's one code form, the stream tests' shared inputs).
# Phase A (with the model syntheses): test_cuda_model --gtest_brief=1; GdnConvStep.* + GdnStep.* verbose; racecheck /
# memcheck of GdnConvStep.FusedGivesSameBits; test_cuda StreamQ6KLeanSameBits + StreamQ6KVariants + StreamXoneSameBits
# (3 shards), StreamQ4KVariants (2 shards), BlockLeanSameBits + BlockBuildFastSameBits + TensorCoreQ4KVariants; the SASS of
# gdn_conv / block_kernel / mvq6::kernel<true> in both binaries (sass_cmp.py). Phase B (one at a time): tg128 0.8B and 9B, the
# baseline binary (main a0fb389, deltaserve.old) and the new one interleaved old new old new.
# Lives in /work/main/devwork-clean20/ as go.sh beside b.tar.xz (tools/gpu_bundle.sh of branch clean20 plus
# gpu-bundle/deltaserve.old = devwork-v16's deltaserve, f71829f: a0fb389's code) and sass_cmp.py
# (bench/cuda/calls/clean20_sass_cmp.py). PREPARED, NOT RUN: the device was paused for all of session 17.
# Run as: cd devwork-clean20 && OUT=$OUT timeout 100 bash go.sh   (timeout_s 110; ~60 s wall expected)
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_clean20; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; XO=$B/deltaserve.old; TM=$B/test_cuda_model; TC=$B/test_cuda; LIM=${LIM:-75}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"; "$XO" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 0.8B ) &
( syn 9B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( nice python3 "$D/sass_cmp.py" "$CO" "$XO" "$X" gdn_conv block_kernel mvq66kernel > "$OUT/sass.txt" 2>&1; echo "[$(el)s] sass compared" >> "$OUT/steps.log" ) &
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
SF='CudaMatvec.StreamQ6KLeanSameBits:CudaMatvec.StreamQ6KVariants:CudaMatvec.StreamXoneSameBits'
t model 60 DS_X=0 "$TM" --gtest_brief=1 & P+=($!)
t gdn 60 DS_X=0 "$TM" --gtest_filter='GdnConvStep.*:GdnStep.*' & P+=($!)
t race 60 DS_X=0 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.FusedGivesSameBits' & P+=($!)
t mem 60 DS_X=0 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.*' & P+=($!)
for k in 0 1 2; do t stream$k 60 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter="$SF" & P+=($!); done
for k in 0 1; do t q4v$k 45 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!); done
t block 60 DS_X=0 "$TC" --gtest_filter='CudaMatvecBatched.BlockLeanSameBits:CudaMatvecBatched.BlockBuildFastSameBits:CudaMatvec.TensorCoreQ4KVariants' & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $f | tr '\n' ' ' | cut -c1-220)"; done
grep -hE "^\[cg18/gs18\]|^\[stream q6 lean\]|^\[stream xone\]" "$W"/t_*.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tg() { local s=$1 b=$2 x; [ $b = old ] && x=$XO || x=$X; [ $(el) -lt $LIM ] || { say "skip tg $s $b"; return; }
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no model $s ($b)"; return; }
  timeout 25 "$x" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "clean20 call1 $s $b" >> "$OUT/bench.jsonl"
  say "TG $s $b $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
say "== phase B"
for r in 1 2; do tg 0.8B old; tg 0.8B new; done
for r in 1 2; do tg 9B old; tg 9B new; done
[ $(el) -lt $((LIM - 20)) ] && { tg 0.8B old; tg 0.8B new; tg 9B old; tg 9B new; }
say done

#!/bin/bash
# Session 42, call 3 (binaries of d452c80: the Q4_K wgmma ring kernel removed): test_cuda's CudaMatvecBatched.* (t/,
# the stripped test_cuda xz'd) while the 9B synth runs, then the lockstep step (its argmax / logits digests must be
# s40's 87261c2a60eb4383 / 9084b3f6889049dd); on an H200 also served at 64 (--kv-f16, fp32) and tg128 of the 9B / 0.8B.
# Run as: cd devf16 && OUT=$OUT LIM=300 timeout 310 bash go2.sh
set -u
LIM=${LIM:-300}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s42go2
synth9b_bg 14
M08=$W/m08.gguf
"$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 &
xz -dc t/test_cuda.xz > "$B/test_cuda" && chmod +x "$B/test_cuda"
timeout 200 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.*' > "$OUT/test_cuda.log" 2>&1
say "test_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_cuda.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/test_cuda.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM / 2))
say synth9b
[ $(el) -lt $((LIM - 30)) ] && lockstep "DS_KV_F16=1"
case "$GPU" in *H200*)
  [ $(el) -lt $((LIM - 60)) ] && served "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 40)) ] && tg128 "$M9"
  [ $(el) -lt $((LIM - 20)) ] && [ -e "$M08" ] && tg128 "$M08"
  [ $(el) -lt $((LIM - 60)) ] && served "DS_KV_F16=0"
  serve_summary ;;
esac
say done
pack_out

#!/bin/bash
# Session 43, call 1 (binaries of d452c80 = main 8dd1944 but for a test setter and a comment). First test_cuda's
# CudaMatvecBatched.* (t/: the stripped test_cuda, xz'd; d452c80 removed the Q4_K wgmma ring kernel and never ran on
# a GPU) while the 9B and 0.8B synths run, then the lockstep step (its argmax / logits digests must be s40's
# 87261c2a60eb4383 / 9084b3f6889049dd). On an H200 also: issue 7 served at 64 clients (--kv-f16 twice, the opt-in
# f16 states + K / V, fp32), issue 5's tg128 of the 9B / 0.8B / 27B and batch-1 breakdowns (9B, 0.8B), and the
# lockstep with 8 and 4 attention splits at ctx 1024 (DS_ATTN_SPLIT_POS 128 / 256; the default gives the most, 16).
# Run as: cd devf16 && OUT=$OUT LIM=420 timeout 430 bash go1.sh
set -u
LIM=${LIM:-420}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s43go1
synth9b_bg 14
M08=$W/m08.gguf; M27=$W/m27.gguf
"$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 &
xz -dc t/test_cuda.xz > "$B/test_cuda" && chmod +x "$B/test_cuda"
timeout 200 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.*' > "$OUT/test_cuda.log" 2>&1
say "test_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_cuda.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/test_cuda.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM / 2))
say synth9b
case "$GPU" in *H200*)
  served "DS_KV_F16=1"  # issue 7's number first
  [ $(el) -lt $((LIM - 60)) ] && lockstep "DS_KV_F16=1"
  [ $(el) -lt $((LIM - 60)) ] && served "DS_STATE_F16=1 DS_KV_F16=1"
  [ $(el) -lt $((LIM - 40)) ] && tg128 "$M9"
  [ $(el) -lt $((LIM - 20)) ] && [ -e "$M08" ] && tg128 "$M08"
  [ $(el) -lt $((LIM - 60)) ] && served "DS_KV_F16=0"
  [ $(el) -lt $((LIM - 60)) ] && served "DS_KV_F16=1"
  serve_summary
  [ $(el) -lt $((LIM - 40)) ] && lockstep "DS_KV_F16=1 DS_ATTN_SPLIT_POS=128"
  [ $(el) -lt $((LIM - 40)) ] && lockstep "DS_KV_F16=1 DS_ATTN_SPLIT_POS=256"
  for m in "$M9" "$M08"; do  # issue 5's per-kernel breakdown of one batch-1 step
    [ $(el) -lt $((LIM - 30)) ] && [ -e "$m" ] && timeout 30 "$X" cuda-bench -m "$m" --tg 16 --breakdown --top 12 \
      >> "$OUT/bd1.log" 2>&1 && say "breakdown $(basename "$m") $(grep -m1 'per-kernel' "$OUT/bd1.log" | tail -c 60)"
  done
  if [ $(el) -lt $((LIM - 130)) ]; then
    timeout 80 "$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 15 -o "$M27" > /dev/null 2>&1 && touch "$W/m27.ok"
    say "synth27B $([ -e "$W/m27.ok" ] && echo ok || echo missing)"
    [ $(el) -lt $((LIM - 35)) ] && [ -e "$W/m27.ok" ] && tg128 "$M27"
  fi ;;
*) [ $(el) -lt $((LIM - 30)) ] && lockstep "DS_KV_F16=1" ;;
esac
say done
pack_out

#!/bin/bash
# Session 38, call 1 (H100 or H200): cg38, the certified greedy head (matvec_batched_hi + certified_argmax). Tests
# CertifiedHead.* + CudaSelect.* + CudaState.*; lockstep 9B synth 64 x 512 + tg64 --kv-f16 --select 0 with
# DS_HEAD_CERTIFY=0 / 1 interleaved, two rounds (the selected-argmax digests must match); served at 64 clients
# (--kv-f16, --prefill-budget 4096) with and without it, then fp32 with it.
# Bundle (deltaserve + test_cuda_model): cd devf16 && rm -rf * && DS_FIXTURES=/work/shared/fixtures bash
# ../tools/gpu_bundle.sh ../build gpu-bundle; in gpu-bundle rm test_cuda test_cuda_prefill test_engine
# fixtures/models/tiny-sym fixtures/quant lib/libcublas* lib/libcudart*, strip the binaries; tar cf - gpu-bundle | xz -3
# -T2 > b.tar.xz; rm -rf gpu-bundle; cp this script; carry ["devf16"].
# Run as: cd devf16 && OUT=$OUT LIM=540 timeout 550 bash go1.sh
set -u
LIM=${LIM:-540}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 12
say "tests"
timeout 170 "$TM" --gtest_filter='CertifiedHead.*:CudaSelect.*:CudaState.*' > "$OUT/tests.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ') $(grep '\[certify\]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|error' "$OUT/tests.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM - 200))
say synth9b
cb() { timeout 25 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode|digest' "$OUT/cb1.log" | tr '\n' ' ' | cut -c1-220)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 150)) ] && cb "$v"; done
done
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
  --budget-s 40 --label "s38go1 $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"; }
[ $(el) -lt $((LIM - 60)) ] && sb "DS_KV_F16=1"
[ $(el) -lt $((LIM - 60)) ] && sb "DS_KV_F16=1 DS_HEAD_CERTIFY=0"
[ $(el) -lt $((LIM - 60)) ] && sb "DS_KV_F16=0"
serve_summary
pack_out

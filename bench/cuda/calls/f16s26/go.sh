#!/bin/bash
# Session 26, call 1. (a) x16 (DS_MVB_X16=1: the Q4_K block kernel with x as its fp16 hi term alone, half the wgmma
# work; opt-in approximation): CudaMatvecBatched.X16WithinFp16Bound (+ BlockLeanSameBits, the same kernel family), the
# 9B step at 64 x 512+ with it, and the logits' difference from the default's (cuda-bench --dump-logits, compared here).
# (b) issue 7 with the opt-in f16 options (DS_STATE_F16=1 DS_KV_F16=1): the step default vs both, interleaved; a
# breakdown each; served at 1 / 8 / 32 / 64 with both, then at 64 with --prefill-budget 4096 (the throughput setting)
# with both, without, and with both + x16. ~300 s plus the start.
# Run as: cd devf16 && OUT=$OUT timeout 400 bash go.sh (devf16: b.tar.xz from tools/gpu_bundle.sh: deltaserve, test_cuda)
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 60 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.X16*:CudaMatvecBatched.BlockLean*' > "$OUT/t_x16.log" 2>&1
say "test x16 rc=$? $(grep -E 'x16 \(x as|PASSED|FAILED' "$OUT/t_x16.log" | tr '\n' ' ' | cut -c1-300)"
wait9b 200
say synth
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 $2 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1 $2: $(grep -E '^(decode|per-kernel)' "$OUT/cb.log" | tail -1 | cut -c1-150) $(grep -E '^logits digest' "$OUT/cb.log" | tail -1 | cut -c30-50)"; }
cb DS_DEFAULT=1 "--dump-logits $W/l0.bin"
cb DS_MVB_X16=1 "--dump-logits $W/l1.bin"
python3 - "$W/l0.bin" "$W/l1.bin" <<'PY' 2>&1 | tee -a "$OUT/steps.log"
import sys, numpy as np
a = np.fromfile(sys.argv[1], np.float32).reshape(64, -1).astype(np.float64); b = np.fromfile(sys.argv[2], np.float32).reshape(64, -1).astype(np.float64)
d = np.abs(a - b); sd = a.std(axis=1)
print("x16 vs default logits (9B synth, 64 rows after 512+33 tokens): max |diff| %.4g, rms diff %.4g, logit std %.4g, max |diff|/std per row %.4g, argmax equal %d/64"
      % (d.max(), np.sqrt((d ** 2).mean()), sd.mean(), (d.max(axis=1) / sd).max(), int((a.argmax(1) == b.argmax(1)).sum())))
PY
cb "$F16" ""
cb DS_MVB_X16=1 ""
cb DS_DEFAULT=1 ""
cb "$F16" ""
cb "$F16 DS_MVB_X16=1" ""
cb DS_MVB_X16=1 "--breakdown --top 12"
cb "$F16" "--breakdown --top 12"
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 90 bash "$D/../tools/serve_bench.sh" "$M9" --levels $2 \
  --budget-s 70 --label "session26 $GPU $1 $3" ${3:+--server-args "$3"} >> "$OUT/serve.log" 2>&1; say "serve $1 $2 $3 rc=$?"; }
sb "$F16" 1,8,32,64 ""
[ $(el) -lt 300 ] && sb "$F16" 64 "--prefill-budget 4096"
[ $(el) -lt 320 ] && sb DS_DEFAULT=1 64 "--prefill-budget 4096"
[ $(el) -lt 340 ] && sb "$F16 DS_MVB_X16=1" 64 "--prefill-budget 4096"
serve_summary
say done
pack_out

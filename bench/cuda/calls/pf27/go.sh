#!/bin/bash
# Session 27, call 1 (branch pf27 = main + pfcheck + pf26). (1) pf26's test (PrefillGemm.*, F16InputsPastTheF16Range
# among them). (2) Where the 9B synth's fast prefill first goes non-finite: DS_PREFILL_CHECK=1 scans every piece-prefill
# op's output (non-finite count, largest |x|) and fails at the first non-finite op, naming it: without pf26's scaling
# (DS_PREFILL_F16_SCALE=0), with it, and with --precise. (3) 64 x 512+: finite logits (cuda-bench counts non-finite
# logits beside the digest) and prefill / step times, unscaled vs scaled vs scaled + f16 states and K / V, interleaved.
# (0) CudaSelect.* (the decode rows' non-finite count). ~300 s plus the start. Bundle: deltaserve, test_cuda_prefill,
# test_cuda_model (+ lib, fixtures/tokenizer, fixtures/models/tiny-gqa-q4_k_m).
# Run as: cd devf16 && OUT=$OUT timeout 420 bash go.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
timeout 120 "$B/test_cuda_prefill" --gtest_filter='PrefillGemm.*' > "$OUT/t_gemm.log" 2>&1
say "test PrefillGemm rc=$? $(grep -E 'PASSED|FAILED' "$OUT/t_gemm.log" | tr '\n' ' ' | cut -c1-300)"
timeout 60 "$TM" --gtest_filter='CudaSelect.*' > "$OUT/t_select.log" 2>&1
say "test CudaSelect rc=$? $(grep -E 'PASSED|FAILED' "$OUT/t_select.log" | tr '\n' ' ' | cut -c1-300)"
wait9b 220
say synth
chk() {
  env DS_PREFILL_CHECK=1 $1 timeout 60 "$X" cuda-bench -m "$M9" --tg 1 --reps 1 --batch 1 --prompt 512 $2 > "$OUT/check_$3.log" 2>&1
  say "check $1 $2 rc=$?: $(grep -c 'prefill check' "$OUT/check_$3.log") ops; first non-finite: $(grep -m1 -E ' [1-9][0-9]* non-finite' "$OUT/check_$3.log")"
  say "largest |x| per op kind ($3): $(grep 'prefill check' "$OUT/check_$3.log" | sed -E 's/.*L-?[0-9]+\.([^:]*):.*max \|x\| ([^,]*),.*/\1 \2/' | sort -k1,1 -k2,2g | awk '{m[$1]=$2} END {for (k in m) printf "%s=%s ", k, m[k]}')"
}
chk DS_PREFILL_F16_SCALE=0 "" noscale
chk DS_DEFAULT=1 "" scale
chk DS_DEFAULT=1 --precise precise
F16="DS_STATE_F16=1 DS_KV_F16=1"
cb() { timeout 40 env $1 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 $2 >> "$OUT/cb.log" 2>&1
  say "batch 64 x 512 $1 $2: $(grep -E '^(decode|per-kernel)' "$OUT/cb.log" | tail -1 | cut -c1-120) | $(grep -E '^prefill' "$OUT/cb.log" | tail -1 | cut -c1-100) | $(grep -E '^logits digest' "$OUT/cb.log" | tail -1 | cut -c30-)"; }
for r in 1 2; do cb DS_PREFILL_F16_SCALE=0 ""; cb DS_DEFAULT=1 ""; cb "$F16" ""; done
[ $(el) -lt 330 ] && cb DS_DEFAULT=1 "--breakdown --top 12"
[ $(el) -lt 360 ] && cb "$F16" "--breakdown --top 12"
say done
pack_out

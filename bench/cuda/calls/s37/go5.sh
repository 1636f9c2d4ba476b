#!/bin/bash
# Session 37, call 3 (b0889f8): test_cuda_model whole, every model fixture in the bundle (call 2's bundle lacked
# tiny-sym, so its fixture tests failed on missing files). No deltaserve in this bundle (the carry limit), so the
# CudaCli tests, which run it, are expected to fail here.
# Run as: cd devf16 && OUT=$OUT timeout 230 bash go5.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
timeout 200 "$TM" --gtest_brief=1 > "$OUT/tm.log" 2>&1
say "test_cuda_model rc=$? $(grep -E '^\[  (PASSED|FAILED)|tests ran' "$OUT/tm.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" -A3 "$OUT/tm.log" | head -30 | tee -a "$OUT/steps.log"
grep -E "^\[(mma|kv19)\]" "$OUT/tm.log" | tee -a "$OUT/steps.log"
say done
pack_out

#!/bin/bash
# Session 38, a short form of go2.sh for the last ~150 s of device budget: tests, one lockstep pair (certify 0 / 1,
# argmax digests), ncu of the certified selection kernels. Bundle as go1.sh.
# Run as: cd devf16 && OUT=$OUT LIM=130 timeout 140 bash go3.sh
set -u
LIM=${LIM:-130}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
timeout 60 "$TM" --gtest_filter='CertifiedHead.*:CudaSelect.*:CudaState.*' > "$OUT/tests.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ') $(grep '\[certify\]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM - 90))
say synth9b
cb() { timeout 25 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode|digest' "$OUT/cb1.log" | tr '\n' ' ' | cut -c1-220)"; }
for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 60)) ] && cb "$v"; done
[ $(el) -lt $((LIM - 30)) ] && DS_KV_F16=1 timeout 25 ncu --kernel-name-base mangled -k regex:'cert_|ring_kernelILi[23]ELb0ELi4E' \
    --launch-count 24 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$X" cuda-bench -m "$M9" --tg 2 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu1.txt" 2>&1
grep -E "cert_|ring_kernel|gpu__time|dram__" "$OUT/ncu1.txt" | sed -e 's/(const.*//' -e 's/ \+/ /g' | tail -24 | tee -a "$OUT/steps.log"
pack_out

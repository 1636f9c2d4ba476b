#!/bin/bash
# Session 39, call 2 (H100 or H200): certified_argmax leaves the chunks without a candidate unread (cert_lower's
# part_hi). Tests CertifiedHead.* + CudaSelect.* + CudaState.*; ncu of the certified selection kernels; lockstep 9B
# synth 64 x 512 + tg64 --kv-f16 --select 0 certify 0 / 1 (two rounds, argmax digests). Bundle as go1.sh.
# Run as: cd devf16 && OUT=$OUT LIM=200 timeout 210 bash go2.sh
set -u
LIM=${LIM:-200}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s39go2
synth9b_bg 14
model_tests 'CertifiedHead.*:CudaSelect.*:CudaState.*' 100
wait9b $((LIM - 100))
say synth9b
DS_KV_F16=1 timeout 40 ncu -k regex:'cert_' --launch-count 24 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  "$X" cuda-bench -m "$M9" --tg 3 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu1.txt" 2>&1
ncu_summary "$OUT/ncu1.txt"
for r in 1 2; do
  for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 15)) ] && lockstep "$v"; done
done
say done
pack_out

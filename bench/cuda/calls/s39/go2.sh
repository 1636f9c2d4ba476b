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
timeout 100 "$TM" --gtest_filter='CertifiedHead.*:CudaSelect.*:CudaState.*' > "$OUT/tests.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ') $(grep '\[certify\]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM - 100))
say synth9b
DS_KV_F16=1 timeout 40 ncu -k regex:'cert_' --launch-count 24 \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  "$X" cuda-bench -m "$M9" --tg 3 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu1.txt" 2>&1
python3 - "$OUT/ncu1.txt" <<'PY' | tee -a "$OUT/steps.log"
import re,sys,collections
d=collections.defaultdict(list); name=None
for l in open(sys.argv[1]):
    m=re.search(r'::(\w+)\(.*\) \((\d+), (\d+), (\d+)\)x\((\d+)',l)
    if m: name=m.group(1)+' grid '+m.group(2)+'x'+m.group(3); continue
    m=re.search(r'(gpu__time_duration.sum|dram__throughput\S*)\s+\S+\s+([\d.,]+)',l)
    if m and name: d[(name,m.group(1)[:8])].append(float(m.group(2).replace(',','')))
for (n,k),v in sorted(d.items()):
    v.sort(); print(f'ncu {n:28s} {k} n={len(v)} med={v[len(v)//2]:.2f} max={v[-1]:.2f}')
PY
for r in 1 2; do
  for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 15)) ] && lockstep "$v"; done
done
say done
pack_out

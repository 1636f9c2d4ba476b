#!/bin/bash
# Session 38, call 5 (H100 or H200): cg38 with cert_pick's loads all in flight and cert_merge by a warp. Tests
# CertifiedHead.* + CudaSelect.* + CudaState.*; ncu of the head (ring_kernel forms 3 / 4) and the selection kernels with
# DS_HEAD_CERTIFY=1 / 0; lockstep 9B 64 x 512 + tg64 --kv-f16 --select 0 certify 0 / 1 (two rounds, argmax digests);
# served at 64 (--kv-f16, --prefill-budget 4096) with and without. Bundle as go1.sh.
# Run as: cd devf16 && OUT=$OUT LIM=400 timeout 410 bash go2.sh
set -u
LIM=${LIM:-400}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 14
timeout 120 "$TM" --gtest_filter='CertifiedHead.*:CudaSelect.*:CudaState.*' > "$OUT/tests.log" 2>&1
say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ') $(grep '\[certify\]' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -20 | tee -a "$OUT/steps.log"
wait9b $((LIM - 200))
say synth9b
for c in 1 0; do
  DS_KV_F16=1 DS_HEAD_CERTIFY=$c timeout 90 ncu --kernel-name-base mangled -k regex:'cert_|select_|ring_kernelILi[23]ELb0ELi[34]E' \
    --launch-count 120 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$X" cuda-bench -m "$M9" --tg 3 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu$c.txt" 2>&1
  python3 - "$OUT/ncu$c.txt" <<'PY' | tee -a "$OUT/steps.log"
import re,sys,collections
d=collections.defaultdict(list); name=None
for l in open(sys.argv[1]):
    m=re.match(r'\s+(\S+)\s+\((\d+), (\d+), (\d+)\)x\((\d+)',l)
    if m and 'Context' in l:
        name=m.group(1)[-40:]+' grid '+m.group(2)+'x'+m.group(3); continue
    m=re.search(r'(gpu__time_duration.sum|dram__throughput\S*)\s+\S+\s+([\d.,]+)',l)
    if m and name: d[(name,m.group(1)[:8])].append(float(m.group(2).replace(',','')))
print('== ncu certify', sys.argv[1][-5])
for (n,k),v in sorted(d.items()):
    v.sort(); print(f'{n:60s} {k} n={len(v)} med={v[len(v)//2]:.2f} max={v[-1]:.2f}')
PY
done
cb() { timeout 25 env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode|digest' "$OUT/cb1.log" | tr '\n' ' ' | cut -c1-220)"; }
for r in 1 2; do
  for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 100)) ] && cb "$v"; done
done
sb() { env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 40 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
  --budget-s 30 --label "s38go2 $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"; }
[ $(el) -lt $((LIM - 45)) ] && sb "DS_KV_F16=1"
[ $(el) -lt $((LIM - 45)) ] && sb "DS_KV_F16=1 DS_HEAD_CERTIFY=0"
serve_summary
pack_out

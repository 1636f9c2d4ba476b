#!/bin/bash
# Session 39, call 1 (H100 or H200): cg38's cert_pick rewrite (loads in flight, cert_merge by a warp) on a GPU for the
# first time, then issue 7's numbers: tests CertifiedHead.* + CudaSelect.* + CudaState.*; ncu of the certified and the
# exact selection kernels; lockstep 9B synth 64 x 512 + tg64 --kv-f16 --select 0 certify 0 / 1 (two rounds, argmax
# digests); served at 64 clients (--prefill-budget 4096) --kv-f16 certified / exact and fp32 caches; on an H200 also
# batch-1 tg128 of the 9B and 0.8B (issue 5).
# Bundle: cd devf16 && rm -rf * && DS_FIXTURES=/work/shared/fixtures bash ../tools/gpu_bundle.sh ../build gpu-bundle;
# in gpu-bundle rm test_cuda test_cuda_prefill test_engine fixtures/models/tiny-sym fixtures/quant lib/libcublas*
# lib/libcudart*; strip deltaserve test_cuda_model; tar cf - gpu-bundle | xz -3 -T2 > b.tar.xz; rm -rf gpu-bundle;
# cp this script; carry ["devf16"].
# Run as: cd devf16 && OUT=$OUT LIM=560 timeout 570 bash go1.sh (SKIP_NCU=1 LIM=300: no ncu, for a short budget)
set -u
LIM=${LIM:-560}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s39go1
synth9b_bg 14
M08=$W/m08.gguf
model_tests 'CertifiedHead.*:CudaSelect.*:CudaState.*' 100
wait9b $((LIM / 2))
say synth9b
case "$GPU" in *H200*) "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 & ;; esac
for c in 1 0; do
  [ $(el) -lt $((LIM - 330)) ] && [ -z "${SKIP_NCU:-}" ] || continue
  DS_KV_F16=1 DS_HEAD_CERTIFY=$c timeout 60 ncu -k regex:'cert_|select_' \
    --launch-count 40 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$X" cuda-bench -m "$M9" --tg 3 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu$c.txt" 2>&1
  ncu_summary "$OUT/ncu$c.txt"
done
for r in 1 2; do
  for v in "DS_KV_F16=1 DS_HEAD_CERTIFY=0" "DS_KV_F16=1 DS_HEAD_CERTIFY=1"; do [ $(el) -lt $((LIM - 230)) ] && lockstep "$v"; done
done
[ $(el) -lt $((LIM - 170)) ] && served "DS_KV_F16=1"
[ $(el) -lt $((LIM - 120)) ] && served "DS_KV_F16=0"
[ $(el) -lt $((LIM - 70)) ] && served "DS_KV_F16=1 DS_HEAD_CERTIFY=0"
serve_summary
tg() { timeout 30 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"; }
case "$GPU" in *H200*)
  [ $(el) -lt $((LIM - 35)) ] && tg "$M9"
  [ $(el) -lt $((LIM - 35)) ] && [ -e "$M08" ] && tg "$M08" ;;
esac
say done
pack_out

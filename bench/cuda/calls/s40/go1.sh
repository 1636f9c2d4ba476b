#!/bin/bash
# Session 40, call 1 (H200 hoped for; H100 also useful). Three builds: main (7b64559), cp39 (main + branch cp39's
# one-block-per-row cert_pick, 01f8bdd), hix3 (main + ring_kernel kForm 4 copying only x's hi terms, 32 of the 64 KB
# a block stage filled from L2, packed in a 32 KB stage, three stages in flight). Tests CertifiedHead.* (+ CudaSelect.* / CudaState.* on main); ncu of the head
# (ring_kernel) and the cert_ kernels per build; lockstep 9B synth 64 x 512 + tg64 --kv-f16 --select 0 per build, two
# rounds (argmax digests must match); served at 64 clients (--kv-f16, --prefill-budget 4096) main / hix3; on an
# H200 also batch-1 tg128 of the 9B, 0.8B and 27B synths (issue 5).
# Bundle: main's build as in s39/go1.sh, plus gpu-bundle/{cp39,hix3}/{deltaserve,test_cuda_model}; all stripped;
# tar the deltaserves, then the test_cuda_models, one build after the other | xz -9e -T1 (~41 MB: each build shares
# xz's dictionary window with the one before; the carry limit of 64 MiB counts the tracked tree's ~15 MB too).
# Run as: cd devf16 && OUT=$OUT LIM=480 timeout 490 bash go1.sh
set -u
LIM=${LIM:-480}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s40go1
bin() { case $1 in main) echo "$B" ;; *) echo "$B/$1" ;; esac; }
synth9b_bg 14
M08=$W/m08.gguf; M27=$W/m27.gguf
model_tests 'CertifiedHead.*:CudaSelect.*:CudaState.*' 100
for v in cp39; do TM=$(bin $v)/test_cuda_model; say "$v tests:"; model_tests 'CertifiedHead.*:CudaSelect.*' 60; done
TM=$B/hix3/test_cuda_model; say "hix3 tests:"; model_tests 'CertifiedHead.*:CudaSelect.*:CudaState.*' 100
TM=$B/test_cuda_model
wait9b $((LIM / 3))
say synth9b
case "$GPU" in *H200*)
  ( "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1
    "$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 4 -o "$M27" > /dev/null 2>&1
    touch "$W/m27.ok" ) & ;;
esac
for v in main hix3 cp39; do
  [ $(el) -lt $((LIM - 260)) ] || continue
  X=$(bin $v)/deltaserve
  DS_KV_F16=1 timeout 45 ncu -k regex:'cert_|ring_kernel' --launch-count 40 --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed \
    "$X" cuda-bench -m "$M9" --tg 3 --reps 1 --select 0 --batch 64 --prompt 16 --ctx 64 > "$OUT/ncu_$v.txt" 2>&1
  say "ncu $v:"; ncu_summary "$OUT/ncu_$v.txt"
done
for r in 1 2; do
  for v in main hix3 cp39; do
    X=$(bin $v)/deltaserve
    [ $(el) -lt $((LIM - 170)) ] && say "$v" && lockstep "DS_KV_F16=1"
  done
done
for v in main hix3; do
  export DS_BIN=$(bin $v)/deltaserve; TAG=s40go1-$v
  [ $(el) -lt $((LIM - 120)) ] && served "DS_KV_F16=1"
done
export DS_BIN=$B/deltaserve; X=$B/deltaserve
serve_summary
case "$GPU" in *H200*)
  [ $(el) -lt $((LIM - 100)) ] && tg128 "$M9"
  [ $(el) -lt $((LIM - 70)) ] && [ -e "$M08" ] && tg128 "$M08"
  while [ ! -e "$W/m27.ok" ] && [ "$(el)" -lt $((LIM - 45)) ]; do sleep 1; done
  [ $(el) -lt $((LIM - 45)) ] && [ -e "$W/m27.ok" ] && tg128 "$M27" ;;
esac
say done
pack_out

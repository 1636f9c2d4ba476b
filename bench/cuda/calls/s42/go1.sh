#!/bin/bash
# Session 42, call 1 (an H200: issue 7 served at 64 clients, --kv-f16 up to twice and fp32 caches once, with
# --prefill-budget 4096; the 9B lockstep 64 x 512 + tg64; batch-1 tg128 of the 9B, 0.8B and 27B synths for issue 5).
# s40/go3.sh with its own label, after all of test_cuda_model (60 s at most, while the 9B synth runs).
# Run as: cd devf16 && OUT=$OUT LIM=300 timeout 310 bash go1.sh
set -u
LIM=${LIM:-300}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
[ -e f.tar.xz ] && tar xJf f.tar.xz  # the tiny-sym fixture models (SYM=1 tools/gpu_prepare.sh), for the tests
TAG=s42go1
synth9b_bg 14
M08=$W/m08.gguf; M27=$W/m27.gguf
"$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 &
[ -e f.tar.xz ] && model_tests '*' 60  # all of test_cuda_model (fixture models on the GPU) while the synths run
wait9b $((LIM / 3))
say synth9b
# the 27B before the timed runs, so its synthesis does not share the host's cores with the server and clients
if [ "$LIM" -ge 300 ]; then  # (~50-70 s: only with time for it)
  timeout 70 "$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 15 -o "$M27" > /dev/null 2>&1 && touch "$W/m27.ok"
  say "synth27B $([ -e "$W/m27.ok" ] && echo ok || echo missing)"
fi
served "DS_KV_F16=1"  # issue 7's number first, whatever LIM is
for v in "DS_KV_F16=1" "DS_KV_F16=0"; do [ $(el) -lt $((LIM - 100)) ] && served "$v"; done
serve_summary
[ $(el) -lt $((LIM - 75)) ] && lockstep "DS_KV_F16=1"
[ $(el) -lt $((LIM - 50)) ] && tg128 "$M9"
[ $(el) -lt $((LIM - 25)) ] && [ -e "$M08" ] && tg128 "$M08"
[ $(el) -lt $((LIM - 42)) ] && [ -e "$W/m27.ok" ] && tg128 "$M27"
say done
pack_out

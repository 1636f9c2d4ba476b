#!/bin/bash
# Session 40, call 4 (the last of the budget; for an H200 only): issue 7's served rate at 64 clients (--kv-f16,
# --prefill-budget 4096) once, the lockstep step once, batch-1 tg128 of the 9B and 0.8B synths as time allows.
# Run as: cd devf16 && OUT=$OUT LIM=120 timeout 125 bash go4.sh
set -u
LIM=${LIM:-120}
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
TAG=s40go4
synth9b_bg 14
M08=$W/m08.gguf
"$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 2 -o "$M08" > /dev/null 2>&1 &
wait9b $((LIM / 2))
say synth9b
served "DS_KV_F16=1"
serve_summary
[ $(el) -lt $((LIM - 35)) ] && lockstep "DS_KV_F16=1"
[ $(el) -lt $((LIM - 25)) ] && tg128 "$M9"
[ $(el) -lt $((LIM - 12)) ] && [ -e "$M08" ] && tg128 "$M08"
say done
pack_out

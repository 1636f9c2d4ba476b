#!/bin/bash
# CPU-only check of the Q4_K stream kernel's lean scale / min extraction (b1q420; no GPU needed): the functions of
# src/cuda/matvec_stream.cuh (scale_words .. lean_mins), mvt::pair_scales of matvec_tc.cuh and mvd::bf of
# matvec_direct.cuh are cut out of the headers as they are and compiled on the host with shims
# (stream_q4_lean_emu.cpp). Usage (repository root): bench/cuda/emu/run_q4_lean_emu.sh   (exit status 1 on a mismatch)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
sed -n '/^__device__ __forceinline__ uint2 scale_words/,/^\/\/ One item of the integer form/p' \
  "$root/src/cuda/matvec_stream.cuh" | sed '$d' > "$tmp/lean.inc"
sed -n '/^__device__ __forceinline__ void pair_scales/,/^}/p' "$root/src/cuda/matvec_tc.cuh" > "$tmp/pair_scales.inc"
sed -n '/^__device__ __forceinline__ float bf(/,/^}/p' "$root/src/cuda/matvec_direct.cuh" | sed '1i template <int I>' \
  > "$tmp/bf.inc"
for f in lean pair_scales bf; do [ -s "$tmp/$f.inc" ] || { echo "run_q4_lean_emu: $f not found in the headers"; exit 1; }; done
g++ -std=c++20 -O2 -I"$tmp" -o "$tmp/emu" "$root/bench/cuda/emu/stream_q4_lean_emu.cpp"
"$tmp/emu"

#!/bin/bash
# Instruction counts of the Q4_K stream kernels without a disassembler (b1q420; this machine's CUDA has no cuobjdump /
# nvdisasm): the integer-form kernels mvq::kernel<3, true, 8 / 16, lean false / true> and a probe kernel around one
# item_i8<false / true> are compiled alone for sm_90a into a cubin, and each function's .text section size / 16 (bytes
# per sm_90 instruction, tail padding included) is printed, with ptxas -v's registers and spills.
# Usage (repository root): bench/cuda/emu/q4_lean_cubin_sizes.sh [SRC_DIR=src]
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
src=${1:-$root/src}
tmp=$(mktemp -d)
cat > "$tmp/k.cu" <<'CU'
#include "cuda/matvec_stream.cuh"
namespace ds::cuda::mvq {
template __global__ void kernel<3, true, 8, false>(const Args);
template __global__ void kernel<3, true, 8, true>(const Args);
template __global__ void kernel<3, true, 16, false>(const Args);
template __global__ void kernel<3, true, 16, true>(const Args);
template <bool L>
__global__ void item_probe(int pitch, float* out) {
  extern __shared__ uint8_t sm[];
  float yp[2] = {0.f, 0.f};
  const int lane = threadIdx.x & 31, t = lane & 3;
  const uint32_t msel = lean_min_sel(t);
  for (int q = threadIdx.x >> 5; q < pitch; q += 8)
    item_i8<L>(sm + (lane >> 2) * pitch, pitch, q, q, t, reinterpret_cast<const uint2*>(sm) + q * 128,
               reinterpret_cast<const float*>(sm), reinterpret_cast<const float*>(sm) + 64, yp, msel);
  out[threadIdx.x] = yp[0] + yp[1];
}
template __global__ void item_probe<false>(int, float*);
template __global__ void item_probe<true>(int, float*);
}
CU
"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -O3 -DNDEBUG -DDS_HAVE_CUDA=1 -DDS_HAVE_SM90A=1 -DFMT_CONSTEVAL= \
  -DFMT_USE_CONSTEXPR=1 -DFMT_HEADER_ONLY --generate-code=arch=compute_90a,code=[sm_90a] --expt-relaxed-constexpr \
  -std=c++20 -I "$src" -Xptxas -v -cubin -o "$tmp/k.cubin" "$tmp/k.cu" 2> "$tmp/ptxas.log"
grep -A2 -E 'Function properties for _ZN2ds4cuda3mvq(6kernelILi3ELb1|10item_probe)' "$tmp/ptxas.log" | grep -E 'Function|Used|spill'
python3 - "$tmp/k.cubin" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
shoff = struct.unpack_from('<Q', d, 0x28)[0]
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
secs = [struct.unpack_from('<IIQQQQ', d, shoff + i * shentsize) for i in range(shnum)]
stro = secs[shstrndx][4]
name = lambda n: d[stro + n:d.index(b'\0', stro + n)].decode()
for s in secs:
    n = name(s[0])
    if n.startswith('.text.') and ('mvq6kernelILi3ELb1' in n or 'item_probe' in n):
        print(s[5] // 16, 'instructions', n[6:])
PY

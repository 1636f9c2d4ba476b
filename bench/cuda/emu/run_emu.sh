#!/bin/bash
# CPU-only check of src/cuda/matvec_direct.cuh (no GPU needed): every CUDA thread of a block runs as a
# std::thread, shuffles and __syncthreads are block-wide barriers (the kernel's shuffle sequence is
# block-uniform), __ldg/__byte_perm/__funnelshift_r have host shims. The header is included after a
# sed pass that turns its <<<>>> launches into emu_launch(...) calls. Checks y against
# ds::quant::dot_row for several shapes x launch choices (kR, ks, pipeline), with and without accumulate;
# also the shared-memory kernel of matvec_smem.cuh (Q4_K, Q6_K).
# Usage (repository root): bench/cuda/emu/run_emu.sh [--prologue]   (exit status 1 on a mismatch;
# --prologue: only the fused RMSNorm / SwiGLU prologue on both shared-memory kernels, small shapes)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
grep -v '#include <cuda_fp16.h>\|#include "cuda/cuda_util.h"\|#pragma once' "$root/src/cuda/matvec_direct.cuh" |
  sed -E 's/kernel<D, ([24]), (true|false)><<<grid, kThreads, 0, stream>>>\(a\);/emu_launch(kernel<D, \1, \2>, grid, kThreads, a);/' \
  > "$tmp/hdr.inc"
# The shared-memory kernel (matvec_smem.cuh): dynamic shared memory becomes a host buffer.
grep -v '#include "cuda/matvec_direct.cuh"\|#include "cuda/launch.cuh"\|#pragma once' "$root/src/cuda/matvec_smem.cuh" |
  sed -E -e 's/extern __shared__ float4 xs\[\];/float4* xs = emu_dyn_smem();/' \
    -e 's/cudaFuncSetAttribute\(kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, \(int\)kMaxXBytes\)/cudaSuccess/' \
    -e 's/cudaFuncSetAttribute\(kernel_async<S, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax\)/cudaSuccess/' \
    -e 's/cudaFuncSetAttribute\(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100\)/cudaSuccess/' \
    -e 's/launch_pdl\(k, dim3\(grid\), dim3\(threads\), smem, stream, pdl, a\)/(emu_launch(k, grid, threads, a), cudaSuccess)/' \
  > "$tmp/hdr_smem.inc"
cuda=${CUDA_HOME:-/usr/local/cuda}
g++ -std=c++20 -O1 -pthread -DDS_MATVEC_EMU -I"$root/src" -I"$tmp" -I"$cuda/include" -DFMT_HEADER_ONLY \
  "$root/bench/cuda/emu/matvec_direct_emu.cpp" "$root"/src/quant/*.cpp "$root/src/core/ggml_type.cpp" \
  "$root/src/cuda/cuda_util.cpp" -L"$cuda/lib64" -lcudart_static -ldl -lrt -o "$tmp/emu"
"$tmp/emu" "$@"

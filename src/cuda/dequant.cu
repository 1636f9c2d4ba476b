// Dequantization kernels: one thread per unit (quant_traits.cuh) for block types, one thread per
// element for F32/F16/BF16 (so any n works for them).
#include "cuda/cuda_util.h"
#include "cuda/dequant.h"
#include "cuda/quant_traits.cuh"

namespace ds::cuda {
namespace {
using qt::QuantTraits;

template <class QT>
__global__ void dequant_units(const uint8_t* __restrict__ src, float* __restrict__ dst, int64_t n_units) {
  const int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= n_units) return;
  const int64_t blk = u / QT::kUnits;
  const int k = (int)(u % QT::kUnits);
  float w[QT::kE];
  QT::dequant(src + blk * QT::kBlockBytes, k, w);
  float* y = dst + blk * QT::kBlockElems;
#pragma unroll
  for (int r = 0; r < QT::kRuns; r++) {
    const int s = QT::run_start(k, r);
#pragma unroll
    for (int i = 0; i < QT::kRunLen; i++) y[s + i] = w[r * QT::kRunLen + i];
  }
}

template <class QT>
__global__ void dequant_elems(const uint8_t* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = QT::elem(src, i);
}

template <class QT>
Status launch(GgmlType type, const void* src, float* dst, int64_t n, cudaStream_t stream) {
  const auto info = ggml_type_info(type);
  if (n < 0 || n % info->block_size != 0)
    return cu_err("cuda dequantize: {} elements of {} is not a whole number of {}-element blocks", n,
               type_cstr(type), info->block_size);
  const int align = QT::kIsFloat ? (int)info->type_size : QT::kAlign;
  if ((uintptr_t)src % align != 0)
    return cu_err("cuda dequantize: {} source {} is not {}-byte aligned", type_cstr(type), src, align);
  if (n == 0) return {};
  constexpr int kThreads = 256;
  if constexpr (QT::kIsFloat) {
    dequant_elems<QT><<<(unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(src), dst, n);
  } else {
    const int64_t units = n / QT::kBlockElems * QT::kUnits;
    dequant_units<QT><<<(unsigned)((units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(src), dst, units);
  }
  CUDA_TRY_LAUNCH("dequantize", stream);
  return {};
}

}  // namespace

bool has_kernel(GgmlType t) {
  switch (t) {
#define DS_CASE(T) case GgmlType::T:
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    return true;
    default:
      return false;
  }
}

Status dequantize(GgmlType type, const void* src, float* dst, int64_t n, cudaStream_t stream) {
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return launch<QuantTraits<GgmlType::T>>(type, src, dst, n, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda dequantize: no kernel for type {}", type_cstr(type));
  }
}

}  // namespace ds::cuda

// Batched matrix-vector products Y[B, rows] = X[B, cols] · Wᵀ for 1 < B <= 64 (matvec.h): the same
// tiles as matvec.cu, each unit decoded once to registers and multiplied into 8 batch columns at a time.
#include "cuda/matvec_kernel.cuh"

namespace ds::cuda {

Status matvec_batched(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
                      int batch, cudaStream_t stream, bool accumulate) {
  if (batch < 1 || batch > kMatvecMaxBatch)
    return cu_err("cuda matvec_batched: batch {} outside [1, {}]", batch, kMatvecMaxBatch);
  if (batch == 1) return matvec(type, w, rows, cols, x, y, stream, accumulate);
  const mv::MvArgs a{static_cast<const uint8_t*>(w), 0, rows, cols, x, y, batch, 0, 0, accumulate};
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return mv::launch<qt::QuantTraits<GgmlType::T>, true>(type, a, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda matvec_batched: no kernel for weight type {}", type_cstr(type));
  }
}

}  // namespace ds::cuda

// Batched matrix-vector products Y[B, rows] = X[B, cols] · Wᵀ for 1 < B <= 64 (matvec.h).
// Block-quantized, BF16 and F16 weights go to the tensor-core kernel (matvec_mma.cuh: integer codes
// as bf16 times x split into bf16 terms, fp32 accumulation, near-fp32 accuracy); F32 weights and
// F16/BF16 rows whose length is not a multiple of 16 use the FMA tile kernel (matvec_kernel.cuh).
#include "cuda/matvec_kernel.cuh"
#include "cuda/matvec_mma.cuh"

#include <tuple>

namespace ds::cuda {
namespace {

Status fma_path(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                cudaStream_t stream, bool accumulate) {
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

}  // namespace

Status matvec_batched(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
                      int batch, cudaStream_t stream, bool accumulate) {
  if (batch < 1 || batch > kMatvecMaxBatch)
    return cu_err("cuda matvec_batched: batch {} outside [1, {}]", batch, kMatvecMaxBatch);
  if (batch == 1) return matvec(type, w, rows, cols, x, y, stream, accumulate);
  const auto args = std::make_tuple(type, w, rows, cols, x, y, batch, stream, accumulate);
  switch (type) {
    case GgmlType::Q4_K: return std::apply(mma::launch<mma::DecQ4K>, args);
    case GgmlType::Q5_K: return std::apply(mma::launch<mma::DecQ5K>, args);
    case GgmlType::Q6_K: return std::apply(mma::launch<mma::DecQ6K>, args);
    case GgmlType::Q8_0: return std::apply(mma::launch<mma::DecQ8_0>, args);
    case GgmlType::Q4_0: return std::apply(mma::launch<mma::DecQ4_0>, args);
    case GgmlType::Q5_0: return std::apply(mma::launch<mma::DecQ5_0>, args);
    case GgmlType::IQ4_NL: return std::apply(mma::launch<mma::DecIQ4NL>, args);
    case GgmlType::IQ4_XS: return std::apply(mma::launch<mma::DecIQ4XS>, args);
    case GgmlType::BF16:
      if (cols % 16 == 0) return std::apply(mma::launch<mma::DecBF16>, args);
      break;
    case GgmlType::F16:
      if (cols % 16 == 0) return std::apply(mma::launch<mma::DecF16>, args);
      break;
    default: break;
  }
  return fma_path(type, w, rows, cols, x, y, batch, stream, accumulate);
}

}  // namespace ds::cuda

// Batch-1 matrix-vector product (matvec.h). Q4_K, Q6_K and Q8_0 (the weights of Q4_K_M and Q8_0
// files) go through the direct-load kernels of matvec_direct.cuh; every other type through the
// shared-memory tile kernel of matvec_kernel.cuh (also the batched kernel's template). Thread mapping
// of the tile kernel: a CTA is 8 warps; a warp owns a row group of kR = 4 rows (or a 1/ks share of
// their columns when ks warps split the columns of few, long rows). A warp walks its rows in tiles of
// `lpr` units (quant_traits.cuh) per row: it copies the tile's bytes of all kR rows into its
// shared-memory slice with aligned 16-byte loads, then each lane decodes one unit per row from shared
// memory. Partial sums meet through shuffles within the group and shared memory across the ks warps.
#include "cuda/matvec_direct.cuh"
#include "cuda/matvec_kernel.cuh"

namespace ds::cuda {

namespace {
// The checks every path shares (the tile launcher repeats them).
template <class QT>
Status check_args(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, const float* y) {
  if (rows <= 0 || cols <= 0) return cu_err("cuda matvec: empty matrix [{}, {}]", rows, cols);
  if (cols % QT::kBlockElems != 0)
    return cu_err("cuda matvec: {} weights need cols to be a multiple of {}, got {}", type_cstr(type),
                  QT::kBlockElems, cols);
  if ((uintptr_t)w % 16 != 0) return cu_err("cuda matvec: weights {} are not 16-byte aligned", w);
  if ((uintptr_t)x % 16 != 0) return cu_err("cuda matvec: x {} is not 16-byte aligned", (const void*)x);
  if ((uintptr_t)y % 4 != 0) return cu_err("cuda matvec: y {} is not 4-byte aligned", (const void*)y);
  return {};
}

template <GgmlType T, class D>
Status direct(const void* w, int64_t rows, int64_t cols, const float* x, float* y, cudaStream_t stream,
              bool accumulate) {
  if (auto st = check_args<qt::QuantTraits<T>>(T, w, rows, cols, x, y); !st.ok()) return st;
  return mvd::launch<D>(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
}
}  // namespace

Status matvec(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
              cudaStream_t stream, bool accumulate) {
  switch (type) {
    case GgmlType::Q4_K: return direct<GgmlType::Q4_K, mvd::Q4K>(w, rows, cols, x, y, stream, accumulate);
    case GgmlType::Q6_K: return direct<GgmlType::Q6_K, mvd::Q6K>(w, rows, cols, x, y, stream, accumulate);
    case GgmlType::Q8_0: return direct<GgmlType::Q8_0, mvd::Q80>(w, rows, cols, x, y, stream, accumulate);
    default: break;
  }
  const mv::MvArgs a{static_cast<const uint8_t*>(w), 0, rows, cols, x, y, 1, 0, 0, accumulate};
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return mv::launch<qt::QuantTraits<GgmlType::T>, false>(type, a, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda matvec: no kernel for weight type {}", type_cstr(type));
  }
}

}  // namespace ds::cuda

// Embedding lookup (ops/get_rows.h): y[i, :] = dequantize(W[ids[i], :]); the ids are read on the
// device, so the lookup can sit inside a captured graph. grid (n_ids, units per row / 128), thread per unit.
// Ids outside [0, n_rows) produce a zero row (the host validates token ids).
#include "cuda/common.cuh"
#include "cuda/cuda_util.h"
#include "cuda/ops.h"
#include "cuda/quant_traits.cuh"

namespace ds::cuda {
namespace {
using qt::QuantTraits;

template <class QT>
__global__ void get_rows_kernel(const ops::GetRowsParams p, const uint8_t* w, int64_t row_bytes, const int32_t* ids,
                                float* y) {
  const int64_t i = blockIdx.x;  // ids on x: up to 2^31 (y is limited to 65535)
  const int64_t u = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
  const int32_t id = ids[i];
  float* yr = y + i * p.n_cols;
  const bool ok = id >= 0 && id < p.n_rows;
  const uint8_t* row = w + (ok ? id : 0) * row_bytes;
  if constexpr (QT::kIsFloat) {
    if (u < p.n_cols) yr[u] = ok ? QT::elem(row, u) : 0.f;
  } else {
    if (u >= p.n_cols / QT::kBlockElems * QT::kUnits) return;
    const int64_t blk = u / QT::kUnits;
    const int k = (int)(u % QT::kUnits);
    float v[QT::kE];
    QT::dequant(row + blk * QT::kBlockBytes, k, v);
#pragma unroll
    for (int r = 0; r < QT::kRuns; r++)
#pragma unroll
      for (int e = 0; e < QT::kRunLen; e++)
        yr[blk * QT::kBlockElems + QT::run_start(k, r) + e] = ok ? v[r * QT::kRunLen + e] : 0.f;
  }
}

template <class QT>
Status launch(const ops::GetRowsParams& p, const void* w, const int32_t* ids, float* y, cudaStream_t stream) {
  const auto info = *ggml_type_info(p.type);
  if (p.n_cols % info.block_size != 0)
    return cu_err("cuda get_rows: {} rows of {} elements are not whole blocks", type_cstr(p.type), p.n_cols);
  const int64_t row_bytes = (int64_t)ggml_row_bytes(info, p.n_cols);
  const int align = QT::kIsFloat ? (int)info.type_size : QT::kAlign;
  if ((uintptr_t)w % 16 != 0 || row_bytes % align != 0)
    return cu_err("cuda get_rows: {} weights must be 16-byte aligned with rows a multiple of {} bytes",
                  type_cstr(p.type), align);
  const int64_t work = QT::kIsFloat ? p.n_cols : p.n_cols / QT::kBlockElems * QT::kUnits;
  get_rows_kernel<QT><<<dim3((unsigned)p.n_ids, grid_for(work, 128)), 128, 0, stream>>>(
      p, static_cast<const uint8_t*>(w), row_bytes, ids, y);
  CUDA_TRY_LAUNCH("get_rows", stream);
  return {};
}

}  // namespace

Status get_rows(const ops::GetRowsParams& p, const void* w, const int32_t* ids, float* y, cudaStream_t stream) {
  if (p.n_ids < 0 || p.n_rows < 1 || p.n_cols < 1)
    return cu_err("cuda get_rows: bad shape rows {} cols {} ids {}", p.n_rows, p.n_cols, p.n_ids);
  if (p.n_ids == 0) return {};
  switch (p.type) {
#define DS_CASE(T) \
  case GgmlType::T: return launch<QuantTraits<GgmlType::T>>(p, w, ids, y, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda get_rows: no kernel for type {}", type_cstr(p.type));
  }
}

}  // namespace ds::cuda

// Matrix-vector kernels (matvec.h). Thread mapping: a CTA is 8 warps; a warp owns a row group of
// kR = 4 rows (or a 1/ks share of their columns when ks warps split the columns of few, long rows).
// A warp walks its rows in tiles of `lpr` units (quant_traits.cuh) per row: it copies the tile's
// bytes of all kR rows into its shared-memory slice with aligned 16-byte loads (every byte of W is
// loaded once, whatever the block size: 18, 34, 210 ...), then each lane decodes one unit per row
// from shared memory. Lanes form 32/lpr groups of lpr lanes; a group takes kR*lpr/32 of the rows, so
// short rows (few units) still keep every lane busy. A lane loads the activations of its unit once
// and reuses them for all its rows. Partial sums meet through shuffles within the group and shared
// memory across the ks warps.
#include "cuda/matvec_kernel.cuh"

namespace ds::cuda {

Status matvec(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
              cudaStream_t stream, bool accumulate) {
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

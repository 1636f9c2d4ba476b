// cuda::matmul (ops/matmul.h) on top of the matvec kernels: one weight pass per 64 tokens.
#include <algorithm>

#include "cuda/matvec.h"
#include "cuda/ops.h"

namespace ds::cuda {

Status matmul(const ops::MatmulParams& p, const void* w, const float* x, float* y, cudaStream_t stream) {
  if (p.n_tokens < 0) return err("cuda matmul: negative token count {}", p.n_tokens);
  if (p.n_tokens == 1) return matvec(p.type, w, p.n_rows, p.n_cols, x, y, stream);
  for (int64_t t = 0; t < p.n_tokens; t += kMatvecMaxBatch) {
    const int b = (int)std::min<int64_t>(kMatvecMaxBatch, p.n_tokens - t);
    DS_TRY(matvec_batched(p.type, w, p.n_rows, p.n_cols, x + t * p.n_cols, y + t * p.n_rows, b, stream));
  }
  return {};
}

}  // namespace ds::cuda

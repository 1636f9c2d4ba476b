// Quantized matrix products with float activations (qwen35-spec.md §4.1, §5, §6; formats.md §5):
//   y[t, n] = sum_k W[n, k] * x[t, k]       t in [0, n_tokens), n in [0, n_rows), k in [0, n_cols)
// W is a GGUF matrix of `type`, ggml ne {n_cols, n_rows}: n_rows rows of n_cols elements, each row
// ggml_row_bytes(type, n_cols) bytes, row-major (= PyTorch [out, in]). x [n_tokens, n_cols] packed fp32,
// y [n_tokens, n_rows] packed fp32. Activations stay fp32 (no Q8 activation rounding as in llama.cpp §8.2);
// products accumulate in fp32. n_tokens == 1 is the decode matrix-vector product; n_tokens > 1 the
// prefill matrix-matrix product, which reads each weight row once per call. y must not alias x.
// Call: ds::cpu::matmul(p, w, x, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

#include "core/ggml_type.h"

namespace ds::ops {

struct MatmulParams {
  GgmlType type = GgmlType::F32;
  int64_t n_rows = 0;    // N: outputs (ne1)
  int64_t n_cols = 0;    // K: inputs (ne0), a multiple of the type's block size
  int64_t n_tokens = 0;  // T
};

}  // namespace ds::ops

// Embedding lookup (qwen35-spec.md §6): y[i, :] = dequantize(W[ids[i], :]) for i in [0, n_ids), fp32 out.
// W is a GGUF matrix of `type`, ne {n_cols, n_rows} (token_embd: {H, V}); y [n_ids, n_cols] packed.
// Every id must be in [0, n_rows): callers validate ids (an out-of-range token is a user error).
// Call: ds::cpu::get_rows(p, w, ids, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

#include "core/ggml_type.h"

namespace ds::ops {

struct GetRowsParams {
  GgmlType type = GgmlType::F32;
  int64_t n_rows = 0;  // V
  int64_t n_cols = 0;  // H
  int64_t n_ids = 0;
};

}  // namespace ds::ops

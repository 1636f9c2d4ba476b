#include "core/check.h"
#include "cpu/cpu.h"
#include "quant/quant.h"

namespace ds::cpu {

void get_rows(const ops::GetRowsParams& p, const void* w, const int32_t* ids, float* y) {
  const auto info = ggml_type_info(p.type);
  DS_CHECK(info.has_value(), "get_rows: unknown type {}", (uint32_t)p.type);
  const uint64_t row_bytes = ggml_row_bytes(*info, p.n_cols);
  for (int64_t i = 0; i < p.n_ids; i++) {
    DS_CHECK(ids[i] >= 0 && ids[i] < p.n_rows, "get_rows: id {} outside [0, {})", ids[i], p.n_rows);
    quant::dequantize_row(p.type, (const uint8_t*)w + ids[i] * row_bytes, y + i * p.n_cols, p.n_cols);
  }
}

}  // namespace ds::cpu

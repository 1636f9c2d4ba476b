// Public entry points of quant.h: type dispatch, the scalar reference row loops, and the choice
// between the scalar reference and the fast (AVX2+FMA) kernels at run time.
#include "quant/quant.h"

#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/kernels.h"

namespace ds::quant {

using detail::dequant_block_fn;

bool can_dequantize(GgmlType t) { return dequant_block_fn(t) != nullptr; }
bool can_dot(GgmlType t) { return can_dequantize(t); }

namespace {

// Callers must pass whole blocks of a known type (quant.h); a violation is a bug in the caller.
GgmlTypeInfo info_checked(GgmlType t, int64_t n, const char* fn) {
  auto i = ggml_type_info(t);
  DS_CHECK(i.has_value(), "{}: unknown type id {}", fn, (uint32_t)t);
  DS_CHECK(n >= 0 && n % i->block_size == 0, "{}: n = {} is not a multiple of {}'s block size {}", fn,
           n, i->name, i->block_size);
  return *i;
}

}  // namespace

void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n) {
  const GgmlTypeInfo ti = info_checked(t, n, "dequantize_row");
  const auto fn = dequant_block_fn(t);
  DS_CHECK(fn != nullptr, "dequantize_row: type {} is not supported (call check_supported first)", ti.name);
  const auto* p = (const uint8_t*)src;
  for (int64_t b = 0; b < n / ti.block_size; b++) fn(p + b * ti.type_size, dst + b * ti.block_size);
}

float dot_row_ref(GgmlType t, const void* row, const float* x, int64_t n) {
  const GgmlTypeInfo ti = info_checked(t, n, "dot_row");
  if (t == GgmlType::F32) {
    const auto* w = (const uint8_t*)row;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += load_f32(w + 4 * i) * x[i];
    return s;
  }
  if (t == GgmlType::F16 || t == GgmlType::BF16) {
    const auto* w = (const uint8_t*)row;
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
      const uint16_t h = load_u16(w + 2 * i);
      s += (t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h)) * x[i];
    }
    return s;
  }
  // Quantized: decode one block, then a float32 partial sum per block.
  const auto fn = dequant_block_fn(t);
  DS_CHECK(fn != nullptr, "dot_row: type {} is not supported (call check_supported first)", ti.name);
  const auto* p = (const uint8_t*)row;
  float y[256];
  float total = 0;
  for (int64_t b = 0; b < n / ti.block_size; b++) {
    fn(p + b * ti.type_size, y);
    const float* xb = x + b * ti.block_size;
    float s = 0;
    for (uint32_t j = 0; j < ti.block_size; j++) s += y[j] * xb[j];
    total += s;
  }
  return total;
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  if (detail::dequantize_row_fast(t, src, dst, n)) return;
  dequantize_row_ref(t, src, dst, n);
}

float dot_row(GgmlType t, const void* row, const float* x, int64_t n) {
  float out;
  if (detail::dot_row_fast(t, row, x, n, &out)) return out;
  return dot_row_ref(t, row, x, n);
}

void dot_rows(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n, float* y) {
  if (n_rows <= 0) return;
  info_checked(t, n, "dot_rows");
  if (detail::dot_rows_fast(t, w, row_stride, n_rows, x, n, y)) return;
  for (int64_t r = 0; r < n_rows; r++) y[r] = dot_row_ref(t, (const uint8_t*)w + r * row_stride, x, n);
}

Status check_supported(GgmlType t, const std::string& what) {
  auto i = ggml_type_info(t);
  if (!i)
    return err("quant: {}: unknown tensor type id {} (expected a ggml_type id, formats.md §4)", what,
               (uint32_t)t);
  if (!can_dequantize(t))
    return err("quant: {}: tensor type {} (id {}) is not supported by deltaserve", what, i->name,
               (uint32_t)t);
  return {};
}

}  // namespace ds::quant

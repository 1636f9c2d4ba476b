#include "quant/kernels.h"
namespace ds::quant::detail {
bool cpu_has_avx2_fma() { return false; }
bool dot_row_fast(GgmlType, const void*, const float*, int64_t, float*) { return false; }
bool dequantize_row_fast(GgmlType, const void*, float*, int64_t) { return false; }
}

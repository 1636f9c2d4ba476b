#include "quant/quant.h"
namespace ds::quant {
bool can_quantize(GgmlType) { return false; }
uint64_t quantize_row(GgmlType, const float*, void*, int64_t) { return 0; }
}

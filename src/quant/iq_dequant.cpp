#include "quant/kernels.h"
namespace ds::quant::detail {
DequantBlockFn iq_dequant_block_fn(GgmlType) { return nullptr; }
}

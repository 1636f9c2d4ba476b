// Seeded random data for tests and benchmarks of the quantized kernels: float vectors ~ N(0, scale^2) and
// whole blocks of any GGML type that decode to finite, realistically scaled weights (random code bytes,
// every f16 scale field of magnitude 2^-9 .. 2^-6: d of either sign, dmin positive). Random bytes alone
// would put NaN / inf / huge values in the f16 scale fields.
#pragma once
#include <cstdint>
#include <vector>

#include "core/ggml_type.h"

namespace ds {

std::vector<float> random_normal(int64_t n, uint64_t seed, float scale = 1.f);

// n_elems elements (a whole number of blocks) of type t; F32 / F16 / BF16 hold N(0, 1) values.
std::vector<uint8_t> random_blocks(GgmlType t, int64_t n_elems, uint64_t seed);

}  // namespace ds

// Helpers for the quant tests: random but valid blocks of any type (finite scales), Gaussian data.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "core/ggml_type.h"

namespace ds::quant::test {

// n_blocks random blocks of type t: random bytes, with every f16 scale field set to a finite value of
// magnitude 2^-14..2^-3 (random sign), as the golden generator does (formats.md §7).
std::vector<uint8_t> random_blocks(GgmlType t, int64_t n_blocks, std::mt19937& rng);
// n values from N(0, sigma^2).
std::vector<float> gaussian(int64_t n, std::mt19937& rng, float sigma = 1.0f);
// Every type this module decodes (the golden types plus F32 and IQ1_M).
std::vector<GgmlType> all_decodable_types();

}  // namespace ds::quant::test

// Helpers for the CUDA tests: GPU presence (tests skip with a message without one), random weights of
// any supported GGML type with sane scale fields, and host<->device copies that fail the test on error
// (device_copy.h).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/ggml_type.h"
#include "cuda/cuda_util.h"
#include "device_copy.h"
#include "quant/random_blocks.h"

namespace ds::test {

bool have_gpu();

#define DS_REQUIRE_GPU()                                                                   \
  do {                                                                                     \
    if (!::ds::test::have_gpu())                                                           \
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none): GPU test skipped"; \
  } while (0)

// n_elems elements of type t (a whole number of blocks): random code bytes; every f16 scale a finite
// value of magnitude 2^-9 .. 2^-6 (d of either sign, dmin positive); float types ~ N(0, 1).
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  return random_blocks(t, n_elems, seed);
}
inline std::vector<float> random_floats(int64_t n, uint64_t seed, float scale = 1.f) {
  return random_normal(n, seed, scale);
}

// The types the CUDA backend reads, in a fixed order.
const std::vector<GgmlType>& cuda_types();

}  // namespace ds::test

// Helpers for the prefill kernel tests: GPU presence (tests skip with a message without one), seeded random
// data, random GGUF weights with sane scales, device buffers that fail the test on error, and one line of
// measured error per case on stdout (so a run's log shows how far inside its tolerance each case landed).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "cuda/cuda_util.h"
#include "quant/random_blocks.h"
#include "testutil.h"

namespace ds::test {

bool prefill_have_gpu();

#define DS_PREFILL_REQUIRE_GPU()                                                            \
  do {                                                                                      \
    if (!::ds::test::prefill_have_gpu())                                                    \
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none): GPU test skipped"; \
  } while (0)

#define DS_CHECK_OK(expr)                        \
  do {                                           \
    auto _s = (expr);                            \
    ASSERT_TRUE(_s.ok()) << _s.error().message;  \
  } while (0)

inline std::vector<float> prandn(size_t n, uint64_t seed, float scale = 1.f) { return random_normal((int64_t)n, seed, scale); }
std::vector<float> puniform(size_t n, uint64_t seed, float lo, float hi);

// n_elems elements of type t (whole blocks): random code bytes, every f16 scale finite (2^-9 .. 2^-6 in
// magnitude, d of either sign, dmin positive); float types ~ N(0, 1).
inline std::vector<uint8_t> prandom_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  return random_blocks(t, n_elems, seed);
}

// A device copy of a host vector (and back); failures are test failures.
template <typename T>
struct Dev {
  cuda::DeviceBuffer buf;
  size_t n = 0;
  Dev() = default;
  explicit Dev(const std::vector<T>& v) : n(v.size()) {
    auto b = cuda::DeviceBuffer::alloc(std::max<size_t>(n, 1) * sizeof(T));
    if (!b.ok()) {
      ADD_FAILURE() << b.error().message;
      return;
    }
    buf = std::move(b).value();
    if (n) {
      auto s = buf.upload(v.data(), n * sizeof(T));
      if (!s.ok()) ADD_FAILURE() << s.error().message;
    }
  }
  static Dev zeros(size_t n) { return Dev(std::vector<T>(n, T{})); }
  T* p() const { return buf.as<T>(); }
  std::vector<T> host() const {
    std::vector<T> v(n);
    if (cudaDeviceSynchronize() != cudaSuccess) ADD_FAILURE() << "cudaDeviceSynchronize failed";
    if (n) {
      auto s = buf.download(v.data(), n * sizeof(T));
      if (!s.ok()) ADD_FAILURE() << s.error().message;
    }
    return v;
  }
};

// Checks max |a - b| <= tol_abs and rel_rms <= tol_rel; prints the measured errors either way.
void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol_abs, double tol_rel,
                 const std::string& what);

}  // namespace ds::test

#include "prefill_test_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"

namespace ds::test {

bool prefill_have_gpu() { return cuda::device_count() > 0; }

std::vector<float> prandn(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> puniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint8_t> prandom_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  const int64_t n_blocks = n_elems / info.block_size;
  std::vector<uint8_t> out(n_blocks * info.type_size);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const auto f = prandn(n_elems, seed);
    for (int64_t i = 0; i < n_elems; i++) {
      if (t == GgmlType::F32) {
        std::memcpy(&out[4 * i], &f[i], 4);
      } else {
        const uint16_t h = t == GgmlType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        std::memcpy(&out[2 * i], &h, 2);
      }
    }
    return out;
  }
  std::mt19937_64 rng(seed);
  for (auto& b : out) b = (uint8_t)rng();
  std::uniform_real_distribution<float> mag(-9.f, -6.f);
  auto put_f16 = [&](uint8_t* p, bool positive) {
    float v = std::exp2(mag(rng));
    if (!positive && (rng() & 1)) v = -v;
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t b = 0; b < n_blocks; b++) {
    uint8_t* p = &out[b * info.type_size];
    switch (t) {
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: put_f16(p, false); put_f16(p + 2, true); break;
      case GgmlType::Q6_K: put_f16(p + 208, false); break;
      default: put_f16(p, false); break;  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS: d first
    }
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol_abs, double tol_rel,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const ErrStats e = compare(got.data(), want.data(), want.size());
  std::printf("[ measured ] %-60s max|d| %.3e  rel_rms %.3e  (tol %.1e / %.1e)\n", what.c_str(), e.max_abs,
              e.rel_rms, tol_abs, tol_rel);
  EXPECT_LE(e.max_abs, tol_abs) << what << ": max |diff| " << e.max_abs << " at " << e.worst << " (got "
                                << got[e.worst] << ", want " << want[e.worst] << "), rel rms " << e.rel_rms;
  EXPECT_LE(e.rel_rms, tol_rel) << what << ": rel rms " << e.rel_rms;
}

}  // namespace ds::test

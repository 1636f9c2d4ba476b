#include "quant/random_blocks.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"

namespace ds {

std::vector<float> random_normal(int64_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Byte offsets of the f16 scale fields of one block: d (signed), and dmin (positive) where the type has one.
static void scale_fields(GgmlType t, int& d_off, int& dmin_off) {
  dmin_off = -1;
  switch (t) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: d_off = 0; dmin_off = 2; break;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: d_off = 0; dmin_off = 2; break;  // the min m, positive here
    case GgmlType::Q2_K: d_off = 80; dmin_off = 82; break;
    case GgmlType::Q3_K: d_off = 108; break;
    case GgmlType::Q6_K: d_off = 208; break;
    default: d_off = 0; break;  // Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS, ...: d first
  }
}

std::vector<uint8_t> random_blocks(GgmlType t, int64_t n_elems, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  const int64_t n_blocks = n_elems / info.block_size;
  std::vector<uint8_t> out((size_t)(n_blocks * info.type_size));
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const auto f = random_normal(n_elems, seed);
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
  int d_off, dmin_off;
  scale_fields(t, d_off, dmin_off);
  for (int64_t b = 0; b < n_blocks; b++) {
    uint8_t* p = &out[b * info.type_size];
    put_f16(p + d_off, false);
    if (dmin_off >= 0) put_f16(p + dmin_off, true);
  }
  return out;
}

}  // namespace ds

#include "quant_testutil.h"

#include <cstring>

#include "core/fp16.h"

namespace ds::quant::test {
namespace {

uint16_t random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-14.0f, -3.0f);
  const float v = std::exp2(e(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
  return f32_to_f16(v);
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace

std::vector<uint8_t> random_blocks(GgmlType t, int64_t n_blocks, std::mt19937& rng) {
  const auto ti = *ggml_type_info(t);
  std::vector<uint8_t> buf(n_blocks * ti.type_size);
  for (auto& b : buf) b = (uint8_t)rng();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t i = 0; i < n_blocks; i++) {
    uint8_t* b = buf.data() + i * ti.type_size;
    std::vector<int> f16_at;
    switch (t) {
      case GgmlType::F32: { float v = nd(rng); std::memcpy(b, &v, 4); break; }
      case GgmlType::F16: put16(b, f32_to_f16(nd(rng))); break;
      case GgmlType::BF16: put16(b, f32_to_bf16(nd(rng))); break;
      case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
        f16_at = {0, 2}; break;
      case GgmlType::Q2_K: f16_at = {80, 82}; break;
      case GgmlType::Q3_K: f16_at = {108}; break;
      case GgmlType::Q6_K: f16_at = {208}; break;
      case GgmlType::TQ1_0: f16_at = {52}; break;
      case GgmlType::TQ2_0: f16_at = {64}; break;
      case GgmlType::MXFP4: b[0] = (uint8_t)(118 + rng() % 14); break;
      case GgmlType::IQ1_M: {
        // The f16 super-scale lives in the top nibbles of the four u16 scale words (formats.md §5.13).
        const uint16_t d = random_scale(rng);
        for (int k = 0; k < 4; k++) {
          uint16_t w;
          std::memcpy(&w, b + 48 + 2 * k, 2);
          w = (uint16_t)((w & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
          put16(b + 48 + 2 * k, w);
        }
        break;
      }
      default: f16_at = {0}; break;  // Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS and the IQ2/IQ3/IQ1_S grids
    }
    for (int off : f16_at) put16(b + off, random_scale(rng));
  }
  return buf;
}

std::vector<float> gaussian(int64_t n, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<GgmlType> all_decodable_types() {
  using T = GgmlType;
  return {T::F32,    T::F16,    T::BF16,  T::Q4_0,   T::Q4_1,    T::Q5_0,   T::Q5_1,   T::Q8_0,
          T::Q2_K,   T::Q3_K,   T::Q4_K,  T::Q5_K,   T::Q6_K,    T::IQ2_XXS, T::IQ2_XS, T::IQ2_S,
          T::IQ3_XXS, T::IQ3_S, T::IQ1_S, T::IQ1_M,  T::IQ4_NL,  T::IQ4_XS, T::TQ1_0,  T::TQ2_0,
          T::MXFP4};
}

}  // namespace ds::quant::test

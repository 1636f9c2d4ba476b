#include "cuda_test_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"

namespace ds::test {

bool have_gpu() { return cuda::device_count() > 0; }

const std::vector<GgmlType>& cuda_types() {
  static const std::vector<GgmlType> v = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q8_0,
                                          GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_K,
                                          GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};
  return v;
}

std::vector<float> random_floats(int64_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<uint8_t> random_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  std::mt19937_64 rng(seed);
  const int64_t n_blocks = n_elems / info.block_size;
  std::vector<uint8_t> out(n_blocks * info.type_size);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const auto f = random_floats(n_elems, seed);
    for (int64_t i = 0; i < n_elems; i++) {
      if (t == GgmlType::F32) std::memcpy(&out[4 * i], &f[i], 4);
      else {
        const uint16_t h = t == GgmlType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        std::memcpy(&out[2 * i], &h, 2);
      }
    }
    return out;
  }
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

cuda::DeviceBuffer to_device(const void* p, size_t bytes) {
  auto b = cuda::DeviceBuffer::from_host(p, bytes);
  if (!b.ok()) {
    ADD_FAILURE() << b.error().message;
    return {};
  }
  return std::move(b).value();
}

}  // namespace ds::test

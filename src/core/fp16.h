// Exact scalar conversions between f32 and the 16-bit float formats stored in GGUF blocks
// (formats.md §3). f16 -> f32 handles subnormals, inf and NaN; f32 -> f16/bf16 round to nearest even.
#pragma once
#include <cstdint>
#include <cstring>

namespace ds {

inline float bits_to_f32(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
// Unaligned loads: tensor data inside a GGUF is only byte-aligned per element type (formats.md §2.6).
inline uint16_t load_u16(const void* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline float load_f32(const void* p) { float v; std::memcpy(&v, p, 4); return v; }

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {
    // zero or subnormal: man * 2^-24, exact in f32
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  // rounds to >= 65520: inf
  if (ax < 0x38800000) {
    // subnormal half (or zero): value / 2^-24, round to nearest even
    const float v = bits_to_f32(ax) * 16777216.0f;
    uint32_t m = (uint32_t)v;
    const float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t m = ax + 0xc8000fff + ((ax >> 13) & 1);  // rebias exponent (-112 << 23) and round
  return (uint16_t)(sign | (m >> 13));
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

}  // namespace ds

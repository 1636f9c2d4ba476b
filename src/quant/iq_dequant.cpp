// Scalar block decoders of the codebook i-quants (formats.md §5.13): IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M. Each 256-element block has 8 groups of 32 elements; group g, chunk
// l covers elements 32g + 8l .. +7, decoded from a grid entry (byte j = magnitude of element j)
// times a scale and per-element signs. Products are exact in float32, so results are bit-exact.
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace ds::quant::detail {
namespace {

inline uint8_t grid_byte(uint64_t entry, int j) { return (uint8_t)(entry >> (8 * j)); }
inline float sign(uint8_t mask, int j) { return (mask >> j) & 1 ? -1.0f : 1.0f; }

void deq_iq2_xxs(const void* p, float* y) {
  const auto* b = (const BlockIQ2_XXS*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    const uint8_t* a = b->qs + 8 * g;  // four grid indices, then the u32 of signs and scale
    uint32_t w;
    std::memcpy(&w, a + 4, 4);
    const float db = d * (0.5f + (float)(w >> 28)) * 0.25f;
    for (int l = 0; l < 4; l++) {
      const uint64_t e = iq2xxs_grid[a[l]];
      const uint8_t s = ksigns((w >> (7 * l)) & 127);
      for (int j = 0; j < 8; j++) y[32 * g + 8 * l + j] = db * (float)grid_byte(e, j) * sign(s, j);
    }
  }
}

void deq_iq2_xs(const void* p, float* y) {
  const auto* b = (const BlockIQ2_XS*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    const float db_lo = d * (0.5f + (float)(b->scales[g] & 0xF)) * 0.25f;
    const float db_hi = d * (0.5f + (float)(b->scales[g] >> 4)) * 0.25f;
    for (int l = 0; l < 4; l++) {
      uint16_t v;
      std::memcpy(&v, &b->qs[4 * g + l], 2);
      const uint64_t e = iq2xs_grid[v & 511];
      const uint8_t s = ksigns(v >> 9);
      const float db = l < 2 ? db_lo : db_hi;
      for (int j = 0; j < 8; j++) y[32 * g + 8 * l + j] = db * (float)grid_byte(e, j) * sign(s, j);
    }
  }
}

void deq_iq2_s(const void* p, float* y) {
  const auto* b = (const BlockIQ2_S*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    const float db_lo = d * (0.5f + (float)(b->scales[g] & 0xF)) * 0.25f;
    const float db_hi = d * (0.5f + (float)(b->scales[g] >> 4)) * 0.25f;
    for (int l = 0; l < 4; l++) {
      const int idx = b->qs[4 * g + l] | (((b->qh[g] >> (2 * l)) & 3) << 8);
      const uint64_t e = iq2s_grid[idx];
      const uint8_t s = b->signs[4 * g + l];
      const float db = l < 2 ? db_lo : db_hi;
      for (int j = 0; j < 8; j++) y[32 * g + 8 * l + j] = db * (float)grid_byte(e, j) * sign(s, j);
    }
  }
}

void deq_iq3_xxs(const void* p, float* y) {
  const auto* b = (const BlockIQ3_XXS*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    uint32_t w;
    std::memcpy(&w, b->sas + 4 * g, 4);
    const float db = d * (0.5f + (float)(w >> 28)) * 0.5f;
    for (int l = 0; l < 4; l++) {
      const uint8_t s = ksigns((w >> (7 * l)) & 127);
      const uint32_t e1 = iq3xxs_grid[b->qs[8 * g + 2 * l]];
      const uint32_t e2 = iq3xxs_grid[b->qs[8 * g + 2 * l + 1]];
      float* o = y + 32 * g + 8 * l;
      for (int j = 0; j < 4; j++) {
        o[j] = db * (float)grid_byte(e1, j) * sign(s, j);
        o[j + 4] = db * (float)grid_byte(e2, j) * sign(s, j + 4);
      }
    }
  }
}

void deq_iq3_s(const void* p, float* y) {
  const auto* b = (const BlockIQ3_S*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    const int nib = (b->scales[g / 2] >> (4 * (g % 2))) & 0xF;
    const float db = d * (float)(1 + 2 * nib);
    for (int l = 0; l < 4; l++) {
      const int i1 = b->qs[8 * g + 2 * l] | (((b->qh[g] >> (2 * l)) & 1) << 8);
      const int i2 = b->qs[8 * g + 2 * l + 1] | (((b->qh[g] >> (2 * l + 1)) & 1) << 8);
      const uint8_t s = b->signs[4 * g + l];
      float* o = y + 32 * g + 8 * l;
      for (int j = 0; j < 4; j++) {
        o[j] = db * (float)grid_byte(iq3s_grid[i1], j) * sign(s, j);
        o[j + 4] = db * (float)grid_byte(iq3s_grid[i2], j) * sign(s, j + 4);
      }
    }
  }
}

// iq1s_grid bytes are int8 values -1, 0, +1.
inline float grid1(uint64_t entry, int j) { return (float)(int8_t)(entry >> (8 * j)); }

void deq_iq1_s(const void* p, float* y) {
  const auto* b = (const BlockIQ1_S*)p;
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < 8; g++) {
    const uint16_t h = b->qh[g];
    const float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
    const float delta = (h & 0x8000) ? -0.125f : 0.125f;
    for (int l = 0; l < 4; l++) {
      const uint64_t e = iq1s_grid[b->qs[4 * g + l] | (((h >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; j++) y[32 * g + 8 * l + j] = dl * (grid1(e, j) + delta);
    }
  }
}

void deq_iq1_m(const void* p, float* y) {
  const auto* b = (const BlockIQ1_M*)p;
  uint16_t sc[4];
  std::memcpy(sc, b->scales, 8);
  // The f16 super-scale is spread over the top nibbles of the four scale words.
  const uint16_t d_bits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                     (sc[3] & 0xF000));
  const float d = f16_to_f32(d_bits);
  for (int g = 0; g < 8; g++) {
    const int u = sc[g / 2] >> (6 * (g % 2));
    const float dl1 = d * (float)(2 * (u & 7) + 1);
    const float dl2 = d * (float)(2 * ((u >> 3) & 7) + 1);
    for (int l = 0; l < 4; l++) {
      const uint8_t qh = b->qh[2 * g + l / 2] >> (4 * (l % 2));  // low nibble: 3 index bits + delta sign
      const uint64_t e = iq1s_grid[b->qs[4 * g + l] | ((qh & 7) << 8)];
      const float delta = (qh & 8) ? -0.125f : 0.125f;
      const float dl = l < 2 ? dl1 : dl2;
      for (int j = 0; j < 8; j++) y[32 * g + 8 * l + j] = dl * (grid1(e, j) + delta);
    }
  }
}

}  // namespace

DequantBlockFn iq_dequant_block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: return deq_iq2_xxs;
    case GgmlType::IQ2_XS: return deq_iq2_xs;
    case GgmlType::IQ2_S: return deq_iq2_s;
    case GgmlType::IQ3_XXS: return deq_iq3_xxs;
    case GgmlType::IQ3_S: return deq_iq3_s;
    case GgmlType::IQ1_S: return deq_iq1_s;
    case GgmlType::IQ1_M: return deq_iq1_m;
    default: return nullptr;
  }
}

}  // namespace ds::quant::detail

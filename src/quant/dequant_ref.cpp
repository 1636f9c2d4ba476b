// Scalar block decoders for the non-codebook formats (formats.md §5.1-5.12, 5.14, 5.15). These are
// the readable reference: each follows the formula of its section, products in the written order,
// so the output is bit-identical to gguf-py / ggml-quants.c (§6).
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace ds::quant::detail {
namespace {

inline uint8_t lo(uint8_t b) { return b & 0x0F; }
inline uint8_t hi(uint8_t b) { return b >> 4; }

void deq_q4_0(const void* p, float* y) {
  const auto* b = (const BlockQ4_0*)p;
  const float d = f16_to_f32(b->d);
  for (int j = 0; j < 16; j++) {
    y[j] = (float)(lo(b->qs[j]) - 8) * d;
    y[j + 16] = (float)(hi(b->qs[j]) - 8) * d;
  }
}

void deq_q4_1(const void* p, float* y) {
  const auto* b = (const BlockQ4_1*)p;
  const float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
  for (int j = 0; j < 16; j++) {
    y[j] = (float)lo(b->qs[j]) * d + m;
    y[j + 16] = (float)hi(b->qs[j]) * d + m;
  }
}

void deq_q5_0(const void* p, float* y) {
  const auto* b = (const BlockQ5_0*)p;
  const float d = f16_to_f32(b->d);
  uint32_t qh;
  std::memcpy(&qh, b->qh, 4);
  for (int j = 0; j < 16; j++) {
    const int q0 = lo(b->qs[j]) | (((qh >> j) & 1) << 4);
    const int q1 = hi(b->qs[j]) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = (float)(q0 - 16) * d;
    y[j + 16] = (float)(q1 - 16) * d;
  }
}

void deq_q5_1(const void* p, float* y) {
  const auto* b = (const BlockQ5_1*)p;
  const float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
  uint32_t qh;
  std::memcpy(&qh, b->qh, 4);
  for (int j = 0; j < 16; j++) {
    const int q0 = lo(b->qs[j]) | (((qh >> j) & 1) << 4);
    const int q1 = hi(b->qs[j]) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = (float)q0 * d + m;
    y[j + 16] = (float)q1 * d + m;
  }
}

void deq_q8_0(const void* p, float* y) {
  const auto* b = (const BlockQ8_0*)p;
  const float d = f16_to_f32(b->d);
  for (int j = 0; j < 32; j++) y[j] = (float)b->qs[j] * d;
}

void deq_q2_k(const void* p, float* y) {
  const auto* b = (const BlockQ2_K*)p;
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int e = 0; e < 256; e++) {
    const int n = e / 128, j = (e / 32) % 4, k = (e / 16) % 2, l = e % 16;
    const int q = (b->qs[32 * n + 16 * k + l] >> (2 * j)) & 3;
    const uint8_t sc = b->scales[e / 16];
    y[e] = (d * (float)lo(sc)) * (float)q - dmin * (float)hi(sc);
  }
}

// The sixteen signed 6-bit Q3_K scales (formats.md §5.7).
void q3_k_scales(const uint8_t* s, int* sc) {
  for (int i = 0; i < 16; i++) {
    const int low4 = i < 8 ? lo(s[i]) : hi(s[i - 8]);
    const int high2 = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    sc[i] = (low4 | (high2 << 4)) - 32;
  }
}

void deq_q3_k(const void* p, float* y) {
  const auto* b = (const BlockQ3_K*)p;
  const float d = f16_to_f32(b->d);
  int sc[16];
  q3_k_scales(b->scales, sc);
  for (int e = 0; e < 256; e++) {
    const int n = e / 128, j = (e / 32) % 4, k = (e / 16) % 2, l = e % 16;
    const int low = (b->qs[32 * n + 16 * k + l] >> (2 * j)) & 3;
    const int high = (b->hmask[16 * k + l] >> (4 * n + j)) & 1;
    const int q = low - (high ? 0 : 4);
    y[e] = (d * (float)sc[e / 16]) * (float)q;
  }
}

void deq_q4_k(const void* p, float* y) {
  const auto* b = (const BlockQ4_K*)p;
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int s = 0; s < 8; s++) {
    uint8_t sc, mn;
    k_scale_min(b->scales, s, &sc, &mn);
    const float d1 = d * (float)sc, m1 = dmin * (float)mn;
    const uint8_t* q = b->qs + 32 * (s / 2);
    for (int l = 0; l < 32; l++) {
      const int v = (s % 2 == 0) ? lo(q[l]) : hi(q[l]);
      y[32 * s + l] = d1 * (float)v - m1;
    }
  }
}

void deq_q5_k(const void* p, float* y) {
  const auto* b = (const BlockQ5_K*)p;
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int s = 0; s < 8; s++) {
    uint8_t sc, mn;
    k_scale_min(b->scales, s, &sc, &mn);
    const float d1 = d * (float)sc, m1 = dmin * (float)mn;
    const uint8_t* q = b->qs + 32 * (s / 2);
    for (int l = 0; l < 32; l++) {
      const int v = ((s % 2 == 0) ? lo(q[l]) : hi(q[l])) | (((b->qh[l] >> s) & 1) << 4);
      y[32 * s + l] = d1 * (float)v - m1;
    }
  }
}

void deq_q6_k(const void* p, float* y) {
  const auto* b = (const BlockQ6_K*)p;
  const float d = f16_to_f32(b->d);
  for (int e = 0; e < 256; e++) {
    const int n = e / 128, t = (e / 32) % 4, l = e % 32;
    const uint8_t qlb = b->ql[64 * n + 32 * (t % 2) + l];
    const int low = t < 2 ? lo(qlb) : hi(qlb);
    const int high = (b->qh[32 * n + l] >> (2 * t)) & 3;
    const int q = (low | (high << 4)) - 32;
    y[e] = (d * (float)b->scales[e / 16]) * (float)q;
  }
}

void deq_iq4_nl(const void* p, float* y) {
  const auto* b = (const BlockIQ4_NL*)p;
  const float d = f16_to_f32(b->d);
  for (int j = 0; j < 16; j++) {
    y[j] = d * (float)kvalues_iq4nl[lo(b->qs[j])];
    y[j + 16] = d * (float)kvalues_iq4nl[hi(b->qs[j])];
  }
}

void deq_iq4_xs(const void* p, float* y) {
  const auto* b = (const BlockIQ4_XS*)p;
  const float d = f16_to_f32(b->d);
  for (int s = 0; s < 8; s++) {
    const int ls = ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b->scales_h >> (2 * s)) & 3) << 4);
    const float dl = d * (float)(ls - 32);
    for (int j = 0; j < 16; j++) {
      y[32 * s + j] = dl * (float)kvalues_iq4nl[lo(b->qs[16 * s + j])];
      y[32 * s + 16 + j] = dl * (float)kvalues_iq4nl[hi(b->qs[16 * s + j])];
    }
  }
}

void deq_mxfp4(const void* p, float* y) {
  const auto* b = (const BlockMXFP4*)p;
  const float h = e8m0_to_f32_half(b->e);
  for (int j = 0; j < 16; j++) {
    y[j] = h * (float)kvalues_mxfp4[lo(b->qs[j])];
    y[j + 16] = h * (float)kvalues_mxfp4[hi(b->qs[j])];
  }
}

void deq_tq2_0(const void* p, float* y) {
  const auto* b = (const BlockTQ2_0*)p;
  const float d = f16_to_f32(b->d);
  for (int e = 0; e < 256; e++) {
    const int n = e / 128, t = (e / 32) % 4, m = e % 32;
    const int q = (b->qs[32 * n + m] >> (2 * t)) & 3;
    y[e] = (float)(q - 1) * d;
  }
}

// Ternary digit k of a TQ1_0 byte (formats.md §5.15): the product wraps modulo 256 on purpose.
inline int tq1_digit(uint8_t b, int k) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = (uint8_t)(b * kPow3[k]);
  return ((uint16_t)q * 3) >> 8;
}

void deq_tq1_0(const void* p, float* y) {
  const auto* b = (const BlockTQ1_0*)p;
  const float d = f16_to_f32(b->d);
  for (int k = 0; k < 5; k++)
    for (int m = 0; m < 32; m++) y[32 * k + m] = (float)(tq1_digit(b->qs[m], k) - 1) * d;
  for (int k = 0; k < 5; k++)
    for (int m = 0; m < 16; m++) y[160 + 16 * k + m] = (float)(tq1_digit(b->qs[32 + m], k) - 1) * d;
  for (int k = 0; k < 4; k++)
    for (int m = 0; m < 4; m++) y[240 + 4 * k + m] = (float)(tq1_digit(b->qh[m], k) - 1) * d;
}

void deq_f32(const void* p, float* y) { std::memcpy(y, p, 4); }
void deq_f16(const void* p, float* y) { y[0] = f16_to_f32(load_u16(p)); }
void deq_bf16(const void* p, float* y) { y[0] = bf16_to_f32(load_u16(p)); }

}  // namespace

DequantBlockFn dequant_block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return deq_f32;
    case GgmlType::F16: return deq_f16;
    case GgmlType::BF16: return deq_bf16;
    case GgmlType::Q4_0: return deq_q4_0;
    case GgmlType::Q4_1: return deq_q4_1;
    case GgmlType::Q5_0: return deq_q5_0;
    case GgmlType::Q5_1: return deq_q5_1;
    case GgmlType::Q8_0: return deq_q8_0;
    case GgmlType::Q2_K: return deq_q2_k;
    case GgmlType::Q3_K: return deq_q3_k;
    case GgmlType::Q4_K: return deq_q4_k;
    case GgmlType::Q5_K: return deq_q5_k;
    case GgmlType::Q6_K: return deq_q6_k;
    case GgmlType::IQ4_NL: return deq_iq4_nl;
    case GgmlType::IQ4_XS: return deq_iq4_xs;
    case GgmlType::MXFP4: return deq_mxfp4;
    case GgmlType::TQ1_0: return deq_tq1_0;
    case GgmlType::TQ2_0: return deq_tq2_0;
    default: return iq_dequant_block_fn(t);
  }
}

}  // namespace ds::quant::detail

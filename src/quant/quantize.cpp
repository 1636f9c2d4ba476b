// Quantizers f32 -> blocks, following ggml's reference algorithms without an importance matrix
// (ggml-quants.c: quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1,q4_K,q5_K,q6_K}_ref, with make_qkx2_quants
// for the K-quants with mins and make_qx_quants for Q6_K). Written from those formulas; the
// roundings (nearest_int = round half to even, roundf, truncating casts) are kept as in ggml so the
// chosen codes match. Scales are stored as f16 with round-to-nearest-even (core/fp16.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace ds::quant {
namespace {

// Round to nearest, ties to even, via the float "magic number" 1.5 * 2^23 (valid for |v| < 2^22).
inline int nearest_int(float v) {
  const float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ---- 32-element formats ------------------------------------------------------------------------

void quant_q8_0(const float* x, BlockQ8_0* y) {
  float amax = 0;
  for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)std::roundf(x[j] * id);
}

// The signed value of largest magnitude (first one on ties), as ggml's Q4_0/Q5_0 use it.
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; j++)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void quant_q4_0(const float* x, BlockQ4_0* y) {
  const float d = signed_absmax(x, 32) / -8.0f;  // the extreme value maps to code 0 (= -8)
  const float id = d != 0 ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  for (int j = 0; j < 16; j++) {
    const uint8_t a = (uint8_t)std::min(15, (int)(int8_t)(x[j] * id + 8.5f));
    const uint8_t b = (uint8_t)std::min(15, (int)(int8_t)(x[j + 16] * id + 8.5f));
    y->qs[j] = (uint8_t)(a | (b << 4));
  }
}

void quant_q5_0(const float* x, BlockQ5_0* y) {
  const float d = signed_absmax(x, 32) / -16.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; j++) {
    const int a = std::min(31, (int)(int8_t)(x[j] * id + 16.5f));
    const int b = std::min(31, (int)(int8_t)(x[j + 16] * id + 16.5f));
    y->qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
    qh |= (uint32_t)((a >> 4) & 1) << j;
    qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
  }
  std::memcpy(y->qh, &qh, 4);
}

// Q4_1 (kBits = 4) and Q5_1 (kBits = 5): affine code q = round((x - min) / d), d = range / (2^bits - 1).
template <int kBits, class Block>
void quant_q_1(const float* x, Block* y) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; j++) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / (float)((1 << kBits) - 1);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  y->d = f32_to_f16(d);
  y->m = f32_to_f16(min);
  uint32_t qh = 0;
  for (int j = 0; j < 16; j++) {
    int a = (uint8_t)((x[j] - min) * id + 0.5f), b = (uint8_t)((x[j + 16] - min) * id + 0.5f);
    if (kBits == 4) {
      a = std::min(15, a);
      b = std::min(15, b);
    }
    y->qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
    qh |= (uint32_t)((a >> 4) & 1) << j;
    qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
  }
  if constexpr (kBits == 5) std::memcpy(y->qh, &qh, 4);
}

// ---- K-quants ----------------------------------------------------------------------------------

// Affine fit x ~ scale * L - min_out over n values with codes L in [0, nmax], weighted least squares
// (ggml's make_qkx2_quants): start from the min/max grid, then try nstep + 1 slightly different
// grid spacings and keep the one with the smallest weighted squared (or absolute) error.
// Returns the scale; *min_out is the (non-negative) min to subtract.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                    float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; i++) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; i++) L[i] = 0;
    *min_out = -min;
    return 0.0f;
  }
  auto err = [&](float scale, float mn, const uint8_t* q) {
    float e = 0;
    for (int i = 0; i < n; i++) {
      const float diff = scale * q[i] + mn - x[i];
      e += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; i++) L[i] = (uint8_t)std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
  float best = err(scale, min, L);
  if (nstep < 1) {
    *min_out = -min;
    return scale;
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; i++) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = (uint8_t)l;
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float e = err(this_scale, this_min, aux);
      if (e < best) {
        std::memcpy(L, aux, n);
        best = e;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *min_out = -min;
  return scale;
}

// Q4_K (nmax 15) and Q5_K (nmax 31): per 32-element sub-block an affine fit, then the 8 scales and
// 8 mins quantized to 6 bits against d = max_scale/63, dmin = max_min/63, then the codes recomputed
// against the stored (f16-rounded, 6-bit) scales.
template <int kNmax>
void quant_k_affine(const float* x, uint8_t* scales12, uint16_t* d_out, uint16_t* dmin_out, uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; l++) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = kNmax == 15 ? fit_scale_min(32, 15, xs, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20, false)
                            : fit_scale_min(32, 31, xs, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales12, 0, 12);
  for (int j = 0; j < 8; j++) {
    const uint8_t ls = (uint8_t)std::min(63, (int)(uint8_t)nearest_int(inv_scale * scales[j]));
    const uint8_t lm = (uint8_t)std::min(63, (int)(uint8_t)nearest_int(inv_min * mins[j]));
    if (j < 4) {
      scales12[j] = ls;
      scales12[j + 4] = lm;
    } else {  // bit map of formats.md §5.8
      scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
      scales12[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.0f);
  *dmin_out = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(*d_out), dmin = f16_to_f32(*dmin_out);
  for (int j = 0; j < 8; j++) {
    uint8_t sc, mn;
    detail::k_scale_min(scales12, j, &sc, &mn);
    const float dl = d * sc;
    if (dl == 0) continue;  // every code decodes to -dmin*mn: keep the fit's codes, as ggml does
    const float dm = dmin * mn;
    for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)std::clamp(nearest_int((x[32 * j + l] + dm) / dl), 0, kNmax);
  }
}

void quant_q4_k(const float* x, BlockQ4_K* y) {
  uint8_t L[256];
  quant_k_affine<15>(x, y->scales, &y->d, &y->dmin, L);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) y->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

void quant_q5_k(const float* x, BlockQ5_K* y) {
  uint8_t L[256];
  quant_k_affine<31>(x, y->scales, &y->d, &y->dmin, L);
  std::memset(y->qh, 0, 32);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) {
      const int a = L[64 * c + l], b = L[64 * c + 32 + l];
      y->qs[32 * c + l] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
      y->qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1)));
    }
}

// Symmetric fit x ~ scale * (L - nmax), L in [0, 2 nmax), weights x^2 (ggml's make_qx_quants with
// rmse_type 1): start from scale = max / -nmax, then try 18 nearby grid spacings and keep the one
// with the best weighted least-squares score sumlx^2 / suml2.
float fit_scale_sym(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; i++)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < 1e-15f) {
    for (int i = 0; i < n; i++) L[i] = 0;
    return 0.0f;
  }
  auto code = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; i++) {
    const int l = code(iscale, i);
    L[i] = (int8_t)(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; is++) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; i++) {
      const int l = code(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + code(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void quant_q6_k(const float* x, BlockQ6_K* y) {
  int8_t L[256];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ib++) {
    scales[ib] = fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < 1e-15f) {
    std::memset(y, 0, sizeof(*y));
    return;
  }
  const float iscale = -128.0f / max_scale;
  y->d = f32_to_f16(1 / iscale);
  for (int ib = 0; ib < 16; ib++) y->scales[ib] = (int8_t)std::min(127, nearest_int(iscale * scales[ib]));
  const float d = f16_to_f32(y->d);
  for (int j = 0; j < 16; j++) {
    const float dl = d * y->scales[j];
    if (dl == 0) continue;
    for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(std::clamp(nearest_int(x[16 * j + i] / dl), -32, 31) + 32);
  }
  // Layout of formats.md §5.10: element 128n + 32t + l.
  for (int n = 0; n < 2; n++)
    for (int l = 0; l < 32; l++) {
      const int q0 = L[128 * n + l], q1 = L[128 * n + 32 + l], q2 = L[128 * n + 64 + l], q3 = L[128 * n + 96 + l];
      y->ql[64 * n + l] = (uint8_t)((q0 & 0xF) | ((q2 & 0xF) << 4));
      y->ql[64 * n + 32 + l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
      y->qh[32 * n + l] = (uint8_t)((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
}

template <class Block, void (*Fn)(const float*, Block*), int kBlock>
uint64_t quant_rows(const float* src, void* dst, int64_t n) {
  auto* y = (Block*)dst;
  for (int64_t b = 0; b < n / kBlock; b++) Fn(src + b * kBlock, y + b);
  return (uint64_t)(n / kBlock) * sizeof(Block);
}

}  // namespace

bool can_quantize(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

uint64_t quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const auto ti = ggml_type_info(t);
  DS_CHECK(ti && can_quantize(t), "quantize_row: type {} cannot be produced", ggml_type_name(t));
  DS_CHECK(n >= 0 && n % ti->block_size == 0, "quantize_row: n = {} is not a multiple of {}'s block size {}", n,
           ti->name, ti->block_size);
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return n * sizeof(float);
    case GgmlType::F16:
    case GgmlType::BF16: {
      auto* h = (uint16_t*)dst;
      for (int64_t i = 0; i < n; i++) h[i] = t == GgmlType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      return n * 2;
    }
    case GgmlType::Q8_0: return quant_rows<BlockQ8_0, quant_q8_0, 32>(src, dst, n);
    case GgmlType::Q4_0: return quant_rows<BlockQ4_0, quant_q4_0, 32>(src, dst, n);
    case GgmlType::Q4_1: return quant_rows<BlockQ4_1, quant_q_1<4, BlockQ4_1>, 32>(src, dst, n);
    case GgmlType::Q5_0: return quant_rows<BlockQ5_0, quant_q5_0, 32>(src, dst, n);
    case GgmlType::Q5_1: return quant_rows<BlockQ5_1, quant_q_1<5, BlockQ5_1>, 32>(src, dst, n);
    case GgmlType::Q4_K: return quant_rows<BlockQ4_K, quant_q4_k, 256>(src, dst, n);
    case GgmlType::Q5_K: return quant_rows<BlockQ5_K, quant_q5_k, 256>(src, dst, n);
    case GgmlType::Q6_K: return quant_rows<BlockQ6_K, quant_q6_k, 256>(src, dst, n);
    default: return 0;
  }
}

}  // namespace ds::quant

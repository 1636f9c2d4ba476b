// Fast paths (x86-64 AVX2 + FMA + F16C) for dot_row and dequantize_row, and their dispatch. The
// decoders here (F16/BF16/F32 rows, Q8_0, Q4_0/Q4_1, Q4_K, Q6_K, and the scalar block decoders for
// anything else) turn a row of blocks into 8-float vectors holding exactly the reference values
// (every product is exact and FMA rounds once, formats.md §6) and hand them with their element
// offsets to a sink: DotSink multiplies them into four fp32 accumulators, StoreSink writes them out.
// The factored dot kernels (dot_kernels_avx2.cpp) and the code-buffer kernels
// (dot_generic_avx2.cpp) are tried first; dispatch order is in dot_row_fast / dequantize_row_fast. The kernels live in a
// `#pragma GCC target` region; dispatch (outside it) checks the CPU at run time, so the binary still
// runs on CPUs without AVX2, where quant.cpp falls back to the scalar reference.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

#if DS_QUANT_AVX2
#include <immintrin.h>
#endif

namespace ds::quant::detail {

#if DS_QUANT_AVX2

namespace {
std::atomic<bool> g_fast_enabled{true};
std::atomic<bool> g_avx512_enabled{true};
}  // namespace

void set_fast_paths_enabled(bool on) { g_fast_enabled = on; }
void set_avx512_enabled(bool on) { g_avx512_enabled = on; }

bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok && g_fast_enabled.load(std::memory_order_relaxed);
}

bool cpu_has_avx512() {
  static const bool ok = [] {
    const char* e = std::getenv("DS_CPU_ISA");  // the same cap as ds::cpu's (cpu/isa.cpp)
    if (e && (!std::strcmp(e, "avx2") || !std::strcmp(e, "scalar"))) return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return ok && g_avx512_enabled.load(std::memory_order_relaxed) && cpu_has_avx2_fma();
}

}  // namespace ds::quant::detail

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "quant/avx2_util.h"

namespace ds::quant::detail {
namespace {

// Sinks receive four vectors of 8 decoded weights and the element offset of each.
struct DotSink {
  const float* x;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  inline void operator()(int64_t e0, __m256 w0, int64_t e1, __m256 w1, int64_t e2, __m256 w2,
                         int64_t e3, __m256 w3) {
    a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + e0), a0);
    a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + e1), a1);
    a2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + e2), a2);
    a3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + e3), a3);
  }
  float total() const { return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); }
};

struct StoreSink {
  float* y;
  inline void operator()(int64_t e0, __m256 w0, int64_t e1, __m256 w1, int64_t e2, __m256 w2,
                         int64_t e3, __m256 w3) {
    _mm256_storeu_ps(y + e0, w0);
    _mm256_storeu_ps(y + e1, w1);
    _mm256_storeu_ps(y + e2, w2);
    _mm256_storeu_ps(y + e3, w3);
  }
};

// ---- 32-element formats --------------------------------------------------------------------------

template <class Sink>
void run_q8_0(const uint8_t* p, int64_t nb, Sink& s) {
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ8_0)) {
    const auto* blk = (const BlockQ8_0*)p;
    const __m256 d = _mm256_set1_ps(h2f(blk->d));
    __m256 w[4];
    for (int k = 0; k < 4; k++)
      w[k] = _mm256_mul_ps(to_f(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk->qs + 8 * k)))), d);
    const int64_t e = 32 * b;
    s(e, w[0], e + 8, w[1], e + 16, w[2], e + 24, w[3]);
  }
}

// Q4_0 / Q4_1: element j is the low nibble of qs[j], element j + 16 the high nibble.
// y = q*d - 8d (Q4_0) or q*d + m (Q4_1): one rounding of an exact product, as the reference.
template <bool kHasMin, class Sink>
void run_q4_01(const uint8_t* p, int64_t nb, Sink& s) {
  const size_t bs = kHasMin ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0);
  const __m256i m4 = _mm256_set1_epi32(15);
  for (int64_t b = 0; b < nb; b++, p += bs) {
    uint16_t dh, mh = 0;
    std::memcpy(&dh, p, 2);
    if (kHasMin) std::memcpy(&mh, p + 2, 2);
    const uint8_t* qs = p + (kHasMin ? 4 : 2);
    const float df = h2f(dh);
    const __m256 d = _mm256_set1_ps(df);
    const __m256 c = _mm256_set1_ps(kHasMin ? h2f(mh) : -8.0f * df);
    const __m256i v0 = load_u8x8(qs), v1 = load_u8x8(qs + 8);
    const __m256 w0 = _mm256_fmadd_ps(to_f(_mm256_and_si256(v0, m4)), d, c);
    const __m256 w1 = _mm256_fmadd_ps(to_f(_mm256_and_si256(v1, m4)), d, c);
    const __m256 w2 = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v0, 4)), d, c);
    const __m256 w3 = _mm256_fmadd_ps(to_f(_mm256_srli_epi32(v1, 4)), d, c);
    const int64_t e = 32 * b;
    s(e, w0, e + 8, w1, e + 16, w2, e + 24, w3);
  }
}

// ---- 256-element formats -------------------------------------------------------------------------

template <class Sink>
void run_q4_k(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i m4 = _mm256_set1_epi32(15);
  alignas(32) float dsc[8], mmn[8];
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ4_K)) {
    const auto* blk = (const BlockQ4_K*)p;
    k_scales_mins(blk->scales, h2f(blk->d), h2f(blk->dmin), dsc, mmn);
    for (int c = 0; c < 4; c++) {  // sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
      const __m256 d0 = _mm256_broadcast_ss(dsc + 2 * c), m0 = _mm256_broadcast_ss(mmn + 2 * c);
      const __m256 d1 = _mm256_broadcast_ss(dsc + 2 * c + 1), m1 = _mm256_broadcast_ss(mmn + 2 * c + 1);
      const uint8_t* q = blk->qs + 32 * c;
      const int64_t e = 256 * b + 64 * c;
      __m256i v[4];
      for (int k = 0; k < 4; k++) v[k] = load_u8x8(q + 8 * k);
      s(e, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[0], m4)), d0, m0),
        e + 8, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[1], m4)), d0, m0),
        e + 16, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[2], m4)), d0, m0),
        e + 24, _mm256_fmsub_ps(to_f(_mm256_and_si256(v[3], m4)), d0, m0));
      s(e + 32, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[0], 4)), d1, m1),
        e + 40, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[1], 4)), d1, m1),
        e + 48, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[2], 4)), d1, m1),
        e + 56, _mm256_fmsub_ps(to_f(_mm256_srli_epi32(v[3], 4)), d1, m1));
    }
  }
}

// Q6_K: element 128n + 32t + l; low nibble from ql[64n + l] (t = 0, 2) or ql[64n + 32 + l]
// (t = 1, 3), high 2 bits from qh[32n + l] >> 2t. y = (d * scale) * (q - 32).
template <class Sink>
void run_q6_k(const uint8_t* p, int64_t nb, Sink& s) {
  const __m256i m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(0x30);
  for (int64_t b = 0; b < nb; b++, p += sizeof(BlockQ6_K)) {
    const auto* blk = (const BlockQ6_K*)p;
    // d * scale and 32 * d * scale for the 16 sub-blocks (y = q * ds - 32 ds, exact).
    alignas(32) float ds[16], ds32[16];
    const __m256 d = _mm256_set1_ps(h2f(blk->d)), k32 = _mm256_set1_ps(32.0f);
    for (int i = 0; i < 2; i++) {
      const __m256 v = _mm256_mul_ps(d, to_f(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk->scales + 8 * i)))));
      _mm256_store_ps(ds + 8 * i, v);
      _mm256_store_ps(ds32 + 8 * i, _mm256_mul_ps(v, k32));
    }
    for (int n = 0; n < 2; n++) {
      const uint8_t* ql = blk->ql + 64 * n;
      const uint8_t* qh = blk->qh + 32 * n;
      for (int k = 0; k < 4; k++) {  // l = 8k .. 8k+7; sub-block of (t, l) is 8n + 2t + k/2
        const __m256i a = load_u8x8(ql + 8 * k), bq = load_u8x8(ql + 32 + 8 * k);
        const __m256i h = load_u8x8(qh + 8 * k);
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi32(h, 4), m2));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(bq, m4), _mm256_and_si256(_mm256_slli_epi32(h, 2), m2));
        const __m256i q2 = _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(h, m2));
        const __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(bq, 4), _mm256_and_si256(_mm256_srli_epi32(h, 2), m2));
        const int i = 8 * n + k / 2;  // sub-block of t = 0; t adds 2
        const int64_t e = 256 * b + 128 * n + 8 * k;
        s(e, _mm256_fmsub_ps(to_f(q0), _mm256_broadcast_ss(ds + i), _mm256_broadcast_ss(ds32 + i)),
          e + 32, _mm256_fmsub_ps(to_f(q1), _mm256_broadcast_ss(ds + i + 2), _mm256_broadcast_ss(ds32 + i + 2)),
          e + 64, _mm256_fmsub_ps(to_f(q2), _mm256_broadcast_ss(ds + i + 4), _mm256_broadcast_ss(ds32 + i + 4)),
          e + 96, _mm256_fmsub_ps(to_f(q3), _mm256_broadcast_ss(ds + i + 6), _mm256_broadcast_ss(ds32 + i + 6)));
      }
    }
  }
}

// Any other decodable type: the scalar block decoder, then vector sinks (32 elements at a time).
template <class Sink>
void run_generic(DequantBlockFn fn, uint32_t bsize, uint32_t tsize, const uint8_t* p, int64_t nb, Sink& s) {
  alignas(32) float y[256];
  for (int64_t b = 0; b < nb; b++, p += tsize) {
    fn(p, y);
    for (uint32_t j = 0; j < bsize; j += 32) {
      const int64_t e = (int64_t)b * bsize + j;
      s(e, _mm256_load_ps(y + j), e + 8, _mm256_load_ps(y + j + 8), e + 16, _mm256_load_ps(y + j + 16),
        e + 24, _mm256_load_ps(y + j + 24));
    }
  }
}

template <class Sink>
bool run(GgmlType t, const uint8_t* p, int64_t n, Sink& s) {
  switch (t) {
    case GgmlType::Q8_0: run_q8_0(p, n / 32, s); return true;
    case GgmlType::Q4_0: run_q4_01<false>(p, n / 32, s); return true;
    case GgmlType::Q4_1: run_q4_01<true>(p, n / 32, s); return true;
    case GgmlType::Q4_K: run_q4_k(p, n / 256, s); return true;
    case GgmlType::Q6_K: run_q6_k(p, n / 256, s); return true;
    default: break;
  }
  const auto ti = ggml_type_info(t);
  const DequantBlockFn fn = dequant_block_fn(t);
  if (!ti || !fn || ti->block_size % 32 != 0) return false;
  run_generic(fn, ti->block_size, ti->type_size, p, n / ti->block_size, s);
  return true;
}

// ---- plain float rows ----------------------------------------------------------------------------

// Loads 8 weights of a 1-element-block type as floats.
template <GgmlType T>
inline __m256 load8(const uint8_t* p, int64_t i) {
  if constexpr (T == GgmlType::F32) return _mm256_loadu_ps((const float*)(p + 4 * i));
  if constexpr (T == GgmlType::F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p + 2 * i)));
  if constexpr (T == GgmlType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(p + 2 * i))), 16));
}

template <GgmlType T>
inline float load1(const uint8_t* p, int64_t i) {
  if constexpr (T == GgmlType::F32) return load_f32(p + 4 * i);
  if constexpr (T == GgmlType::F16) return f16_to_f32(load_u16(p + 2 * i));
  if constexpr (T == GgmlType::BF16) return bf16_to_f32(load_u16(p + 2 * i));
}

template <GgmlType T>
float dot_plain(const uint8_t* p, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load8<T>(p, i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load8<T>(p, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8<T>(p, i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8<T>(p, i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8<T>(p, i), _mm256_loadu_ps(x + i), a0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; i++) sum += load1<T>(p, i) * x[i];
  return sum;
}

template <GgmlType T>
void dequant_plain(const uint8_t* p, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8<T>(p, i));
  for (; i < n; i++) y[i] = load1<T>(p, i);
}

bool dot_avx2(GgmlType t, const void* row, const float* x, int64_t n, float* out) {
  const auto* p = (const uint8_t*)row;
  switch (t) {
    case GgmlType::F32: *out = dot_plain<GgmlType::F32>(p, x, n); return true;
    case GgmlType::F16: *out = dot_plain<GgmlType::F16>(p, x, n); return true;
    case GgmlType::BF16: *out = dot_plain<GgmlType::BF16>(p, x, n); return true;
    default: break;
  }
  DotSink s{x};
  if (!run(t, p, n, s)) return false;
  *out = s.total();
  return true;
}

bool dequant_avx2(GgmlType t, const void* row, float* y, int64_t n) {
  const auto* p = (const uint8_t*)row;
  switch (t) {
    case GgmlType::F32: std::memcpy(y, row, n * sizeof(float)); return true;
    case GgmlType::F16: dequant_plain<GgmlType::F16>(p, y, n); return true;
    case GgmlType::BF16: dequant_plain<GgmlType::BF16>(p, y, n); return true;
    default: break;
  }
  StoreSink s{y};
  return run(t, p, n, s);
}

}  // namespace

#pragma GCC pop_options

bool dot_row_fast(GgmlType t, const void* row, const float* x, int64_t n, float* out) {
  if (!cpu_has_avx2_fma()) return false;
  return dot_kernel_avx2(t, row, x, n, out) || dot_avx2(t, row, x, n, out);
}

bool dot_rows_fast(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n,
                   float* y) {
  if (!cpu_has_avx2_fma()) return false;
  // Scratch for the partial sums of x, owned here (outside the AVX2 region) and reused per thread.
  thread_local std::vector<float> scratch;
  scratch.resize(n / 16 + n / 32 + 1);
  if (cpu_has_avx512() && dot_rows_kernel_avx512(t, w, row_stride, n_rows, x, n, y, scratch.data())) return true;
  if (dot_rows_kernel_avx2(t, w, row_stride, n_rows, x, n, y, scratch.data())) return true;
  for (int64_t r = 0; r < n_rows; r++)
    if (!dot_avx2(t, (const uint8_t*)w + r * row_stride, x, n, y + r)) return false;
  return true;
}

bool dequantize_row_fast(GgmlType t, const void* row, float* y, int64_t n) {
  if (!cpu_has_avx2_fma()) return false;
  if (cpu_has_avx512() && dequant_kernel_avx512(t, row, y, n)) return true;
  return dequant_generic_avx2(t, (const uint8_t*)row, y, n) || dequant_avx2(t, row, y, n);
}

#else  // not x86-64 GCC/Clang: scalar reference only

void set_fast_paths_enabled(bool) {}
void set_avx512_enabled(bool) {}
bool cpu_has_avx2_fma() { return false; }
bool cpu_has_avx512() { return false; }
bool dot_row_fast(GgmlType, const void*, const float*, int64_t, float*) { return false; }
bool dequantize_row_fast(GgmlType, const void*, float*, int64_t) { return false; }
bool dot_rows_fast(GgmlType, const void*, size_t, int64_t, const float*, int64_t, float*) { return false; }

#endif

}  // namespace ds::quant::detail

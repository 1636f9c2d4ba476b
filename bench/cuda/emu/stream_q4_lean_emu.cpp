// Host check of matvec_stream.cuh's lean scale / min extraction (b1q420, item_i8<true>): scale_words, lean_scales,
// lean_min_sel and lean_mins, taken from the header itself by run_q4_lean_emu.sh, against mvt::pair_scales
// (matvec_tc.cuh) with mvd::bf (matvec_direct.cuh), the forms item_i8<false> uses, and against ggml's
// get_scale_min_k4 layout: the same integers for every sub-block pair p and the same float bits for every lane t, on
// every single-bit header and 2^22 random ones. Exit status 1 on a mismatch.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#define __device__
#define __host__
#define __forceinline__ inline
struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {  // PRMT's default mode (selector bits 0..2)
  uint8_t b[8];
  std::memcpy(b, &x, 4);
  std::memcpy(b + 4, &y, 4);
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) r |= (uint32_t)b[(s >> (4 * i)) & 7] << (8 * i);
  return r;
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
namespace mvt {
#include "pair_scales.inc"
}
namespace mvd {
#include "bf.inc"
}
#include "lean.inc"

// ggml's get_scale_min_k4 on the 12 scale bytes q (header bytes 4..15).
static void ref_scale(const uint8_t* q, int j, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static long g_bad = 0;
static void check(const uint4& h) {
  uint8_t q[12];
  std::memcpy(q, &h.y, 4);
  std::memcpy(q + 4, &h.z, 4);
  std::memcpy(q + 8, &h.w, 4);
  const uint2 sw = scale_words(h, false);
  for (int p = 0; p < 4; p++) {
    uint32_t sc, mn;
    mvt::pair_scales(h, p, sc, mn);
    int se, so, d0, m0, d1, m1;
    lean_scales(sw, p, se, so);
    ref_scale(q, 2 * p, d0, m0);
    ref_scale(q, 2 * p + 1, d1, m1);
    if (se != (int)(sc & 0xFFu) || so != (int)(sc >> 8) || se != d0 || so != d1) g_bad++;
  }
  for (int t = 0; t < 4; t++) {
    uint32_t sc, mn;
    mvt::pair_scales(h, t, sc, mn);
    const float r0 = mvd::bf<0>(mn, 0.f), r1 = mvd::bf<1>(mn, 0.f);
    float l0, l1;
    lean_mins(h, t, lean_min_sel(t), l0, l1);
    int d0, m0, d1, m1;
    ref_scale(q, 2 * t, d0, m0);
    ref_scale(q, 2 * t + 1, d1, m1);
    if (std::memcmp(&r0, &l0, 4) || std::memcmp(&r1, &l1, 4) || l0 != (float)m0 || l1 != (float)m1) g_bad++;
  }
}

int main() {
  long n = 0;
  for (int word = 1; word < 4; word++)
    for (int bit = 0; bit < 32; bit++) {
      uint4 h{0x3C003C00u, 0, 0, 0};
      (&h.x)[word] = 1u << bit;
      check(h);
      (&h.x)[word] = ~(1u << bit);
      check(h);
      n += 2;
    }
  std::mt19937_64 rng(420);
  for (long i = 0; i < (1L << 22); i++, n++) {
    const uint64_t a = rng(), b = rng();
    check(uint4{(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)});
  }
  std::printf("stream_q4_lean_emu: %ld headers x (4 scale pairs + 4 lanes' mins), %ld mismatches\n", n, g_bad);
  return g_bad ? 1 : 0;
}

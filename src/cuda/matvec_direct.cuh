// Batch-1 matvec for the decode hot path types Q4_K, Q6_K, Q8_0, and Q3_K / Q5_K behind DS_MATVEC_DIRECT_KQ
// (matvec.h, kq21): direct global loads into registers, no shared-memory staging. Thread mapping:
//   - a warp owns kR x (32 / lpr) rows; lanes form 32 / lpr groups of lpr lanes, a group walks kR rows;
//   - a lane takes one "task" (a fixed piece of a row: 64 elements of Q4_K, 32 of Q6_K / Q8_0) per
//     step (Q5_K as Q4_K, Q3_K as Q6_K), loads the task's weight bytes of all its kR rows first (kR
//     independent load sets in flight per lane, no dependency between them), loads the task's activations once (float4
//     __ldg, L1/L2 resident) and reuses them for the kR rows;
//   - ks warps of a CTA may split the tasks of the same rows (few, long rows); their partial sums meet
//     in shared memory. Within a group, partial sums meet through shuffles.
// Per type, the task's bytes are read with the widest loads the block alignment allows:
//   Q4_K (144 B blocks, every block 16-byte aligned): the 16-byte header (d, dmin, scales) and the two
//        16-byte code chunks of sub-block pair c; the header is the same address for the 4 lanes of a
//        block, so it is one request.
//   Q8_0 (34 B, 2-byte aligned): the 32 code bytes through five 8-byte loads from the 8-byte aligned
//        address below them, realigned in registers (select + funnel shift); d as one 16-bit load.
//   Q6_K (210 B, 2-byte aligned): unit (n, m) reads three 8-byte pieces (ql, ql + 32, qh) and the 8
//        scale bytes of half n; each piece is two 8-byte loads from the aligned address below it and a
//        realignment; d as one 16-bit load. Neighbouring lanes share the 32-byte sectors, which L1 keeps.
//   Q5_K (176 B, every block 16-byte aligned): Q4_K's header and code chunks plus the 32 qh bytes as two
//        16-byte loads (the same for the 4 lanes of a block).
//   Q3_K (110 B, 2-byte aligned): unit (n, c) reads hmask and qs pieces (8 bytes), the low scales (8) and
//        the high scales with d (6 of 8), each realigned as Q6_K's.
// Weights are decoded exactly (bytef: PRMT + FADD) and multiplied in fp32; scales are factored out of
// the per-element loop. Index math is 32-bit except the row base pointer.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/cuda_util.h"
#include "cuda/quant_traits.cuh"

namespace ds::cuda {
namespace mvd {

constexpr int kWarps = 4;  // warps per CTA
constexpr int kThreads = 32 * kWarps;

__device__ __forceinline__ uint2 ldg64(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint4 ldg128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint32_t ldg_u16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ float h2f(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }
// Byte I of w minus off, exact (2^23 trick, see quant_traits.cuh).
template <int I>
__device__ __forceinline__ float bf(uint32_t w, float off) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | I)) - (8388608.0f + off);
}
// x[i..i+4) via one 16-byte load.
__device__ __forceinline__ float4 ldx(const float* __restrict__ x, int i) {
  return __ldg(reinterpret_cast<const float4*>(x + i));
}

// Eight bytes starting `mis` (0..7) bytes into the 16 bytes a:b (little endian), as two words.
__device__ __forceinline__ uint2 realign8(uint2 a, uint2 b, int mis) {
  const bool hi = mis & 4;
  const uint32_t w0 = hi ? a.y : a.x, w1 = hi ? b.x : a.y, w2 = hi ? b.y : b.x;
  const int sh = (mis & 3) * 8;
  return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
}

// Q4_K sub-block pair c of a block with header h (d, dmin, 12 scale bytes): combines the raw sums
// lo = sum q x over sub-block 2c, hi = over 2c + 1, and the activation sums xlo, xhi of the same
// elements into d * (sc0 lo + sc1 hi) - dmin * (mn0 xlo + mn1 xhi) (formats.md §5.8).
__device__ __forceinline__ float q4k_finish(uint4 h, int c, float lo, float hi, float xlo, float xhi) {
  // Scales and mins of sub-blocks 2c and 2c + 1, two bytes at a time.
  const int sh = 16 * (c & 1);
  const uint32_t A = h.y >> sh, B = h.z >> sh, C = h.w >> sh;
  uint32_t sc, mn;
  if (c < 2) {
    sc = A & 0x3F3Fu;
    mn = B & 0x3F3Fu;
  } else {
    sc = (C & 0x0F0Fu) | ((A >> 2) & 0x3030u);
    mn = ((C >> 4) & 0x0F0Fu) | ((B >> 2) & 0x3030u);
  }
  const float d = h2f(h.x & 0xFFFF), dmin = h2f(h.x >> 16);
  const float s = fmaf(bf<0>(sc, 0.f), lo, bf<1>(sc, 0.f) * hi);
  const float m = fmaf(bf<0>(mn, 0.f), xlo, bf<1>(mn, 0.f) * xhi);
  return fmaf(d, s, -dmin * m);
}

// Q6_K unit: the four 8-byte pieces (ql, ql + 32, qh, scales of half n) realigned from a Raw load.
struct Q6Words { uint2 qa, qb, qh, sc; };
// Codes + 32 of runs u = 0..3, 4 elements j*4 .. j*4 + 3 of each run (j = 0, 1), one word per run.
__device__ __forceinline__ void q6k_codes(const Q6Words& w, int j, uint32_t q[4]) {
  const uint32_t wa = j ? w.qa.y : w.qa.x, wb = j ? w.qb.y : w.qb.x, wh = j ? w.qh.y : w.qh.x;
  q[0] = (wa & 0x0F0F0F0Fu) | ((wh & 0x03030303u) << 4);
  q[1] = (wb & 0x0F0F0F0Fu) | (((wh >> 2) & 0x03030303u) << 4);
  q[2] = ((wa >> 4) & 0x0F0F0F0Fu) | (((wh >> 4) & 0x03030303u) << 4);
  q[3] = ((wb >> 4) & 0x0F0F0F0Fu) | (((wh >> 6) & 0x03030303u) << 4);
}
// d * sum_u scale_u * acc[u] for unit t (m = t % 4).
__device__ __forceinline__ float q6k_finish(uint2 sc, int t, const float acc[4], uint32_t d) {
  // Scales of runs 0..3: scale bytes 2u + m / 2 of the 8 of half n (signed).
  const uint32_t s4 = __byte_perm(sc.x, sc.y, (t & 2) ? 0x7531u : 0x6420u) ^ 0x80808080u;
  const float tot = fmaf(bf<0>(s4, 128.f), acc[0],
                         fmaf(bf<1>(s4, 128.f), acc[1], fmaf(bf<2>(s4, 128.f), acc[2], bf<3>(s4, 128.f) * acc[3])));
  return h2f(d) * tot;
}

// ---- Q4_K: task = (block, sub-block pair c), 64 elements 64c .. 64c + 63 ----------------------------
struct Q4K {
  static constexpr int kBlockElems = 256, kBlockBytes = 144, kTasksPerBlock = 4;
  struct X { float v[64]; float s0, s1; };
  struct Raw { uint4 h, q0, q1; };
  __device__ __forceinline__ static void load_x(const float* __restrict__ x, int t, X& xs) {
    const int e0 = t * 64;  // (t / 4) * 256 + (t % 4) * 64
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const float4 f = ldx(x, e0 + 4 * i);
      xs.v[4 * i] = f.x; xs.v[4 * i + 1] = f.y; xs.v[4 * i + 2] = f.z; xs.v[4 * i + 3] = f.w;
      if (i < 8) s0 += (f.x + f.y) + (f.z + f.w);
      else s1 += (f.x + f.y) + (f.z + f.w);
    }
    xs.s0 = s0; xs.s1 = s1;
  }
  __device__ __forceinline__ static void load(const uint8_t* row, int t, Raw& r) {
    const uint8_t* b = row + (t >> 2) * kBlockBytes;
    const int c = t & 3;
    r.h = ldg128(b);
    r.q0 = ldg128(b + 16 + 32 * c);
    r.q1 = ldg128(b + 32 + 32 * c);
  }
  __device__ __forceinline__ static float dot(const Raw& r, int t, const X& xs) {
    const uint32_t q[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
    float a0 = 0.f, a1 = 0.f, b0 = 0.f, b1 = 0.f;  // two chains per sub-block
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const uint32_t lo = q[j] & 0x0F0F0F0Fu, hi = (q[j] >> 4) & 0x0F0F0F0Fu;
      const float* v = xs.v + 4 * j;
      a0 = fmaf(bf<0>(lo, 0.f), v[0], a0); b0 = fmaf(bf<1>(lo, 0.f), v[1], b0);
      a0 = fmaf(bf<2>(lo, 0.f), v[2], a0); b0 = fmaf(bf<3>(lo, 0.f), v[3], b0);
      a1 = fmaf(bf<0>(hi, 0.f), v[32], a1); b1 = fmaf(bf<1>(hi, 0.f), v[33], b1);
      a1 = fmaf(bf<2>(hi, 0.f), v[34], a1); b1 = fmaf(bf<3>(hi, 0.f), v[35], b1);
    }
    return q4k_finish(r.h, t & 3, a0 + b0, a1 + b1, xs.s0, xs.s1);
  }
};

// ---- Q8_0: task = one block, 32 elements ----------------------------------------------------------------
struct Q80 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34, kTasksPerBlock = 1;
  struct X { float v[32]; };
  struct Raw { uint2 w[5]; uint32_t d; int mis; };
  __device__ __forceinline__ static void load_x(const float* __restrict__ x, int t, X& xs) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const float4 f = ldx(x, 32 * t + 4 * i);
      xs.v[4 * i] = f.x; xs.v[4 * i + 1] = f.y; xs.v[4 * i + 2] = f.z; xs.v[4 * i + 3] = f.w;
    }
  }
  __device__ __forceinline__ static void load(const uint8_t* row, int t, Raw& r) {
    const uint8_t* b = row + t * kBlockBytes;
    const uint8_t* qs = b + 2;
    r.mis = (int)((uintptr_t)qs & 7);
    const uint8_t* base = qs - r.mis;
#pragma unroll
    for (int i = 0; i < 4; i++) r.w[i] = ldg64(base + 8 * i);
    // The fifth piece holds bytes only when the codes are misaligned; it then contains the block's
    // last byte, so it lies inside the (16-byte padded) allocation.
    r.w[4] = r.mis ? ldg64(base + 32) : make_uint2(0, 0);
    r.d = ldg_u16(b);
  }
  __device__ __forceinline__ static float dot(const Raw& r, int, const X& xs) {
    float a = 0.f, b = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint2 q = realign8(r.w[i], r.w[i + 1], r.mis);
      const uint32_t w0 = q.x ^ 0x80808080u, w1 = q.y ^ 0x80808080u;
      const float* v = xs.v + 8 * i;
      a = fmaf(bf<0>(w0, 128.f), v[0], a); b = fmaf(bf<1>(w0, 128.f), v[1], b);
      a = fmaf(bf<2>(w0, 128.f), v[2], a); b = fmaf(bf<3>(w0, 128.f), v[3], b);
      a = fmaf(bf<0>(w1, 128.f), v[4], a); b = fmaf(bf<1>(w1, 128.f), v[5], b);
      a = fmaf(bf<2>(w1, 128.f), v[6], a); b = fmaf(bf<3>(w1, 128.f), v[7], b);
    }
    return h2f(r.d) * (a + b);
  }
};

// ---- Q6_K: task = unit (block, n = k / 4, m = k % 4), 32 elements in 4 runs of 8 (quant_traits.cuh) ----
struct Q6K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kTasksPerBlock = 8;
  struct X { float v[32]; };
  struct Raw { uint2 p[4][2]; uint32_t d; int mis; };  // pieces: ql, ql + 32, qh, scales
  __device__ __forceinline__ static void load_x(const float* __restrict__ x, int t, X& xs) {
    const int e0 = (t >> 3) * 256 + 128 * ((t >> 2) & 1) + 8 * (t & 3);
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const float4 f = ldx(x, e0 + 32 * r + 4 * i);
        float* v = xs.v + 8 * r + 4 * i;
        v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
      }
  }
  __device__ __forceinline__ static void load(const uint8_t* row, int t, Raw& r) {
    const uint8_t* b = row + (t >> 3) * kBlockBytes;
    const int n = (t >> 2) & 1, m = t & 3;
    r.mis = (int)((uintptr_t)b & 7);
    const uint8_t* base = b - r.mis;
    const int off[4] = {64 * n + 8 * m, 64 * n + 32 + 8 * m, 128 + 32 * n + 8 * m, 192 + 8 * n};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      r.p[i][0] = ldg64(base + off[i]);
      // Only needed when misaligned; then the piece's last byte is in it (inside the block).
      r.p[i][1] = r.mis ? ldg64(base + off[i] + 8) : make_uint2(0, 0);
    }
    r.d = ldg_u16(b + 208);
  }
  __device__ __forceinline__ static Q6Words words(const Raw& r) {
    return {realign8(r.p[0][0], r.p[0][1], r.mis), realign8(r.p[1][0], r.p[1][1], r.mis),
            realign8(r.p[2][0], r.p[2][1], r.mis), realign8(r.p[3][0], r.p[3][1], r.mis)};
  }
  __device__ __forceinline__ static float dot(const Raw& r, int t, const X& xs) {
    const Q6Words w = words(r);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 2; j++) {
      uint32_t q[4];
      q6k_codes(w, j, q);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const float* v = xs.v + 8 * u + 4 * j;
        float s = bf<0>(q[u], 32.f) * v[0];
        s = fmaf(bf<1>(q[u], 32.f), v[1], s);
        s = fmaf(bf<2>(q[u], 32.f), v[2], s);
        s = fmaf(bf<3>(q[u], 32.f), v[3], s);
        acc[u] += s;
      }
    }
    return q6k_finish(w.sc, t, acc, r.d);
  }
};

// ---- Q5_K: task = (block, sub-block pair c), 64 elements 64c .. 64c + 63, as Q4_K ----------------------
// Same header as Q4_K (d, dmin, 12 scale bytes); codes qs[32c .. 32c + 32) at byte 48 + 32c; the fifth bits
// of those 64 elements are bits 2c (low nibbles) and 2c + 1 (high nibbles) of all 32 qh bytes (byte 16).
struct Q5K {
  static constexpr int kBlockElems = 256, kBlockBytes = 176, kTasksPerBlock = 4;
  using X = Q4K::X;
  struct Raw { uint4 h, qh0, qh1, q0, q1; };
  __device__ __forceinline__ static void load_x(const float* __restrict__ x, int t, X& xs) { Q4K::load_x(x, t, xs); }
  __device__ __forceinline__ static void load(const uint8_t* row, int t, Raw& r) {
    const uint8_t* b = row + (t >> 2) * kBlockBytes;  // 176 = 11 x 16: every block 16-byte aligned
    const int c = t & 3;
    r.h = ldg128(b);
    r.qh0 = ldg128(b + 16);
    r.qh1 = ldg128(b + 32);
    r.q0 = ldg128(b + 48 + 32 * c);
    r.q1 = ldg128(b + 64 + 32 * c);
  }
  __device__ __forceinline__ static float dot(const Raw& r, int t, const X& xs) {
    const uint32_t q[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
    const uint32_t qh[8] = {r.qh0.x, r.qh0.y, r.qh0.z, r.qh0.w, r.qh1.x, r.qh1.y, r.qh1.z, r.qh1.w};
    const int c = t & 3;
    float a0 = 0.f, a1 = 0.f, b0 = 0.f, b1 = 0.f;  // two chains per sub-block
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const uint32_t h = qh[j] >> (2 * c);
      const uint32_t lo = (q[j] & 0x0F0F0F0Fu) | ((h & 0x01010101u) << 4);
      const uint32_t hi = ((q[j] >> 4) & 0x0F0F0F0Fu) | ((h & 0x02020202u) << 3);
      const float* v = xs.v + 4 * j;
      a0 = fmaf(bf<0>(lo, 0.f), v[0], a0); b0 = fmaf(bf<1>(lo, 0.f), v[1], b0);
      a0 = fmaf(bf<2>(lo, 0.f), v[2], a0); b0 = fmaf(bf<3>(lo, 0.f), v[3], b0);
      a1 = fmaf(bf<0>(hi, 0.f), v[32], a1); b1 = fmaf(bf<1>(hi, 0.f), v[33], b1);
      a1 = fmaf(bf<2>(hi, 0.f), v[34], a1); b1 = fmaf(bf<3>(hi, 0.f), v[35], b1);
    }
    return q4k_finish(r.h, c, a0 + b0, a1 + b1, xs.s0, xs.s1);
  }
};

// ---- Q3_K: task = unit (block, n = u / 4, c = u % 4), 32 elements in 4 runs of 8 (quant_traits.cuh) ----
// Unit u reads hmask[8c ..] and qs[32n + 8c ..] (8 bytes each), the 8 low-scale bytes (96) and the 4
// high-scale bytes with d (104 .. 110); each piece is two 8-byte loads from the aligned address below it
// and a realignment, as Q6_K's. Run j: elements 128n + 32j + 8c .. +8, scale 8n + 2j + c / 2: low 4 bits
// from nibble n of scales[c / 2 + 2j], high 2 bits from bits 4n + 2 (j / 2) of scales[8 + c / 2 + 2 (j % 2)].
struct Q3K {
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kTasksPerBlock = 8;
  using X = Q6K::X;  // the same element cut as Q6_K's units
  struct Raw { uint2 p[4][2]; int mis; };  // pieces: hmask, qs, scales[0..8), scales[8..12) + d
  __device__ __forceinline__ static void load_x(const float* __restrict__ x, int t, X& xs) { Q6K::load_x(x, t, xs); }
  __device__ __forceinline__ static void load(const uint8_t* row, int t, Raw& r) {
    const uint8_t* b = row + (t >> 3) * kBlockBytes;
    const int n = (t >> 2) & 1, c = t & 3;
    r.mis = (int)((uintptr_t)b & 7);
    const uint8_t* base = b - r.mis;
    const int off[3] = {8 * c, 32 + 32 * n + 8 * c, 96};
#pragma unroll
    for (int i = 0; i < 3; i++) {
      r.p[i][0] = ldg64(base + off[i]);
      // Only needed when misaligned; then the piece's last byte is in it (inside the block).
      r.p[i][1] = r.mis ? ldg64(base + off[i] + 8) : make_uint2(0, 0);
    }
    // The last piece uses 6 bytes (104 .. 109): its second load holds one of them only when mis >= 4
    // (with mis = 2 it would start at the block's end, maybe the allocation's).
    r.p[3][0] = ldg64(base + 104);
    r.p[3][1] = r.mis >= 4 ? ldg64(base + 112) : make_uint2(0, 0);
  }
  __device__ __forceinline__ static float dot(const Raw& r, int t, const X& xs) {
    const uint2 hm = realign8(r.p[0][0], r.p[0][1], r.mis), qs = realign8(r.p[1][0], r.p[1][1], r.mis);
    const uint2 sc = realign8(r.p[2][0], r.p[2][1], r.mis), hd = realign8(r.p[3][0], r.p[3][1], r.mis);
    const int n = (t >> 2) & 1, c = t & 3;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint32_t w = h ? qs.y : qs.x, wh = (h ? hm.y : hm.x) >> (4 * n);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const uint32_t q = ((w >> (2 * j)) & 0x03030303u) | (((wh >> j) & 0x01010101u) << 2);
        const float* v = xs.v + 8 * j + 4 * h;
        float s = bf<0>(q, 4.f) * v[0];
        s = fmaf(bf<1>(q, 4.f), v[1], s);
        s = fmaf(bf<2>(q, 4.f), v[2], s);
        s = fmaf(bf<3>(q, 4.f), v[3], s);
        acc[j] += s;
      }
    }
    // Scales of runs 0..3 as bytes 0..3 (6 bits each, then minus 32).
    const uint32_t lo4 = (__byte_perm(sc.x, sc.y, (c & 2) ? 0x7531u : 0x6420u) >> (4 * n)) & 0x0F0F0F0Fu;
    const uint32_t hb = __byte_perm(hd.x, 0, (c & 2) ? 0x3131u : 0x2020u) >> (4 * n);
    const uint32_t hi2 = (hb & 0x00000303u) | ((hb >> 2) & 0x03030000u);
    const uint32_t s4 = lo4 | (hi2 << 4);
    const float tot = fmaf(bf<0>(s4, 32.f), acc[0],
                           fmaf(bf<1>(s4, 32.f), acc[1], fmaf(bf<2>(s4, 32.f), acc[2], bf<3>(s4, 32.f) * acc[3])));
    return h2f(hd.y & 0xFFFFu) * tot;
  }
};

struct Args {
  const uint8_t* w;
  int64_t row_bytes;
  int rows, tasks;  // tasks per row
  int lpr, ks;      // lanes per row group (8, 16, 32); warps splitting one row group's tasks
  const float* x;
  float* y;
  bool accumulate;
};

template <class D, int kR, bool kPipe>
__global__ void __launch_bounds__(kThreads) kernel(const Args a) {
  __shared__ float s_part[kWarps][32 / 8 * kR];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int lpr = a.lpr, ks = a.ks;
  const int groups = 32 / lpr, g = lane / lpr, li = lane % lpr;
  const int slice = warp % ks;
  const int wrows = kR * groups;                                   // rows per warp
  const int row0 = (blockIdx.x * (kWarps / ks) + warp / ks) * wrows;  // first row of this warp
  const uint8_t* rp[kR];
#pragma unroll
  for (int j = 0; j < kR; j++) {
    const int row = min(row0 + g + groups * j, a.rows - 1);  // rows past the end re-read the last one
    rp[j] = a.w + (int64_t)row * a.row_bytes;
  }
  float acc[kR];
#pragma unroll
  for (int j = 0; j < kR; j++) acc[j] = 0.f;

  const int stride = lpr * ks;
  if constexpr (!kPipe) {
    for (int t = slice * lpr + li; t < a.tasks; t += stride) {
      typename D::Raw raw[kR];
#pragma unroll
      for (int j = 0; j < kR; j++) D::load(rp[j], t, raw[j]);
      typename D::X xs;
      D::load_x(a.x, t, xs);
#pragma unroll
      for (int j = 0; j < kR; j++) acc[j] += D::dot(raw[j], t, xs);
    }
  } else {
    // Two steps in flight: the next step's weights are loaded before this step is decoded.
    int t = slice * lpr + li;
    typename D::Raw cur[kR];
    if (t < a.tasks) {
#pragma unroll
      for (int j = 0; j < kR; j++) D::load(rp[j], t, cur[j]);
    }
    for (; t < a.tasks; t += stride) {
      typename D::Raw nxt[kR];
      if (t + stride < a.tasks) {
#pragma unroll
        for (int j = 0; j < kR; j++) D::load(rp[j], t + stride, nxt[j]);
      }
      typename D::X xs;
      D::load_x(a.x, t, xs);
#pragma unroll
      for (int j = 0; j < kR; j++) acc[j] += D::dot(cur[j], t, xs);
#pragma unroll
      for (int j = 0; j < kR; j++) cur[j] = nxt[j];
    }
  }
#pragma unroll
  for (int j = 0; j < kR; j++)
    for (int o = lpr / 2; o > 0; o >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], o);

  if (ks == 1) {
    if (li == 0) {
#pragma unroll
      for (int j = 0; j < kR; j++) {
        const int row = row0 + g + groups * j;
        if (row < a.rows) a.y[row] = a.accumulate ? a.y[row] + acc[j] : acc[j];
      }
    }
    return;
  }
  if (li == 0) {
#pragma unroll
    for (int j = 0; j < kR; j++) s_part[warp][g + groups * j] = acc[j];
  }
  __syncthreads();
  if (slice == 0 && lane < wrows) {
    float sum = 0.f;
    for (int w2 = 0; w2 < ks; w2++) sum += s_part[warp + w2][lane];
    const int row = row0 + lane;
    if (row < a.rows) a.y[row] = a.accumulate ? a.y[row] + sum : sum;
  }
}

}  // namespace mvd
}  // namespace ds::cuda

#include "cuda/cuda_util.h"

namespace ds::cuda {
namespace mvd {

// Launch choices. bench/cuda/matvec_bench_standalone.cu sweeps them; the defaults (kR = 2, 2-step
// pipeline) are a prediction from register counts (ptxas: Q4_K 159, Q6_K 116, Q8_0 79 registers, i.e.
// 12 / 16 / 24 warps per SM, 4 row-steps of loads in flight per warp), NOT yet measured: see
// bench/cuda/NOTES.md.
struct Tune {
  int rows_per_group = 2;    // kR: 2 or 4
  int ks_max = 4;            // most warps splitting one row group (1, 2, 4)
  int warps_per_sm = 32;     // split columns while fewer warps than this per SM would run
  bool pipe = true;          // load the next step's weights before decoding this one
};
inline Tune& tune() {
  static Tune t;
  return t;
}

// Checks done by the caller (matvec.cu): rows, cols > 0, cols % kBlockElems == 0, alignment of w / x / y.
template <class D>
Status launch(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, bool accumulate,
              cudaStream_t stream) {
  if (rows > (int64_t)1 << 30 || cols > (int64_t)1 << 28)
    return cu_err("cuda matvec: [{}, {}] too large for 32-bit index math", rows, cols);
  const Tune tn = tune();
  Args a{w, cols / D::kBlockElems * D::kBlockBytes, (int)rows,
         (int)(cols / D::kBlockElems * D::kTasksPerBlock), 32, 1, x, y, accumulate};
  a.lpr = a.tasks >= 32 ? 32 : a.tasks >= 16 ? 16 : 8;
  const int kr = tn.rows_per_group == 2 ? 2 : 4;
  const int64_t wrows = (int64_t)kr * (32 / a.lpr);
  const int64_t n_warps = (rows + wrows - 1) / wrows;
  const int64_t want = (int64_t)sm_count() * tn.warps_per_sm;
  while (a.ks < tn.ks_max && a.ks < kWarps && n_warps * a.ks < want && a.tasks >= 2 * a.ks * a.lpr) a.ks *= 2;
  const int64_t per_cta = kWarps / a.ks;
  const unsigned grid = (unsigned)((n_warps + per_cta - 1) / per_cta);
  if (kr == 2) {
    if (tn.pipe) kernel<D, 2, true><<<grid, kThreads, 0, stream>>>(a);
    else kernel<D, 2, false><<<grid, kThreads, 0, stream>>>(a);
  } else {
    if (tn.pipe) kernel<D, 4, true><<<grid, kThreads, 0, stream>>>(a);
    else kernel<D, 4, false><<<grid, kThreads, 0, stream>>>(a);
  }
  CUDA_TRY_LAUNCH("matvec", stream);
  return {};
}

}  // namespace mvd
}  // namespace ds::cuda

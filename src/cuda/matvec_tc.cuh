// Batch-1 Q4_K matvec on the tensor cores (matvec.h; issue 5). The register / cp.async kernels of
// matvec_smem.cuh spend ~4 instructions per weight (PRMT + FADD to decode, FFMA, index work) and are
// issue-bound at ~1.2 TB/s. Here a weight costs about one instruction: mma.sync m16n8k16 (f16 in, fp32
// accumulate) takes 16 rows x 16 weights per call, and its A operand is built from the packed codes with
// exact fp16 arithmetic:
//   - (word & 0x000F000F) | 0x64006400 is the fp16 pair (1024 + q) for the low nibbles of bytes 0 and 2
//     (one LOP3); (word & 0x00F000F0) | 0x64006400 is (1024 + 16 q) for the high nibbles;
//   - one fused HFMA2 with the sub-block scale sc (6 bits): (1024 + q) * sc - 1024 sc = q * sc, or
//     (1024 + 16 q) * (sc / 16) - 64 sc = q * sc: the exact product is <= 945 < 2048, so the single
//     rounding of the fused operation is exact. A = q * sc, an integer, with no error.
//   - B (the activations) is x' = x * 2^e per 256-element super-block (2^e brings its max |x| to
//     [2^13, 2^14), so no fp16 overflow and few subnormals), split into kT fp16 terms hi = fp16(x'),
//     lo = fp16(x' - hi), (lo2 = fp16(x' - hi - lo)): 2 terms carry ~22 significant bits, 3 terms ~33.
//     Term g sits in column g of the n8 tile (columns kT..7 are zero). The split is done once per CTA
//     while x is staged in shared memory, already in B-fragment order (one 8-byte load per lane per mma).
//   - a super-block's 16 mma calls accumulate in fp32 (two chains); then per row
//     y += d * 2^-e * (sum of columns) - dmin * sum_j m_j * Sx_j, with Sx_j = sum of x' over the
//     32-element group j (fp32, precomputed with the split). Error: ~2^-22 (2 terms) / fp32-like (3 terms)
//     relative to sum |w x|.
// K order inside an mma is free as long as A and B agree: lane (g = lane / 4, t = lane % 4) holds, for
// rows g and g + 8 of its 16-row group, code words t..t+3 and 16 + 4t..19 + 4t of the super-block's 32
// words (two 16-byte loads per row: the 4 lanes of a row read 64 contiguous bytes each time) and the
// 16-byte header (d, dmin, scales; one request for the 4 lanes). Word u (0..7) of the lane feeds mma 2u
// (low nibbles: byte 0, 2 -> a0a1 / a2a3; high nibbles -> a4a5 / a6a7) and mma 2u + 1 (bytes 1, 3).
// stage() writes x' at exactly those element positions into the B fragments.
// Work split: a CTA is 8 warps; ks warps (1, 2, 4 or 8) share a 16-row group, warp `sub` taking super-blocks
// sub, sub + ks, ...; their partial sums meet in shared memory behind a named barrier. A warp walks items
// (row group, super-block) with the next item's weight loads issued before the current one is decoded
// (two register sets, as kernel<S> of matvec_smem.cuh). The input transform of matvec_fused (RMSNorm /
// SwiGLU) is applied while staging, with the same float formulas as mvs::stage_x.
// Q6_K (kernel<kT, true>, decode5): A = q - 32 (-32..31, exact: (1024 + q6u) - 1056 in one HADD2), no scale
// in A (q x int8 scale needs 13 bits, more than fp16 holds exactly). One mma = one 16-weight sub-block of
// 16 rows (lane t: elements 4t..4t+3, even pair -> a0a1, odd pair -> a4a5), accumulated into a fresh fp32
// fragment and added into the running sums with one FFMA per accumulator by the sub-block's int8 scale;
// d * 2^-e per super-block. The 210-byte blocks are only 2-byte aligned: a lane loads the aligned word at
// 16c + 4t (+2 in a block at 2 mod 4) of each 16-byte chunk c, and misaligned blocks borrow the missing
// half word from the neighbour lane of the quad (one SHFL + PRMT per word).
#pragma once
#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "cuda/matvec_smem.cuh"

namespace ds::cuda {
namespace mvt {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockBytes = 144;
constexpr int kBlockBytesQ6 = 210;
constexpr int kSmemMax = 225 * 1024;  // dynamic; + the static part (red, stage) within sm_90's 227 KB

struct Args {
  const uint8_t* w;
  int64_t row_bytes;
  int rows, nb, ks;  // nb: super-blocks per row; ks: warps per row group
  const float* x;
  float* y;
  bool accumulate;
  mvs::Pre pre;
  int cols;
};

// Shared-memory bytes for kT terms and nb super-blocks: B fragments (+ one zero super-block for the
// lanes of columns >= kT), Sx (8 per super-block), 2^-e (1 per super-block).
inline size_t smem_bytes(int kT, int nb) { return (size_t)(nb + 1) * 16 * kT * 4 * 8 + (size_t)nb * 9 * 4; }
inline bool fits(int kT, int64_t cols) { return cols % 256 == 0 && smem_bytes(kT, (int)(cols / 256)) <= kSmemMax; }

__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint2 b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
}
__device__ __forceinline__ uint32_t pack_h2(__half lo, __half hi) {
  return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
}

// x'[e .. e + 3] (e a multiple of 4) under the input transform (scale: the RMSNorm factor).
__device__ __forceinline__ float4 load_x4(const Args& a, int e, float scale) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(a.x + e));
  if (a.pre.gate) {
    const float4 g = __ldg(reinterpret_cast<const float4*>(a.pre.gate + e));
    return make_float4(mvs::silu(g.x) * v.x, mvs::silu(g.y) * v.y, mvs::silu(g.z) * v.z, mvs::silu(g.w) * v.w);
  }
  if (a.pre.norm_w) {
    const float4 w = __ldg(reinterpret_cast<const float4*>(a.pre.norm_w + e));
    return make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
  }
  return v;
}

// The stagers' block barrier: kBar 0 = __syncthreads (every warp of the CTA stages x: this file's kernels,
// xprep_kernel); else named barrier kBar among the kW staging warps only (the stream kernels, matvec_stream.cuh:
// their producer warp takes no part; sync13: it used to join from its own __syncthreads call site, outside what
// the aligned bar.sync promises).
template <int kW, int kBar>
__device__ __forceinline__ void stage_sync() {
  if constexpr (kBar == 0) __syncthreads();
  else asm volatile("bar.sync %0, %1;\n" ::"n"(kBar), "n"(32 * kW) : "memory");
}

// The RMSNorm prologue's factor 1 / sqrt(mean(x^2) + eps), 1 without it: kW warps sum x^2, one stage_sync.
// red: kW floats of shared memory declared by the caller, so that each stager keeps its own array (a kernel's
// static shared memory stays as it was).
template <int kW, int kBar = 0>
__device__ __forceinline__ float rms_scale(const Args& a, float* red) {
  if (!a.pre.norm_w) return 1.f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float ss = 0.f;
  const float4* x4 = reinterpret_cast<const float4*>(a.x);
  for (int f = threadIdx.x; f < a.cols / 4; f += 32 * kW) {
    const float4 v = __ldg(x4 + f);
    ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) red[warp] = ss;
  stage_sync<kW, kBar>();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < kW; i++) tot += red[i];
  return 1.0f / sqrtf(tot / (float)a.cols + a.pre.eps);
}

// Writes the B fragments, Sx and 2^-e of every super-block into shared memory; one warp per super-block,
// lane = code word wi of the block (elements e_lo + 0..3 = low nibbles, e_hi + 0..3 = high nibbles).
// Q6_K (kQ6): lane = elements 8 lane .. 8 lane + 7 = sub-block lane / 2, fragment lanes t = 2 (lane & 1), + 1.
// kBar: stage_sync's barrier (0: the whole CTA stages).
template <int kT, bool kQ6, int kBar = 0>
__device__ __forceinline__ void stage(const Args& a, uint2* bfr, float* sx, float* inv_s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float red[kWarps];
  const float scale = rms_scale<kWarps, kBar>(a, red);
  // The zero super-block (index nb) for lanes whose column is >= kT.
  for (int i = threadIdx.x; i < 16 * kT * 4; i += kThreads) bfr[a.nb * 16 * kT * 4 + i] = make_uint2(0, 0);
  const int wi = lane, c = wi >> 3;
  const int t = (wi & 15) >> 2, u = (wi & 3) + (wi >> 4) * 4;
  for (int b = warp; b < a.nb; b += kWarps) {
    const int e_lo = kQ6 ? b * 256 + 8 * lane : b * 256 + 64 * c + 4 * (wi & 7), e_hi = kQ6 ? e_lo + 4 : e_lo + 32;
    const float4 lo = load_x4(a, e_lo, scale), hi = load_x4(a, e_hi, scale);
    float m = fmaxf(fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)), fmaxf(fabsf(lo.z), fabsf(lo.w))),
                    fmaxf(fmaxf(fabsf(hi.x), fabsf(hi.y)), fmaxf(fabsf(hi.z), fabsf(hi.w))));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (!kQ6) {  // Q4_K's mins: the sums of x' per 32-group
      float slo = (lo.x + lo.y) + (lo.z + lo.w), shi = (hi.x + hi.y) + (hi.z + hi.w);
      for (int o = 1; o < 8; o <<= 1) {
        slo += __shfl_xor_sync(0xffffffffu, slo, o);
        shi += __shfl_xor_sync(0xffffffffu, shi, o);
      }
      if ((lane & 7) == 0) {
        sx[b * 8 + 2 * c] = slo;
        sx[b * 8 + 2 * c + 1] = shi;
      }
    }
    // m < 2^ex; x' * 2^(14 - ex) has magnitude < 2^14. A zero or non-finite block keeps ex = 0 (an inf or
    // NaN then reaches y, as in fp32); ex >= -100 keeps 2^(14 - ex) finite for blocks of tiny values.
    int ex = 0;
    if (m > 0.f && isfinite(m)) {
      frexpf(m, &ex);
      ex = max(ex, -100);
    }
    const float s = ldexpf(1.f, 14 - ex);
    if (lane == 0) inv_s[b] = ldexpf(1.f, ex - 14);
    const float vl[4] = {lo.x * s, lo.y * s, lo.z * s, lo.w * s};
    const float vh[4] = {hi.x * s, hi.y * s, hi.z * s, hi.w * s};
#pragma unroll
    for (int h = 0; h < 2; h++) {
      // Q4_K: mma 2u + h: b0b1 = x'[e_lo + h], x'[e_lo + h + 2]; b2b3 = the same at e_hi.
      // Q6_K: mma lane / 2, lane t = 2 (lane & 1) + h: b0b1 = elements 0, 2 of the 4, b2b3 = 1, 3.
      const float* v4 = h ? vh : vl;
      float r[4] = {vl[h], vl[h + 2], vh[h], vh[h + 2]};
      if (kQ6) {
        r[0] = v4[0]; r[1] = v4[2]; r[2] = v4[1]; r[3] = v4[3];
      }
      uint2* dst = kQ6 ? bfr + (b * 16 + (lane >> 1)) * kT * 4 + 2 * (lane & 1) + h
                       : bfr + (b * 16 + 2 * u + h) * kT * 4 + t;
#pragma unroll
      for (int g = 0; g < kT; g++) {
        __half p[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
          p[i] = __float2half_rn(r[i]);
          r[i] -= __half2float(p[i]);
        }
        dst[g * 4] = make_uint2(pack_h2(p[0], p[1]), pack_h2(p[2], p[3]));
      }
    }
  }
  stage_sync<kWarps, kBar>();
}

struct Raw {
  uint4 h[2], q[2][2];  // rows g, g + 8: header, code words 4t..4t+3, 16+4t..19+4t
};
__device__ __forceinline__ void load(const Args& a, int rg, int kb, int g, int t, Raw& r) {
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const int row = min(rg * 16 + g + 8 * k, a.rows - 1);
    const uint8_t* b = a.w + (int64_t)row * a.row_bytes + kb * kBlockBytes;
    r.h[k] = mvd::ldg128(b);
    r.q[k][0] = mvd::ldg128(b + 16 + 16 * t);
    r.q[k][1] = mvd::ldg128(b + 80 + 16 * t);
  }
}

// Scale bytes (sub-blocks 2c, 2c + 1) and min bytes of sub-block pair c from the header words.
__device__ __forceinline__ void pair_scales(uint4 h, int c, uint32_t& sc, uint32_t& mn) {
  const int sh = 16 * (c & 1);
  const uint32_t A = h.y >> sh, B = h.z >> sh, C = h.w >> sh;
  if (c < 2) {
    sc = A & 0x3F3Fu;
    mn = B & 0x3F3Fu;
  } else {
    sc = (C & 0x0F0Fu) | ((A >> 2) & 0x3030u);
    mn = ((C >> 4) & 0x0F0Fu) | ((B >> 2) & 0x3030u);
  }
}

// fp16x2 constants of HFMA2 for a scale pair sc (byte 0: low-nibble sub-block, byte 1: high-nibble one).
struct Sc { uint32_t s_lo, o_lo, s_hi, o_hi; };
__device__ __forceinline__ Sc make_sc(uint32_t sc) {
  Sc r;
  r.s_lo = hfma2(__byte_perm(sc, 0x64u, 0x4040u), 0x3C003C00u, 0xE400E400u);  // (1024 + sc) - 1024
  r.o_lo = hmul2(r.s_lo, 0xE400E400u);                                      // -1024 sc
  r.s_hi = hfma2(__byte_perm(sc, 0x64u, 0x4141u), 0x2C002C00u, 0xD400D400u);  // (1024 + sc) / 16 - 64
  r.o_hi = hmul2(r.s_hi, 0xE400E400u);                                      // -64 sc
  return r;
}

// One item: rows g, g + 8 of row group rg, super-block kb. Adds to yp[0], yp[1] (row g, g + 8).
template <int kT>
__device__ __forceinline__ void item(const Raw& r, int kb, int t, const uint2* bq, const float* sx,
                                     const float* inv_s, float (&yp)[2]) {
  Sc s1[2], s2[2];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    uint32_t sc, mn;
    pair_scales(r.h[k], t >> 1, sc, mn);
    s1[k] = make_sc(sc);
    pair_scales(r.h[k], 2 + (t >> 1), sc, mn);
    s2[k] = make_sc(sc);
  }
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int u = 0; u < 8; u++) {
    uint32_t A[4][2];  // [H0..H3][row]
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const uint4& q = r.q[k][u >> 2];
      const uint32_t w = (u & 3) == 0 ? q.x : (u & 3) == 1 ? q.y : (u & 3) == 2 ? q.z : q.w;
      const uint32_t w8 = w >> 8;
      const Sc& s = u < 4 ? s1[k] : s2[k];
      A[0][k] = hfma2((w & 0x000F000Fu) | 0x64006400u, s.s_lo, s.o_lo);
      A[1][k] = hfma2((w & 0x00F000F0u) | 0x64006400u, s.s_hi, s.o_hi);
      A[2][k] = hfma2((w8 & 0x000F000Fu) | 0x64006400u, s.s_lo, s.o_lo);
      A[3][k] = hfma2((w8 & 0x00F000F0u) | 0x64006400u, s.s_hi, s.o_hi);
    }
    mma16816(c0, A[0][0], A[0][1], A[1][0], A[1][1], bq[(2 * u) * kT * 4]);
    mma16816(c1, A[2][0], A[2][1], A[3][0], A[3][1], bq[(2 * u + 1) * kT * 4]);
  }
  const float is = inv_s[kb];
  const float2 sxp = *reinterpret_cast<const float2*>(sx + kb * 8 + 2 * t);
#pragma unroll
  for (int k = 0; k < 2; k++) {
    uint32_t sc, mn;
    pair_scales(r.h[k], t, sc, mn);
    const float d = mvd::h2f(r.h[k].x & 0xFFFF), dmin = mvd::h2f(r.h[k].x >> 16);
    const float acc = (c0[2 * k] + c0[2 * k + 1]) + (c1[2 * k] + c1[2 * k + 1]);
    const float mins = fmaf(mvd::bf<0>(mn, 0.f), sxp.x, mvd::bf<1>(mn, 0.f) * sxp.y);
    yp[k] += fmaf(d * is, acc, -dmin * mins);
  }
}

// Q6_K raw words of one item (rows g, g + 8 of a row group, one super-block).
struct Raw6 {
  uint32_t c[2][12];  // word t of the 16-byte chunks 0..11 (ql 0..7, qh 8..11); +2 bytes in a block at 2 mod 4
  uint32_t x[2];      // block at 2 mod 4: the aligned word at offset -2 (bytes 0, 1 of chunk 0 in its top half)
  uint32_t s[2][5];   // aligned words over the scales and d (offset 192 or 190)
  uint32_t mis;       // bit k: row k's block is at 2 mod 4
};
__device__ __forceinline__ uint32_t ldg32(const uint8_t* p) { return __ldg(reinterpret_cast<const unsigned int*>(p)); }
__device__ __forceinline__ void load(const Args& a, int rg, int kb, int g, int t, Raw6& r) {
  r.mis = 0;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const int row = min(rg * 16 + g + 8 * k, a.rows - 1);
    const uint8_t* b = a.w + (int64_t)row * a.row_bytes + (int64_t)kb * kBlockBytesQ6;
    const int m = (int)((uintptr_t)b & 2);  // blocks are 2-byte aligned (w 16-byte, 210 even)
    r.mis |= (uint32_t)(m >> 1) << k;
    const uint8_t* p = b + m + 4 * t;
#pragma unroll
    for (int c = 0; c < 12; c++) r.c[k][c] = ldg32(p + 16 * c);
    r.x[k] = ldg32(b - m);  // m = 0: a repeat of chunk 0's word 0 (never read); else within the row's start
    const uint8_t* sp = b + 192 - m;
#pragma unroll
    for (int i = 0; i < 5; i++) r.s[k][i] = ldg32(sp + 4 * i);
  }
}

__device__ __forceinline__ uint32_t hadd2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("add.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// D = A B (C = 0): a sub-block's product, scaled by its int8 scale in fp32 afterwards.
__device__ __forceinline__ void mma16816_z(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                           uint2 b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y), "f"(0.f));
}

template <int kT>
__device__ __forceinline__ void item(const Raw6& r, int kb, int t, const uint2* bq, const float* /*sx*/,
                                     const float* inv_s, float (&yp)[2]) {
  uint32_t cw[2][12];
#pragma unroll
  for (int k = 0; k < 2; k++)
#pragma unroll
    for (int c = 0; c < 12; c++) cw[k][c] = r.c[k][c];
  if (__any_sync(0xffffffffu, r.mis != 0)) {
    // Lane t holds bytes 4t + 2 .. 4t + 5 of each chunk; bytes 4t, 4t + 1 are the top half of lane t - 1's
    // word (lane 0: lane 3's word of the previous chunk, or r.x for chunk 0).
    const int src = ((threadIdx.x & 31) & ~3) | ((t + 3) & 3);
#pragma unroll
    for (int k = 0; k < 2; k++) {
#pragma unroll
      for (int c = 0; c < 12; c++) {
        const uint32_t v = t == 3 ? (c > 0 ? r.c[k][c - 1] : 0u) : r.c[k][c];
        uint32_t got = __shfl_sync(0xffffffffu, v, src);
        if (c == 0 && t == 0) got = r.x[k];
        if ((r.mis >> k) & 1) cw[k][c] = __byte_perm(got, r.c[k][c], 0x5432);
      }
    }
  }
  uint32_t sw[2][4];
  float d[2];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const uint32_t sh = ((r.mis >> k) & 1) * 16;
#pragma unroll
    for (int i = 0; i < 4; i++) sw[k][i] = __funnelshift_r(r.s[k][i], r.s[k][i + 1], sh);
    d[k] = mvd::h2f(__funnelshift_r(r.s[k][4], 0u, sh) & 0xFFFFu);
  }
  float run[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < 16; s++) {
    // Sub-block s: half h, quarter Q, part p; ql chunk 4h + 2 (Q & 1) + p (low nibbles for Q < 2, else high),
    // qh chunk 8 + 2h + p, bits 2Q, 2Q + 1.
    const int h = s >> 3, Q = (s >> 1) & 3, p = s & 1;
    uint32_t ev[2], od[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const uint32_t wq = cw[k][4 * h + 2 * (Q & 1) + p] >> (4 * (Q >> 1));
      const uint32_t hq = cw[k][8 + 2 * h + p] >> (2 * Q);
      ev[k] = hadd2((wq & 0x000F000Fu) | ((hq << 4) & 0x00300030u) | 0x64006400u, 0xE420E420u);  // - 1056
      od[k] = hadd2(((wq >> 8) & 0x000F000Fu) | ((hq >> 4) & 0x00300030u) | 0x64006400u, 0xE420E420u);
    }
    float cz[4];
    mma16816_z(cz, ev[0], ev[1], od[0], od[1], bq[s * kT * 4]);
    const float f0 = (float)(int8_t)(sw[0][s >> 2] >> (8 * (s & 3)));
    const float f1 = (float)(int8_t)(sw[1][s >> 2] >> (8 * (s & 3)));
    run[0] = fmaf(f0, cz[0], run[0]);
    run[1] = fmaf(f0, cz[1], run[1]);
    run[2] = fmaf(f1, cz[2], run[2]);
    run[3] = fmaf(f1, cz[3], run[3]);
  }
  const float is = inv_s[kb];
#pragma unroll
  for (int k = 0; k < 2; k++) yp[k] += d[k] * is * (run[2 * k] + run[2 * k + 1]);
}

template <int kT, bool kQ6>
__global__ void __launch_bounds__(kThreads, 2) kernel(const Args a) {
  extern __shared__ uint4 smem_raw[];
  uint2* bfr = reinterpret_cast<uint2*>(smem_raw);
  float* sx = reinterpret_cast<float*>(bfr + (a.nb + 1) * 16 * kT * 4);
  float* inv_s = sx + a.nb * 8;
  __shared__ float red[2][kWarps][16];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int ks = a.ks, sub = warp % ks, slot = warp / ks, spc = kWarps / ks;
  const int nrg = (a.rows + 15) / 16, rgstride = gridDim.x * spc;
  int rg = blockIdx.x * spc + slot, kb = sub;
  std::conditional_t<kQ6, Raw6, Raw> cur, nxt;
  if (rg < nrg) load(a, rg, kb, g, t, cur);  // in flight during the staging

  mvs::grid_dep_wait();
  stage<kT, kQ6>(a, bfr, sx, inv_s);
  mvs::grid_dep_trigger();
  if (rg >= nrg) return;

  // The lane's B fragments: column g of the tile (zero super-block for g >= kT).
  const uint2* bbase = g < kT ? bfr + g * 4 + t : bfr + a.nb * 16 * kT * 4 + t;
  const int bstride = g < kT ? 16 * kT * 4 : 0;
  float yp[2] = {0.f, 0.f};
  int par = 0;
  for (;;) {
    int rgn = rg, kbn = kb + ks;
    const bool last = kbn >= a.nb;
    if (last) { kbn = sub; rgn += rgstride; }
    if (rgn < nrg) load(a, rgn, kbn, g, t, nxt);
    item<kT>(cur, kb, t, bbase + kb * bstride, sx, inv_s, yp);
    if (last) {  // row group rg done
#pragma unroll
      for (int k = 0; k < 2; k++) {
        yp[k] += __shfl_xor_sync(0xffffffffu, yp[k], 1);
        yp[k] += __shfl_xor_sync(0xffffffffu, yp[k], 2);
      }
      if (ks == 1) {
        if (t == 0) {
#pragma unroll
          for (int k = 0; k < 2; k++) {
            const int row = rg * 16 + g + 8 * k;
            if (row < a.rows) a.y[row] = a.accumulate ? a.y[row] + yp[k] : yp[k];
          }
        }
      } else {
        if (t == 0) {
          red[par][warp][g] = yp[0];
          red[par][warp][g + 8] = yp[1];
        }
        asm volatile("bar.sync %0, %1;\n" ::"r"(1 + slot), "r"(32 * ks) : "memory");
        if (sub == 0 && lane < 16) {
          float v = 0.f;
          for (int i = 0; i < ks; i++) v += red[par][warp + i][lane];
          const int row = rg * 16 + lane;
          if (row < a.rows) a.y[row] = a.accumulate ? a.y[row] + v : v;
        }
        par ^= 1;
      }
      yp[0] = yp[1] = 0.f;
      if (rgn >= nrg) break;
    }
    cur = nxt;
    rg = rgn;
    kb = kbn;
  }
}

// Launch choice (DS_MATVEC_TC=0 turns the kernel off; DS_MATVEC_TC_TERMS 2 | 3; DS_MATVEC_TC_KS forces
// the warps per row group; DS_MATVEC_TC_GRID the CTAs per SM cap).
struct Tune {
  bool on = true;
  bool q6k = false;  // Q6_K too (DS_MATVEC_TC_Q6K=1; off until measured on the H200)
  int terms = 3;
  int ks = 0;  // 0: by shape
  int grid_ctas_per_sm = 2;
  bool pdl = true;
};
inline Tune& tune() {
  static Tune t = [] {
    Tune d;
    if (const char* e = std::getenv("DS_MATVEC_TC")) d.on = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_TC_Q6K")) d.q6k = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_TC_TERMS")) d.terms = std::atoi(e) == 2 ? 2 : 3;
    if (const char* e = std::getenv("DS_MATVEC_TC_KS")) d.ks = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_TC_GRID")) d.grid_ctas_per_sm = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_PDL")) d.pdl = e[0] != '0';
    return d;
  }();
  return t;
}

namespace {
template <int kT, bool kQ6>
cudaError_t allow_smem_tc() {
  static const cudaError_t e = cudaFuncSetAttribute(kernel<kT, kQ6>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax);
  return e != cudaSuccess ? e : mvs::carveout_max(kernel<kT, kQ6>);
}
template <int kT, bool kQ6>
Status launch_t(const Args& a, unsigned grid, cudaStream_t stream) {
  const cudaError_t attr = allow_smem_tc<kT, kQ6>();
  if (attr != cudaSuccess) return cu_err("cuda matvec_tc: cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
  const size_t smem = smem_bytes(kT, a.nb);
  const cudaError_t e = launch_pdl(kernel<kT, kQ6>, dim3(grid), dim3(kThreads), smem, stream, tune().pdl, a);
  if (e != cudaSuccess) return cu_err("cuda matvec_tc: launch: {}", cudaGetErrorString(e));
  CUDA_TRY_LAUNCH("matvec_tc", stream);
  return {};
}
}  // namespace

// Warps per row group: the power of two (<= nb) that wastes the least of the GPU, counting the last
// partial round of CTAs (CTA slots: `capacity`, row groups per CTA: kWarps / ks) and the warps of a row
// group that get one super-block fewer (nb not a multiple of ks). Ties go to the smaller ks (fewer
// barriers). E.g. 9B ffn_gate_up [24576 x 4096]: ks 1 and 2 fill 73% of the last round, ks 4 97%.
inline int pick_ks(int64_t nrg, int nb, int64_t capacity) {
  int best = 1;
  double best_eff = -1.0;
  for (int ks = 1; ks <= kWarps && ks <= nb; ks *= 2) {
    const int64_t ctas = (nrg + kWarps / ks - 1) / (kWarps / ks);
    const int64_t rounds = (ctas + capacity - 1) / capacity;
    const double fill = (double)ctas / (double)(rounds * capacity);
    const double split = (double)nb / (double)(((nb + ks - 1) / ks) * ks);
    const double eff = fill * split;
    if (eff > best_eff * 1.02) {
      best = ks;
      best_eff = eff;
    }
  }
  return best;
}

// Whether the kernel takes Q4_K (q6: Q6_K) [rows, cols] with the current tuning.
inline bool takes(int64_t rows, int64_t cols, bool q6 = false) {
  return tune().on && (!q6 || tune().q6k) && rows <= ((int64_t)1 << 30) && fits(tune().terms, cols);
}

// Checks done by the caller (matvec.cu): rows, cols > 0, cols % 256 == 0, alignment of w / x / y, takes().
inline Status launch(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, bool accumulate,
                     cudaStream_t stream, const mvs::Pre& pre = {}, bool q6 = false) {
  const Tune& tn = tune();
  if (!fits(tn.terms, cols) || rows > ((int64_t)1 << 30))
    return cu_err("cuda matvec_tc: [{}, {}] too large", rows, cols);
  const int nb = (int)(cols / 256);
  const int64_t nrg = (rows + 15) / 16;
  int ks = tn.ks;
  if (ks != 1 && ks != 2 && ks != 4 && ks != 8) ks = pick_ks(nrg, nb, (int64_t)(tn.grid_ctas_per_sm > 0 ? std::min(tn.grid_ctas_per_sm, 2) : 2) * sm_count());
  // A power of two dividing kWarps (the named barrier of a row group expects all ks warps of its slot)
  // and at most nb (every warp owns a super-block of each row group).
  while (ks > 1 && ks > nb) ks /= 2;
  const Args a{w, (int64_t)nb * (q6 ? kBlockBytesQ6 : kBlockBytes), (int)rows, nb, ks, x, y, accumulate, pre, (int)cols};
  const int64_t spc = kWarps / ks;
  int64_t grid = (nrg + spc - 1) / spc;
  if (tn.grid_ctas_per_sm > 0) grid = std::min<int64_t>(grid, (int64_t)tn.grid_ctas_per_sm * sm_count());
  if (q6) return tn.terms == 2 ? launch_t<2, true>(a, (unsigned)grid, stream) : launch_t<3, true>(a, (unsigned)grid, stream);
  if (tn.terms == 2) return launch_t<2, false>(a, (unsigned)grid, stream);
  return launch_t<3, false>(a, (unsigned)grid, stream);
}

}  // namespace mvt
}  // namespace ds::cuda

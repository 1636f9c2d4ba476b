// Batch-1 Q6_K matvec with the weights streamed into shared memory by bulk async copies (matvec.h; issue 5,
// decode7): the Q6_K counterpart of matvec_stream.cuh's integer form (same producer warp / mbarrier ring /
// 8 consumer warps / persistent grid / PDL), with its own staging, item and window handling:
//   - x' x 2^(30 - e) per super-block (|x'| < 2^30) rounded to an int32 and split exactly into 4 signed
//     int8 digits (d0 2^24 + d1 2^16 + d2 2^8 + d3), as mvq::stage_i8;
//   - A = the 6-bit codes q = ql nibble | qh 2 bits << 4 (0..63) as u8, built with shifts and LOP3 from the
//     raw words; mma.sync m16n8k32 u8 x s8 -> s32. The -32 offset of Q6_K enters through the mma's C
//     operand: C = -32 x (sum of the column's digits over the sub-block), precomputed while staging, so
//     the integer result is exactly sum (q - 32) x digit;
//   - Q6_K scales are per 16 weights (int8), an mma is 32 weights: one mma covers the two 16-element
//     halves (lh = 0, 1) of a 32-element group (n, Q) of the super-block (element 128 n + 32 Q + l), the
//     n8 tile's columns 0..3 holding the 4 digits of x restricted to half 0 (zero bytes for elements of
//     half 1) and columns 4..7 the digits restricted to half 1. Lane (g, t) then owns columns 2t, 2t + 1:
//     one sub-block (lh = t / 2), digits 2 (t & 1), 2 (t & 1) + 1, and scales its 4 accumulators by the
//     sub-block's int8 scale (rows g, g + 8) with one IMAD each into int32 running sums;
//   - per super-block y += d 2^(e - 30) (digit columns weighted 2^24, 2^16, 2^8, 1).
// Error: integer math exact; x keeps ~30 significant bits relative to its super-block's largest |x'|; the
// int32 -> fp32 conversion of the running sums and the fp32 epilogue give ~1e-7 of sum |w x|.
// The 210-byte blocks: a chunk of kc super-blocks of a row is copied as the 16-byte aligned window around it
// (start rounded down, end up; cp.async.bulk needs 16-byte aligned addresses and sizes), so a block sits at
// its global address mod 16 in shared memory. With an even number of super-blocks per row (rows 4-byte
// aligned) and even kc (chunks start at even kb), block kb is 4-byte aligned for even kb and at 2 mod 4 for
// odd kb. Lane t reads, of each 32-byte region (ql: 4, qh: 2), the aligned words holding elements
// l = 4t + 2 odd .. + 3 (slot 0, k 4t..4t+3 of the mma) and (16 + 4t + 2 odd .. + 3) mod 32 (slot 1, k 16+4t..);
// in an odd block lane 3's slot-1 word (l = 30, 31, 0, 1) is put together from two aligned words (PRMT).
// stage_q6 writes x in the same per-parity element order. Odd numbers of super-blocks per row are not taken
// (matvec_tc / the older kernels run them).
// Work split: warp w takes the super-blocks kb with (kb & 7) ^ ((kb >> 3) & 1) == w, so every warp gets as
// many odd (more loads) as even blocks over each 16 super-blocks.
// Consumer warps (decode9): 8 where two CTAs fit an SM; 16 where the plan has one CTA per SM (x + 2 stages need
// more than half the SM: the 9B / 27B ffn_down rows of 48 / 68 super-blocks). With one CTA of 8 consumer warps
// those products were latency-bound (2 warps per scheduler, every CTA staging all of x: 9B ffn_down ~1.3 TB/s in
// the model); the 16 form stages x twice as fast and has two groups of 8 warps on alternate ring stages.
#pragma once
#include <algorithm>
#include <cstdlib>

#include "cuda/matvec_stream.cuh"

namespace ds::cuda {
namespace mvq6 {

constexpr int kCW = mvq::kCW;
constexpr int kThreads = mvq::kThreads;
constexpr int kMaxStages = 8;
constexpr int kBlockBytes = 210;

struct Args {
  mvt::Args t;  // w, row_bytes, rows, nb, x, y, accumulate, prologue, cols (ks unused)
  int kc;       // super-blocks per chunk (even)
  int nchunk;   // chunks per row group
  int pitch;    // shared-memory bytes per row of a stage (16 mod 32)
  int stages;
  int xbytes;   // offset of the ring in dynamic shared memory
  const uint8_t* pf = nullptr;  // L2 prefetch of the next product's weights (mvq::prefetch_next)
  uint32_t pf_cta = 0;
  const uint4* xg = nullptr;  // x prepared by xprep_kernel (mvq::Args::xg, decode10); nullptr: staged here
  uint32_t xg_bytes = 0;
  bool xfence = false;  // mvq::Args::xfence
  bool evict = false;         // mvq::Args::evict
  int xone = 0;               // mvq::Args::xone
  uint64_t* probe = nullptr;  // mvq::Args::probe
  int xregion = 0;            // q6m28 (kernel<..., kB > 1>): mvq::Args::xregion, mvq::Args::nseq
  int nseq = 1;
};

// x in shared memory, per super-block: B [8 groups m][4 digits][4 t] uint2 (1 KB), then for all super-blocks
// C [8 m][4 t] int2 (256 B each), then 2^(e - 30) per super-block.
inline size_t smem_x_bytes(int nb) { return (size_t)nb * (1024 + 256 + 4); }

__device__ __forceinline__ float2 load_x2(const mvt::Args& a, int e, float scale) {
  const float2 v = __ldg(reinterpret_cast<const float2*>(a.x + e));
  if (a.pre.gate) {
    const float2 g = __ldg(reinterpret_cast<const float2*>(a.pre.gate + e));
    return make_float2(mvs::silu(g.x) * v.x, mvs::silu(g.y) * v.y);
  }
  if (a.pre.norm_w) {
    const float2 w = __ldg(reinterpret_cast<const float2*>(a.pre.norm_w + e));
    return make_float2(v.x * scale * w.x, v.y * scale * w.y);
  }
  return v;
}

// mvq::split_digits with the digit sums of the lane's elements (slot 0 at p0, slot 1 at p1, mod 32) per half lh
// of their 32-element group (l < 16: half 0) and digit, for the C operand that carries Q6_K's -32 offset. The sums
// stay in the split's loop: as a second loop after split_digits, kernel<true, 8> compiled to different code.
__device__ __forceinline__ void split_digits_q6(const float (&v)[8], float s, bool fin, int p0, int p1, int (&dg)[4][8],
                                                int (&sum)[2][4]) {
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int k = 0; k < 4; k++) sum[h][k] = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    mvq::split_s8(fin ? __float2int_rn(v[i] * s) : 0, dg, i);
    const int l = ((i < 4 ? p0 : p1) + (i & 3)) & 31;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      if (l < 16) sum[0][k] += dg[k][i];
      else sum[1][k] += dg[k][i];
    }
  }
}

// kU super-blocks bs[] of parity kOdd of a warp whose x' (the lane's 8 elements each, in stage_q6's order) are in v,
// their dependent chains (max reduction, digit sums) interleaved; stores only where st[u] (stage_q6's values).
template <bool kOdd, int kU>
__device__ __forceinline__ void digits_q6_u(const float (&v)[kU][8], const int (&bs)[kU], const bool (&st)[kU],
                                            uint2* bfr, int2* cfr, float* inv_s) {
  const int lane = threadIdx.x & 31;
  const int m = lane >> 2, t = lane & 3, p0 = 4 * t + (kOdd ? 2 : 0), p1 = p0 + 16;
  float mx[kU];
  bool fin[kU];  // fmaxf skips NaN: test every element
#pragma unroll
  for (int u = 0; u < kU; u++) {
    mx[u] = 0.f;
    fin[u] = true;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      mx[u] = fmaxf(mx[u], fabsf(v[u][i]));
      fin[u] = fin[u] && isfinite(v[u][i]);
    }
  }
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int u = 0; u < kU; u++) mx[u] = fmaxf(mx[u], __shfl_xor_sync(0xffffffffu, mx[u], o));
#pragma unroll
  for (int u = 0; u < kU; u++) fin[u] = __all_sync(0xffffffffu, fin[u]);
  // Digit sums of the lane's elements per (half lh, digit k), two per int32 (k even in the low half:
  // |sum| <= 16 x 128, so the packed sums add without overflow and unpack exactly).
  int ps[kU][2][2];
#pragma unroll
  for (int u = 0; u < kU; u++) {
    const int ex = mvq::block_exp(mx[u]);
    const float s = ldexpf(1.f, 30 - ex);
    if (lane == 0 && st[u]) inv_s[bs[u]] = mvq::digit_factor(fin[u], ex - 30);
    int dg[4][8];  // [digit][element]
    int sum[2][4];
    split_digits_q6(v[u], s, fin[u], p0, p1, dg, sum);
    if (st[u]) mvq::store_digits(bfr + (bs[u] * 8 + m) * 16 + t, dg);
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int k = 0; k < 2; k++) ps[u][h][k] = sum[h][2 * k] + sum[h][2 * k + 1] * 65536;
  }
  for (int o = 1; o <= 2; o <<= 1)
#pragma unroll
    for (int u = 0; u < kU; u++)
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int k = 0; k < 2; k++) ps[u][h][k] += __shfl_xor_sync(0xffffffffu, ps[u][h][k], o);
  // Lane t's accumulator columns 2t, 2t + 1: half t / 2, digits 2 (t & 1), 2 (t & 1) + 1 = one packed pair.
#pragma unroll
  for (int u = 0; u < kU; u++) {
    const int pk = (t >> 1) ? ((t & 1) ? ps[u][1][1] : ps[u][1][0]) : ((t & 1) ? ps[u][0][1] : ps[u][0][0]);
    const int c0 = (int)(int16_t)(pk & 0xFFFF), c1 = (pk - c0) / 65536;
    if (st[u]) cfr[(bs[u] * 8 + m) * 4 + t] = make_int2(-32 * c0, -32 * c1);
  }
}

// Same prologue (RMSNorm / SwiGLU) and barriers as mvq::stage_i8 (the named mvq::kStageBar among the kW staging
// warps; the producer warp takes no part).
// One warp per super-block b; lane = (group m = lane / 4, t = lane % 4): elements l = p0 .. p0 + 3 (slot 0)
// and (p1 .. p1 + 3) mod 32 (slot 1) of group m, p0 = 4t + 2 (b & 1), p1 = p0 + 16.
// b0 / bstep: the super-blocks b0 + warp, + bstep, ... (xprep_kernel: a slice per CTA).
template <int kW>
__device__ __forceinline__ void stage_q6(const mvt::Args& a, uint2* bfr, int2* cfr, float* inv_s, int b0 = 0,
                                         int bstep = kW) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float red[kW];
  const float scale = mvt::rms_scale<kW, mvq::kStageBar>(a, red);
  const int m = lane >> 2, t = lane & 3;
  for (int b = b0 + warp; b < a.nb; b += bstep) {
    const int odd = b & 1;
    const int base = b * 256 + 32 * m, p0 = 4 * t + 2 * odd, p1 = p0 + 16;
    float v[8];
    if (!odd) {
      const float4 lo = mvt::load_x4(a, base + p0, scale), hi = mvt::load_x4(a, base + p1, scale);
      v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
      v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
    } else {
      const float2 a0 = load_x2(a, base + p0, scale), a1 = load_x2(a, base + p0 + 2, scale);
      const float2 b0 = load_x2(a, base + (p1 & 31), scale), b1 = load_x2(a, base + ((p1 + 2) & 31), scale);
      v[0] = a0.x; v[1] = a0.y; v[2] = a1.x; v[3] = a1.y;
      v[4] = b0.x; v[5] = b0.y; v[6] = b1.x; v[7] = b1.y;
    }
    float mx = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) mx = fmaxf(mx, fabsf(v[i]));
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const int ex = mvq::block_exp(mx);
    const float s = ldexpf(1.f, 30 - ex);
    const bool fin = mvq::all_finite(v);
    if (lane == 0) inv_s[b] = mvq::digit_factor(fin, ex - 30);
    int dg[4][8];  // [digit][element]
    int sum[2][4];  // [half lh][digit]: digit sums of the lane's elements
    split_digits_q6(v, s, fin, p0, p1, dg, sum);
    mvq::store_digits(bfr + (b * 8 + m) * 16 + t, dg);
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int k = 0; k < 4; k++) {
        sum[h][k] += __shfl_xor_sync(0xffffffffu, sum[h][k], 1);
        sum[h][k] += __shfl_xor_sync(0xffffffffu, sum[h][k], 2);
      }
    // Lane t's accumulator columns 2t, 2t + 1: half t / 2, digits 2 (t & 1), 2 (t & 1) + 1.
    const int h = t >> 1, k0 = 2 * (t & 1);
    int c0 = 0, c1 = 0;
#pragma unroll
    for (int hh = 0; hh < 2; hh++)
#pragma unroll
      for (int k = 0; k < 4; k += 2)
        if (hh == h && k == k0) {
          c0 = sum[hh][k];
          c1 = sum[hh][k + 1];
        }
    cfr[(b * 8 + m) * 4 + t] = make_int2(-32 * c0, -32 * c1);
  }
  mvt::stage_sync<kW, mvq::kStageBar>();
}

// b1x16 (mvq::Tune::xone): the one-round staging (mvq::stage_one) in this kernel's element order (the digits by
// split_digits_q6 as in stage_q6: its digit sums need each digit). The lane's 8 elements of super-block b of p, in
// stage_q6's order: slot 0 at p0 = 4t + 2 (b & 1), slot 1 at (p0 + 16) mod 32 of group m = lane / 4.
__device__ __forceinline__ void load8_q6(const float* p, int b, float (&v)[8]) {
  const int lane = threadIdx.x & 31, m = lane >> 2, t = lane & 3, odd = b & 1;
  const int base = b * 256 + 32 * m, p0 = 4 * t + 2 * odd, p1 = p0 + 16;
  if (!odd) {
    const float4 lo = __ldg(reinterpret_cast<const float4*>(p + base + p0));
    const float4 hi = __ldg(reinterpret_cast<const float4*>(p + base + p1));
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
    v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
  } else {
    const float2 a0 = __ldg(reinterpret_cast<const float2*>(p + base + p0));
    const float2 a1 = __ldg(reinterpret_cast<const float2*>(p + base + p0 + 2));
    const float2 b0 = __ldg(reinterpret_cast<const float2*>(p + base + (p1 & 31)));
    const float2 b1 = __ldg(reinterpret_cast<const float2*>(p + base + ((p1 + 2) & 31)));
    v[0] = a0.x; v[1] = a0.y; v[2] = a1.x; v[3] = a1.y;
    v[4] = b0.x; v[5] = b0.y; v[6] = b1.x; v[7] = b1.y;
  }
}
// mvq::stage_one's format of x for this kernel (mvq::XoneI8's counterpart): warp w takes super-blocks w, w + kW, ...
// (kW even: all of the warp's parity); nothing to do before griddepcontrol.wait (no zero super-block).
struct XoneQ6 {
  uint2* bfr;
  int2* cfr;
  float* inv_s;
  __device__ __forceinline__ static void load(const float* p, int b, float (&v)[8]) { load8_q6(p, b, v); }
  static constexpr bool kNorm = false;  // no RMSNorm in mvq::stage_multi (fold29: Q4_K only)
  template <int kW>
  __device__ __forceinline__ void before_wait(int) const {}
  template <int kU>
  __device__ __forceinline__ void digits(const float (&v)[kU][8], const int (&bs)[kU], const bool (&st)[kU]) const {
    if ((threadIdx.x >> 5) & 1) digits_q6_u<true, kU>(v, bs, st, bfr, cfr, inv_s);
    else digits_q6_u<false, kU>(v, bs, st, bfr, cfr, inv_s);
  }
};

__device__ __forceinline__ void imma_c(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1, int2 cc) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%10,%11};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(cc.x), "r"(cc.y));
}
// Byte `sel & 3`-selected PRMT in its sign-replicating mode: the selector's nibbles 1..3 have bit 3 set.
__device__ __forceinline__ int prmt_s8(uint32_t w, uint32_t sel) {
  int r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(w), "r"(0u), "r"(sel));
  return r;
}
__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Lane constants of an item: B masks (bytes of half 0 for slot 0 / 1, inverted for columns 4..7), the
// scale-byte selectors, the digit weights of the lane's columns.
struct Lane {
  uint32_t m0[2], m1[2];  // [parity]
  uint32_t sel[2];        // [Q & 1]
  float wa, wb;
};
__device__ __forceinline__ Lane lane_consts(int g, int t) {
  Lane c;
  const bool hi_cols = g >= 4;
  const uint32_t e0 = 0xFFFFFFFFu, e1 = 0u;                                            // even blocks
  const uint32_t o0 = t == 3 ? 0x0000FFFFu : 0xFFFFFFFFu, o1 = t == 3 ? 0xFFFF0000u : 0u;  // odd blocks
  c.m0[0] = hi_cols ? ~e0 : e0;
  c.m1[0] = hi_cols ? ~e1 : e1;
  c.m0[1] = hi_cols ? ~o0 : o0;
  c.m1[1] = hi_cols ? ~o1 : o1;
  const uint32_t lh = (uint32_t)(t >> 1);
#pragma unroll
  for (int qo = 0; qo < 2; qo++) {
    const uint32_t bi = 2u * qo + lh;
    c.sel[qo] = bi | ((bi | 8u) * 0x1110u);
  }
  c.wa = (t & 1) ? 256.f : 16777216.f;
  c.wb = (t & 1) ? 1.f : 65536.f;
  return c;
}

// The raw words of one item (item_q6, item_q6_multi): rows g (p[0]) and g + 8 (p[1]), the lane's ql / qh words W / H
// (slots 0 and 1), the 16 int8 scales as 4 words sw and d per row.
template <bool kOdd>
__device__ __forceinline__ void load_q6(const uint8_t* const (&p)[2], int t, uint32_t (&W)[2][4][2],
                                        uint32_t (&H)[2][2][2], uint32_t (&sw)[2][4], float (&d)[2]) {
  const int o = 4 * t + (kOdd ? 2 : 0);
  const uint32_t sel3 = t == 3 ? 0x7610u : 0x3210u;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const uint8_t* b = p[k];
#pragma unroll
    for (int r = 0; r < 6; r++) {  // regions: ql 0..3, qh 4, 5 (32 bytes each)
      const uint8_t* rb = b + 32 * r;
      const uint32_t s0 = lds32(rb + o);
      uint32_t s1 = lds32(rb + 16 + o);
      if (kOdd) s1 = __byte_perm(s1, lds32(rb - 2), sel3);  // lane 3: l 30, 31 | 0, 1
      if (r < 4) {
        W[k][r][0] = s0;
        W[k][r][1] = s1;
      } else {
        H[k][r - 4][0] = s0;
        H[k][r - 4][1] = s1;
      }
    }
    if (kOdd) {
      uint32_t s5[5];
#pragma unroll
      for (int i = 0; i < 5; i++) s5[i] = lds32(b + 190 + 4 * i);
#pragma unroll
      for (int i = 0; i < 4; i++) sw[k][i] = __funnelshift_r(s5[i], s5[i + 1], 16);
      d[k] = mvd::h2f(s5[4] >> 16);
    } else {
#pragma unroll
      for (int i = 0; i < 4; i++) sw[k][i] = lds32(b + 192 + 4 * i);
      d[k] = mvd::h2f(*reinterpret_cast<const uint16_t*>(b + 208));
    }
  }
}

// The 6-bit codes of group m = 4 n + Q of an item as u8 A words (item_q6, item_q6_multi): the ql nibble | the qh bits,
// per row k and slot j. n and Q are constants of the callers' unrolled loops.
__device__ __forceinline__ void codes_q6(const uint32_t (&W)[2][4][2], const uint32_t (&H)[2][2][2], int n, int Q,
                                         uint32_t (&A)[2][2]) {
#pragma unroll
  for (int k = 0; k < 2; k++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const uint32_t w = W[k][2 * n + (Q & 1)][j], h = H[k][n][j];
      const uint32_t nib = Q < 2 ? (w & 0x0F0F0F0Fu) : ((w >> 4) & 0x0F0F0F0Fu);
      const uint32_t hb = (Q == 0 ? h << 4 : Q == 1 ? h << 2 : Q == 2 ? h : h >> 2) & 0x30303030u;
      A[k][j] = nib | hb;
    }
}

// One item: rows g (block at p[0]) and g + 8 (p[1]) of a stage, one super-block kb (parity kOdd).
// bq: the super-block's B entries + g % 4 * 4 + t; cq: its C entries + t; is: 2^(e - 30).
// The 6-bit codes: (nibbles & 0x0F0F0F0F) | (the qh bits shifted & 0x30303030), per register. q6i19's form (one
// bit-select each from masks shared by a qh word's four Q; same bits) compiled to the same SASS mix (odd body 296: LOP3
// 80, LDS 62, IMAD 60, SHF 35, PRMT 28; even 263) in another schedule: removed in clean20 (it is in 7f96404).
template <bool kOdd>
__device__ __forceinline__ void item_q6(const uint8_t* const (&p)[2], int t, const Lane& lc, const uint2* bq,
                                        const int2* cq, float is, float (&yp)[2]) {
  uint32_t W[2][4][2], H[2][2][2];  // [row][ql region 2n + (Q & 1)][slot], [row][n][slot]
  uint32_t sw[2][4];
  float d[2];
  load_q6<kOdd>(p, t, W, H, sw, d);
  const uint32_t mk0 = lc.m0[kOdd ? 1 : 0], mk1 = lc.m1[kOdd ? 1 : 0];
  int R[4] = {0, 0, 0, 0};
#pragma unroll
  for (int n = 0; n < 2; n++)
#pragma unroll
    for (int Q = 0; Q < 4; Q++) {
      const int m = 4 * n + Q;
      uint32_t A[2][2];  // [row][slot]
      codes_q6(W, H, n, Q, A);
      const uint2 bv = bq[m * 16];
      int c[4];
      imma_c(c, A[0][0], A[1][0], A[0][1], A[1][1], bv.x & mk0, bv.y & mk1, cq[m * 4]);
      const int s0 = prmt_s8(sw[0][2 * n + (Q >> 1)], lc.sel[Q & 1]);
      const int s1 = prmt_s8(sw[1][2 * n + (Q >> 1)], lc.sel[Q & 1]);
      R[0] += s0 * c[0];
      R[1] += s0 * c[1];
      R[2] += s1 * c[2];
      R[3] += s1 * c[3];
    }
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const float f = fmaf((float)R[2 * k], lc.wa, (float)R[2 * k + 1] * lc.wb);
    yp[k] = fmaf(d[k] * is, f, yp[k]);
  }
}

// q6m28 (kernel<..., kB = 2 / 4>): item_q6 for kB sequences, the 6-bit codes (A) built once per group and multiplied by
// each sequence's digits (its own n8 tile: one mma per group and sequence); sequence s's B / C entries at bq / cq + s xr
// (8-byte units per x region), its 2^(e - 30) is[s]; yp[s] as item_q6's yp (store_rows_seqs sums the lane quads). The
// same integers and fp32 expressions per sequence as item_q6.
template <bool kOdd, int kB>
__device__ __forceinline__ void item_q6_multi(const uint8_t* const (&p)[2], int t, const Lane& lc, const uint2* bq,
                                              const int2* cq, int xr, const float (&is)[kB], float (&yp)[kB][2]) {
  uint32_t W[2][4][2], H[2][2][2];  // [row][ql region 2n + (Q & 1)][slot], [row][n][slot]
  uint32_t sw[2][4];
  float d[2];
  load_q6<kOdd>(p, t, W, H, sw, d);
  const uint32_t mk0 = lc.m0[kOdd ? 1 : 0], mk1 = lc.m1[kOdd ? 1 : 0];
  int R[kB][4] = {};
#pragma unroll
  for (int n = 0; n < 2; n++)
#pragma unroll
    for (int Q = 0; Q < 4; Q++) {
      const int m = 4 * n + Q;
      uint32_t A[2][2];  // [row][slot]
      codes_q6(W, H, n, Q, A);
      const int s0 = prmt_s8(sw[0][2 * n + (Q >> 1)], lc.sel[Q & 1]);
      const int s1 = prmt_s8(sw[1][2 * n + (Q >> 1)], lc.sel[Q & 1]);
#pragma unroll
      for (int sq = 0; sq < kB; sq++) {
        const uint2 bv = bq[sq * xr + m * 16];
        int c[4];
        imma_c(c, A[0][0], A[1][0], A[0][1], A[1][1], bv.x & mk0, bv.y & mk1, cq[sq * xr + m * 4]);
        R[sq][0] += s0 * c[0];
        R[sq][1] += s0 * c[1];
        R[sq][2] += s1 * c[2];
        R[sq][3] += s1 * c[3];
      }
    }
#pragma unroll
  for (int sq = 0; sq < kB; sq++)
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const float f = fmaf((float)R[sq][2 * k], lc.wa, (float)R[sq][2 * k + 1] * lc.wb);
      yp[sq][k] = fmaf(d[k] * is[sq], f, yp[sq][k]);
    }
}

// decode10: x prepared once per product in this kernel's shared-memory layout (mvq::xprep_kernel's Q6_K form).
// fence: as mvq::xprep_kernel's.
template <int kPW>
__global__ void __launch_bounds__(32 * kPW) xprep_kernel(const mvt::Args a, uint4* xg, bool fence) {
  mvs::grid_dep_trigger();
  mvs::grid_dep_wait();
  uint2* bfr = reinterpret_cast<uint2*>(xg);
  int2* cfr = reinterpret_cast<int2*>(bfr + a.nb * 8 * 16);
  stage_q6<kPW>(a, bfr, cfr, reinterpret_cast<float*>(cfr + a.nb * 8 * 4), blockIdx.x * kPW, gridDim.x * kPW);
  if (fence) mvq::fence_proxy_async_global();
}

// kW consumer warps: 8 (two CTAs per SM fit the register file) or 16 (kWide, one CTA per SM: decode9). With
// 16, the warps form two groups of 8 that take alternate stages of the ring (group h the stages j with
// j % 2 == h; each stage's empty mbarrier still counts 8 warps), with the same super-block map inside a stage;
// x is staged by all 16, and a row group's partial sums meet over all 16.
// kLean (q6i19, Tune::lean; same bits): the ring slot and phase as counters advanced per stage (no divisions by the
// runtime stage count), the stage's window offsets in 32 bits.
// kB 2 / 4 (q6m28; kMath and kLean only): kB sequences' products (Args::nseq <= kB real) in one pass over the weights,
// x of sequence s in region s (Args::xregion bytes each: this kernel's B, C and 2^(e - 30) of that sequence), staged by
// mvq::stage_multi / stage_q6 (never a prepared x); item_q6_multi, mvq::store_rows_seqs.
template <bool kMath, int kW, bool kLean = false, int kB = 1>
__global__ void __launch_bounds__(32 * (kW + 1), kW == kCW ? 2 : 1) kernel(const Args a) {
  constexpr int kG = kW / kCW;  // consumer groups
  static_assert(kW % kCW == 0, "consumer warps in groups of 8");
  static_assert(kB == 1 || ((kB == 2 || kB == 4) && kMath && kLean), "2 / 4 sequences: the lean form only");
  extern __shared__ uint4 smem_raw[];
  uint2* bfr = reinterpret_cast<uint2*>(smem_raw);
  int2* cfr = reinterpret_cast<int2*>(bfr + a.t.nb * 8 * 16);
  float* inv_s = reinterpret_cast<float*>(cfr + a.t.nb * 8 * 4);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw) + a.xbytes;
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages], xfull;
  __shared__ float red[2][kW][16 * kB];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nrg = (a.t.rows + 15) / 16, S = a.stages, stage_bytes = 16 * a.pitch;
  if (threadIdx.x == 0) mvq::probe_at(a.probe, mvq::kPrEntry);
  mvq::init_ring(full, empty, &xfull, S);

  // The producer and consumer loops follow mvq::kernel's; they stay written out in both kernels because as shared
  // templates taking the copy / the items as callbacks, kernel<true, 8> compiled to different code.
  if (warp == kW) {  // producer: the same schedule as mvq::kernel, 16-byte aligned windows per row piece
    bool x_done = false;
    const auto x_part = [&] {
      mvq::producer_x<kW>(a, smem_raw, &xfull);
      x_done = true;
    };
    const uint64_t pol = a.evict ? mvq::l2_evict_first() : 0;
    int j = 0, sl = 0, ph = 0;  // kLean: j % S, (j / S) & 1
    const auto step = [&] {
      if (kLean && ++sl == S) {
        sl = 0;
        ph ^= 1;
      }
    };
    for (int rg = blockIdx.x; rg < nrg; rg += gridDim.x)
      for (int c = 0; c < a.nchunk; c++, j++, step()) {
        if (j == S && !x_done) x_part();
        const int s = kLean ? sl : j % S;
        if (j >= S) mvq::mbar_wait(&empty[s], kLean ? ph ^ 1 : ((j / S) - 1) & 1);
        const int kb0 = c * a.kc, n = min(a.kc, a.t.nb - kb0);
        const int row = min(rg * 16 + (lane & 15), a.t.rows - 1);
        const int64_t src = (int64_t)row * a.t.row_bytes + (int64_t)kb0 * kBlockBytes;
        const int o = (int)(src & 15);
        const uint32_t bytes = (uint32_t)((o + n * kBlockBytes + 15) & ~15);
        const uint32_t total = __reduce_add_sync(0xffffffffu, lane < 16 ? bytes : 0u);
        if (lane == 0) mvq::mbar_expect_tx(&full[s], total);
        __syncwarp();
        if (lane < 16)
          mvq::bulk_w(ring + s * stage_bytes + lane * a.pitch, a.t.w + (src - o), bytes, &full[s], a.evict, pol);
        if (j == 0 && lane == 0) mvq::probe_at(a.probe, mvq::kPrFirstCopy);
      }
    if (lane == 0) mvq::probe_at(a.probe, mvq::kPrLastCopy);
    if (!x_done) x_part();
    mvq::prefetch_next(a.pf, a.pf_cta);
    return;
  }

  uint64_t* const pr = threadIdx.x == 0 ? a.probe : nullptr;  // consumer warp 0's stamps
  // Three super-blocks per warp only with 16 warps: with 8, kernel<true, 8> then spilled (4 bytes; ptxas, b1x16).
  const int xr = a.xregion / 8;  // kB > 1: 8-byte units per sequence's x region
  if constexpr (kB > 1) {
    XoneQ6 f[kB];
#pragma unroll
    for (int s = 0; s < kB; s++) {
      uint2* b = bfr + s * xr;
      int2* c = reinterpret_cast<int2*>(b + a.t.nb * 8 * 16);
      f[s] = XoneQ6{b, c, reinterpret_cast<float*>(c + a.t.nb * 8 * 4)};
    }
    const int xm0 = a.xone ? mvq::multi_units(a.t.nb, kW, kB) : 0, xm = kW == kCW && xm0 > 2 ? 0 : xm0;
    mvq::stage_multi_units<kW, kB, XoneQ6, kW == kCW ? 2 : 3>(xm, a.t, a.nseq, f, pr, nullptr);
    if (!xm) {  // rows past the one-round staging: stage_q6 per sequence
      mvs::grid_dep_wait();
      mvq::probe_at(pr, mvq::kPrWaited);
#pragma unroll 1
      for (int s = 0; s < kB; s++) {  // region pointers from s (an f[s] of a runtime s would put f in local memory)
        mvt::Args ts = a.t;
        ts.x += (int64_t)(s < a.nseq ? s : 0) * ts.cols;
        uint2* b = bfr + s * xr;
        int2* c = reinterpret_cast<int2*>(b + a.t.nb * 8 * 16);
        stage_q6<kW>(ts, b, c, reinterpret_cast<float*>(c + a.t.nb * 8 * 4));
      }
    }
    mvq::x_staged_arrive<kW>();
  } else {
    const int xu0 = a.xone && !a.xg ? mvq::xone_units(a.t.nb, kW) : 0, xu = kW == kCW && xu0 > 2 ? 0 : xu0;
    mvq::stage_one_units<kW, kW == kCW ? 2 : 3>(xu, a.t, XoneQ6{bfr, cfr, inv_s}, pr, a.xone == 2);
    if (!xu) {
      mvs::grid_dep_wait();
      mvq::probe_at(pr, mvq::kPrWaited);
    }
    if (a.xg) mvq::mbar_wait(&xfull, 0);
    else if (!xu) stage_q6<kW>(a.t, bfr, cfr, inv_s);
    if (!a.xg) mvq::x_staged_arrive<kW>();
  }
  mvq::probe_at(pr, mvq::kPrXStaged);
  mvs::grid_dep_trigger();
  const int grp = warp / kCW, lw = warp % kCW;  // group, warp within the group

  const int g = lane >> 2, t = lane & 3;
  const Lane lc = lane_consts(g, t);
  const uint2* bbase = bfr + (g & 3) * 4 + t;
  const int2* cbase = cfr + t;
  int j = 0, par = 0, sl = 0, ph = 0;  // kLean: sl = j % S, ph = (j / S) & 1
  const auto step = [&] {
    if (kLean && ++sl == S) {
      sl = 0;
      ph ^= 1;
    }
  };
  uint64_t t_full = 0;  // probe: the last stage's landing
  for (int rg = blockIdx.x; rg < nrg; rg += gridDim.x) {
    float yp[2] = {0.f, 0.f};
    float ym[kB][2];  // kB > 1: item_q6_multi's sums
#pragma unroll
    for (int sq = 0; sq < kB; sq++) ym[sq][0] = ym[sq][1] = 0.f;
    const int rowa = min(rg * 16 + g, a.t.rows - 1), rowb = min(rg * 16 + g + 8, a.t.rows - 1);
    // kLean: the rows' start addresses mod 16 (a window's offset: (row start + kb0 x 210) mod 16).
    const int oa = (int)(((int64_t)rowa * a.t.row_bytes) & 15), ob = (int)(((int64_t)rowb * a.t.row_bytes) & 15);
    for (int c = 0; c < a.nchunk; c++, j++, step()) {
      if (kG > 1 && (kLean ? (int)((unsigned)j % kG) : j % kG) != grp) continue;  // the other group's stage
      const int s = kLean ? sl : j % S;
      mvq::mbar_wait(&full[s], kLean ? ph : (j / S) & 1);
      if (pr) mvq::probe_full(pr, t_full);
      const int kb0 = c * a.kc, n = min(a.kc, a.t.nb - kb0);
      if (kMath) {
        const uint8_t* st = ring + s * stage_bytes;
        const int o0 = kLean ? (oa + kb0 * kBlockBytes) & 15
                             : (int)(((int64_t)rowa * a.t.row_bytes + (int64_t)kb0 * kBlockBytes) & 15);
        const int o1 = kLean ? (ob + kb0 * kBlockBytes) & 15
                             : (int)(((int64_t)rowb * a.t.row_bytes + (int64_t)kb0 * kBlockBytes) & 15);
        const uint8_t* r0 = st + g * a.pitch + o0;
        const uint8_t* r1 = st + (g + 8) * a.pitch + o1;
        for (int G = kb0 >> 3; G <= (kb0 + n - 1) >> 3; G++) {
          const int kb = 8 * G + (lw ^ (G & 1));
          if (kb < kb0 || kb >= kb0 + n) continue;
          const int q = kb - kb0;
          const uint8_t* const p[2] = {r0 + q * kBlockBytes, r1 + q * kBlockBytes};
          if constexpr (kB > 1) {
            float is[kB];
#pragma unroll
            for (int sq = 0; sq < kB; sq++) is[sq] = inv_s[sq * 2 * xr + kb];
            if (kb & 1) item_q6_multi<true, kB>(p, t, lc, bbase + kb * 128, cbase + kb * 32, xr, is, ym);
            else item_q6_multi<false, kB>(p, t, lc, bbase + kb * 128, cbase + kb * 32, xr, is, ym);
          } else {
            if (kb & 1) item_q6<true>(p, t, lc, bbase + kb * 128, cbase + kb * 32, inv_s[kb], yp);
            else item_q6<false>(p, t, lc, bbase + kb * 128, cbase + kb * 32, inv_s[kb], yp);
          }
        }
      }
      mvq::release_stage(&empty[s]);
    }
    if constexpr (kB > 1) mvq::store_rows_seqs<kW, kB>(a.t, a.nseq, rg, warp, lane, ym, red[par]);
    else mvq::store_rows<kW>(a.t, rg, warp, lane, yp, red[par]);
    par ^= 1;
  }
  mvq::probe_end(pr, t_full);
}

// DS_MATVEC_STREAM_Q6K=0 turns the kernel off, =1 forces it wherever it fits (default: by shape, takes());
// DS_MATVEC_STREAM_Q6K_KC (super-blocks per stage, even), _STAGES, _CTAS (per SM) for A/B runs.
struct Tune {
  int mode = -1;  // -1: by shape, 0: off, 1: wherever it fits
  int kc = 0;     // 0: 8
  int stages = 0;       // 0: as many as fit (<= kMaxStages)
  int ctas_per_sm = 0;  // 0: 2 where >= 3 stages fit in half the SM, else 1; -1: 1 in half the SM (plan())
  bool math = true;     // false: streaming probe (mvbench only)
  // 16 consumer warps where the plan has one CTA per SM in the full SM (x + 2 stages need more than half:
  // rows of >= ~40 super-blocks, e.g. the 9B / 27B ffn_down); DS_MATVEC_STREAM_Q6K_WIDE=0: 8 (decode9). H200, op
  // by op: 9B ffn_down [4096 x 12288] 28.1 vs 32.4 us, 27B [5120 x 17408] 46.9 vs 52.3; tg128 27B 125.8 tok/s with
  // this one alone vs 123.35 with neither kernel's 16-warp form.
  bool wide = true;
  // q6i19: kernel<, , true> (same bits): the per-stage ring bookkeeping without divisions (34 -> 7 SASS instructions
  // before the full wait; 16 warps take one item per stage). DS_MATVEC_STREAM_Q6K_LEAN=0: the previous form. H200
  // (mvbench, weights past L2): 9B ffn_down 18.82 / 18.85 vs 19.24 / 19.20 us, 27B 34.88 / 34.91 vs 36.56 / 36.39;
  // tg128 9B 435.19 vs 433.06 tok/s, 27B 144.86 vs 143.36 (means of 3 interleaved pairs, each pair faster).
  bool lean = true;
};
inline Tune& tune() {
  static Tune t = [] {
    Tune d;
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K")) d.mode = e[0] == '0' ? 0 : e[0] == '1' ? 1 : -1;
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K_WIDE")) d.wide = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K_LEAN")) d.lean = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K_KC")) d.kc = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K_STAGES")) d.stages = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q6K_CTAS")) d.ctas_per_sm = std::atoi(e);
    return d;
  }();
  return t;
}

struct Plan {
  int kc = 0, pitch = 0, stages = 0, ctas_per_sm = 0, xbytes = 0;
  int warps = kCW;  // consumer warps (kernel<, kW>)
  size_t smem = 0;
};
// Dynamic shared memory allowed per kernel: 16 consumer warps have 1 KB more static shared memory (227 KB in all).
constexpr size_t kOneSmem = 225 * 1024, kOneSmemWide = 224 * 1024;
// kB 2 / 4 (q6m28): kB sequences' x regions, and the ring (kB - 1) KB (8 consumer warps) / 2 (kB - 1) KB (16) smaller
// for the kernel's larger static row sums (mvq::plan's rule).
inline bool plan(int nb, const Tune& tn, Plan& p, int kB = 1) {
  const size_t kHalf = (size_t)(110 - (kB - 1)) * 1024;
  const size_t kOne = (tn.wide ? kOneSmemWide : kOneSmem) - (size_t)(kB - 1) * 2048;
  if (nb <= 0 || nb % 2 != 0) return false;
  // kc 0: 8 super-blocks per stage. 16 was faster alone on the 9B ffn_down ([4096 x 12288] 19.4 vs 20.6 us,
  // decode7) but slower on 27B ffn_gate_up-sized rows (46.6 vs 42.4 us), leaves rows of >= 100 super-blocks no
  // room for x and 2 stages, and the whole 9B was not faster with it (H200, session 6: 357.1 tok/s with 16 for
  // rows of >= 32 vs 364.7 with 8 in decode7's call).
  int kc = tn.kc > 0 ? tn.kc : 8;
  kc = std::max(2, kc & ~1);
  p.kc = std::min(kc, nb);
  // Window of a row piece: up to 14 bytes before the first block, rounded up to 16; pitch 16 mod 32 (the
  // word loads of 8 rows x 4 lanes hit 32 distinct banks when the rows' windows start alike).
  p.pitch = (p.kc * kBlockBytes + 14 + 15) / 16 * 16;
  if (p.pitch % 32 == 0) p.pitch += 16;
  p.xbytes = kB * (int)((smem_x_bytes(nb) + 127) / 128 * 128);
  const size_t stage = (size_t)16 * p.pitch;
  // ctas_per_sm -1 (decode8): one CTA per SM within half the SM's shared memory (the full SM where x and 2
  // stages need more), so the next product's CTAs fit beside this one's and fill their ring while it runs.
  // A/B only: half the consumer warps per SM cost far more than the overlap gives (H200 tg128, decode8: 9B 280.6
  // tok/s with both kernels so vs 357.9, Q4_K alone 300.0, Q6_K alone 331.3; 27B 92.3 vs 123.5; 0.8B 990.6 vs 1131.5).
  const bool half1 = tn.ctas_per_sm < 0;
  for (int cand = 0; cand < 3; cand++) {
    const int cps = cand == 0 ? 2 : 1;
    const size_t lim = cand == 2 ? kOne : kHalf;
    if (half1 ? cand == 0 : (cand == 1 || (tn.ctas_per_sm && cps != tn.ctas_per_sm))) continue;
    if ((size_t)p.xbytes + 2 * stage > lim) continue;
    int st = (int)std::min<size_t>(kMaxStages, (lim - p.xbytes) / stage);
    if (tn.stages > 0) st = std::min(st, std::max(2, tn.stages));
    if (cps == 2 && !tn.ctas_per_sm && st < 3) continue;
    if (cand == 2 && tn.wide) st = mvq::even_stages(st);  // 16 consumer warps (p.warps below)
    p.stages = st;
    p.ctas_per_sm = cps;
    p.warps = cand == 2 && tn.wide ? 2 * kCW : kCW;
    p.smem = p.xbytes + (size_t)st * stage;
    return true;
  }
  return false;
}

// Whether the kernel takes Q6_K [rows, cols] (by shape: see the rule below; bench/cuda/NOTES.md decode7).
inline bool takes(int64_t rows, int64_t cols) {
  const Tune& tn = tune();
  if (tn.mode == 0 || cols % 256 != 0 || rows > ((int64_t)1 << 30)) return false;
  Plan p;
  if (!plan((int)(cols / 256), tn, p)) return false;
  if (tn.mode == 1) return true;
  // At least one row group per SM and rows of >= 8 super-blocks, or vocab-sized rows of >= 4 (H200, decode7,
  // weights past L2: 9B ffn_down [4096 x 12288] with SwiGLU 25.6 vs 30.6 us, output [248320 x 4096] 205.8 vs
  // 387.0, 27B ffn_down 35.4 vs 48.5, [248320 x 1024] 78.7 vs 122.2; in the 9B model the Q6_K products of
  // fewer rows were slower on this kernel: 361.9 tok/s with it forced everywhere vs 364.7 by shape).
  return (rows + 15) / 16 >= sm_count() && (cols >= 2048 || (rows >= 65536 && cols >= 1024));
}

namespace {
template <bool kMath, int kW, bool kLean, int kB>
cudaError_t allow_smem_q6() {
  static const cudaError_t e =
      cudaFuncSetAttribute(kernel<kMath, kW, kLean, kB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)((kW == kCW ? kOneSmem : kOneSmemWide) - (kB - 1) * 2048));
  return e != cudaSuccess ? e : mvs::carveout_max(kernel<kMath, kW, kLean, kB>);
}
template <bool kMath, int kW, bool kLean = false, int kB = 1>
Status launch_t(const Args& a, size_t smem, unsigned grid, cudaStream_t stream) {
  const cudaError_t attr = allow_smem_q6<kMath, kW, kLean, kB>();
  if (attr != cudaSuccess) return cu_err("cuda matvec_stream_q6: cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
  const cudaError_t e = launch_pdl(kernel<kMath, kW, kLean, kB>, dim3(grid), dim3(32 * (kW + 1)), smem, stream,
                                   mvq::launch_pdl_with(a.xg != nullptr), a);
  if (e != cudaSuccess) return cu_err("cuda matvec_stream_q6: launch: {}", cudaGetErrorString(e));
  CUDA_TRY_LAUNCH("matvec_stream_q6", stream);
  return {};
}
}  // namespace

// Checks done by the caller (matvec.cu): rows, cols > 0, cols % 256 == 0, alignment of w (16, allocation
// padded to 16 bytes: the last row's window may end up to 15 bytes past the matrix) / x / y.
inline Status launch(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, bool accumulate,
                     cudaStream_t stream, const mvs::Pre& pre = {}) {
  const int nb = (int)(cols / 256);
  Plan p;
  if (cols % 256 != 0 || rows > ((int64_t)1 << 30) || !plan(nb, tune(), p))
    return cu_err("cuda matvec_stream_q6: [{}, {}] does not fit", rows, cols);
  Args a;
  a.t = mvt::Args{w, (int64_t)nb * kBlockBytes, (int)rows, nb, 1, x, y, accumulate, pre, (int)cols};
  a.kc = p.kc;
  a.nchunk = (nb + p.kc - 1) / p.kc;
  a.pitch = p.pitch;
  a.stages = p.stages;
  a.xbytes = p.xbytes;
  a.evict = mvq::tune().evict;
  a.xone = mvq::tune().xone;
  const int64_t nrg = (rows + 15) / 16;
  const int64_t grid = std::min<int64_t>(nrg, (int64_t)p.ctas_per_sm * sm_count());
  a.probe = mvq::probe_take((int)grid, rows, cols, true);
  a.pf_cta = mvq::prefetch_per_cta(mvq::tune().prefetch_kb, grid);
  a.pf = a.pf_cta ? mvq::next_hint().w : nullptr;
  if (mvq::xprep_takes(nb, true)) {
    const size_t xb = (smem_x_bytes(nb) + 15) / 16 * 16;
    uint4* xg = xb <= mvq::kXgMax && xb <= (size_t)p.xbytes ? mvq::next_xprep_buffer() : nullptr;
    if (xg) {
      const bool fence = mvq::tune().xprep_fence;
      const cudaError_t e = launch_pdl(xprep_kernel<8>, dim3((nb + 7) / 8), dim3(256), 0, stream,
                                       mvq::launch_pdl_with(true), a.t, xg, fence);
      if (e != cudaSuccess) return cu_err("cuda matvec_stream_q6: xprep launch: {}", cudaGetErrorString(e));
      CUDA_TRY_LAUNCH("matvec_stream_q6 xprep", stream);
      a.xg = xg;
      a.xg_bytes = (uint32_t)xb;
      a.xfence = fence;
    }
  }
  const bool wide = p.warps > kCW;
  if (!tune().math)
    return wide ? launch_t<false, 2 * kCW>(a, p.smem, (unsigned)grid, stream)
                : launch_t<false, kCW>(a, p.smem, (unsigned)grid, stream);
  if (tune().lean)
    return wide ? launch_t<true, 2 * kCW, true>(a, p.smem, (unsigned)grid, stream)
                : launch_t<true, kCW, true>(a, p.smem, (unsigned)grid, stream);
  return wide ? launch_t<true, 2 * kCW>(a, p.smem, (unsigned)grid, stream)
              : launch_t<true, kCW>(a, p.smem, (unsigned)grid, stream);
}

// q6m28: whether the kB-sequence kernel (kB 2 or 4) takes Q6_K [rows, cols] (takes()'s rule with kB x regions in the
// plan; the lean form on, DS_MVB_PAIR not 0), and its launch for nseq <= 4 sequences (mvq::launch_multi's contract).
// kB 4 spills (64-80 bytes at 96 registers, ptxas, session 28): DS_MVB_Q6K_QUAD=0 turns it off (pairs instead).
inline bool quad_on() {
  static const bool v = [] {
    const char* e = std::getenv("DS_MVB_Q6K_QUAD");
    return !(e && e[0] == '0');
  }();
  return v;
}
inline bool takes_multi(int64_t rows, int64_t cols, int kB) {
  const Tune& tn = tune();
  if (!mvq::pair_on() || (kB == 4 && !quad_on()) || !tn.math || !tn.lean || tn.mode == 0 || cols % 256 != 0 || rows > ((int64_t)1 << 30))
    return false;
  Plan p;
  if (!plan((int)(cols / 256), tn, p, kB)) return false;
  return tn.mode == 1 || ((rows + 15) / 16 >= sm_count() && (cols >= 2048 || (rows >= 65536 && cols >= 1024)));
}
inline Status launch_multi(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, int nseq,
                           bool accumulate, cudaStream_t stream) {
  const int nb = (int)(cols / 256), kB = nseq <= 2 ? 2 : 4;
  Plan p;
  if (nseq < 1 || nseq > 4 || cols % 256 != 0 || rows > ((int64_t)1 << 30) || !plan(nb, tune(), p, kB))
    return cu_err("cuda matvec_stream_q6 ({} sequences): [{}, {}] does not fit", nseq, rows, cols);
  Args a;
  const int64_t grid = mvq::multi_args(a, p, w, rows, cols, kBlockBytes, x, y, nseq, kB, accumulate);
  const bool wide = p.warps > kCW;
  if (kB == 2)
    return wide ? launch_t<true, 2 * kCW, true, 2>(a, p.smem, (unsigned)grid, stream)
                : launch_t<true, kCW, true, 2>(a, p.smem, (unsigned)grid, stream);
  return wide ? launch_t<true, 2 * kCW, true, 4>(a, p.smem, (unsigned)grid, stream)
              : launch_t<true, kCW, true, 4>(a, p.smem, (unsigned)grid, stream);
}

}  // namespace mvq6
}  // namespace ds::cuda

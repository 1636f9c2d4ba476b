// Batch-1 Q4_K matvec with the weights streamed into shared memory by bulk async copies (matvec.h; issue 5,
// decode6). Same math as matvec_tc.cuh (A = exact fp16 q * sc from the codes, x in kT fp16 terms staged
// once per CTA, mma.sync m16n8k16 with fp32 accumulation: mvt::stage / mvt::item), but the weight bytes do
// not go through registers: matvec_tc keeps one 2.3 KB item per warp in flight and issues the next load
// only after the current one is consumed, ~37 KB per SM, latency-bound at ~1.5 TB/s. Here
//   - a persistent grid (1 or 2 CTAs per SM) walks row groups of 16 rows, each split in chunks of kc
//     super-blocks; a chunk (16 rows x kc x 144 bytes) is one stage of a ring of `stages` stages in shared
//     memory (pitch per row padded to 64 mod 128 bytes: the 16-byte loads of rows g and g + 1 by one
//     quarter-warp then hit different banks);
//   - one producer warp issues, per stage, 16 `cp.async.bulk` copies (one row piece each, lanes 0..15)
//     completing on the stage's `full` mbarrier (expect_tx = the stage's bytes), and re-fills a stage once
//     its `empty` mbarrier has seen all consumer warps: `stages` x ~18-37 KB stay in flight per CTA;
//   - the first stages are issued before griddepcontrol.wait (weights do not depend on the previous
//     kernel), x is staged after it (mvt::stage, by the consumer warps behind their own named barrier
//     kStageBar; the producer warp takes no part, sync13; in the integer form rows of <= 3 x the consumer warps
//     super-blocks in one dependent round of loads, stage_one, b1x16);
//   - 8 consumer warps: warp w takes super-blocks w, w + 8, ... of each chunk (16 rows x 256 weights per
//     item, read from shared memory with three 16-byte loads per row), partial sums meet in shared memory
//     behind a named barrier at the end of each row group.
//     One CTA per SM (x + 2 stages need more than half the SM, e.g. the 27B ffn_down) takes 16 consumer warps in
//     the integer form (decode9): two groups of 8 on alternate stages, x staged by all 16.
// Integer form (kI8, Tune::i8): x' x 2^(30 - e) per super-block (|x'| < 2^30) is rounded to an int32 and
// split exactly into 4 signed 8-bit digits (d0 2^24 + d1 2^16 + d2 2^8 + d3, each digit the sign-extended
// low byte of what is left), one digit per column of the n8 tile; A = the raw codes as u8 (low nibbles:
// w & 0x0F0F0F0F = q, high nibbles: w & 0xF0F0F0F0 = 16 q, one LOP3 per 4 weights) into
// mma.sync m16n8k32 u8 x s8 -> s32: one mma = one 32-weight sub-block of 16 rows, scaled by its 6-bit
// scale with one IMAD per accumulator into int32 running sums (<= 5e8, no overflow). Per super-block:
// y += d 2^(e - 34) (digit columns weighted 2^24, 2^16, 2^8, 1) - dmin sum_j m_j Sx_j. About half the
// instructions of the fp16 form per weight (no HFMA2 per 2 weights, half the mma calls); x keeps ~30
// significant bits relative to its super-block's largest |x'|.
// Q4_K only: Q6_K keeps its kernels (decode5's tc Q6_K is off by default).
// Multi-sequence forms (pair28 / quad28, kernel<..., kB = 2 / 4>, launch_multi; matvec_batched's small batches): the
// integer form's n8 tile leaves columns 4..7 zero for one sequence, so a second sequence's digits go there (kB 2, the
// same mma count and A build), and kB 4 adds a second tile (item_multi, stage_multi, store_rows_multi).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "cuda/matvec_tc.cuh"

namespace ds::cuda {
namespace mvq {

constexpr int kCW = 8;                   // consumer warps (= mvt::kWarps: mvt::stage's thread mapping)
constexpr int kThreads = 32 * (kCW + 1);  // + one producer warp
constexpr int kMaxStages = 8;
constexpr int kBlockBytes = 144;
// Named barriers of the consumer warps (bar.sync id, 32 x consumer warps; the producer warp never executes them):
// 1 a row group's partial sums (store_rows), 2 the staging of x (mvt::stage_sync; sync13: the producer warp used to
// join the consumers' __syncthreads from its own call site, which compute-sanitizer's synccheck reports as
// divergent threads: __syncthreads is the aligned bar.sync, whose threads must all execute the same instruction).
// 3: the hand-off "x is staged" from the consumer warps (barrier.arrive) to the producer warp (barrier.sync), both
// with the count of the whole CTA: the producer-consumer form of a named barrier, in which warps arrive from
// different instructions (producer_x; dec15 made it the only form).
constexpr int kRowBar = 1, kStageBar = 2, kXBar = 3;
static_assert(kCW == mvt::kWarps, "mvt::stage runs on the consumer warps");

struct Args {
  mvt::Args t;     // x, y, rows, nb, accumulate, prologue (ks unused)
  int kc;          // super-blocks per chunk
  int nchunk;      // chunks per row group
  int pitch;       // shared-memory bytes per row of a stage
  int stages;
  int xbytes;      // offset of the ring in dynamic shared memory
  bool math;       // false: a probe that only streams (no loads from shared memory, y = 0)
  const uint8_t* pf = nullptr;  // next product's weights: this CTA prefetches [pf + blockIdx.x pf_cta, + pf_cta)
  uint32_t pf_cta = 0;          // into L2 once its own copies are issued (decode8; prefetch_next())
  // decode10 (Tune::xprep): x already in this kernel's shared-memory layout in global memory (xprep_kernel, the
  // launch before this one); the producer copies its first xg_bytes with bulk copies after griddepcontrol.wait
  // instead of the consumer warps staging it. nullptr: staged in the kernel as before.
  const uint4* xg = nullptr;
  uint32_t xg_bytes = 0;
  bool xfence = false;  // fence.proxy.async.global between griddepcontrol.wait and the bulk copies (Tune::xprep_fence)
  bool evict = false;         // the weight copies with the L2 evict_first policy (Tune::evict)
  int xone = 0;               // x staged in one dependent round (Tune::xone; rows of <= 3 kW super-blocks)
  uint64_t* probe = nullptr;  // this launch's timestamp slots (Probe; nullptr: none)
  // pair28 / quad28 (kernel<..., kB = 2 / 4>): bytes per sequence's x region in shared memory (smem_bytes_i8(nb)
  // rounded to 128), and the sequences (<= kB): sequence s's x is t.x + s t.cols, its y t.y + s t.rows.
  int xregion = 0;
  int nseq = 1;
  // fold29: with t.pre.norm_w, the normalised x of the sequences written here by CTA 0 (nullptr: not written; only
  // where stage_multi stages x: multi_xn_takes).
  float* xn = nullptr;
};

// dec15: a timeline of stream kernel launches for measurement (set_matvec_probe in matvec.h; CudaMatvec.StreamTimeline):
// while a probe buffer is set, each launch takes kProbeN %globaltimer stamps (ns) per CTA at the points below, in
// slots [blockIdx.x][event] of its own region. One thread writes each stamp; no stamp changes what the kernel does.
constexpr int kProbeN = 8;
enum ProbeEvent : int {
  kPrEntry,      // the CTA starts (thread 0)
  kPrFirstCopy,  // the producer has issued its first stage's copies
  kPrLastCopy,   // ... its last stage's copies (its L2 prefetch of the next product follows)
  kPrWaited,     // consumer warp 0 is past griddepcontrol.wait (the previous grid is complete)
  kPrXStaged,    // ... x is staged (or the prepared x copied)
  kPrFirstFull,  // ... its first stage's weights have landed
  kPrLastFull,   // ... its last stage's weights have landed
  kPrDone,       // ... its last row group is stored
};
__device__ __forceinline__ uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ void probe_at(uint64_t* p, int ev) {
  if (p) p[blockIdx.x * kProbeN + ev] = gtimer();
}
// A stage's weights landed (consumer warp 0): the first stamp is kPrFirstFull, the last one is kept in t for probe_end.
__device__ __forceinline__ void probe_full(uint64_t* p, uint64_t& t) {
  const uint64_t now = gtimer();
  if (!t) p[blockIdx.x * kProbeN + kPrFirstFull] = now;
  t = now;
}
__device__ __forceinline__ void probe_end(uint64_t* p, uint64_t t) {
  if (!p) return;
  p[blockIdx.x * kProbeN + kPrLastFull] = t;
  p[blockIdx.x * kProbeN + kPrDone] = gtimer();
}
// Host side: the region of the next launch of `grid` CTAs (nullptr when no probe is set or it is full) and a record of
// the launch (matvec.cu).
uint64_t* probe_take(int grid, int64_t rows, int64_t cols, bool q6);

// Global buffers for x in the shared-memory layout (decode10; matvec.cu: two per device, kXgMax bytes each, taken
// by alternate products (decode11, Tune::xprep_bufs): a product's xprep_kernel waits for the previous grid
// (griddepcontrol.wait, or stream order) before it writes, and with two buffers it overwrites the x of the product
// before the previous one, so a reader is two whole products behind the writer even where a kernel in between
// completes without waiting for its predecessor. Concurrent streams in one process would share them: Tune::xprep
// is for one stream at a time). Buffer i (0 or 1), nullptr when unavailable.
constexpr size_t kXgMax = 232 * 1024;
uint4* stream_x_buffer(int i);

// L2 prefetch of the next product's weights (decode8, DS_MATVEC_PREFETCH_KB): set_matvec_next (matvec.h) names
// them; a streamed kernel (this one, matvec_stream_q6.cuh) launched while the hint is set has each CTA's
// producer warp, once it has issued its last copy, prefetch its share of the first prefetch_kb KB of them, so
// that the next kernel's first stages come from L2 while this kernel's tail, launch and x staging run.
struct Next {
  const uint8_t* w = nullptr;
  size_t bytes = 0;
};
inline Next& next_hint() {  // per host thread: the forward sets it, launches and clears it on one thread
  static thread_local Next n;
  return n;
}
// Bytes per CTA (a multiple of 256: 16 lanes x 16-byte pieces) of a grid of `grid` CTAs, 0 for none.
inline uint32_t prefetch_per_cta(int prefetch_kb, int64_t grid) {
  const Next& n = next_hint();
  if (prefetch_kb <= 0 || !n.w || grid <= 0 || (uintptr_t)n.w % 16 != 0) return 0;
  const size_t total = std::min(n.bytes, (size_t)prefetch_kb * 1024);
  return (uint32_t)std::min<size_t>(total / (size_t)grid / 256 * 256, (size_t)1 << 30);
}
__device__ __forceinline__ void prefetch_next(const uint8_t* pf, uint32_t pf_cta) {
  const int lane = threadIdx.x & 31;
  if (!pf || lane >= 16) return;
  const uint32_t piece = pf_cta / 16;
  const uint8_t* p = pf + (size_t)blockIdx.x * pf_cta + (size_t)lane * piece;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(piece) : "memory");
}
// The L2 policy of the weight copies (dec15, Tune::evict): each weight byte is read once per step, so its lines may
// go first, leaving the next product's prefetched weights (and x, y, the norm weights) in L2.
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

// kI8: x digits in shared memory, per sub-block (32 elements) 16 uint2 = [digit g][t]: elements 8t .. 8t + 7
// of the sub-block as b0 (4 bytes) and b1 (4 bytes) of the m16n8k32 B fragment of column g; then one zero
// super-block (the lanes of columns >= 4 read it at every sub-block offset), Sx (8 per super-block),
// 2^(e - 34) per super-block.
// The zero super-block is a whole one (8 x 16 uint2, 1 KB: item_i8 reads it at the offsets of all 8 sub-blocks) and Sx
// starts after it (sx_offset_i8). decode11: Sx began 16 uint2 into it, so the zeroing (stage_i8's `zero`) and the
// Sx / 2^(e - 34) stores of super-blocks 0..27 hit the same bytes; in xprep_kernel CTA 0 zeroes while the other
// CTAs store Sx, and a late CTA 0 wiped Sx values already written (session 9's failures on the H200).
inline size_t smem_bytes_i8(int nb) { return ((size_t)nb + 1) * 8 * 16 * 8 + (size_t)nb * 9 * 4; }
__host__ __device__ constexpr int sx_offset_i8(int nb) { return (nb + 1) * 8 * 16; }  // in uint2

__device__ __forceinline__ uint32_t pack_s8(int a, int b, int c, int d) {
  return (uint32_t)(a & 0xFF) | ((uint32_t)(b & 0xFF) << 8) | ((uint32_t)(c & 0xFF) << 16) | ((uint32_t)d << 24);
}

// Exponent of a super-block's largest |x'| m, m < 2^ex: |x' 2^(30 - ex)| < 2^30. A zero block keeps ex = 0; so
// does a non-finite one (digit_factor makes its factor NaN: y NaN, where fp32 gives NaN or inf); ex >= -90 keeps
// 2^(30 - ex) finite.
__device__ __forceinline__ int block_exp(float m) {
  int ex = 0;
  if (m > 0.f && isfinite(m)) {
    frexpf(m, &ex);
    ex = max(ex, -90);
  }
  return ex;
}

// Whether the warp's 8 x 32 elements are all finite (fmaxf skips NaN: every element is tested).
__device__ __forceinline__ bool all_finite(const float (&v)[8]) {
  bool fin = true;
#pragma unroll
  for (int i = 0; i < 8; i++) fin = fin && isfinite(v[i]);
  return __all_sync(0xffffffffu, fin);
}

// 2^e, the factor of a super-block's digits, or NaN for a block with a non-finite element.
__device__ __forceinline__ float digit_factor(bool fin, int e) {
  return fin ? ldexpf(1.f, e) : __int_as_float(0x7fffffff);
}

// r (|r| < 2^30) split exactly into 4 signed 8-bit digits of element i, r = dg[0][i] 2^24 + dg[1][i] 2^16 +
// dg[2][i] 2^8 + dg[3][i], each digit the sign-extended low byte of what is left.
__device__ __forceinline__ void split_s8(int r, int (&dg)[4][8], int i) {
#pragma unroll
  for (int k = 3; k > 0; k--) {
    const int d = (int)(int8_t)(r & 0xFF);
    dg[k][i] = d;
    r = (r - d) >> 8;  // exact: r - d is a multiple of 256
  }
  dg[0][i] = r;  // |r| <= 64
}

// The lane's 8 elements x' s (s = 2^(30 - ex)) rounded to int32 and split into digits; all 0 for a non-finite block.
__device__ __forceinline__ void split_digits(const float (&v)[8], float s, bool fin, int (&dg)[4][8]) {
#pragma unroll
  for (int i = 0; i < 8; i++) split_s8(fin ? __float2int_rn(v[i] * s) : 0, dg, i);
}

// The digits as B fragments: dst[4 k] = digit k of elements 0..3 (b0) and 4..7 (b1).
__device__ __forceinline__ void store_digits(uint2* dst, const int (&dg)[4][8]) {
#pragma unroll
  for (int k = 0; k < 4; k++)
    dst[k * 4] = make_uint2(pack_s8(dg[k][0], dg[k][1], dg[k][2], dg[k][3]),
                            pack_s8(dg[k][4], dg[k][5], dg[k][6], dg[k][7]));
}

// b1x16 (Tune::xone): the digits of the lane's 8 elements straight from the rounded int32s r (|r| < 2^30): with
// u = r + 0x808080 (128 added to each of the three low bytes, carries included) bytes 0..2 of u are the low digits +
// 128 and byte 3 the top digit (|d0| <= 64), i.e. the digits of split_s8 (each digit in -128..127 makes them unique):
// digit k's byte = byte 3 - k of u, ^ 0x80 for k > 0. Four elements' bytes are gathered into one word by PRMT (two
// per element pair, one per word): ~16 PRMT + 8 IADD + 3 LOP per 8 elements instead of split_s8's ~9 integer
// instructions per element plus pack_s8's shifts and masks. Same words as store_digits(split_digits(...)).
__device__ __forceinline__ void store_digits_r(uint2* dst, const int (&r)[8]) {
  uint32_t w[2][4];  // [element quad][digit k]
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint32_t u0 = (uint32_t)r[4 * h] + 0x808080u, u1 = (uint32_t)r[4 * h + 1] + 0x808080u;
    const uint32_t u2 = (uint32_t)r[4 * h + 2] + 0x808080u, u3 = (uint32_t)r[4 * h + 3] + 0x808080u;
    const uint32_t a_lo = __byte_perm(u0, u1, 0x5140), a_hi = __byte_perm(u0, u1, 0x7362);  // (u0.b0 u1.b0 u0.b1 u1.b1)
    const uint32_t b_lo = __byte_perm(u2, u3, 0x5140), b_hi = __byte_perm(u2, u3, 0x7362);
    w[h][3] = __byte_perm(a_lo, b_lo, 0x5410) ^ 0x80808080u;  // byte 0 of each: the lowest digit
    w[h][2] = __byte_perm(a_lo, b_lo, 0x7632) ^ 0x80808080u;
    w[h][1] = __byte_perm(a_hi, b_hi, 0x5410) ^ 0x80808080u;
    w[h][0] = __byte_perm(a_hi, b_hi, 0x7632);  // byte 3: the top digit
  }
#pragma unroll
  for (int k = 0; k < 4; k++) dst[k * 4] = make_uint2(w[0][k], w[1][k]);
}

// kU super-blocks bs[] of a warp whose x' (the lane's 8 elements each) are in v, their dependent chains (max / Sx /
// finite reductions) interleaved: digits, Sx and 2^(e - 34) stored where st[u] (stage_i8's values). kR: the digits by
// store_digits_r (Tune::xone) instead of split_digits + store_digits (same words).
template <int kU, bool kR = false>
__device__ __forceinline__ void digits_i8_u(const float (&v)[kU][8], const int (&bs)[kU], const bool (&st)[kU],
                                            uint2* bfr, float* sx, float* inv_s) {
  const int lane = threadIdx.x & 31;
  float m[kU], sg[kU];
  bool fin[kU];  // fmaxf skips NaN: test every element
#pragma unroll
  for (int u = 0; u < kU; u++) {
    m[u] = fmaxf(fmaxf(fmaxf(fabsf(v[u][0]), fabsf(v[u][1])), fmaxf(fabsf(v[u][2]), fabsf(v[u][3]))),
                 fmaxf(fmaxf(fabsf(v[u][4]), fabsf(v[u][5])), fmaxf(fabsf(v[u][6]), fabsf(v[u][7]))));
    sg[u] = ((v[u][0] + v[u][1]) + (v[u][2] + v[u][3])) + ((v[u][4] + v[u][5]) + (v[u][6] + v[u][7]));
    fin[u] = true;
#pragma unroll
    for (int i = 0; i < 8; i++) fin[u] = fin[u] && isfinite(v[u][i]);
  }
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int u = 0; u < kU; u++) m[u] = fmaxf(m[u], __shfl_xor_sync(0xffffffffu, m[u], o));
#pragma unroll
  for (int u = 0; u < kU; u++) sg[u] += __shfl_xor_sync(0xffffffffu, sg[u], 1);
#pragma unroll
  for (int u = 0; u < kU; u++) sg[u] += __shfl_xor_sync(0xffffffffu, sg[u], 2);  // Sx of sub-block lane / 4
#pragma unroll
  for (int u = 0; u < kU; u++) fin[u] = __all_sync(0xffffffffu, fin[u]);
#pragma unroll
  for (int u = 0; u < kU; u++) {
    const int b = bs[u];
    if ((lane & 3) == 0 && st[u]) sx[b * 8 + (lane >> 2)] = sg[u];
    const int ex = block_exp(m[u]);
    const float s = ldexpf(1.f, 30 - ex);
    if (lane == 0 && st[u]) inv_s[b] = digit_factor(fin[u], ex - 34);
    uint2* dst = bfr + (b * 8 + (lane >> 2)) * 16 + (lane & 3);
    if constexpr (kR) {
      int r[8];
#pragma unroll
      for (int i = 0; i < 8; i++) r[i] = fin[u] ? __float2int_rn(v[u][i] * s) : 0;
      if (st[u]) store_digits_r(dst, r);
    } else {
      int dg[4][8];  // [digit][element]
      split_digits(v[u], s, fin[u], dg);
      if (st[u]) store_digits(dst, dg);
    }
  }
}

// Same prologue (RMSNorm / SwiGLU) as mvt::stage, its barriers the named kStageBar among the kW staging warps (in
// xprep_kernel all of its CTA); one warp per super-block, lane = elements 8 lane .. 8 lane + 7 = sub-block lane / 4,
// t = lane % 4.
// b0 / bstep: the super-blocks b0 + warp, + bstep, ... (xprep_kernel: a slice per CTA; zero: write the zero block).
template <int kW>
__device__ __forceinline__ void stage_i8(const mvt::Args& a, uint2* bfr, float* sx, float* inv_s, int b0 = 0,
                                         int bstep = kW, bool zero = true) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float red[kW];
  const float scale = mvt::rms_scale<kW, kStageBar>(a, red);
  if (zero)
    for (int i = threadIdx.x; i < 8 * 16; i += 32 * kW) bfr[a.nb * 8 * 16 + i] = make_uint2(0, 0);
  for (int b = b0 + warp; b < a.nb; b += bstep) {
    const int e = b * 256 + 8 * lane;
    const float4 lo = mvt::load_x4(a, e, scale), hi = mvt::load_x4(a, e + 4, scale);
    float m = fmaxf(fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)), fmaxf(fabsf(lo.z), fabsf(lo.w))),
                    fmaxf(fmaxf(fabsf(hi.x), fabsf(hi.y)), fmaxf(fabsf(hi.z), fabsf(hi.w))));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sg = ((lo.x + lo.y) + (lo.z + lo.w)) + ((hi.x + hi.y) + (hi.z + hi.w));  // Sx of sub-block lane / 4
    sg += __shfl_xor_sync(0xffffffffu, sg, 1);
    sg += __shfl_xor_sync(0xffffffffu, sg, 2);
    if ((lane & 3) == 0) sx[b * 8 + (lane >> 2)] = sg;
    const int ex = block_exp(m);
    const float s = ldexpf(1.f, 30 - ex);
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const bool fin = all_finite(v);
    if (lane == 0) inv_s[b] = digit_factor(fin, ex - 34);
    int dg[4][8];  // [digit][element]
    split_digits(v, s, fin, dg);
    store_digits(bfr + (b * 8 + (lane >> 2)) * 16 + (lane & 3), dg);
  }
  mvt::stage_sync<kW, kStageBar>();
}

// b1x16 (Tune::xone, DS_MATVEC_STREAM_XONE=1): x staged in ONE dependent round of global loads after
// griddepcontrol.wait, for rows of up to kU x kW super-blocks (kU <= 3: the warp's super-blocks w, w + kW, w + 2 kW).
// CudaMatvec.StreamTimeline (dec15): 5.4-6.4 us from the wait to x staged on the RMSNorm products (the x^2 round,
// a barrier, then per super-block x + the norm weights, the latter from DRAM), 2.6-3.6 us on the plain ones (one
// round per super-block), while the CTA's weight ring is already full. Here
//   - before the wait: the norm weights of the lane's elements into registers (model weights: no kernel of the step
//     writes them) and the zero super-block (this CTA's own shared memory);
//   - after it, issued together: x (and the SwiGLU gate) of all the warp's super-blocks and rms_scale's loads of x
//     (thread i: float4 i, i + 32 kW, ...; the same partition and order as mvt::rms_scale, so the same factor);
//   - then the x^2 reduction (one barrier), the prologue's formulas of mvt::load_x4 and digits_i8_u with the digits
//     by PRMT (store_digits_r). The same bits as stage_i8 (CudaMatvec.StreamXoneSameBits).
// The lane's 8 elements of super-block b of p: p[256 b + 8 lane .. + 7].
__device__ __forceinline__ void load8(const float* p, int b, float (&v)[8]) {
  const int e = b * 256 + 8 * (threadIdx.x & 31);
  const float4 lo = __ldg(reinterpret_cast<const float4*>(p + e)), hi = __ldg(reinterpret_cast<const float4*>(p + e + 4));
  v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
  v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
}
// load8's inverse: v to the lane's 8 elements of super-block b of p (fold29: the normalised x for other products).
__device__ __forceinline__ void store8(float* p, int b, const float (&v)[8]) {
  const int e = b * 256 + 8 * (threadIdx.x & 31);
  *reinterpret_cast<float4*>(p + e) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(p + e + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
// mvt::rms_scale's loads of x for kW staging warps over at most kR float4 per thread (zero past the end).
template <int kW, int kR>
__device__ __forceinline__ void rms_load(const mvt::Args& a, float4 (&r)[kR]) {
  const float4* x4 = reinterpret_cast<const float4*>(a.x);
#pragma unroll
  for (int i = 0; i < kR; i++) {
    const int f = threadIdx.x + i * 32 * kW;
    r[i] = f < a.cols / 4 ? __ldg(x4 + f) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
// mvt::rms_scale's tail: the staging threads' partial sums of x^2 (ss) reduced, the factor 1 / sqrt(mean + eps).
template <int kW>
__device__ __forceinline__ float rms_tail(const mvt::Args& a, float ss, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) red[warp] = ss;
  mvt::stage_sync<kW, kStageBar>();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < kW; i++) tot += red[i];
  return 1.0f / sqrtf(tot / (float)a.cols + a.pre.eps);
}
// mvt::rms_scale's sum and factor from rms_load's loads (the same expressions in the same order: the same bits).
template <int kW, int kR>
__device__ __forceinline__ float rms_finish(const mvt::Args& a, const float4 (&r)[kR], float* red) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kR; i++) {
    const float4 v = r[i];
    if (threadIdx.x + i * 32 * kW < a.cols / 4) ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
  }
  return rms_tail<kW>(a, ss, red);
}
// Tune::xone 2: the factor from the staging's own loads of x (each element once over the kW warps; a different
// summation order than mvt::rms_scale: not the same bits, within fp32 rounding of it). Elements of super-blocks
// that are not the warp's (beyond nb) are 0.
template <int kW, int kU>
__device__ __forceinline__ float rms_own(const mvt::Args& a, const float (&v)[kU][8], float* red) {
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < kU; u++)
#pragma unroll
    for (int h = 0; h < 8; h += 4)
      ss += (v[u][h] * v[u][h] + v[u][h + 1] * v[u][h + 1]) + (v[u][h + 2] * v[u][h + 2] + v[u][h + 3] * v[u][h + 3]);
  return rms_tail<kW>(a, ss, red);
}
// mvt::load_x4's prologue on 8 loaded elements: SwiGLU silu(gate) x, RMSNorm x scale w (aux: gate or norm weights).
__device__ __forceinline__ void prologue8(const mvt::Args& a, float (&v)[8], const float (&aux)[8], float scale) {
  if (a.pre.gate) {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = mvs::silu(aux[i]) * v[i];
  } else if (a.pre.norm_w) {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = v[i] * scale * aux[i];
  }
}
// The super-blocks of the calling warp: bs[u] = warp + u kW where st[u] (b < nb), else warp (not stored).
template <int kW, int kU>
__device__ __forceinline__ void xone_blocks(int nb, int (&bs)[kU], bool (&st)[kU]) {
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int u = 0; u < kU; u++) {
    st[u] = warp + u * kW < nb;
    bs[u] = st[u] ? warp + u * kW : warp;
  }
}
// Super-blocks per warp of the one-round staging (Tune::xone) for rows of nb, 0 where it does not apply. b1x17: 4-5 per
// warp on 16 warps (the 27B ffn_down's 68 super-blocks, in two rounds) with the prepared x off lost on the H200
// (DS_MATVEC_STREAM_XPREP=0: tg128 27B 131.2 vs 142.6 tok/s; 9B, 3 per warp, 408 vs 427): removed.
__host__ __device__ constexpr int xone_units(int nb, int kW) { return nb <= 3 * kW ? (nb + kW - 1) / kW : 0; }

// rms_finish's kW floats, one array per kW for every kU (the 16-warp kernel's static shared memory is tight).
template <int kW>
__device__ __forceinline__ float* xone_red() {
  __shared__ float red[kW];
  return red;
}

// The one-round staging's format of x in shared memory (F of stage_one): this kernel's (digits, Sx, 2^(e - 34) and
// the zero super-block) and mvq6::XoneQ6's. F::load: the lane's 8 elements of a super-block of a float array in the
// order F's digits take them; F::before_wait: shared-memory work that does not depend on x; F::digits<kU>: the
// warp's super-blocks from their x' (stored where st[u]).
struct XoneI8 {
  uint2* bfr;
  float* sx;
  float* inv_s;
  __device__ __forceinline__ static void load(const float* p, int b, float (&v)[8]) { load8(p, b, v); }
  __device__ __forceinline__ static void store(float* p, int b, const float (&v)[8]) { store8(p, b, v); }
  static constexpr bool kNorm = true;  // stage_multi's RMSNorm (fold29)
  template <int kW>
  __device__ __forceinline__ void before_wait(int nb) const {
    for (int i = threadIdx.x; i < 8 * 16; i += 32 * kW) bfr[nb * 8 * 16 + i] = make_uint2(0, 0);
  }
  template <int kU>
  __device__ __forceinline__ void digits(const float (&v)[kU][8], const int (&bs)[kU], const bool (&st)[kU]) const {
    digits_i8_u<kU, true>(v, bs, st, bfr, sx, inv_s);
  }
};

// The whole consumer side of x for Tune::xone, griddepcontrol.wait included, both kernels (F: XoneI8 or mvq6::XoneQ6;
// b1x17: one template for b1x16's stage_i8_one / mvq6::stage_q6_one, which differed only in the loader and the
// digits; pr: the probe's kPrWaited stamp; own: the RMSNorm factor by rms_own, Tune::xone 2).
template <int kW, int kU, class F>
__device__ __forceinline__ void stage_one(const mvt::Args& a, const F& f, uint64_t* pr, bool own) {
  float* red = xone_red<kW>();
  int bs[kU];
  bool st[kU];
  xone_blocks<kW, kU>(a.nb, bs, st);
  float v[kU][8], aux[kU][8];
  if (a.pre.norm_w) {
#pragma unroll
    for (int u = 0; u < kU; u++)
      if (st[u]) F::load(a.pre.norm_w, bs[u], aux[u]);
  }
  f.template before_wait<kW>(a.nb);
  mvs::grid_dep_wait();
  probe_at(pr, kPrWaited);
#pragma unroll
  for (int u = 0; u < kU; u++) {
    if (st[u]) {
      F::load(a.x, bs[u], v[u]);
      if (a.pre.gate) F::load(a.pre.gate, bs[u], aux[u]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; i++) v[u][i] = aux[u][i] = 0.f;
    }
  }
  float scale = 1.f;
  if (a.pre.norm_w && own) {
    scale = rms_own<kW, kU>(a, v, red);
  } else if (a.pre.norm_w) {
    float4 r[2 * kU];  // 64 nb float4 <= 2 kU per staging thread
    rms_load<kW, 2 * kU>(a, r);
    scale = rms_finish<kW, 2 * kU>(a, r, red);
  }
#pragma unroll
  for (int u = 0; u < kU; u++) prologue8(a, v[u], aux[u], scale);
  f.template digits<kU>(v, bs, st);
  mvt::stage_sync<kW, kStageBar>();
}

// The kernels' choice among stage_one's instantiations: xu super-blocks per warp (xone_units; 0: none taken), at most
// kMaxU (the instantiations a kernel holds: the Q6_K kernel with 8 consumer warps spilled with 3, b1x16).
template <int kW, int kMaxU, class F>
__device__ __forceinline__ void stage_one_units(int xu, const mvt::Args& a, const F& f, uint64_t* pr, bool own) {
  static_assert(kMaxU >= 1 && kMaxU <= 3, "1 .. 3 super-blocks per warp");
  if (xu == 1) stage_one<kW, 1>(a, f, pr, own);
  if constexpr (kMaxU >= 2) if (xu == 2) stage_one<kW, 2>(a, f, pr, own);
  if constexpr (kMaxU >= 3) if (xu == 3) stage_one<kW, 3>(a, f, pr, own);
}

// fold29: rms_own for each of kB sequences (the same sums in the same order per sequence: batch 1's factor under
// Tune::xone 2), their partial sums meeting in one barrier.
template <int kW, int kU, int kB>
__device__ __forceinline__ void rms_own_multi(const mvt::Args& a, const float (&v)[kB][kU][8], float (&scale)[kB]) {
  __shared__ float red[kB][kW];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float ss[kB];
#pragma unroll
  for (int s = 0; s < kB; s++) {
    ss[s] = 0.f;
#pragma unroll
    for (int u = 0; u < kU; u++)
#pragma unroll
      for (int h = 0; h < 8; h += 4)
        ss[s] += (v[s][u][h] * v[s][u][h] + v[s][u][h + 1] * v[s][u][h + 1]) +
                 (v[s][u][h + 2] * v[s][u][h + 2] + v[s][u][h + 3] * v[s][u][h + 3]);
  }
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int s = 0; s < kB; s++) ss[s] += __shfl_xor_sync(0xffffffffu, ss[s], o);
  if (lane == 0)
#pragma unroll
    for (int s = 0; s < kB; s++) red[s][warp] = ss[s];
  mvt::stage_sync<kW, kStageBar>();
#pragma unroll
  for (int s = 0; s < kB; s++) {
    float tot = 0.f;
#pragma unroll
    for (int i = 0; i < kW; i++) tot += red[s][i];
    scale[s] = 1.0f / sqrtf(tot / (float)a.cols + a.pre.eps);
  }
}

// The lane's 8 norm weights of super-block b in F's order (zero where the warp stores nothing: st false).
template <class F>
__device__ __forceinline__ void norm_w8(const float* w, int b, bool st, float (&g)[8]) {
  if (st) {
    F::load(w, b, g);
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) g[i] = 0.f;
  }
}

// pair28 / quad28: the one-round staging of kB sequences' x, every load of all of them issued together, sequence s's
// digits into its own region f[s]. Sequences s >= nseq (a batch of 3 in the kB 4 kernel) stage sequence 0's x again;
// their outputs are not stored. The same digits per sequence as stage_one / stage_i8 (digits_i8_u on the same values).
// fold29: with a.pre.norm_w and F::kNorm (XoneI8: the Q4_K kernel only; the Q6_K kernel's spills grew with it, ptxas),
// each sequence's RMSNorm as stage_one's prologue (rms_own's factor; the norm weights loaded
// once for all sequences), and xn (not null): CTA 0 writes the normalised x of the real sequences
// there (row s at xn + s a.cols), for the products that read it after this one.
template <int kW, int kU, int kB, class F>
__device__ __forceinline__ void stage_multi(const mvt::Args& a, int nseq, const F (&f)[kB], uint64_t* pr, float* xn) {
  int bs[kU];
  bool st[kU];
  xone_blocks<kW, kU>(a.nb, bs, st);
  // The norm weights (model weights: no kernel of the step writes them) into registers before the wait where they fit
  // beside x (kEarly: kU (kB + 1) rows of 8 floats <= 6; the kB 2, kU 3 form spilled with them, ptxas), else after
  // the factors (a dependent load on the staging's path: call 1 of session 29).
  constexpr bool kEarly = kU * (kB + 1) <= 6;
  float nw[kEarly ? kU : 1][8];
  if constexpr (F::kNorm && kEarly)
    if (a.pre.norm_w)
#pragma unroll
      for (int u = 0; u < kU; u++) norm_w8<F>(a.pre.norm_w, bs[u], st[u], nw[u]);
#pragma unroll
  for (int s = 0; s < kB; s++) f[s].template before_wait<kW>(a.nb);
  mvs::grid_dep_wait();
  probe_at(pr, kPrWaited);
  float v[kB][kU][8];
#pragma unroll
  for (int s = 0; s < kB; s++) {
    const float* x = a.x + (int64_t)(s < nseq ? s : 0) * a.cols;
#pragma unroll
    for (int u = 0; u < kU; u++) {
      if (st[u]) {
        F::load(x, bs[u], v[s][u]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; i++) v[s][u][i] = 0.f;
      }
    }
  }
  if constexpr (F::kNorm) if (a.pre.norm_w) {
    float scale[kB];
    rms_own_multi<kW, kU, kB>(a, v, scale);
#pragma unroll
    for (int u = 0; u < kU; u++) {
      if (!kEarly) norm_w8<F>(a.pre.norm_w, bs[u], st[u], nw[0]);
      const float(&g)[8] = nw[kEarly ? u : 0];
#pragma unroll
      for (int s = 0; s < kB; s++)
#pragma unroll
        for (int i = 0; i < 8; i++) v[s][u][i] = v[s][u][i] * scale[s] * g[i];
    }
    if (xn && blockIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < kB; s++)
#pragma unroll
        for (int u = 0; u < kU; u++)
          if (s < nseq && st[u]) F::store(xn + (int64_t)s * a.cols, bs[u], v[s][u]);
    }
  }
#pragma unroll
  for (int s = 0; s < kB; s++) f[s].template digits<kU>(v[s], bs, st);
  mvt::stage_sync<kW, kStageBar>();
}
// Super-blocks per warp that stage_multi takes for kB sequences (at most 6 rows of 8 floats per lane), 0: none.
__host__ __device__ constexpr int multi_units(int nb, int kW, int kB) {
  const int u = xone_units(nb, kW);
  return u * kB <= 6 ? u : 0;
}
// kMaxU: the most super-blocks per warp the caller allows (the Q6_K kernel with 8 consumer warps: 2).
template <int kW, int kB, class F, int kMaxU = 3>
__device__ __forceinline__ void stage_multi_units(int xu, const mvt::Args& a, int nseq, const F (&f)[kB],
                                                  uint64_t* pr, float* xn) {
  if (xu == 1) stage_multi<kW, 1, kB>(a, nseq, f, pr, xn);
  if constexpr (kB <= 3 && kMaxU >= 2) if (xu == 2) stage_multi<kW, 2, kB>(a, nseq, f, pr, xn);
  if constexpr (kB <= 2 && kMaxU >= 3) if (xu == 3) stage_multi<kW, 3, kB>(a, nseq, f, pr, xn);
}

__device__ __forceinline__ void imma(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint2 b) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y), "r"(0));
}

// b1q420 (kLean of item_i8 / kernel, Tune::lean): a Q4_K header's eight 6-bit scales (m false) or mins (m true) as
// two words, byte j of .x = sub-block j, of .y = sub-block 4 + j; once per item and row for all four sub-block pairs
// (mvt::pair_scales builds one pair's two bytes per call, with its own shifts and masks for every pair).
__device__ __forceinline__ uint2 scale_words(uint4 h, bool m) {
  const uint32_t a = m ? h.z : h.y;  // the low 6 bits of sub-blocks 0..3, the top 2 bits of 4..7
  const uint32_t b = m ? h.w >> 4 : h.w;  // the low 4 bits of 4..7
  return make_uint2(a & 0x3F3F3F3Fu, (b & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u));
}
// item_i8<true>'s scales of sub-blocks 2p (se) and 2p + 1 (so) from a row's scale words sw (scale_words(h, false)):
// (int)(sc & 0xFF) and (int)(sc >> 8) of mvt::pair_scales(h, p, sc, mn). p is a constant in the unrolled item loop:
// one byte pick (PRMT / LOP3 / SHF) each.
__device__ __forceinline__ void lean_scales(uint2 sw, int p, int& se, int& so) {
  const uint32_t word = p < 2 ? sw.x : sw.y, j = 2 * (p & 1);
  se = (int)__byte_perm(word, 0u, 0x4440u | j);
  so = (int)__byte_perm(word, 0u, 0x4440u | (j + 1));
}
// item_i8<true>'s PRMT selector of lane t's first min (byte 2 (t % 2) of its scale word into mvd::bf's 2^23 float).
__device__ __forceinline__ uint32_t lean_min_sel(int t) { return 0x7440u | (uint32_t)(2 * (t & 1)); }
// item_i8<true>'s mins of sub-blocks 2t, 2t + 1 (msel = lean_min_sel(t)): mvd::bf<0> / bf<1>(mn, 0.f) of
// mvt::pair_scales(h, t, sc, mn), the same floats.
__device__ __forceinline__ void lean_mins(uint4 h, int t, uint32_t msel, float& m0, float& m1) {
  const uint2 mw = scale_words(h, true);
  const uint32_t word = t < 2 ? mw.x : mw.y;
  m0 = __uint_as_float(__byte_perm(word, 0x4B000000u, msel)) - 8388608.0f;  // mvd::bf's 2^23 form
  m1 = __uint_as_float(__byte_perm(word, 0x4B000000u, msel + 1)) - 8388608.0f;
}
// One item of the integer form from a stage: rows g (row0) and g + 8 (row0 + 8 pitch), super-block q of
// the stage (kb of the row). Lane t holds code bytes 32p + 8t .. 32p + 8t + 7 of sub-block pair p: k
// 4t..4t+3 (a0 / a1) and 16+4t..19+4t (a2 / a3) of the pair's two mma calls (low nibbles: sub-block 2p,
// high nibbles: 2p + 1), matching stage_i8's B order. bq: the lane's B fragments of super-block kb.
// kLean (b1q420; same bits: the same integers and the same fp32 expressions): the scales by scale_words + one byte
// pick each; the lane's two mins (sub-blocks 2t, 2t + 1; mvt::pair_scales(h, t) shifted and selected by the runtime t
// per item) by scale_words(h, true) and mvd::bf's PRMT with the lane-constant selectors msel, msel + 1
// (lean_min_sel).
template <bool kLean = false>
__device__ __forceinline__ void item_i8(const uint8_t* row0, int pitch, int q, int kb, int t, const uint2* bq,
                                        const float* sx, const float* inv_s, float (&yp)[2], uint32_t msel = 0) {
  const uint8_t* r[2] = {row0 + q * kBlockBytes, row0 + 8 * pitch + q * kBlockBytes};
  uint4 h[2];
  uint2 w[2][4];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    h[k] = *reinterpret_cast<const uint4*>(r[k]);
#pragma unroll
    for (int p = 0; p < 4; p++) w[k][p] = *reinterpret_cast<const uint2*>(r[k] + 16 + 32 * p + 8 * t);
  }
  int re[4] = {0, 0, 0, 0}, ro[4] = {0, 0, 0, 0};  // sum of scale x mma over even / odd sub-blocks
  uint2 sw[2];  // kLean: the rows' scale words
  if constexpr (kLean) {
#pragma unroll
    for (int k = 0; k < 2; k++) sw[k] = scale_words(h[k], false);
  }
  // The non-lean statements in their order before b1q420: item_i8<false> compiles to the same SASS as before (a probe
  // kernel around one item, sm_90a cubin compared byte for byte).
#pragma unroll
  for (int p = 0; p < 4; p++) {
    uint32_t sc[2], mn;
    int se[2], so[2];  // kLean: the rows' scales of sub-blocks 2p, 2p + 1
#pragma unroll
    for (int k = 0; k < 2; k++) {
      if constexpr (kLean) lean_scales(sw[k], p, se[k], so[k]);
      else mvt::pair_scales(h[k], p, sc[k], mn);
    }
    int ce[4], co[4];
    imma(ce, w[0][p].x & 0x0F0F0F0Fu, w[1][p].x & 0x0F0F0F0Fu, w[0][p].y & 0x0F0F0F0Fu, w[1][p].y & 0x0F0F0F0Fu,
         bq[(2 * p) * 16]);
    imma(co, w[0][p].x & 0xF0F0F0F0u, w[1][p].x & 0xF0F0F0F0u, w[0][p].y & 0xF0F0F0F0u, w[1][p].y & 0xF0F0F0F0u,
         bq[(2 * p + 1) * 16]);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      if constexpr (kLean) {
        re[i] += se[i >> 1] * ce[i];
        ro[i] += so[i >> 1] * co[i];
      } else {
        const uint32_t scp = sc[i >> 1];
        re[i] += (int)(scp & 0xFFu) * ce[i];
        ro[i] += (int)(scp >> 8) * co[i];
      }
    }
  }
  // Columns 2t, 2t + 1 of the tile: digits 0, 1 (t = 0) or 2, 3 (t = 1); t >= 2 hold the zero columns
  // (weighted 0 as well).
  const float wa = t == 0 ? 16777216.f : t == 1 ? 256.f : 0.f, wb = t == 0 ? 65536.f : t == 1 ? 1.f : 0.f;
  const float is = inv_s[kb];
  const float2 sxp = *reinterpret_cast<const float2*>(sx + kb * 8 + 2 * t);
#pragma unroll
  for (int k = 0; k < 2; k++) {
    uint32_t sc, mn;
    float m0, m1;  // kLean: the mins of sub-blocks 2t, 2t + 1
    if constexpr (kLean) lean_mins(h[k], t, msel, m0, m1);
    else mvt::pair_scales(h[k], t, sc, mn);
    const float d = mvd::h2f(h[k].x & 0xFFFF), dmin = mvd::h2f(h[k].x >> 16);
    const float f = fmaf((float)(16 * re[2 * k] + ro[2 * k]), wa, (float)(16 * re[2 * k + 1] + ro[2 * k + 1]) * wb);
    float mins;
    if constexpr (kLean) mins = fmaf(m0, sxp.x, m1 * sxp.y);
    else mins = fmaf(mvd::bf<0>(mn, 0.f), sxp.x, mvd::bf<1>(mn, 0.f) * sxp.y);
    yp[k] += fmaf(d * is, f, -dmin * mins);
  }
}

// pair28 / quad28 (kernel<..., kB = 2 / 4>; the lean integer form): kTl = kB / 2 n8 tiles per sub-block, tile tl's
// columns 0..3 holding sequence 2 tl's digits and 4..7 sequence 2 tl + 1's (the zero columns of batch 1), the A
// fragments (the codes) built once for every tile. bq: the lane's fragments of super-block kb in tile 0, tile tl's at
// bq + tl * tile_off. Lanes t = 0, 1 own a tile's first sequence's digit columns (0, 1 / 2, 3), t = 2, 3 its second
// sequence's; sx[tl] / inv_s[tl] are the lane's sequence's of tile tl, and each lane takes the mins of 4 sub-blocks
// (4 (t & 1) .. + 3) of it: yp[tl] is that sequence's partial sum of rows g, g + 8 (store_rows_multi sums the lane pairs
// t, t ^ 1). The same integers per sequence as item_i8; the mins in another grouping (not batch 1's bits).
template <int kTl>
__device__ __forceinline__ void item_multi(const uint8_t* row0, int pitch, int q, int kb, int t, const uint2* bq,
                                           int tile_off, const float* const (&sx)[kTl],
                                           const float* const (&inv_s)[kTl], float (&yp)[kTl][2]) {
  const uint8_t* r[2] = {row0 + q * kBlockBytes, row0 + 8 * pitch + q * kBlockBytes};
  uint4 h[2];
  uint2 w[2][4], sw[2];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    h[k] = *reinterpret_cast<const uint4*>(r[k]);
#pragma unroll
    for (int p = 0; p < 4; p++) w[k][p] = *reinterpret_cast<const uint2*>(r[k] + 16 + 32 * p + 8 * t);
    sw[k] = scale_words(h[k], false);
  }
  int re[kTl][4] = {}, ro[kTl][4] = {};  // per tile: sum of scale x mma over even / odd sub-blocks
#pragma unroll
  for (int p = 0; p < 4; p++) {
    int se[2], so[2];
#pragma unroll
    for (int k = 0; k < 2; k++) lean_scales(sw[k], p, se[k], so[k]);
    const uint32_t m = 0x0F0F0F0Fu, n = 0xF0F0F0F0u;
#pragma unroll
    for (int tl = 0; tl < kTl; tl++) {
      int ce[4], co[4];
      imma(ce, w[0][p].x & m, w[1][p].x & m, w[0][p].y & m, w[1][p].y & m, bq[tl * tile_off + (2 * p) * 16]);
      imma(co, w[0][p].x & n, w[1][p].x & n, w[0][p].y & n, w[1][p].y & n, bq[tl * tile_off + (2 * p + 1) * 16]);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        re[tl][i] += se[i >> 1] * ce[i];
        ro[tl][i] += so[i >> 1] * co[i];
      }
    }
  }
  const float wa = (t & 1) ? 256.f : 16777216.f, wb = (t & 1) ? 1.f : 65536.f;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const uint2 mw = scale_words(h[k], true);
    const uint32_t word = (t & 1) ? mw.y : mw.x;  // the mins of sub-blocks 4 (t & 1) .. + 3, a byte each
    float mm[4];
#pragma unroll
    for (int i = 0; i < 4; i++) mm[i] = __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | i)) - 8388608.0f;
    const float d = mvd::h2f(h[k].x & 0xFFFF), dmin = mvd::h2f(h[k].x >> 16);
#pragma unroll
    for (int tl = 0; tl < kTl; tl++) {
      const float4 sxq = *reinterpret_cast<const float4*>(sx[tl] + kb * 8 + 4 * (t & 1));
      const float f =
          fmaf((float)(16 * re[tl][2 * k] + ro[tl][2 * k]), wa, (float)(16 * re[tl][2 * k + 1] + ro[tl][2 * k + 1]) * wb);
      const float mins = fmaf(mm[0], sxq.x, fmaf(mm[1], sxq.y, fmaf(mm[2], sxq.z, mm[3] * sxq.w)));
      yp[tl][k] += fmaf(d * inv_s[tl][kb], f, -dmin * mins);
    }
  }
}

__device__ __forceinline__ uint32_t su32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(su32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(su32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(su32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(su32(b)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   su32(dst)),
               "l"(src), "r"(bytes), "r"(su32(bar))
               : "memory");
}

// bulk_g2s with an L2 cache policy (l2_evict_first): the weight copies under Tune::evict.
__device__ __forceinline__ void bulk_g2s_hint(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          su32(dst)),
      "l"(src), "r"(bytes), "r"(su32(bar)), "l"(pol)
      : "memory");
}
// A weight copy of the ring: with the policy when evict (warp-uniform).
__device__ __forceinline__ void bulk_w(void* dst, const void* src, uint32_t bytes, uint64_t* bar, bool evict,
                                       uint64_t pol) {
  if (evict) bulk_g2s_hint(dst, src, bytes, bar, pol);
  else bulk_g2s(dst, src, bytes, bar);
}

// Orders this thread's generic-proxy global accesses with its async-proxy (bulk copy) ones (decode11): x is
// written by xprep_kernel with ordinary stores and read by the stream kernel's cp.async.bulk, a different proxy;
// griddepcontrol.wait makes the prerequisite grid's writes visible to this grid's generic accesses, and the PTX
// memory model asks for a proxy fence before the async proxy reads them (not the cause of session 9's failure,
// see Tune::xprep_fence).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// The producer warp's copy of a prepared x (Args::xg) into the start of dynamic shared memory: after
// griddepcontrol.wait (xprep_kernel's grid done) and, with fence, a proxy fence, lanes 0..15 one bulk copy each
// (16-byte multiples) onto `bar`.
__device__ __forceinline__ void copy_xg(const uint4* xg, uint32_t bytes, void* dst, uint64_t* bar, bool fence) {
  const int lane = threadIdx.x & 31;
  mvs::grid_dep_wait();
  if (fence) fence_proxy_async_global();
  const uint32_t piece = (bytes + 255) / 256 * 16, off = (uint32_t)lane * piece;
  if (lane == 0) mbar_expect_tx(bar, bytes);
  __syncwarp();
  if (lane < 16 && off < bytes)
    bulk_g2s(static_cast<uint8_t*>(dst) + off, reinterpret_cast<const uint8_t*>(xg) + off, min(piece, bytes - off), bar);
}

// The ring's barriers (both stream kernels), set up by thread 0 before any thread uses them: full[s] takes the
// producer's arrival and its copies' bytes, empty[s] the 32 kCW lanes of the consumer group that reads stage s
// (release_stage), xfull the copy of a prepared x.
__device__ __forceinline__ void init_ring(uint64_t* full, uint64_t* empty, uint64_t* xfull, int stages) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 32 * kCW);
    }
    mbar_init(xfull, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The producer warp's part in x once the first stages are in flight: with a prepared x (a.xg) it copies x and lets
// the dependent grid launch. Without one, it waits until the consumer warps have staged x (kXBar; they trigger the
// dependents themselves), as it did while it joined their __syncthreads before sync13: its next copies and its L2
// prefetch of the next product start after the staging. dec15 (DS_MATVEC_STREAM_XWAIT=1 of sync13 made the only
// form): H200 tg128, with ARRIVE_LANES as below, 9B 394.72 / 394.25 tok/s vs 391.50 / 391.96 without either, 27B
// 134.44 / 134.38 vs 133.32 / 133.46, 0.8B 1254.1 / 1259.9 vs 1262.1 / 1259.4 (noise level); XWAIT alone 9B 395.3.
template <int kW, class A>
__device__ __forceinline__ void producer_x(const A& a, void* smem, uint64_t* xfull) {
  if (!a.xg) {
    asm volatile("barrier.sync %0, %1;\n" ::"n"(kXBar), "n"(32 * (kW + 1)) : "memory");
    return;
  }
  copy_xg(a.xg, a.xg_bytes, smem, xfull, a.xfence);
  mvs::grid_dep_trigger();
}
// The consumer warps' half of that hand-off, once x is staged (no prepared x).
template <int kW>
__device__ __forceinline__ void x_staged_arrive() {
  asm volatile("barrier.arrive %0, %1;\n" ::"n"(kXBar), "n"(32 * (kW + 1)) : "memory");
}

// A consumer lane done with stage s: its reads of the stage ordered before the producer's next bulk copy into it by
// its own arrival (empty[s] counts lanes). sync13's DS_MATVEC_STREAM_ARRIVE_LANES=1, the only form since dec15: the
// per-warp form (__syncwarp, lane 0 arrives) is correct too, but compute-sanitizer racecheck does not carry
// __syncwarp's ordering over to lane 0's arrival and reported the ring's write-after-read pairs; with every lane's
// arrival racecheck reports 0 hazards on all CudaMatvec.Stream* (dec15 call 1) and tg128 is not slower (above).
__device__ __forceinline__ void release_stage(uint64_t* empty) { mbar_arrive(empty); }

// A row group's end: the kW warps' partial sums of rows g, g + 8 (yp) meet in red (one of two buffers, taken by
// alternate row groups, so that one barrier per row group suffices) and warp 0 writes the 16 rows.
template <int kW>
__device__ __forceinline__ void store_rows(const mvt::Args& a, int rg, int warp, int lane, float (&yp)[2],
                                           float (*red)[16]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    yp[k] += __shfl_xor_sync(0xffffffffu, yp[k], 1);
    yp[k] += __shfl_xor_sync(0xffffffffu, yp[k], 2);
  }
  if (t == 0) {
    red[warp][g] = yp[0];
    red[warp][g + 8] = yp[1];
  }
  asm volatile("bar.sync %0, %1;\n" ::"n"(kRowBar), "n"(32 * kW) : "memory");
  if (warp == 0 && lane < 16) {
    float v = 0.f;
#pragma unroll
    for (int i = 0; i < kW; i++) v += red[i][lane];
    const int row = rg * 16 + lane;
    if (row < a.rows) a.y[row] = a.accumulate ? a.y[row] + v : v;
  }
}
// The multi-sequence forms' row-group end, once each warp has put its partial sums of sequence s's rows g, g + 8 into
// red[warp][16 s + g (+ 8)] (16 kB entries per warp): warp 0 sums them over the warps in order and writes sequence s's
// rows to y + s rows, for s < nseq.
template <int kW, int kB>
__device__ __forceinline__ void store_red_rows(const mvt::Args& a, int nseq, int rg, int warp, int lane,
                                               float (*red)[16 * kB]) {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kRowBar), "n"(32 * kW) : "memory");
  if (warp != 0) return;
#pragma unroll
  for (int i0 = 0; i0 < 16 * kB; i0 += 32) {
    const int i16 = i0 + lane, row = rg * 16 + (lane & 15), s = i16 >> 4;
    if (i16 >= 16 * kB) break;
    float v = 0.f;
#pragma unroll
    for (int i = 0; i < kW; i++) v += red[i][i16];
    float* y = a.y + (int64_t)s * a.rows;
    if (s < nseq && row < a.rows) y[row] = a.accumulate ? y[row] + v : v;
  }
}
// store_rows for kB sequences whose lane quads hold a row's parts of every sequence (the Q6_K kernel's item_q6_multi:
// yp[s] summed over the quad as store_rows does).
template <int kW, int kB>
__device__ __forceinline__ void store_rows_seqs(const mvt::Args& a, int nseq, int rg, int warp, int lane,
                                                float (&yp)[kB][2], float (*red)[16 * kB]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int s = 0; s < kB; s++) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      yp[s][k] += __shfl_xor_sync(0xffffffffu, yp[s][k], 1);
      yp[s][k] += __shfl_xor_sync(0xffffffffu, yp[s][k], 2);
    }
    if (t == 0) {
      red[warp][16 * s + g] = yp[s][0];
      red[warp][16 * s + g + 8] = yp[s][1];
    }
  }
  store_red_rows<kW, kB>(a, nseq, rg, warp, lane, red);
}
// store_rows for kB = 2 kTl sequences (item_multi's yp: lanes t, t ^ 1 hold one sequence's sums, sequence 2 tl + t / 2).
template <int kW, int kTl>
__device__ __forceinline__ void store_rows_multi(const mvt::Args& a, int nseq, int rg, int warp, int lane,
                                                 float (&yp)[kTl][2], float (*red)[32 * kTl]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int tl = 0; tl < kTl; tl++) {
#pragma unroll
    for (int k = 0; k < 2; k++) yp[tl][k] += __shfl_xor_sync(0xffffffffu, yp[tl][k], 1);
    if ((t & 1) == 0) {
      red[warp][16 * (2 * tl + (t >> 1)) + g] = yp[tl][0];
      red[warp][16 * (2 * tl + (t >> 1)) + g + 8] = yp[tl][1];
    }
  }
  store_red_rows<kW, 2 * kTl>(a, nseq, rg, warp, lane, red);
}

// Raw words of one item from a stage: rows g, g + 8 at `row0` + k * 8 * pitch, super-block at byte q * 144.
__device__ __forceinline__ void load_s(const uint8_t* row0, int pitch, int q, int t, mvt::Raw& r) {
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const uint8_t* b = row0 + k * 8 * pitch + q * kBlockBytes;
    r.h[k] = *reinterpret_cast<const uint4*>(b);
    r.q[k][0] = *reinterpret_cast<const uint4*>(b + 16 + 16 * t);
    r.q[k][1] = *reinterpret_cast<const uint4*>(b + 80 + 16 * t);
  }
}

// decode10 (Tune::xprep): x of a product prepared once into global memory, in the stream kernel's shared-memory
// layout (stage_i8's digits, Sx, 2^(e - 34)), by kPW-warp CTAs of kPW super-blocks each. It lets its dependent (the
// stream kernel) launch at once; that one copies the result after griddepcontrol.wait with a few bulk copies
// instead of every CTA staging all of x with its consumer warps (3 dependent rounds for 48 super-blocks).
// fence: each thread ends with a proxy fence after its stores (the writer's half of copy_xg's fence).
template <int kPW>
__global__ void __launch_bounds__(32 * kPW) xprep_kernel(const mvt::Args a, uint4* xg, bool fence) {
  mvs::grid_dep_trigger();
  mvs::grid_dep_wait();
  uint2* bfr = reinterpret_cast<uint2*>(xg);
  float* sx = reinterpret_cast<float*>(bfr + sx_offset_i8(a.nb));
  stage_i8<kPW>(a, bfr, sx, sx + a.nb * 8, blockIdx.x * kPW, gridDim.x * kPW, blockIdx.x == 0);
  if (fence) fence_proxy_async_global();
}

// kLean's ring position (b1q420, as q6i19's): slot sl = j % S and phase ph = (j / S) & 1 advanced to stage j + 1.
template <bool kLean>
__device__ __forceinline__ void ring_step(int& sl, int& ph, int S) {
  if (kLean && ++sl == S) {
    sl = 0;
    ph ^= 1;
  }
}

// kW consumer warps: 8 (two CTAs per SM fit the register file) or 16 (integer form only, one CTA per SM: decode9).
// With 16 the warps form two groups of 8 that take alternate stages of the ring (group h the stages j with
// j % 2 == h; a stage's empty mbarrier still counts 8 warps), with the same super-block map inside a stage; x is
// staged by all 16, and a row group's partial sums meet over all 16.
// kLean (b1q420, Tune::lean, integer form; same bits): q6i19's ring bookkeeping for this kernel (the slot and phase as
// counters sl / ph advanced once per stage in both loops instead of j % S and j / S by the runtime stage count; the
// group test j % 2 unsigned; the producer's row addresses once per row group, 64-bit products out of the stage loop)
// and item_i8<true>'s scales and mins.
// kB 2 / 4 (pair28 / quad28; the integer lean form only): kB sequences' products (Args::nseq <= kB of them real) in one
// pass over the weights, kB / 2 n8 tiles per sub-block, tile tl's columns 0..3 / 4..7 holding sequences 2 tl / 2 tl + 1
// (item_multi): kB = 2 has batch 1's mma count and A build; x of sequence s in region s (Args::xregion bytes each),
// staged by stage_multi / stage_i8 (never a prepared x).
template <int kT, bool kI8, int kW = kCW, bool kLean = false, int kB = 1>
__global__ void __launch_bounds__(32 * (kW + 1), kW == kCW ? 2 : 1) kernel(const Args a) {
  constexpr int kG = kW / kCW;  // consumer groups
  constexpr int kTl = kB / 2 > 0 ? kB / 2 : 1;  // kB > 1: n8 tiles per sub-block
  static_assert(kW % kCW == 0 && (kW == kCW || kI8), "16 consumer warps: integer form only");
  static_assert(!kLean || kI8, "the lean form is the integer form's");
  static_assert(kB == 1 || ((kB == 2 || kB == 4) && kLean), "2 / 4 sequences: the integer lean form only");
  extern __shared__ uint4 smem_raw[];
  uint2* bfr = reinterpret_cast<uint2*>(smem_raw);
  float* sx = reinterpret_cast<float*>(bfr + (kI8 ? sx_offset_i8(a.t.nb) : (a.t.nb + 1) * 16 * kT * 4));
  float* inv_s = sx + a.t.nb * 8;
  const int xr = a.xregion / 8;  // kB > 1: uint2 per sequence's region
  const auto region = [&](int s) { return bfr + s * xr; };
  const auto region_sx = [&](int s) { return reinterpret_cast<float*>(region(s) + sx_offset_i8(a.t.nb)); };
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw) + a.xbytes;
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages], xfull;
  __shared__ float red[2][kW][16 * kB];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nrg = (a.t.rows + 15) / 16, S = a.stages, stage_bytes = 16 * a.pitch;
  if (threadIdx.x == 0) probe_at(a.probe, kPrEntry);
  init_ring(full, empty, &xfull, S);

  if (warp == kW) {  // producer
    // Its part in x (producer_x) after the first `S` stages are in flight.
    bool x_done = false;
    const auto x_part = [&] {
      producer_x<kW>(a, smem_raw, &xfull);
      x_done = true;
    };
    const uint64_t pol = a.evict ? l2_evict_first() : 0;
    int j = 0, sl = 0, ph = 0;  // kLean: j % S, (j / S) & 1
    for (int rg = blockIdx.x; rg < nrg; rg += gridDim.x) {
      const uint8_t* wrow = kLean ? a.t.w + (int64_t)min(rg * 16 + lane, a.t.rows - 1) * a.t.row_bytes : nullptr;
      for (int c = 0; c < a.nchunk; c++, j++) {
        if (j == S && !x_done) x_part();
        const int s = kLean ? sl : j % S;
        if (j >= S) mbar_wait(&empty[s], kLean ? ph ^ 1 : ((j / S) - 1) & 1);
        const int kb0 = c * a.kc, n = min(a.kc, a.t.nb - kb0);
        const uint32_t bytes = (uint32_t)n * kBlockBytes;
        if (lane == 0) mbar_expect_tx(&full[s], 16 * bytes);
        __syncwarp();
        if (lane < 16) {
          const int row = min(rg * 16 + lane, a.t.rows - 1);
          const uint8_t* src = kLean ? wrow + kb0 * kBlockBytes
                                     : a.t.w + (int64_t)row * a.t.row_bytes + kb0 * kBlockBytes;
          bulk_w(ring + s * stage_bytes + lane * a.pitch, src, bytes, &full[s], a.evict, pol);
        }
        if (j == 0 && lane == 0) probe_at(a.probe, kPrFirstCopy);
        ring_step<kLean>(sl, ph, S);
      }
    }
    if (lane == 0) probe_at(a.probe, kPrLastCopy);
    if (!x_done) x_part();
    prefetch_next(a.pf, a.pf_cta);
    return;
  }

  uint64_t* const pr = threadIdx.x == 0 ? a.probe : nullptr;  // consumer warp 0's stamps
  const int xu = kI8 && a.xone && !a.xg ? xone_units(a.t.nb, kW) : 0;
  if constexpr (kB > 1) {
    XoneI8 f[kB];
#pragma unroll
    for (int s = 0; s < kB; s++) f[s] = XoneI8{region(s), region_sx(s), region_sx(s) + a.t.nb * 8};
    const int xm = a.xone ? multi_units(a.t.nb, kW, kB) : 0;
    stage_multi_units<kW, kB>(xm, a.t, a.nseq, f, pr, a.xn);
    if (!xm) {  // rows past the one-round staging: stage_i8 per sequence
      mvs::grid_dep_wait();
      probe_at(pr, kPrWaited);
#pragma unroll 1
      for (int s = 0; s < kB; s++) {  // region pointers from s (an f[s] of a runtime s would put f in local memory)
        mvt::Args ts = a.t;
        ts.x += (int64_t)(s < a.nseq ? s : 0) * ts.cols;
        stage_i8<kW>(ts, region(s), region_sx(s), region_sx(s) + a.t.nb * 8);
      }
    }
    x_staged_arrive<kW>();
  } else {
    if constexpr (kI8) stage_one_units<kW, 3>(xu, a.t, XoneI8{bfr, sx, inv_s}, pr, a.xone == 2);
    if (!xu) {
      mvs::grid_dep_wait();
      probe_at(pr, kPrWaited);
    }
    if (a.xg) {
      mbar_wait(&xfull, 0);
    } else {
      if constexpr (kI8) {
        if (!xu) stage_i8<kW>(a.t, bfr, sx, inv_s);
      } else {
        mvt::stage<kT, false, kStageBar>(a.t, bfr, sx, inv_s);
      }
      x_staged_arrive<kW>();
    }
  }
  probe_at(pr, kPrXStaged);
  mvs::grid_dep_trigger();
  const int grp = warp / kCW, lw = warp % kCW;  // group, warp within the group

  const int g = lane >> 2, t = lane & 3;
  const uint2* bbase = kB > 1 ? region(g >> 2) + (g & 3) * 4 + t  // tile 0: sequence g / 4
                      : kI8   ? (g < 4 ? bfr + g * 4 + t : bfr + a.t.nb * 8 * 16 + t)
                              : (g < kT ? bfr + g * 4 + t : bfr + a.t.nb * 16 * kT * 4 + t);
  const int bstride = kB > 1 ? 8 * 16 : kI8 ? (g < 4 ? 8 * 16 : 0) : (g < kT ? 16 * kT * 4 : 0);
  const float* sxl[kTl];  // kB > 1: the lane's sequence of each tile (2 tl + t / 2): Sx, 2^(e - 34)
  const float* isl[kTl];
#pragma unroll
  for (int tl = 0; tl < kTl; tl++) {
    sxl[tl] = region_sx(2 * tl + (t >> 1));
    isl[tl] = sxl[tl] + a.t.nb * 8;
  }
  float ym[kTl][2];  // kB > 1: item_multi's sums
  const uint32_t msel = kLean ? lean_min_sel(t) : 0u;
  int j = 0, par = 0, sl = 0, ph = 0;  // kLean: sl = j % S, ph = (j / S) & 1
  uint64_t t_full = 0;  // probe: the last stage's landing
  for (int rg = blockIdx.x; rg < nrg; rg += gridDim.x) {
    float yp[2] = {0.f, 0.f};
#pragma unroll
    for (int tl = 0; tl < kTl; tl++) ym[tl][0] = ym[tl][1] = 0.f;
    for (int c = 0; c < a.nchunk; c++, j++, ring_step<kLean>(sl, ph, S)) {
      if (kG > 1 && (kLean ? (int)((unsigned)j % kG) : j % kG) != grp) continue;  // the other group's stage
      const int s = kLean ? sl : j % S;
      mbar_wait(&full[s], kLean ? ph : (j / S) & 1);
      if (pr) probe_full(pr, t_full);
      const int kb0 = c * a.kc, n = min(a.kc, a.t.nb - kb0);
      const uint8_t* row0 = ring + s * stage_bytes + g * a.pitch;
      if (kB > 1 && a.math) {
        for (int q = lw; q < n; q += kCW)
          item_multi<kTl>(row0, a.pitch, q, kb0 + q, t, bbase + (kb0 + q) * bstride, 2 * xr, sxl, isl, ym);
      } else if (kI8 && a.math) {
        for (int q = lw; q < n; q += kCW)
          item_i8<kLean>(row0, a.pitch, q, kb0 + q, t, bbase + (kb0 + q) * bstride, sx, inv_s, yp, msel);
      } else if (a.math && lw < n) {
        mvt::Raw cur, nxt;
        load_s(row0, a.pitch, lw, t, cur);
        for (int q = lw;;) {
          const int qn = q + kCW;
          if (qn < n) load_s(row0, a.pitch, qn, t, nxt);
          mvt::item<kT>(cur, kb0 + q, t, bbase + (kb0 + q) * bstride, sx, inv_s, yp);
          if (qn >= n) break;
          cur = nxt;
          q = qn;
        }
      }
      release_stage(&empty[s]);
    }
    if constexpr (kB > 1) store_rows_multi<kW, kTl>(a.t, a.nseq, rg, warp, lane, ym, red[par]);
    else store_rows<kW>(a.t, rg, warp, lane, yp, red[par]);
    par ^= 1;
  }
  probe_end(pr, t_full);
}

// DS_MATVEC_STREAM=0 turns the kernel off (1 forces it wherever it fits); DS_MATVEC_STREAM_KC (super-blocks
// per stage), _STAGES, _CTAS (per SM) for A/B runs. Terms of x: mvt::tune().terms.
struct Tune {
  int mode = -1;  // -1: by shape (takes()), 0: off, 1: wherever it fits
  int kc = 0;           // 0: by row length (plan())
  int stages = 0;       // 0: as many as fit (<= kMaxStages)
  int ctas_per_sm = 0;  // 0: 2 where >= 3 stages fit in half the SM, else 1; -1: 1 in half the SM (plan())
  bool math = true;     // false: streaming probe (mvbench only)
  bool i8 = true;       // the integer form (DS_MATVEC_STREAM_I8=0: the fp16 form of matvec_tc)
  // L2 prefetch of the next product's weights (Next; DS_MATVEC_PREFETCH_KB, 0 = off), both kernels. 8 MB: H200
  // tg128 9B 362.4 / 363.9 tok/s vs 357.9 / 358.6 without, 27B 123.8 vs 123.5, 0.8B 1134.9 vs 1131.5; 4 MB
  // 9B 362.5; 16 MB 354.8, 32 MB 345.0 (the prefetch then competes with the kernel's own stream). decode8.
  int prefetch_kb = 8192;
  // 16 consumer warps where the plan has one CTA per SM in the full SM (integer form; x + 2 stages need more
  // than half the SM: rows of >= 64 super-blocks, e.g. the 27B ffn_down); DS_MATVEC_STREAM_WIDE=0: 8 (decode9).
  // H200 tg128 27B: 125.2 tok/s with this one alone vs 123.35 with neither kernel's 16-warp form, 128.0 with both.
  bool wide = true;
  // With ctas_per_sm 0 and wide: one CTA of 16 consumer warps also for rows of >= one_cta_nb super-blocks that
  // would fit two CTAs (x staged once per SM by 16 warps, up to 8 stages): H200, decode9, op by op in the 9B step,
  // ffn_down [4096 x 12288] (48 super-blocks) 19.6 vs 22.6 us; rows of 16 were slower so (ffn_gate_up
  // [24576 x 4096] 32.8 vs 25.4 us, ssm_out 11.3 vs 9.6). DS_MATVEC_STREAM_ONE_NB (0: off).
  int one_cta_nb = 32;
  // decode10: x prepared once per product into global memory by xprep_kernel (one small launch before the
  // product) and copied by each CTA with bulk copies, for rows of >= xprep super-blocks (both stream kernels,
  // integer form); 0: off (x staged by every CTA's consumer warps). DS_MATVEC_STREAM_XPREP. H200 tg128 (same
  // call): 32 (the 9B / 27B ffn_down, 48 / 68 super-blocks) 9B 377.3 / 376.4 tok/s vs 364.6 / 367.1 off, 27B
  // 131.1 vs 126.5; 1 (every product) loses: 9B 343.7, 27B 122.5, 0.8B 996 vs 1127 (on 16-super-block rows the
  // extra launch costs more than the one staging round per warp it replaces). Session 9 turned it off after
  // CudaMatvec.StreamQ4KVariants failed once on the H200 (long-row shapes, errors 3e-4 .. 3e-3 of sum|w x|);
  // decode11 found the cause: Sx overlapped the zero super-block (smem_bytes_i8), and in xprep_kernel CTA 0's
  // zeroing raced with the other CTAs' Sx stores. H200 (decode11 call 1, CudaMatvec.StreamXprepOrdering, 45 s x 5
  // processes): 18 of ~106k products over the tolerance with the overlap, fence or not; call 2, fixed: 0 of 35k.
  int xprep = 32;
  // The Q6_K stream kernel's threshold (DS_MATVEC_STREAM_XPREP_Q6K; -1: xprep's).
  int xprep_q6k = -1;
  // decode11, A/B and diagnosis: fence.proxy.async.global after xprep_kernel's stores and between the stream
  // kernel's griddepcontrol.wait and its copy of x (DS_MATVEC_STREAM_XPREP_FENCE=0: without, as decode10); buffers
  // taken by alternate products (DS_MATVEC_STREAM_XPREP_BUFS=1: one, as decode10); the prep kernel and its product
  // as programmatic dependent launches (DS_MATVEC_STREAM_XPREP_PDL=0: plain stream order). Neither the fence nor
  // the two buffers were the cause of the failures (they happened with the fence on too); both are kept as cheap
  // margins: the proxy fence is what the PTX memory model asks for between generic stores and bulk-copy reads, and
  // the second buffer puts a whole product between a prepared x's reader and the next writer of its buffer.
  bool xprep_fence = true;
  int xprep_bufs = 2;
  bool xprep_pdl = true;
  // dec15, both kernels: the weight copies with the L2 evict_first policy (DS_MATVEC_STREAM_EVICT=0: without; an
  // evict_last policy on the next product's prefetch with 16 MB of it lost in dec15 call 1, 386.1: removed). b1x16
  // call 1 (H200, each alone against the old default, interleaved): tg128 9B 386.89 / 387.00 tok/s vs 369.25 / 369.76,
  // 27B 133.98 / 133.99 vs 129.27 / 129.14, 0.8B 1228.7 / 1229.9 vs 1222.6 / 1222.7: on. With xone 1 (session 13's
  // final call, main f0059f1): 9B 428.15 / 429.35 vs 416.12 with EVICT=0, 27B 142.06 vs 138.83, 0.8B 1,319.15 vs
  // 1,305.54. (dec15 call 2's losing set EVICT + PREW + stage2: PREW and stage2 lost alone, removed.)
  bool evict = true;
  // b1x16, both kernels: x staged in one dependent round (stage_one with XoneI8 / mvq6::XoneQ6: the norm weights loaded
  // before griddepcontrol.wait, x, the gate and the x^2 loads issued together; same bits) for rows of <= 3 x the
  // consumer warps super-blocks without a prepared x. DS_MATVEC_STREAM_XONE=0: stage_i8 / stage_q6 (x^2 round,
  // barrier, one round per super-block). 2: the RMSNorm factor from the staging's own loads of x (rms_own: no second
  // load of x; another summation order: |y2 - y0| <= 3.6e-8 of sum|w x| in CudaMatvec.StreamXoneSameBits).
  // H200 b1x16 call 1, tg128 (interleaved, EVICT off): 9B 413.54 / 412.80 tok/s (2: 414.42 / 413.85) vs 369.25 / 369.76,
  // 27B 136.11 / 136.13 (2: 136.37 / 136.35) vs 129.27 / 129.14, 0.8B 1294.98 / 1294.13 (2: 1299.27 / 1298.38) vs
  // 1222.61 / 1222.67; CudaMatvec.StreamTimeline (x staging, first / second layer) in_proj 8.67 / 8.35 -> 4.42 / 3.55
  // us, ffn_gate_up 5.60 / 5.89 -> 3.17 / 3.55, ssm_out 2.82 / 2.85 -> 2.50 / 2.34; 112.0 vs 126.2 us per replay.
  // 2 gained another 0.2-0.3% in b1x16's call, nothing clear in session 13's final call (9B 428.63 vs 428.15 / 429.35),
  // and in b1x17's call (H200, three interleaved pairs each) 9B 427.76 / 428.23 / 431.73 vs 427.88 / 425.40 / 426.57,
  // 27B 142.89 / 142.91 / 142.94 vs 142.58 / 142.65 / 142.65, 0.8B 1323.85 / 1324.15 / 1323.10 vs 1315.34 / 1316.10 /
  // 1313.57 (all nine pairs faster): 2 is the default since b1x17; 1 stays for A/B (the same bits as 0).
  int xone = 2;
  // b1q420: kernel<3, true, kW, true> (same bits; integer form): q6i19's division-free ring bookkeeping and the scales /
  // mins of item_i8<true>. DS_MATVEC_STREAM_Q4K_LEAN=0: off. Default since session 18 (H200, tg128, two interleaved
  // pairs each): 9B 440.42 / 439.78 vs 433.50 / 435.37, 27B 151.23 / 151.49 vs 145.04 / 145.37, 0.8B 1399.29 / 1397.66
  // vs 1370.47 / 1371.42 tok/s.
  bool lean = true;
};
inline Tune& tune() {
  static Tune t = [] {
    Tune d;
    if (const char* e = std::getenv("DS_MATVEC_STREAM_WIDE")) d.wide = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_ONE_NB")) d.one_cta_nb = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM")) d.mode = e[0] == '0' ? 0 : 1;
    if (const char* e = std::getenv("DS_MATVEC_STREAM_KC")) d.kc = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM_STAGES")) d.stages = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_STREAM_CTAS")) d.ctas_per_sm = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_STREAM_I8")) d.i8 = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_PREFETCH_KB")) d.prefetch_kb = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XPREP")) d.xprep = std::max(0, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XPREP_Q6K")) d.xprep_q6k = std::max(-1, std::atoi(e));
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XPREP_FENCE")) d.xprep_fence = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XPREP_BUFS")) d.xprep_bufs = std::atoi(e) == 1 ? 1 : 2;
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XPREP_PDL")) d.xprep_pdl = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_EVICT")) d.evict = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_STREAM_XONE")) d.xone = std::clamp(std::atoi(e), 0, 2);
    if (const char* e = std::getenv("DS_MATVEC_STREAM_Q4K_LEAN")) d.lean = e[0] != '0';
    return d;
  }();
  return t;
}

// Whether a product of nb super-blocks per row takes a prepared x (q6: the Q6_K kernel's threshold).
inline bool xprep_takes(int nb, bool q6) {
  const Tune& t = tune();
  const int th = q6 && t.xprep_q6k >= 0 ? t.xprep_q6k : t.xprep;
  return th > 0 && nb >= th;
}
// The buffer of the next prepared x: buffers 0 and 1 by turns (xprep_bufs 2), shared by both stream kernels.
inline uint4* next_xprep_buffer() {
  static std::atomic<unsigned> n{0};
  return stream_x_buffer(tune().xprep_bufs > 1 ? (int)(n.fetch_add(1, std::memory_order_relaxed) & 1u) : 0);
}
// Launches with PDL: mvt::tune().pdl, and with a prepared x only while xprep_pdl.
inline bool launch_pdl_with(bool xprep) { return mvt::tune().pdl && (!xprep || tune().xprep_pdl); }

struct Plan {
  int kc = 0, pitch = 0, stages = 0, ctas_per_sm = 0, xbytes = 0;
  int warps = kCW;  // consumer warps (kernel<, , kW>)
  size_t smem = 0;
};
// Dynamic shared memory allowed per kernel: 16 consumer warps have 1 KB more static shared memory (227 KB in all).
constexpr size_t kOneSmem = 225 * 1024, kOneSmemWide = 224 * 1024;
// Shared memory per CTA: the x fragments of mvt (rounded to 128 bytes) + the ring. Two CTAs per SM get
// ~110 KB each (228 KB per SM, 1 KB reserved per CTA, the static part).
// kB 2 / 4 (pair28 / quad28): kB sequences' x regions, and (kB - 1) KB (8 consumer warps) / 2 (kB - 1) KB (16) less
// for the ring: the kernel's static row sums (red) grow by that.
// s29: the stage count of a kernel with two consumer groups (16 consumer warps: group j % 2 takes stage j), even. With
// an odd count slot s is taken by the groups in turn, and a group that runs ahead can reach its full[s] wait for use
// j + S while use j (the other group's) has not landed: the parity wait then passes at once (it cannot tell phase p + 1
// from p - 1), the group reads a stage in flight and arrives on empty[s] a phase early, and the producer later waits
// on a phase that never completes. Seen as hangs (session 29: the Q6_K kB 2 kernel, 9B ffn_down at B = 2, 3 stages;
// cuda-gdb: the producer in SYNCS.PHASECHK.TRYWAIT, every consumer warp gone). With an even count each slot belongs to
// one group, which waits for its own previous use of it. x + 2 stages always fit (plan's rule), so the count stays >= 2.
inline int even_stages(int st) { return st > 2 ? st & ~1 : st; }
inline bool plan(int kT, int nb, const Tune& tn, Plan& p, int kB = 1) {
  const bool wide = tn.wide && tn.i8;
  const size_t kHalf = (size_t)(110 - (kB - 1)) * 1024;
  const size_t kOne = (wide ? kOneSmemWide : kOneSmem) - (size_t)(kB - 1) * 2048;
  // kc 0: 8 super-blocks per stage, 16 for rows of >= 64 (27B ffn_down [5120 x 17408]: 25.0 vs 29.9 us).
  p.kc = std::min(tn.kc > 0 ? tn.kc : nb >= 64 ? 16 : 8, nb);
  p.pitch = p.kc * kBlockBytes;
  // Bank-conflict-free row pitch: 64 mod 128 for the 16-byte loads of the fp16 form (rows g, g + 1 per
  // quarter-warp), 32 mod 128 for the 8-byte loads of the integer form (rows g .. g + 3 per half-warp).
  const int pad = tn.i8 ? 32 : 64;
  p.pitch += (pad - p.pitch % 128 + 128) % 128;
  p.xbytes = kB * (int)(((tn.i8 ? smem_bytes_i8(nb) : mvt::smem_bytes(kT, nb)) + 127) / 128 * 128);
  const size_t stage = (size_t)16 * p.pitch;
  // ctas_per_sm -1 (decode8): one CTA per SM within half the SM's shared memory (the full SM where x and 2
  // stages need more), so the next product's CTAs fit beside this one's and fill their ring while it runs.
  // A/B only: half the consumer warps per SM cost far more than the overlap gives (H200 tg128, decode8: 9B 280.6
  // tok/s with both kernels so vs 357.9, Q4_K alone 300.0, Q6_K alone 331.3; 27B 92.3 vs 123.5; 0.8B 990.6 vs 1131.5).
  const bool half1 = tn.ctas_per_sm < 0;
  const bool one = wide && !tn.ctas_per_sm && tn.one_cta_nb > 0 && nb >= tn.one_cta_nb;  // skip two CTAs
  for (int cand = 0; cand < 3; cand++) {
    const int cps = cand == 0 ? 2 : 1;
    const size_t lim = cand == 2 ? kOne : kHalf;
    if (half1 ? cand == 0 : (cand == 1 || (tn.ctas_per_sm && cps != tn.ctas_per_sm))) continue;
    if (one && cand == 0) continue;
    if ((size_t)p.xbytes + 2 * stage > lim) continue;
    int st = (int)std::min<size_t>(kMaxStages, (lim - p.xbytes) / stage);
    if (tn.stages > 0) st = std::min(st, std::max(2, tn.stages));
    if (cps == 2 && !tn.ctas_per_sm && st < 3) continue;
    p.warps = cand == 2 && wide ? 2 * kCW : kCW;
    if (p.warps > kCW) st = even_stages(st);
    p.stages = st;
    p.ctas_per_sm = cps;
    p.smem = p.xbytes + (size_t)st * stage;
    return true;
  }
  return false;
}

// Whether the kernel takes Q4_K [rows, cols] with the current tuning. By shape (measured on the H200,
// bench/cuda/NOTES.md decode6): see the rule below.
inline bool takes(int64_t rows, int64_t cols) {
  const Tune& tn = tune();
  if (tn.mode == 0 || cols % 256 != 0 || rows > ((int64_t)1 << 30)) return false;
  Plan p;
  if (!plan(mvt::tune().terms, (int)(cols / 256), tn, p)) return false;
  if (tn.mode == 1) return true;
  // At least one row group per SM (fewer leave SMs idle: matvec_tc splits the columns instead), and not
  // vocab-sized short rows (Q4_K [248320 x 1024]: 64.7 vs 50.1 us; 4 super-blocks make a 9 KB stage).
  return (rows + 15) / 16 >= sm_count() && (cols >= 2048 || rows < 65536);
}

namespace {
template <int kT, bool kI8, int kW, bool kLean, int kB>
cudaError_t allow_smem_stream() {
  static const cudaError_t e = cudaFuncSetAttribute(kernel<kT, kI8, kW, kLean, kB>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    (int)((kW == kCW ? kOneSmem : kOneSmemWide) - (kB - 1) * 2048));
  return e != cudaSuccess ? e : mvs::carveout_max(kernel<kT, kI8, kW, kLean, kB>);
}
template <int kT, bool kI8, int kW = kCW, bool kLean = false, int kB = 1>
Status launch_t(const Args& a, size_t smem, unsigned grid, cudaStream_t stream) {
  const cudaError_t attr = allow_smem_stream<kT, kI8, kW, kLean, kB>();
  if (attr != cudaSuccess) return cu_err("cuda matvec_stream: cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
  const cudaError_t e = launch_pdl(kernel<kT, kI8, kW, kLean, kB>, dim3(grid), dim3(32 * (kW + 1)), smem, stream,
                                   launch_pdl_with(a.xg != nullptr), a);
  if (e != cudaSuccess) return cu_err("cuda matvec_stream: launch: {}", cudaGetErrorString(e));
  CUDA_TRY_LAUNCH("matvec_stream", stream);
  return {};
}
}  // namespace

// Checks done by the caller (matvec.cu): rows, cols > 0, cols % 256 == 0, alignment of w / x / y.
inline Status launch(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, bool accumulate,
                     cudaStream_t stream, const mvs::Pre& pre = {}) {
  const int kT = mvt::tune().terms;
  const int nb = (int)(cols / 256);
  Plan p;
  if (cols % 256 != 0 || rows > ((int64_t)1 << 30) || !plan(kT, nb, tune(), p))
    return cu_err("cuda matvec_stream: [{}, {}] does not fit", rows, cols);
  Args a;
  a.t = mvt::Args{w, (int64_t)nb * kBlockBytes, (int)rows, nb, 1, x, y, accumulate, pre, (int)cols};
  a.kc = p.kc;
  a.nchunk = (nb + p.kc - 1) / p.kc;
  a.pitch = p.pitch;
  a.stages = p.stages;
  a.xbytes = p.xbytes;
  a.math = tune().math;
  a.evict = tune().evict;
  a.xone = tune().xone;
  const int64_t nrg = (rows + 15) / 16;
  const int64_t grid = std::min<int64_t>(nrg, (int64_t)p.ctas_per_sm * sm_count());
  a.probe = probe_take((int)grid, rows, cols, false);
  a.pf_cta = prefetch_per_cta(tune().prefetch_kb, grid);
  a.pf = a.pf_cta ? next_hint().w : nullptr;
  if (tune().i8 && xprep_takes(nb, false)) {
    const size_t xb = (smem_bytes_i8(nb) + 15) / 16 * 16;
    uint4* xg = xb <= kXgMax && xb <= (size_t)p.xbytes ? next_xprep_buffer() : nullptr;
    if (xg) {
      const bool fence = tune().xprep_fence;
      const cudaError_t e = launch_pdl(xprep_kernel<8>, dim3((nb + 7) / 8), dim3(256), 0, stream,
                                       launch_pdl_with(true), a.t, xg, fence);
      if (e != cudaSuccess) return cu_err("cuda matvec_stream: xprep launch: {}", cudaGetErrorString(e));
      CUDA_TRY_LAUNCH("matvec_stream xprep", stream);
      a.xg = xg;
      a.xg_bytes = (uint32_t)xb;
      a.xfence = fence;
    }
  }
  if (tune().i8 && tune().lean)
    return p.warps > kCW ? launch_t<3, true, 2 * kCW, true>(a, p.smem, (unsigned)grid, stream)
                         : launch_t<3, true, kCW, true>(a, p.smem, (unsigned)grid, stream);
  if (tune().i8)
    return p.warps > kCW ? launch_t<3, true, 2 * kCW>(a, p.smem, (unsigned)grid, stream)
                         : launch_t<3, true>(a, p.smem, (unsigned)grid, stream);
  return kT == 2 ? launch_t<2, false>(a, p.smem, (unsigned)grid, stream) : launch_t<3, false>(a, p.smem, (unsigned)grid, stream);
}

// pair28 / quad28: whether the kB-sequence kernel (kB 2 or 4) takes Q4_K [rows, cols]: takes()'s rule with kB x regions
// in the plan; the integer lean form on, DS_MVB_PAIR not 0.
inline bool pair_on() {
  static const bool v = [] {
    const char* e = std::getenv("DS_MVB_PAIR");
    return !(e && e[0] == '0');
  }();
  return v;
}
inline bool takes_multi(int64_t rows, int64_t cols, int kB) {
  const Tune& tn = tune();
  if (!pair_on() || !tn.i8 || !tn.lean || tn.mode == 0 || cols % 256 != 0 || rows > ((int64_t)1 << 30)) return false;
  Plan p;
  if (!plan(3, (int)(cols / 256), tn, p, kB)) return false;
  return tn.mode == 1 || ((rows + 15) / 16 >= sm_count() && (cols >= 2048 || rows < 65536));
}
// The launch arguments of a multi-sequence product from its plan (launch_multi here and in matvec_stream_q6.cuh: A / P
// are either kernel's Args / Plan; block_bytes per super-block); returns the grid.
template <class A, class P>
inline int64_t multi_args(A& a, const P& p, const uint8_t* w, int64_t rows, int64_t cols, int block_bytes,
                          const float* x, float* y, int nseq, int kB, bool accumulate, const mvs::Pre& pre = {}) {
  const int nb = (int)(cols / 256);
  a.t = mvt::Args{w, (int64_t)nb * block_bytes, (int)rows, nb, 1, x, y, accumulate, pre, (int)cols};
  a.kc = p.kc;
  a.nchunk = (nb + p.kc - 1) / p.kc;
  a.pitch = p.pitch;
  a.stages = p.stages;
  a.xbytes = p.xbytes;
  a.xregion = p.xbytes / kB;
  a.nseq = nseq;
  a.evict = tune().evict;
  a.xone = tune().xone;
  const int64_t grid = std::min<int64_t>((rows + 15) / 16, (int64_t)p.ctas_per_sm * sm_count());
  a.pf_cta = prefetch_per_cta(tune().prefetch_kb, grid);
  a.pf = a.pf_cta ? next_hint().w : nullptr;
  return grid;
}
// fold29: whether the kB-sequence kernel stages x by stage_multi (the one round that can write xn) for Q4_K rows of cols.
inline bool multi_xn_takes(int64_t cols, int kB) {
  Plan p;
  if (cols % 256 != 0 || !plan(3, (int)(cols / 256), tune(), p, kB)) return false;
  return tune().xone && multi_units((int)(cols / 256), p.warps > kCW ? 2 * kCW : kCW, kB) > 0;
}
// Y[nseq, rows] = X[nseq, cols] Wᵀ (+ Y) in one pass over the weights for nseq <= 4 sequences (the kB = 2 kernel for
// nseq <= 2, kB = 4 above; x, y: nseq rows of cols / rows floats, x 16-byte aligned); the caller checks takes_multi.
// fold29: pre.norm_w (not null): X is RMSNorm'd per sequence in the staging (pre.gate is not taken), and where xn is
// not null CTA 0 writes the normalised X there (the caller checks multi_xn_takes).
inline Status launch_multi(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, int nseq,
                           bool accumulate, cudaStream_t stream, const mvs::Pre& pre = {}, float* xn = nullptr) {
  const int nb = (int)(cols / 256), kB = nseq <= 2 ? 2 : 4;
  Plan p;
  if (nseq < 1 || nseq > 4 || cols % 256 != 0 || rows > ((int64_t)1 << 30) || !plan(3, nb, tune(), p, kB))
    return cu_err("cuda matvec_stream ({} sequences): [{}, {}] does not fit", nseq, rows, cols);
  Args a;
  a.math = tune().math;
  const int64_t grid = multi_args(a, p, w, rows, cols, kBlockBytes, x, y, nseq, kB, accumulate, pre);
  a.xn = pre.norm_w ? xn : nullptr;
  const bool wide = p.warps > kCW;
  if (kB == 2)
    return wide ? launch_t<3, true, 2 * kCW, true, 2>(a, p.smem, (unsigned)grid, stream)
                : launch_t<3, true, kCW, true, 2>(a, p.smem, (unsigned)grid, stream);
  return wide ? launch_t<3, true, 2 * kCW, true, 4>(a, p.smem, (unsigned)grid, stream)
              : launch_t<3, true, kCW, true, 4>(a, p.smem, (unsigned)grid, stream);
}

}  // namespace mvq
}  // namespace ds::cuda

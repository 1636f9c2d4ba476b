// tca33: the decode attention on f16 caches by tensor cores (include from kernels_attn.cu, inside ds::cuda::mk's
// anonymous namespace, after split_range / write_empty / part_base / ex2).
// Each (split, kv head, token) item is one block of two warps (attn_mma_pair_kernel), the split plan of the other
// loaders (so attn_combine merges it unchanged).
// The split's rows go through shared memory in tiles of 16 rows (two buffers, cp.async, rows past the split zero-filled),
// and per tile:
//  * scores: S (16 rows x 8 columns) = K tile (16 x hd, the A operand of mma.m16n8k16, f16 as cached: exact) times
//    Q^T as 8 columns (q head h's hi and lo f16 terms in columns 2h, 2h + 1; q pre-scaled by scale * log2 e in fp32, so
//    hi + lo carries ~22 bits); the score of row r and head h is S[r][2h] + S[r][2h + 1];
//  * the online softmax per head in log2 units (the running max uniform over the 8 lanes of a head);
//  * O^T (hd x 8) += V^T (A: ldmatrix.trans of the V tile) times P^T as 8 columns (p's hi and lo f16 terms).
// A lane's head is lane % 4 in both accumulators; heads >= G have zero q columns and are not written.
// Its bits differ from the scalar loaders' (another summation order); it is used for f16 caches at every batch size
// (attn_mma_on), so a sequence's bits still do not depend on its batch.
// Measured (H200, session 33, 9B synth, 64 x 512 + tg64 with --kv-f16): attention 516 vs 591 us a step (the scalar
// ring kernel + combine), step 8.076-8.083 vs 8.157-8.163 ms; AttnRing.SameBitsF16Caches 3.35e-7 of float64 at the
// 9B's shape. Still ~2x its DRAM floor (~35 us a layer). walk34 (session 34) let one-warp blocks walk runs of items
// (no gain: the per-item prologue and the pipeline fill / drain were not the bound); s35's profile (ncu, H100, B 64 x
// 528) of that one-warp kernel: 6 blocks per SM (shared memory), 4.26 warp cycles per issued instruction, DRAM 58%,
// bound by its warps' instruction chains, most of them the copies' address arithmetic. So s35 rewrote the copies
// (mma_issue_tile) and split each item over two warps (attn_mma_pair_kernel: twice the warps per SM). s37 (H100,
// AttnBench.Mma, 16 x 4 x 256 heads): B 64 at 528 positions 66.2 us vs 77.8 (walk) / 74.4 (one item per warp); B 1
// 7.05 vs 9.70 us; the 9B step at 64 x 512+ with --kv-f16 8.938 vs 9.013 ms. The one-warp kernel was removed then
// (its bits were the pair's: AttnRing.MmaWalkSameBits memcmp'd them on the H100 before). ncu of the pair kernel (H100,
// B 64 x 528): 59.4 us, DRAM 77%, 61% of its stalls on the tile copies; three tile buffers (two tiles in flight, 52 KB,
// 4 blocks per SM instead of 6; the same bits) measured 69.8 vs 66.4 us there, 61.6 vs 61.6 with 64-row splits, the
// step and tg128 unchanged: removed (s37).
#pragma once

constexpr int kMmaRows = 16;  // rows per tile

// Row pitch of a tile in shared memory: hd halves + 16 bytes, so ldmatrix's 8 rows fall in distinct banks.
template <int HPL>
constexpr int mma_pitch() {
  return 32 * HPL * 2 + 16;
}
template <int HPL>
constexpr int mma_smem_bytes() {
  return 2 * 2 * kMmaRows * mma_pitch<HPL>();  // two buffers of [K tile | V tile]
}

__device__ __forceinline__ uint32_t pack_h2(__half lo, __half hi) {
  return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
}
// x's hi (hl = 0) or lo (hl = 1) f16 term: hi = f16(x), lo = f16(x - hi).
__device__ __forceinline__ __half term_h(float x, int hl) {
  const __half h = __float2half_rn(x);
  return hl == 0 ? h : __float2half_rn(x - __half2float(h));
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&a)[4], const void* p) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&a)[4], const void* p) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(s));
}
// 16 bytes global -> shared; n = 16 copies, n = 0 zero-fills (a row past the split).
__device__ __forceinline__ void cp16_zfill(void* dst, const void* src, int n) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
}

// Tile rows r0 .. r0 + 15 (rows >= k1 zero-filled) of kv head g into buf ([K tile | V tile], rows of mma_pitch);
// one commit group per call. A lane copies chunk lane % kChunks of rows lane / kChunks + kRP i, so its source and
// destination addresses are one base each plus constant steps (s35: the old form recomputed row, chunk and a 64-bit
// row offset per copy, ~25 instructions each, most of the kernel's instruction stream; the same bytes land).
// kThreads lanes copy (attn_mma_pair_kernel's 64), lane = the thread's index among them.
template <int HPL, int kThreads = 64>
__device__ __forceinline__ void mma_issue_tile(const __half* Kc, const __half* Vc, int r0, int k1, int nkv, int g,
                                               int lane, char* buf) {
  constexpr int HD = 32 * HPL, kChunks = HD * 2 / 16, kRP = kThreads / kChunks, kP = mma_pitch<HPL>();
  static_assert(kThreads % kChunks == 0 && kMmaRows % kRP == 0, "the lanes cover whole rows of a tile");
  const int ch = lane % kChunks, rr = lane / kChunks;
  const int64_t step = (int64_t)kRP * nkv * HD;  // elements from one of the lane's rows to its next
  const int64_t off = ((int64_t)(r0 + rr) * nkv + g) * HD + 8 * ch;
  const __half* kp = Kc + off;
  const __half* vp = Vc + off;
  char* const d = buf + rr * kP + 16 * ch;
#pragma unroll
  for (int i = 0; i < kMmaRows / kRP; i++) {
    const bool in = r0 + rr + kRP * i < k1;  // a row past the split: zero-filled from a valid address
    cp16_zfill(d + kRP * i * kP, in ? kp + i * step : Kc, in ? 16 : 0);
    cp16_zfill(d + (kMmaRows + kRP * i) * kP, in ? vp + i * step : Vc, in ? 16 : 0);
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Item it of a launch: (token t, kv head g, split sp) with it = (t * nkv + g) * ns + sp. A split's rows: the
// context cut into n_splits equal chunks (split_range; rows = 0), or (rows > 0) chunks of at least `rows`
// rows rounded up to whole 16-row tiles, so no tile but a split's last is partly zero-filled and short contexts use
// fewer splits (other bits than rows 0; a function of the sequence's length, not of the batch).
struct MmaItem {
  int t, g, sp, k0, k1;
  const __half* Kc;
  const __half* Vc;
};
__device__ __forceinline__ MmaItem mma_item(const AttnArgs& a, const StepIO* __restrict__ io, int it, int rows) {
  const int ns = a.n_splits, sp = it % ns, g = (it / ns) % a.n_head_kv, t = it / (ns * a.n_head_kv);
  const SplitRange<__half> r = split_range<__half>(a, io, sp, t);
  if (rows <= 0) return {t, g, sp, r.k0, r.k1, r.Kc, r.Vc};
  const int n_keys = io->pos[t] + 1;
  const int chunk = (max((n_keys + ns - 1) / ns, rows) + kMmaRows - 1) / kMmaRows * kMmaRows;
  const int k0 = min(sp * chunk, n_keys);
  return {t, g, sp, k0, min(k0 + chunk, n_keys), r.Kc, r.Vc};
}

// The B fragments of Q^T for N chunks cc = cc0 + ccs j: column n = lane / 4 is head n / 2's term n % 2; rows (dims)
// 16 cc + 2 (lane % 4) + {0, 1}, + 8. q: the kv group's first q head's row (heads >= G give zero columns).
template <int HD, int N>
__device__ __forceinline__ void mma_q_terms(uint32_t (&qb)[N][2], const float* q, int cc0, int ccs, int G, int lane,
                                            float qs) {
  const int hq = lane >> 3, hl = (lane >> 2) & 1, kq = 2 * (lane & 3);
  q += (int64_t)hq * HD;
#pragma unroll
  for (int jj = 0; jj < N; jj++)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int d = 16 * (cc0 + ccs * jj) + kq + 8 * j;
      const float x0 = hq < G ? q[d] * qs : 0.f, x1 = hq < G ? q[d + 1] * qs : 0.f;
      qb[jj][j] = pack_h2(term_h(x0, hl), term_h(x1, hl));
    }
}
// One tile's online softmax: the scores s0 / s1 of this lane's rows lane / 4 and + 8 (base = the tile's first
// position; rows >= k1 masked), head lane % 4 (m: running max, uniform over the head's 8 lanes; l: this lane's sum;
// o: the accumulators rescaled when the max grows); returns P^T's B fragments through the warp's P tile sp_p [16][4]:
// this lane's column n = lane / 4 (head hq, term hl), rows kq, kq + 1, kq + 8, kq + 9.
template <int N>
__device__ __forceinline__ void mma_softmax(float s0, float s1, int base, int k1, int lane, float& m, float& l,
                                            float (&o)[N][4], float* sp_p, uint32_t& pb0, uint32_t& pb1) {
  const int row = lane >> 2, hq = lane >> 3, hl = (lane >> 2) & 1, kq = 2 * (lane & 3);
  if (base + row >= k1) s0 = -INFINITY;
  if (base + row + 8 >= k1) s1 = -INFINITY;
  float tm = fmaxf(s0, s1);
  tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 4));
  tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 8));
  tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 16));
  if (tm > m) {  // uniform over the head's lanes
    const float corr = ex2(m - tm);  // 0 while m is -inf
    l *= corr;
#pragma unroll
    for (int cc = 0; cc < N; cc++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[cc][e] *= corr;
    m = tm;
  }
  const float p0 = ex2(s0 - m), p1 = ex2(s1 - m);
  l += p0 + p1;
  __syncwarp();
  sp_p[row * 4 + (lane & 3)] = p0;
  sp_p[(row + 8) * 4 + (lane & 3)] = p1;
  __syncwarp();
  pb0 = pack_h2(term_h(sp_p[kq * 4 + hq], hl), term_h(sp_p[(kq + 1) * 4 + hq], hl));
  pb1 = pack_h2(term_h(sp_p[(kq + 8) * 4 + hq], hl), term_h(sp_p[(kq + 9) * 4 + hq], hl));
}
// An item's (A, M, L) per q head: O^T chunks cc0 .. cc0 + N - 1 (rows = dims 16 cc + lane / 4, + 8; columns 2h, 2h + 1
// = hi, lo of head h = lane % 4), and M, L when with_ml.
template <int HD, int N>
__device__ __forceinline__ void mma_store(const AttnArgs& a, const MmaItem& c, const float (&o)[N][4], float m, float l,
                                          int cc0, bool with_ml, int lane) {
  float lt = l;
  lt += __shfl_xor_sync(0xffffffffu, lt, 4);
  lt += __shfl_xor_sync(0xffffffffu, lt, 8);
  lt += __shfl_xor_sync(0xffffffffu, lt, 16);
  const int h = lane & 3;
  if (h >= a.n_head / a.n_head_kv) return;
  float* out = part_base(a, c.t, c.g) + ((int64_t)h * a.n_splits + c.sp) * (HD + 2);
  const int d = lane >> 2;
#pragma unroll
  for (int j = 0; j < N; j++) {
    out[16 * (cc0 + j) + d] = o[j][0] + o[j][1];
    out[16 * (cc0 + j) + d + 8] = o[j][2] + o[j][3];
  }
  if (d == 0 && with_ml) {
    out[HD] = m;
    out[HD + 1] = lt;
  }
}

// s35: two warps per item, one item per block. Warp k computes the score chain of the chunks cc = k, k + 2, .. (so
// one accumulator per warp, the even / odd chains that halve the dependent chain of a one-warp form), the two halves
// meet through shared memory and both warps sum them alike; both run the same online softmax; warp k owns the output
// chunks k NC / 2 .. (k + 1) NC / 2 - 1. The 64 threads copy each tile (issued after the barrier that ends the tile
// before: one tile in flight while one is computed). An item's arithmetic does not depend on the grid, so a
// sequence's bits are the same alone and in any batch.
template <int HPL>
constexpr int mma_pair_smem_bytes() {
  return mma_smem_bytes<HPL>() + 2 * 32 * 4 * (int)sizeof(float) + 2 * kMmaRows * 4 * (int)sizeof(float);
}
template <int HPL>
__global__ void __launch_bounds__(64) attn_mma_pair_kernel(const AttnArgs a, const StepIO* __restrict__ io, int rows) {
  constexpr int HD = 32 * HPL, NC = HD / 16, NH = NC / 2, kP = mma_pitch<HPL>(), kBuf = 2 * kMmaRows * kP;
  static_assert(NC % 2 == 0, "two warps split the chunks");
  extern __shared__ __align__(16) char mma_smem[];
  const int tid = threadIdx.x, k = tid >> 5, lane = tid & 31;
  const int nh = a.n_head, G = nh / a.n_head_kv;
  pdl_wait();
  pdl_trigger();
  const MmaItem c = mma_item(a, io, blockIdx.x, rows);
  if (c.k0 >= c.k1) {
    write_empty(part_base(a, c.t, c.g), a.n_splits, c.sp, G, HD);
    return;
  }
  const int n_tiles = (c.k1 - c.k0 + kMmaRows - 1) / kMmaRows;
  mma_issue_tile<HPL, 64>(c.Kc, c.Vc, c.k0, c.k1, a.n_head_kv, c.g, tid, mma_smem);

  uint32_t qb[NH][2];  // chunks cc = 2 j + k
  mma_q_terms<HD, NH>(qb, a.q + ((int64_t)c.t * nh + c.g * G) * HD, k, 2, G, lane, a.scale * kLog2e);
  float o[NH][4];  // chunk k NH + j
#pragma unroll
  for (int j = 0; j < NH; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m = -INFINITY, l = 0.f;
  float* const xs = reinterpret_cast<float*>(mma_smem + mma_smem_bytes<HPL>());  // [2][32][4]: the score halves
  float* const sp_p = xs + 2 * 32 * 4 + k * kMmaRows * 4;                        // this warp's P tile [16][4]
  const int mj = lane >> 3, mr = lane & 7;

  for (int i = 0; i < n_tiles; i++) {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();  // tile i is visible to both warps, both are done with tile i - 1 (its buffer, xs)
    if (i + 1 < n_tiles)
      mma_issue_tile<HPL, 64>(c.Kc, c.Vc, c.k0 + (i + 1) * kMmaRows, c.k1, a.n_head_kv, c.g, tid,
                              mma_smem + ((i + 1) & 1) * kBuf);
    const char* kt = mma_smem + (i & 1) * kBuf;
    const char* vt = kt + kMmaRows * kP;
    float sk[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int jj = 0; jj < NH; jj++) {
      uint32_t af[4];
      ldsm_x4(af, kt + (8 * (mj & 1) + mr) * kP + 2 * (16 * (2 * jj + k) + 8 * (mj >> 1)));
      mma_16816(sk, af, qb[jj][0], qb[jj][1]);
    }
    reinterpret_cast<float4*>(xs)[k * 32 + lane] = make_float4(sk[0], sk[1], sk[2], sk[3]);
    __syncthreads();
    // Both warps read both halves back, so the sums are formed alike.
    const float4 e = reinterpret_cast<const float4*>(xs)[lane], d = reinterpret_cast<const float4*>(xs)[32 + lane];
    uint32_t pb0, pb1;
    mma_softmax<NH>((e.x + d.x) + (e.y + d.y), (e.z + d.z) + (e.w + d.w), c.k0 + i * kMmaRows, c.k1, lane, m, l, o,
                    sp_p, pb0, pb1);
#pragma unroll
    for (int j = 0; j < NH; j++) {
      const int cc = k * NH + j;
      uint32_t af[4];
      ldsm_x4_t(af, vt + (8 * (mj >> 1) + mr) * kP + 2 * (16 * cc + 8 * (mj & 1)));
      mma_16816(o[j], af, pb0, pb1);
    }
  }
  mma_store<HD, NH>(a, c, o, m, l, k * NH, k == 0, lane);
}

// cuda::prefill::attention_prefill: causal GQA attention for prompts (qwen35-spec.md §5, ops/attention.h),
// flash style: each block owns the query rows of one tile of tokens × the nh/nkv query heads that share one
// kv head, streams that kv head's cache rows 0 .. max pos in tiles of keys, and keeps an online softmax
// (running max m, running sum l, rescaled output) per row. K/V of this call are stored into the cache first
// (store_kernel), so prefix and new keys are read the same way.
// Thread mappings:
//   fast    4 warps, 64 rows (tokens × heads of the group); a warp owns 16 rows and runs f16 mma.sync
//           m16n8k16 (fp32 accumulators): S = Q Kᵀ for 64 keys, softmax in registers, O += P V with P taken
//           straight from the S accumulators and V fragments from ldmatrix.trans; 2 blocks per SM
//   precise 8 warps, 32 rows; 8 lanes per row, each lane 4 keys of the 32-key tile and HD/8 output dims; fp32
// K/V tiles are converted (fast: to f16) on their way into shared memory; keys past the tile's last position
// are zero-filled so masked probabilities multiply zeros, never stale shared memory. kv_half (kv19): the caches
// hold f16 rows (the store rounds to nearest; the fast kernel copies them as they are, the same halves it made
// from f32 rows; the precise kernel widens them).
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "cuda/prefill/common.cuh"
#include "cuda/prefill/prefill.cuh"

namespace ds::cuda::prefill {
namespace {

constexpr int kFastRows = 64, kFastKeys = 64, kFastThreads = 128;
constexpr int kPreciseRows = 32, kPreciseKeys = 32, kPreciseThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;

struct Args {
  const float *q, *k, *v;
  void *k_cache, *v_cache;  // float, or __half with kv_half
  float* out;
  bool kv_half;
  const int32_t *pos, *slots;
  const int4* tiles;
  int64_t max_ctx;
  int nh, nkv, group, tile_tokens;
  float scale;
};

__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);  // .x = a (low half)
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Copies every token's k, v rows (nkv * HD floats) into its sequence's cache row pos[t].
__global__ void store_kernel(Args A, int row) {
  const int4 tl = A.tiles[blockIdx.x];
  const int s = tl.x, t0 = tl.y, n = tl.z;
  if (n == 0) return;
  const int slot = A.slots ? A.slots[s] : s;
  const int row4 = row / 4;
  for (int idx = threadIdx.x; idx < n * row4; idx += blockDim.x) {
    const int tt = idx / row4, x = idx % row4;
    const int64_t p = A.pos[t0 + tt];
    if (p < 0 || p >= A.max_ctx) continue;
    const size_t src = (size_t)(t0 + tt) * row4 + x, dst = ((size_t)slot * A.max_ctx + p) * row4 + x;
    const float4 kx = reinterpret_cast<const float4*>(A.k)[src], vx = reinterpret_cast<const float4*>(A.v)[src];
    if (A.kv_half) {
      reinterpret_cast<uint2*>(A.k_cache)[dst] = make_uint2(pack_half2(kx.x, kx.y), pack_half2(kx.z, kx.w));
      reinterpret_cast<uint2*>(A.v_cache)[dst] = make_uint2(pack_half2(vx.x, vx.y), pack_half2(vx.z, vx.w));
    } else {
      reinterpret_cast<float4*>(A.k_cache)[dst] = kx;
      reinterpret_cast<float4*>(A.v_cache)[dst] = vx;
    }
  }
}

// Row r of a block: token r / group of the tile, query head kvh * group + r % group. rpos[r] = that token's
// position (clamped into the cache), or -1 for a padding row.
__device__ __forceinline__ void row_positions(const Args& A, int t0, int n, int rows, int* rpos) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const int tt = r / A.group;
    int p = -1;
    if (tt < A.tile_tokens && tt < n) {
      const int64_t pp = A.pos[t0 + tt];
      p = (int)(pp < A.max_ctx ? pp : A.max_ctx - 1);
    }
    rpos[r] = p;
  }
}

__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 f16 matrices, transposed on the way (lanes 8i..8i+7 give the row addresses of matrix i).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                              const __half* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

__device__ __forceinline__ uint32_t lds32(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <int HD>
constexpr size_t fast_smem() { return sizeof(__half) * (size_t)(kFastRows + 2 * kFastKeys) * (HD + 8); }

template <int HD>
__global__ void __launch_bounds__(kFastThreads, 2) attn_fast_kernel(Args A) {
  constexpr int R = kFastRows, BK = kFastKeys, SP = HD + 8;  // row stride in halves: +16 bytes kills conflicts
  extern __shared__ __align__(16) unsigned char smraw[];
  __half* Qs = reinterpret_cast<__half*>(smraw);  // [R][SP]
  __half* Ks = Qs + R * SP;                       // [BK][SP]
  __half* Vs = Ks + BK * SP;                      // [BK][SP]
  __shared__ int rpos[R];
  const int4 tl = A.tiles[blockIdx.x];
  const int s = tl.x, t0 = tl.y, n = tl.z, kvh = blockIdx.y;
  if (n == 0) return;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int slot = A.slots ? A.slots[s] : s;
  const size_t row = (size_t)A.nkv * HD;
  const size_t off = (size_t)slot * A.max_ctx * row + (size_t)kvh * HD;  // elements of the caches
  const float* kc = static_cast<const float*>(A.k_cache) + off;
  const float* vc = static_cast<const float*>(A.v_cache) + off;
  const __half* kh = static_cast<const __half*>(A.k_cache) + off;
  const __half* vh = static_cast<const __half*>(A.v_cache) + off;
  row_positions(A, t0, n, R, rpos);
  for (int idx = tid; idx < R * HD / 4; idx += kFastThreads) {
    const int r = idx / (HD / 4), d = idx % (HD / 4) * 4, tt = r / A.group;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (tt < A.tile_tokens && tt < n)
      x = *reinterpret_cast<const float4*>(A.q + ((size_t)(t0 + tt) * A.nh + kvh * A.group + r % A.group) * HD + d);
    *reinterpret_cast<uint2*>(Qs + r * SP + d) = make_uint2(pack_half2(x.x, x.y), pack_half2(x.z, x.w));
  }
  __syncthreads();
  int kmax = -1, wmax = -1;
  for (int r = 0; r < R; r++) kmax = max(kmax, rpos[r]);
  for (int r = warp * 16; r < warp * 16 + 16; r++) wmax = max(wmax, rpos[r]);
  const int p_lo = rpos[warp * 16 + g], p_hi = rpos[warp * 16 + g + 8];
  const float sl2 = A.scale * kLog2e;

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;

  for (int k0 = 0; k0 <= kmax; k0 += BK) {
    __syncthreads();  // the previous tile is consumed
    for (int idx = tid; idx < BK * HD / 4; idx += kFastThreads) {
      const int kr = idx / (HD / 4), d = idx % (HD / 4) * 4, key = k0 + kr;
      uint2 kw = make_uint2(0u, 0u), vw = kw;
      if (key <= kmax && A.kv_half) {  // uniform: the rows are f16 already
        kw = *reinterpret_cast<const uint2*>(kh + (size_t)key * row + d);
        vw = *reinterpret_cast<const uint2*>(vh + (size_t)key * row + d);
      } else if (key <= kmax) {
        const float4 kx = *reinterpret_cast<const float4*>(kc + (size_t)key * row + d);
        const float4 vx = *reinterpret_cast<const float4*>(vc + (size_t)key * row + d);
        kw = make_uint2(pack_half2(kx.x, kx.y), pack_half2(kx.z, kx.w));
        vw = make_uint2(pack_half2(vx.x, vx.y), pack_half2(vx.z, vx.w));
      }
      *reinterpret_cast<uint2*>(Ks + kr * SP + d) = kw;
      *reinterpret_cast<uint2*>(Vs + kr * SP + d) = vw;
    }
    __syncthreads();
    if (k0 > wmax) continue;  // every key of this tile is in the future of this warp's rows

    float sacc[BK / 8][4];
#pragma unroll
    for (int j = 0; j < BK / 8; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;
#pragma unroll 4
    for (int ks = 0; ks < HD / 16; ks++) {
      const __half* qa = Qs + (warp * 16 + g) * SP + ks * 16 + 2 * t;
      const uint32_t a0 = lds32(qa), a1 = lds32(qa + 8 * SP), a2 = lds32(qa + 8), a3 = lds32(qa + 8 * SP + 8);
#pragma unroll
      for (int j = 0; j < BK / 8; j++) {
        const __half* kb = Ks + (j * 8 + g) * SP + ks * 16 + 2 * t;
        mma_f16(sacc[j], a0, a1, a2, a3, lds32(kb), lds32(kb + 8));
      }
    }
    // Scale into the log2 domain, mask the future, update the running max and sum.
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int j = 0; j < BK / 8; j++) {
      const int key = k0 + j * 8 + 2 * t;
      sacc[j][0] = key <= p_lo ? sacc[j][0] * sl2 : -INFINITY;
      sacc[j][1] = key + 1 <= p_lo ? sacc[j][1] * sl2 : -INFINITY;
      sacc[j][2] = key <= p_hi ? sacc[j][2] * sl2 : -INFINITY;
      sacc[j][3] = key + 1 <= p_hi ? sacc[j][3] * sl2 : -INFINITY;
      mx_lo = fmaxf(mx_lo, fmaxf(sacc[j][0], sacc[j][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(sacc[j][2], sacc[j][3]));
    }
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
    const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
    const float b_lo = mn_lo == -INFINITY ? 0.f : mn_lo, b_hi = mn_hi == -INFINITY ? 0.f : mn_hi;
    const float al_lo = exp2f(m_lo - b_lo), al_hi = exp2f(m_hi - b_hi);  // 0 on the first tile
    m_lo = mn_lo;
    m_hi = mn_hi;
    float ps_lo = 0.f, ps_hi = 0.f;
#pragma unroll
    for (int j = 0; j < BK / 8; j++) {
      sacc[j][0] = exp2f(sacc[j][0] - b_lo);
      sacc[j][1] = exp2f(sacc[j][1] - b_lo);
      sacc[j][2] = exp2f(sacc[j][2] - b_hi);
      sacc[j][3] = exp2f(sacc[j][3] - b_hi);
      ps_lo += sacc[j][0] + sacc[j][1];
      ps_hi += sacc[j][2] + sacc[j][3];
    }
    l_lo = l_lo * al_lo + ps_lo;  // per-lane partial sums; the 4 lanes of a row are added at the end
    l_hi = l_hi * al_hi + ps_hi;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
      o[i][0] *= al_lo;
      o[i][1] *= al_lo;
      o[i][2] *= al_hi;
      o[i][3] *= al_hi;
    }
    // O += P V: the S accumulators of key tiles 2kk, 2kk+1 are the A fragment of key step kk.
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      const uint32_t pa0 = pack_half2(sacc[2 * kk][0], sacc[2 * kk][1]);
      const uint32_t pa1 = pack_half2(sacc[2 * kk][2], sacc[2 * kk][3]);
      const uint32_t pa2 = pack_half2(sacc[2 * kk + 1][0], sacc[2 * kk + 1][1]);
      const uint32_t pa3 = pack_half2(sacc[2 * kk + 1][2], sacc[2 * kk + 1][3]);
      const int mi = lane / 8, mj = lane % 8;  // ldmatrix: matrix mi, row mj
      const __half* vrow = Vs + (kk * 16 + (mi & 1) * 8 + mj) * SP + (mi >> 1) * 8;
#pragma unroll
      for (int dn = 0; dn < HD / 16; dn++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_trans(b0, b1, b2, b3, vrow + dn * 16);
        mma_f16(o[2 * dn], pa0, pa1, pa2, pa3, b0, b1);
        mma_f16(o[2 * dn + 1], pa0, pa1, pa2, pa3, b2, b3);
      }
    }
  }
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int r = warp * 16 + g + 8 * half, tt = r / A.group;
    if (tt >= A.tile_tokens || tt >= n) continue;
    const float inv = 1.f / (half ? l_hi : l_lo);
    float* orow = A.out + ((size_t)(t0 + tt) * A.nh + kvh * A.group + r % A.group) * HD + 2 * t;
#pragma unroll
    for (int i = 0; i < HD / 8; i++)
      *reinterpret_cast<float2*>(orow + i * 8) = make_float2(o[i][2 * half] * inv, o[i][2 * half + 1] * inv);
  }
}

template <int HD>
constexpr size_t precise_smem() {
  return sizeof(float) * (size_t)(kPreciseRows * (HD + 1) + kPreciseKeys * (HD + 1) + kPreciseKeys * HD +
                                  kPreciseRows * (kPreciseKeys + 1));
}

template <int HD>
__global__ void __launch_bounds__(kPreciseThreads) attn_precise_kernel(Args A) {
  constexpr int R = kPreciseRows, BK = kPreciseKeys, P = HD + 1, PP = BK + 1, NO = HD / 32;
  extern __shared__ __align__(16) float sm[];
  float* Qs = sm;             // [R][P]
  float* Ks = Qs + R * P;     // [BK][P]
  float* Vs = Ks + BK * P;    // [BK][HD] (16-byte aligned: (R + BK) * P floats is a multiple of 4)
  float* Ps = Vs + BK * HD;   // [R][PP]
  __shared__ int rpos[R];
  const int4 tl = A.tiles[blockIdx.x];
  const int s = tl.x, t0 = tl.y, n = tl.z, kvh = blockIdx.y;
  if (n == 0) return;
  const int tid = threadIdx.x, r = tid / 8, c = tid % 8;
  const int slot = A.slots ? A.slots[s] : s;
  const size_t row = (size_t)A.nkv * HD;
  const size_t off = (size_t)slot * A.max_ctx * row + (size_t)kvh * HD;  // elements of the caches
  const float* kc = static_cast<const float*>(A.k_cache) + off;
  const float* vc = static_cast<const float*>(A.v_cache) + off;
  const __half* kh = static_cast<const __half*>(A.k_cache) + off;
  const __half* vh = static_cast<const __half*>(A.v_cache) + off;
  row_positions(A, t0, n, R, rpos);
  for (int idx = tid; idx < R * HD; idx += kPreciseThreads) {
    const int rr = idx / HD, d = idx % HD, tt = rr / A.group;
    Qs[rr * P + d] = (tt < A.tile_tokens && tt < n)
                         ? A.q[((size_t)(t0 + tt) * A.nh + kvh * A.group + rr % A.group) * HD + d]
                         : 0.f;
  }
  __syncthreads();
  int kmax = -1;
  for (int i = 0; i < R; i++) kmax = max(kmax, rpos[i]);
  const int prow = rpos[r];
  float o[4 * NO];  // dims 4c + 32jj + e
#pragma unroll
  for (int i = 0; i < 4 * NO; i++) o[i] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int k0 = 0; k0 <= kmax; k0 += BK) {
    __syncthreads();
    for (int idx = tid; idx < BK * HD; idx += kPreciseThreads) {
      const int kr = idx / HD, d = idx % HD, key = k0 + kr;
      const bool ok = key <= kmax;
      const size_t i = (size_t)key * row + d;
      Ks[kr * P + d] = !ok ? 0.f : A.kv_half ? __half2float(kh[i]) : kc[i];
      Vs[kr * HD + d] = !ok ? 0.f : A.kv_half ? __half2float(vh[i]) : vc[i];
    }
    __syncthreads();
    float sc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int d = 0; d < HD; d++) {
      const float qv = Qs[r * P + d];
#pragma unroll
      for (int j = 0; j < 4; j++) sc[j] += qv * Ks[(c + 8 * j) * P + d];
    }
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      sc[j] = k0 + c + 8 * j <= prow ? sc[j] * A.scale : -INFINITY;
      mx = fmaxf(mx, sc[j]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    const float mn = fmaxf(m, mx), base = mn == -INFINITY ? 0.f : mn;
    const float alpha = expf(m - base);
    m = mn;
    float ps = 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float p = expf(sc[j] - base);
      Ps[r * PP + c + 8 * j] = p;
      ps += p;
    }
    ps += __shfl_xor_sync(0xffffffffu, ps, 1);
    ps += __shfl_xor_sync(0xffffffffu, ps, 2);
    ps += __shfl_xor_sync(0xffffffffu, ps, 4);
    l = l * alpha + ps;
    __syncwarp();  // row r's probabilities come from the 8 lanes that read them
#pragma unroll
    for (int i = 0; i < 4 * NO; i++) o[i] *= alpha;
    for (int kk = 0; kk < BK; kk++) {
      const float p = Ps[r * PP + kk];
#pragma unroll
      for (int jj = 0; jj < NO; jj++) {
        const float4 v = *reinterpret_cast<const float4*>(Vs + kk * HD + 4 * c + 32 * jj);
        o[4 * jj + 0] += p * v.x;
        o[4 * jj + 1] += p * v.y;
        o[4 * jj + 2] += p * v.z;
        o[4 * jj + 3] += p * v.w;
      }
    }
  }
  const int tt = r / A.group;
  if (tt >= A.tile_tokens || tt >= n) return;
  const float inv = 1.f / l;
  float* orow = A.out + ((size_t)(t0 + tt) * A.nh + kvh * A.group + r % A.group) * HD;
#pragma unroll
  for (int jj = 0; jj < NO; jj++)
    *reinterpret_cast<float4*>(orow + 4 * c + 32 * jj) =
        make_float4(o[4 * jj] * inv, o[4 * jj + 1] * inv, o[4 * jj + 2] * inv, o[4 * jj + 3] * inv);
}

template <int HD>
Status launch(const Args& A, unsigned n_tiles, Mode mode, cudaStream_t stream) {
  if (mode == Mode::kFast) {
    auto kern = attn_fast_kernel<HD>;
    DS_TRY(allow_smem((const void*)kern, fast_smem<HD>()));
    kern<<<dim3(n_tiles, (unsigned)A.nkv), kFastThreads, fast_smem<HD>(), stream>>>(A);
  } else {
    auto kern = attn_precise_kernel<HD>;
    DS_TRY(allow_smem((const void*)kern, precise_smem<HD>()));
    kern<<<dim3(n_tiles, (unsigned)A.nkv), kPreciseThreads, precise_smem<HD>(), stream>>>(A);
  }
  CUDA_TRY_LAUNCH("attention_prefill", stream);
  return {};
}

bool aligned16(const void* p) { return (uintptr_t)p % 16 == 0; }

}  // namespace

size_t attention_prefill_workspace_bytes(const ops::AttentionParams& p) {
  return align256((size_t)max_tiles(std::max<int64_t>(p.n_tokens, 0), std::max<int64_t>(p.n_seqs, 1), 1) *
                  sizeof(int4));
}

Status attention_prefill(const ops::AttentionParams& p, const float* q, const float* k, const float* v,
                         void* k_cache, void* v_cache, const int32_t* pos, const int32_t* seq_starts,
                         const int32_t* slots, float* out, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream, Mode mode, bool kv_half) {
  const int64_t hd = p.head_dim;
  if (hd != 64 && hd != 128 && hd != 256)
    return cu_err("cuda attention_prefill: head_dim {}: need 64, 128 or 256", hd);
  if (p.n_head_kv < 1 || p.n_head < 1 || p.n_head % p.n_head_kv != 0 || p.n_head / p.n_head_kv > 16 ||
      p.n_head_kv > 65535)
    return cu_err("cuda attention_prefill: {} heads over {} kv heads: need a multiple, at most 16 per kv head",
                  p.n_head, p.n_head_kv);
  if (p.n_tokens < 0 || p.n_tokens > INT32_MAX || p.n_seqs < 1 || p.max_ctx < 1 || p.max_ctx > INT32_MAX)
    return cu_err("cuda attention_prefill: {} tokens, {} sequences, max_ctx {}", p.n_tokens, p.n_seqs, p.max_ctx);
  if (workspace_bytes < attention_prefill_workspace_bytes(p) || !aligned16(workspace))
    return cu_err("cuda attention_prefill: workspace of {} bytes at {}, need {} (16-byte aligned)", workspace_bytes,
                  workspace, attention_prefill_workspace_bytes(p));
  if (p.n_tokens == 0) return {};
  if (!q || !k || !v || !k_cache || !v_cache || !pos || !out)
    return cu_err("cuda attention_prefill: a data pointer is null");
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(k_cache) || !aligned16(v_cache) ||
      !aligned16(out))
    return cu_err("cuda attention_prefill: q, k, v, caches and out must be 16-byte aligned");
  const int group = (int)(p.n_head / p.n_head_kv);
  const int rows = mode == Mode::kFast ? kFastRows : kPreciseRows;
  Args A{};
  A.q = q; A.k = k; A.v = v;
  A.k_cache = k_cache; A.v_cache = v_cache; A.out = out;
  A.kv_half = kv_half;
  A.pos = pos; A.slots = slots;
  A.tiles = static_cast<const int4*>(workspace);
  A.max_ctx = p.max_ctx;
  A.nh = (int)p.n_head; A.nkv = (int)p.n_head_kv; A.group = group;
  A.tile_tokens = rows / group;
  A.scale = p.scale;
  const int64_t n_tiles = max_tiles(p.n_tokens, p.n_seqs, A.tile_tokens);
  DS_TRY(launch_tile_table(seq_starts, p.n_seqs, p.n_tokens, A.tile_tokens, n_tiles, static_cast<int4*>(workspace),
                           nullptr, stream));
  store_kernel<<<(unsigned)n_tiles, 256, 0, stream>>>(A, (int)(p.n_head_kv * hd));
  CUDA_TRY_LAUNCH("attention_prefill store", stream);
  switch (hd) {
    case 64: return launch<64>(A, (unsigned)n_tiles, mode, stream);
    case 128: return launch<128>(A, (unsigned)n_tiles, mode, stream);
    default: return launch<256>(A, (unsigned)n_tiles, mode, stream);
  }
}

}  // namespace ds::cuda::prefill

// The lazy delta rule (lz23; DS_GDN_LAZY=T, off by default): a GDN decode step that reads each head's state and
// writes it back only every T-th token, so a batched step moves about (T + 1) / 2T of the state bytes.
//
// Why: at 64 sequences of the 9B a decode step reads and writes 3.2 GB of f32 delta-rule state each way, more than
// the weights; the kernels already run near the copy bandwidth, so only fewer bytes help. The state stays f32.
//
// The algebra (spec §4.4 with M = S^T, row j of a head, key index fastest; rule_row's update):
//   m_t = m_{t-1} P_t + beta_t v_t[j] k_t^T,   P_t = d_t (I - beta_t k_t k_t^T)  (symmetric),   o_t[j] = m_t . q_t
// Over the tokens 1..t since the state m_0 was last written:
//   o_t[j] = m_0 . r_0 + sum_i c_i v_i[j],   r_t = q_t,   c_i = beta_i (k_i . r_i),   r_{i-1} = d_i (r_i - c_i k_i)
// (r_{i-1} = P_i r_i). The chain over i is O(t d_k) per head, done by one warp; the only O(d_k^2) work is m_0 . r_0,
// one read of the state and no write. Two kernels per step, each over every (value head, sequence) and each taking
// its own items (lazy_item, from the token's position: the same choice in both, in any batch):
//   gdn_lazy_kernel: a single token at a position p with (p + 1) % T != 0: the output as above, the token's k,
//     v[.], d and beta appended to the head's history;
//   gdn_state_kernel (persistent: one CTA per SM over the items): every other item (positions T - 1, 2T - 1, ...;
//     several tokens, as the step-path prefill;
//     none): the history and then the tokens applied to the state with rule_row, token after token (gdn_kernel's
//     arithmetic: with f32 states the state written is gdn_kernel's, bit for bit), the history emptied.
// Outputs of lazy steps are the same sum in another order: not gdn_kernel's bits, within float rounding of them
// (tests/cuda_model/cuda_gdn_test.cu, GdnLazy.*). A sequence gives the same bits alone or in any batch.
//
// The history (GdnArgs::hist_off, per value head, gdn_hist_floats): word 0 the count n (int bits), 3 words of
// padding, then T - 1 entries of k [d_k], v [d_k], d, beta, 2 words of padding. A zeroed history is empty (a reset
// state). Readers of the state outside the step (the piece prefill, CudaModel::download) call gdn_flush first.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"
#include "cuda/model/gdn_row.cuh"

namespace ds::cuda::mk {
namespace {

template <int DK>
constexpr int kEntry = 2 * DK + 4;  // floats per history entry

template <int DK>
__device__ __forceinline__ float* hist_at(const StepIO* io, int s, const GdnArgs& a, int h) {
  return state_at<float>(io, s, a.hist_off) + (int64_t)h * gdn_hist_floats(DK, a.lazy);
}

// The n entries of history H (global) into sh (shared), all loads in flight at once; the block's threads.
template <int DK>
__device__ __forceinline__ void stage_history(const float* H, int n, float* sh, int tid) {
  const float4* src = reinterpret_cast<const float4*>(H + 4);
  float4* dst = reinterpret_cast<float4*>(sh);
  const int n4 = n * kEntry<DK> / 4;
  for (int i = tid; i < n4; i += DK * 4) dst[i] = src[i];
}

// The history's tokens (staged in sh) applied to the row chunks m: rule_row's update, its output unused.
template <int DK>
__device__ __forceinline__ void apply_history(float4 (&m)[DK / 16], const float* sh, int n, int j, int r) {
  for (int e = 0; e < n; e++) {
    const float* E = sh + e * kEntry<DK>;
    const float4* k4 = reinterpret_cast<const float4*>(E);
    rule_row<DK>(m, k4, k4, r, E[2 * DK], E[2 * DK + 1], E[DK + j], 0.f);
  }
}

// Which kernel takes sequence s this step (both decide alike, from StepIO alone, whatever the other wrote): the lazy
// kernel a single token whose position p has (p + 1) % T != 0; the state kernel every other item (the tokens at
// positions T - 1, 2T - 1, ..., several tokens, none). Between two state writes a sequence takes at most T - 1
// lazy steps, so its history never holds more than T - 1 entries; after a prefill (history empty) the first state
// write may come sooner.
__device__ __forceinline__ bool lazy_item(const GdnArgs& a, const StepIO* io, int s) {
  const int t0 = io->start[s];
  return io->start[s + 1] - t0 == 1 && (io->pos[t0] + 1) % a.lazy != 0;
}

// lz25: every sequence's lazy_item into fl (shared, n_seqs <= kMaxStepTokens), one test per thread, all in flight at
// once; the block synchronized after. The persistent state kernel then skips the lazy kernel's items at the cost of
// a shared-memory read (lz24 tested them one after another, two dependent global loads each, ~15 per CTA at 64
// sequences of the 9B).
__device__ __forceinline__ void mark_lazy(const GdnArgs& a, const StepIO* io, int n_seqs, bool* fl, int tid) {
  for (int s = tid; s < n_seqs; s += blockDim.x) fl[s] = lazy_item(a, io, s);
  __syncthreads();
}

// Dependents (the next kernel of the step) are released at the end, not after pdl_wait: the lazy kernel's grid is
// not persistent (thousands of CTAs at 64 sequences), and a dependent's CTAs made resident early would hold SMs that
// later CTAs need.
// gdn_lazy_kernel: the lazy items (the others return at once): the output from the state and the history, the token
// appended to the history, no state write. It needs only m_0 . r_0 per row, not rule_row's layout, so it reads the
// state coalesced: warp w takes rows 8w .. 8w + 7, lane l float4 l of each (a row per warp instruction: 512
// contiguous bytes at d_k 128), one warp sum per row; lane i < 8 then finishes row 8w + i.
// Compiled for 2 CTAs per SM, so that one CTA's chain overlaps the other's state loads (session 23: 9.05 vs 9.69 ms a
// 9B step at 64 sequences with 1 CTA per SM; that A/B switch, DS_GDN_LAZY_OCC, was removed in session 24).
template <int DK, typename St>
__global__ void __launch_bounds__(DK * 4, 2) gdn_lazy_kernel(const GdnArgs a, const StepIO* __restrict__ io) {
  constexpr int kRows = 8;  // DK rows over the DK * 4 / 32 warps
  __shared__ __align__(16) float sq[DK];
  __shared__ __align__(16) float sk[DK];
  __shared__ __align__(16) float sr[DK];
  __shared__ __align__(16) float sh[(kMaxGdnLazy - 1) * kEntry<DK>];
  __shared__ float sc[kMaxGdnLazy];
  __shared__ float red[32];
  const int h = blockIdx.x, s = blockIdx.y;
  if (!lazy_item(a, io, s)) return;  // uniform over the block
  const int tid = threadIdx.x, w = tid >> 5, l = tid & 31;
  const bool in = l < DK / 4, fin = l < kRows;  // fin: lane l finishes row jl
  const int jl = w * kRows + l;
  const int nv = a.n_v_heads, kh = h % a.n_k_heads;
  const int64_t Kd = (int64_t)a.n_k_heads * DK;
  const float4 z4 = make_float4(0.f, 0.f, 0.f, 0.f);
  const St* M = state_at<St>(io, s, a.state_off) + ((int64_t)h * DK + w * kRows) * DK;
  float* H = hist_at<DK>(io, s, a, h);
  float4 m[kRows];
#pragma unroll
  for (int i = 0; i < kRows; i++) m[i] = in ? ld_chunk(M + i * DK, l) : z4;
  const int n = reinterpret_cast<const int*>(H)[0];
  stage_history<DK>(H, n, sh, tid);
  const float sa = a.ssm_a[h], dtb = a.dt_bias[h], nw = fin ? a.norm_w[jl] : 0.f;
  pdl_wait();  // state, history, weights: written by no kernel of the step before this one
  const int t0 = io->start[s];
  const float* ut = a.u + (int64_t)t0 * a.ldu;
  if (tid < DK) {
    sq[tid] = ut[(int64_t)kh * DK + tid];
    sk[tid] = ut[Kd + (int64_t)kh * DK + tid];
  }
  const float g = sa * softplus_f(a.a[(int64_t)t0 * a.lda + h] + dtb);
  const float beta = sigmoid_f(a.b[(int64_t)t0 * a.ldb + h]);
  const float decay = expf(g);
  const float vj = fin ? ut[2 * Kd + (int64_t)h * DK + jl] : 0.f;
  const float zz = fin ? a.z[(int64_t)t0 * a.ldz + (int64_t)h * DK + jl] : 0.f;
  __syncthreads();  // sq, sk, sh
  if (w == 0) {  // the chain: lane l holds r's elements 4l .. 4l + 3
    float4 rr = in ? reinterpret_cast<const float4*>(sq)[l] : z4;
    auto link = [&](const float4 kk, float d, float b) {
      const float c = b * warp_sum(kk.x * rr.x + kk.y * rr.y + kk.z * rr.z + kk.w * rr.w);
      rr = make_float4(d * (rr.x - c * kk.x), d * (rr.y - c * kk.y), d * (rr.z - c * kk.z), d * (rr.w - c * kk.w));
      return c;
    };
    const float cn = link(in ? reinterpret_cast<const float4*>(sk)[l] : z4, decay, beta);
    if (l == 0) sc[n] = cn;
    for (int e = n - 1; e >= 0; e--) {
      const float* E = sh + e * kEntry<DK>;
      const float c = link(in ? reinterpret_cast<const float4*>(E)[l] : z4, E[2 * DK], E[2 * DK + 1]);
      if (l == 0) sc[e] = c;
    }
    if (in) reinterpret_cast<float4*>(sr)[l] = rr;
  }
  __syncthreads();
  const float4 rl = in ? reinterpret_cast<const float4*>(sr)[l] : z4;
  float o = 0.f;
#pragma unroll
  for (int i = 0; i < kRows; i++) {
    const float d = warp_sum(m[i].x * rl.x + m[i].y * rl.y + m[i].z * rl.z + m[i].w * rl.w);
    if (l == i) o = d;
  }
  if (fin) {
    for (int e = 0; e < n; e++) o += sc[e] * sh[e * kEntry<DK> + DK + jl];
    o += sc[n] * vj;
    o *= a.scale;
  }
  const float ss = block_sum(fin ? o * o : 0.f, red);  // the gated norm (gdn_kernel's formula)
  const float rs = 1.0f / sqrtf(ss / (float)DK + a.eps);
  if (fin) {
    a.out[(int64_t)t0 * a.ldo + (int64_t)h * DK + jl] = o * rs * nw * silu_f(zz);
    if (a.dbg_core) a.dbg_core[((int64_t)t0 * nv + h) * DK + jl] = o;
  }
  if (tid == 0 && a.dbg_g) {
    a.dbg_g[(int64_t)t0 * nv + h] = g;
    a.dbg_beta[(int64_t)t0 * nv + h] = beta;
  }
  float* E = H + 4 + n * kEntry<DK>;  // this token into the history
  if (tid < DK) E[tid] = sk[tid];
  if (fin) E[DK + jl] = vj;
  if (tid == 0) {
    E[2 * DK] = decay;
    E[2 * DK + 1] = beta;
    reinterpret_cast<int*>(H)[0] = n + 1;
  }
  pdl_trigger();
}

// gdn_state_kernel: the other items: the history, then the step's tokens (gdn_kernel<DK, false>'s loop and
// arithmetic), the state written back, the history emptied. Persistent: one CTA per SM loops over the items
// it = blockIdx.x + i * gridDim.x (s = it / nv, h = it % nv), having marked every sequence's kind once (mark_lazy), and
// takes its own only. Why (lz24 / lz25): a grid of one CTA per item (nv x B: 2,048 at the 9B's 64 sequences, one CTA
// per SM fits) ran its empty CTAs wave after wave in a lazy step: 78.5 vs 74.9 us a lazy step on an H100, 68.1 vs
// 64.5 on an H200 (GdnBench, 64 sequences of the 9B, T = 8), a state step ~5% slower; the same bits (GdnLazy, both
// GPUs), and that grid was then removed. lz24 also made the lazy kernel persistent (registers prefetching the next
// item: 87-90 us) and lz25 tried it with bulk copies into a shared-memory ring (78 us on the H200, and its d_k 64
// outputs were not gdn_lazy_kernel's bits); both lost to the per-item grid (branches lz24, lz25tma).
template <int DK, typename St>
__global__ void __launch_bounds__(DK * 4, 1) gdn_state_kernel(const GdnArgs a, const StepIO* __restrict__ io,
                                                              int n_seqs) {
  constexpr int kL = 4, kC = DK / 16;
  __shared__ __align__(16) float sq[DK];
  __shared__ __align__(16) float sk[DK];
  __shared__ __align__(16) float sh[(kMaxGdnLazy - 1) * kEntry<DK>];
  __shared__ float red[32];
  __shared__ bool fl[kMaxStepTokens];
  const int nv = a.n_v_heads, items = nv * n_seqs;
  const int tid = threadIdx.x, j = tid / kL, r = tid % kL;
  const int64_t Kd = (int64_t)a.n_k_heads * DK;
  const float4* q4 = reinterpret_cast<const float4*>(sq);
  const float4* k4 = reinterpret_cast<const float4*>(sk);
  mark_lazy(a, io, n_seqs, fl, tid);
  pdl_wait();
  for (int it = blockIdx.x; it < items; it += gridDim.x) {
    const int s = it / nv, h = it % nv, kh = h % a.n_k_heads;
    if (fl[s]) continue;  // uniform over the block
    St* M = state_at<St>(io, s, a.state_off) + ((int64_t)h * DK + j) * DK;
    float* H = hist_at<DK>(io, s, a, h);
    float4 m[kC];
#pragma unroll
    for (int c = 0; c < kC; c++) m[c] = ld_chunk(M, r + kL * c);
    const int n = reinterpret_cast<const int*>(H)[0];
    __syncthreads();  // the previous item's readers of sh, sq, sk are done
    stage_history<DK>(H, n, sh, tid);
    __syncthreads();
    apply_history<DK>(m, sh, n, j, r);
    const float sa = a.ssm_a[h], dtb = a.dt_bias[h], nw = a.norm_w[j];
    for (int t = io->start[s]; t < io->start[s + 1]; t++) {
      const float* ut = a.u + (int64_t)t * a.ldu;
      __syncthreads();
      if (tid < DK) {
        sq[tid] = ut[(int64_t)kh * DK + tid];
        sk[tid] = ut[Kd + (int64_t)kh * DK + tid];
      }
      __syncthreads();
      const float g = sa * softplus_f(a.a[(int64_t)t * a.lda + h] + dtb);
      const float beta = sigmoid_f(a.b[(int64_t)t * a.ldb + h]);
      const float o = rule_row<DK>(m, k4, q4, r, expf(g), beta, ut[2 * Kd + (int64_t)h * DK + j], a.scale);
      const float ss = block_sum(r == 0 ? o * o : 0.f, red);
      const float rs = 1.0f / sqrtf(ss / (float)DK + a.eps);
      if (r == 0) {
        const float zz = a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j];
        a.out[(int64_t)t * a.ldo + (int64_t)h * DK + j] = o * rs * nw * silu_f(zz);
        if (a.dbg_core) a.dbg_core[((int64_t)t * nv + h) * DK + j] = o;
      }
      if (tid == 0 && a.dbg_g) {
        a.dbg_g[(int64_t)t * nv + h] = g;
        a.dbg_beta[(int64_t)t * nv + h] = beta;
      }
    }
#pragma unroll
    for (int c = 0; c < kC; c++) st_chunk(M, r + kL * c, m[c]);
    if (tid == 0) reinterpret_cast<int*>(H)[0] = 0;
  }
  pdl_trigger();
}

// gdn_flush: one sequence's history applied to its state (one CTA per value head).
template <int DK, typename St>
__global__ void __launch_bounds__(DK * 4) gdn_flush_kernel(const GdnArgs a, uint8_t* base) {
  constexpr int kL = 4, kC = DK / 16;
  __shared__ __align__(16) float sh[(kMaxGdnLazy - 1) * kEntry<DK>];
  const int h = blockIdx.x, tid = threadIdx.x, j = tid / kL, r = tid % kL;
  St* M = reinterpret_cast<St*>(base + a.state_off) + ((int64_t)h * DK + j) * DK;
  float* H = reinterpret_cast<float*>(base + a.hist_off) + (int64_t)h * gdn_hist_floats(DK, a.lazy);
  const int n = reinterpret_cast<const int*>(H)[0];
  if (n == 0) return;  // uniform over the block
  float4 m[kC];
#pragma unroll
  for (int c = 0; c < kC; c++) m[c] = ld_chunk(M, r + kL * c);
  stage_history<DK>(H, n, sh, tid);
  __syncthreads();
  apply_history<DK>(m, sh, n, j, r);
#pragma unroll
  for (int c = 0; c < kC; c++) st_chunk(M, r + kL * c, m[c]);
  __syncthreads();  // every thread has read the count
  if (tid == 0) reinterpret_cast<int*>(H)[0] = 0;
}

// The two kernels of a step; each takes its own items (lazy_item).
template <int DK, typename St>
Status launch_lazy(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  const dim3 grid(a.n_v_heads, n_seqs), block(DK * 4);
  DS_TRY(launch_step(gdn_lazy_kernel<DK, St>, grid, block, 0, stream, "gdn_step (lazy)", a, io));
  const dim3 pg((unsigned)std::min(a.n_v_heads * n_seqs, sm_count()));
  return launch_step(gdn_state_kernel<DK, St>, pg, block, 0, stream, "gdn_step (lazy, state)", a, io, n_seqs);
}

Status check_lazy(const GdnArgs& a, const char* what) {
  if (a.lazy < 2 || a.lazy > kMaxGdnLazy)
    return cu_err("cuda {}: lazy length {} outside [2, {}]", what, a.lazy, kMaxGdnLazy);
  if (a.d_k != 64 && a.d_k != 128) return cu_err("cuda {}: d_k {} (64 or 128)", what, a.d_k);
  if (a.state_off % 16 != 0 || a.hist_off % 16 != 0)
    return cu_err("cuda {}: state offset {} / history offset {} not 16-byte aligned", what, a.state_off, a.hist_off);
  return {};
}

}  // namespace

Status gdn_lazy_step(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  DS_TRY(check_lazy(a, "gdn_step (lazy)"));
  if (n_seqs < 1 || n_seqs > kMaxStepTokens) return cu_err("cuda gdn_step (lazy): {} sequences", n_seqs);
  if (a.d_k == 64)
    return a.state_half ? launch_lazy<64, __half>(a, io, n_seqs, stream) : launch_lazy<64, float>(a, io, n_seqs, stream);
  return a.state_half ? launch_lazy<128, __half>(a, io, n_seqs, stream)
                      : launch_lazy<128, float>(a, io, n_seqs, stream);
}

Status gdn_flush(const GdnArgs& a, uint8_t* base, cudaStream_t stream) {
  DS_TRY(check_lazy(a, "gdn_flush"));
  const dim3 grid(a.n_v_heads), block(a.d_k * 4);
  if (a.d_k == 64) {
    if (a.state_half) gdn_flush_kernel<64, __half><<<grid, block, 0, stream>>>(a, base);
    else gdn_flush_kernel<64, float><<<grid, block, 0, stream>>>(a, base);
  } else {
    if (a.state_half) gdn_flush_kernel<128, __half><<<grid, block, 0, stream>>>(a, base);
    else gdn_flush_kernel<128, float><<<grid, block, 0, stream>>>(a, base);
  }
  CUDA_TRY_LAUNCH("gdn_flush", stream);
  return {};
}

}  // namespace ds::cuda::mk

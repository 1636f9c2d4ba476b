// Gated DeltaNet kernels of the model (qwen35-spec.md §4.2-§4.5).
// conv_silu_l2 (DS_CONV_WARP=0; default since conv14: conv_warp_kernel, see there): one block per (group of dk
//   channels, sequence), one thread per channel; the thread keeps its
//   channel's window in registers over the sequence's tokens; a q or k head is exactly one block, so the L2
//   norm is one block reduction per token. DS_CONV_SEQS=2 / 4 (gdn11): a block takes 2 / 4 sequences.
// gdn_step takes one of two kernels (both call rule_row and reduce the norm in block_sum's order: the same bits,
// tests/cuda_model/cuda_gdn_test.cu):
// gdn_kernel<DK, kPre> (below DS_GDN_TMA_MIN = 16 sequences, so also the step-path prefill of one sequence, and
//   at every batch with DS_GDN_TMA=0): one block per (value head, sequence), 4 lanes per state row j (each lane
//   dk/4 keys as float4 chunks r, r+4, ...); the head's state stays in registers over the sequence's tokens (read
//   once, written once); the gated RMSNorm over the head's dv outputs is one block reduction per token. kPre
//   (default; DS_GDN_PREFETCH=0: off): a token's inputs (q, k, v, a, b, z) are loaded before the block's first
//   barrier, together with the state, instead of after the barriers that need them: one memory round trip per
//   block instead of about four (the same arithmetic: the same bits). H200, 9B shape, one layer: B = 1 6.0 us,
//   B = 16 27.8, B = 64 112.8 (gdn11).
// gdn_tma_out_kernel<DK, kCopy, kSIn> (gdn12; from 16 sequences; DS_GDN_TMA_OUT=2 default, 1 without kSIn):
//   persistent CTAs, one per SM, gdn_kernel's threads and arithmetic on one (value head, sequence) at a time;
//   each head's state comes in by one bulk copy into a ring of load slots and goes back by one bulk store
//   through an out slot (see the kernel). H200, 9B step at B = 64: 8.95-8.98 ms (GDN 1.84 ms of it, 3.55 TB/s).
// gdn_conv_kernel<DK, 4, 1> (cg18; DS_GDN_CONV_FUSE, default 1): conv_silu_l2 + gdn_kernel<DK, true> in one launch
//   where gdn_kernel is taken (batch 1: one kernel fewer per GDN layer; the same bits; see there).
// gdn_conv_kernel<DK, 4, kS> (gs18; DS_GDN_SPLIT_B1=2 / 4, by default 4 where nv = nk, below 16 sequences): each
//   value head's rows over kS CTAs of a cluster, the gated norm's sum through distributed shared memory (the same
//   bits).
// Every conv form computes a channel's token with conv_silu_channel (the same roundings).
// Removed in s30 (same bits, slower; bench/cuda/NOTES.md s30; commits 18146ae, ea21768): gdn_tma_out_kernel without the
//   out slot (kDirect: each thread's state chunks stored from registers; H100 GdnBench B = 64 f16 81.9 vs 65.7 us, f32
//   132.8 vs 98.1) and with two CTAs per SM (kOcc 2, half the slots each, 64-register cap: f16 81.2 vs 65.6 us).
// Removed in cf19 (same bits, slower; bench/cuda/NOTES.md cf19; branch cf19 064937e): gdn_tma_out_kernel with the conv
//   inside (DS_GDN_CONV_FUSE_TMA=1 / 2; CTAs on (key head, sequence) groups of nv / nk items, conv inputs one item
//   ahead by cp.async): 9B step at B = 64 x 512 8.44-8.49 ms vs 8.35-8.36 with conv_warp_kernel + gdn_tma_out_kernel
//   (op by op the fused kernel 85.6-87.5 us per layer vs 78.6 + 8.8: the conv lengthens each CTA's serial item
//   chain, while under PDL the separate conv_warp_kernel mostly hides behind its neighbours).
// Removed in sync13 (same bits, slower; bench/cuda/NOTES.md gdn9, gdn11, gdn12): gdn_split_kernel (a head split
//   over a 4-CTA cluster, DS_GDN_SPLIT / _SPLIT_MIN / _REGCAP / _CS: B = 64 104.4 us per layer) and
//   gdn_tma_kernel (gdn11: load slots refilled only after the bulk store had read them, DS_GDN_TMA_OUT=0: 89.1 us
//   vs 80.6 for gdn_tma_out_kernel, 9.20 vs 8.97 ms per step).

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <cuda_fp16.h>

#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"
#include "cuda/model/gdn_row.cuh"

namespace ds::cuda::mk {
namespace {

// One token of one channel's causal conv + SiLU (spec §4.2): the taps in order, tap 0 on the oldest sample (the CPU
// reference's summation order) over the window win (the W = kernel - 1 previous inputs, oldest first) and x, then the
// window moved past x. Every conv form calls this one function (conv_tokens, conv_warp_kernel, gdn_conv_kernel at
// every kS; W a compile-time constant but in conv_tokens, arrays of N >= W + 1 entries): the same
// roundings everywhere (cf19; it was written out in each of them).
template <int N>
__device__ __forceinline__ float conv_silu_channel(const float (&w)[N], float (&win)[N], int W, float x) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < N; j++) {
    if (j < W) sum += w[j] * win[j];
    else if (j == W) sum += w[j] * x;
  }
#pragma unroll
  for (int j = 0; j < N; j++) {
    if (j + 1 < W) win[j] = win[j + 1];
    else if (j + 1 == W) win[j] = x;
  }
  return silu_f(sum);
}

// The conv channel of part p (0 q, 1 k, 2 v) index i of key head kh / value head h (Kd = nk * DK).
template <int DK>
__device__ __forceinline__ int64_t conv_channel(int p, int i, int kh, int h, int64_t Kd) {
  return p == 0 ? (int64_t)kh * DK + i : p == 1 ? Kd + (int64_t)kh * DK + i : 2 * Kd + (int64_t)h * DK + i;
}

// One sequence's tokens t0 .. t1-1 for channel c (window win: this channel's W = kc - 1 previous inputs, oldest
// first; x_first: token t0's input, already loaded); every thread of the block reaches the same block_sums.
__device__ __forceinline__ void conv_tokens(const ConvArgs& a, int t0, int t1, int64_t c, bool norm,
                                            const float (&w)[kMaxConvKernel], float (&win)[kMaxConvKernel],
                                            float x_first, float* red) {
  const int W = a.kernel - 1;
  const int64_t Cc = a.n_channels;
  for (int t = t0; t < t1; t++) {
    const float xv = t == t0 ? x_first : a.x[(int64_t)t * a.ldx + c];
    float y = conv_silu_channel(w, win, W, xv);
    if (a.dbg_pre) a.dbg_pre[(int64_t)t * Cc + c] = y;
    if (norm) {
      const float ss = block_sum(y * y, red);
      y *= 1.0f / sqrtf(ss + a.eps);
    }
    a.u[(int64_t)t * a.ldu + c] = y;
  }
}

// kSeqs sequences per block (blockIdx.y * kSeqs ...; DS_CONV_SEQS, gdn11): their windows, the channel's taps
// (once) and their first tokens' inputs all loaded before the first use; then the sequences one after another
// with conv_tokens (the same arithmetic for every kSeqs: the same bits).
template <int kSeqs>
__global__ void __launch_bounds__(1024) conv_kernel(const ConvArgs a, const StepIO* __restrict__ io, int n_seqs) {
  __shared__ float red[32];
  const int s0 = blockIdx.y * kSeqs;
  const int64_t c = (int64_t)blockIdx.x * a.head_dim + threadIdx.x;
  const bool norm = (int64_t)blockIdx.x * a.head_dim < a.n_norm_channels;  // uniform over the block
  const int kc = a.kernel, W = kc - 1;
  const int64_t Cc = a.n_channels;
  float w[kMaxConvKernel], win[kSeqs][kMaxConvKernel], x0[kSeqs];
  int t0[kSeqs], t1[kSeqs];
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; j++) w[j] = j < kc ? a.w[c * kc + j] : 0.f;
#pragma unroll
  for (int i = 0; i < kSeqs; i++) {
    const bool on = s0 + i < n_seqs;
    const float* st = on ? state_ptr(io, s0 + i, a.state_off) : nullptr;
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; j++) win[i][j] = on && j < W ? st[j * Cc + c] : 0.f;
    t0[i] = on ? io->start[s0 + i] : 0;
    t1[i] = on ? io->start[s0 + i + 1] : 0;
  }
  pdl_wait();  // weights, this layer's conv states and StepIO above: written by no kernel of the step before this one
  pdl_trigger();
#pragma unroll
  for (int i = 0; i < kSeqs; i++) x0[i] = t0[i] < t1[i] ? a.x[(int64_t)t0[i] * a.ldx + c] : 0.f;
#pragma unroll
  for (int i = 0; i < kSeqs; i++) {
    if (s0 + i >= n_seqs) break;  // uniform over the block
    conv_tokens(a, t0[i], t1[i], c, norm, w, win[i], x0[i], red);
    float* st = state_ptr(io, s0 + i, a.state_off);
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; j++)
      if (j < W) st[j * Cc + c] = win[i][j];
  }
}

// conv_warp_kernel<kNpt, KC, kSeqs> (conv14; DS_CONV_WARP=1 default, 2 / 4 sequences per warp, 0 = conv_kernel
// above; taken for KC = 4 and heads of 64 / 128 channels, conv_kernel otherwise): one warp
// per (head of 32 * kNpt channels, kSeqs sequences), blocks of kConvWarps warps (the same head, consecutive sequence
// groups: the taps come once per SM from L1). Why: conv_kernel is 4,096 blocks of 128 threads at B = 64 with 3
// window loads in flight per thread and two barriers per token for the L2 norm. Lane l holds channels l + 32 i
// (i < kNpt) of its head, i.e. what lane l of conv_kernel's warp i held: the same per-channel arithmetic (taps
// oldest first, the kernel size KC at compile time), and the norm's sum is each i's warp_sum (the same butterfly
// as block_sum's) added in block_sum's warp order from 0.f: the same bits, with no barrier. Each warp loads all its
// windows (kSeqs * kNpt * (KC - 1) floats per lane, 128 contiguous bytes per warp instruction) and taps before the
// PDL wait, and its sequences' first inputs right after it. H200, 9B shape, one layer (ConvStep.Bench): B = 64
// 4.7-5.0 us (3.4-3.6 TB/s) vs conv_kernel 9.3 (2 / 4 per warp: 5.0-5.2); B = 16 / 32 about the same / 4.5 vs 5.5.
// 9B step at B = 64: conv+silu+l2 209-211 us vs 338 (8.43-8.45 ms vs 8.57-8.62); B = 16 167 vs 178 us.
inline constexpr int kConvWarps = 4;

template <int kNpt, int KC, int kSeqs>
__global__ void __launch_bounds__(kConvWarps * 32) conv_warp_kernel(const ConvArgs a, const StepIO* __restrict__ io,
                                                                   int n_seqs) {
  constexpr int W = KC - 1;
  const int lane = threadIdx.x & 31;
  const int n_groups = (n_seqs + kSeqs - 1) / kSeqs;
  const int gw = blockIdx.x * kConvWarps + (threadIdx.x >> 5);
  const int h = gw / n_groups, s0 = (gw - h * n_groups) * kSeqs;
  if ((int64_t)h * a.head_dim >= a.n_channels) return;  // the grid's last block: whole warps only, no barrier
  const int64_t Cc = a.n_channels, cb = (int64_t)h * a.head_dim + lane;
  const bool norm = (int64_t)h * a.head_dim < a.n_norm_channels;  // uniform over the warp
  float w[kNpt][KC], win[kSeqs][kNpt][KC], xv[kSeqs][kNpt];  // win: W used
  int t0[kSeqs], t1[kSeqs];
#pragma unroll
  for (int i = 0; i < kNpt; i++)
#pragma unroll
    for (int j = 0; j < KC; j++) w[i][j] = a.w[(cb + 32 * i) * KC + j];
#pragma unroll
  for (int q = 0; q < kSeqs; q++) {
    const bool on = s0 + q < n_seqs;
    const float* st = on ? state_ptr(io, s0 + q, a.state_off) : nullptr;
#pragma unroll
    for (int j = 0; j < W; j++)
#pragma unroll
      for (int i = 0; i < kNpt; i++) win[q][i][j] = on ? st[j * Cc + cb + 32 * i] : 0.f;
    t0[q] = on ? io->start[s0 + q] : 0;
    t1[q] = on ? io->start[s0 + q + 1] : 0;
  }
  pdl_wait();  // as conv_kernel: only weights, this layer's conv states and StepIO above
  pdl_trigger();
#pragma unroll
  for (int q = 0; q < kSeqs; q++)
#pragma unroll
    for (int i = 0; i < kNpt; i++) xv[q][i] = t0[q] < t1[q] ? a.x[(int64_t)t0[q] * a.ldx + cb + 32 * i] : 0.f;
#pragma unroll
  for (int q = 0; q < kSeqs; q++) {
    if (s0 + q >= n_seqs) break;  // uniform over the warp
    for (int t = t0[q]; t < t1[q]; t++) {
      float y[kNpt];
#pragma unroll
      for (int i = 0; i < kNpt; i++) {
        const float x = t == t0[q] ? xv[q][i] : a.x[(int64_t)t * a.ldx + cb + 32 * i];
        y[i] = conv_silu_channel(w[i], win[q][i], W, x);
        if (a.dbg_pre) a.dbg_pre[(int64_t)t * Cc + cb + 32 * i] = y[i];
      }
      if (norm) {
        float p[kNpt];
#pragma unroll
        for (int i = 0; i < kNpt; i++) p[i] = warp_sum(y[i] * y[i]);
        float ss = 0.f;  // block_sum's r: the warp sums from 0.f in warp order
#pragma unroll
        for (int i = 0; i < kNpt; i++) ss += p[i];
        const float inv = 1.0f / sqrtf(ss + a.eps);
#pragma unroll
        for (int i = 0; i < kNpt; i++) y[i] *= inv;
      }
#pragma unroll
      for (int i = 0; i < kNpt; i++) a.u[(int64_t)t * a.ldu + cb + 32 * i] = y[i];
    }
    float* st = state_ptr(io, s0 + q, a.state_off);
#pragma unroll
    for (int j = 0; j < W; j++)
#pragma unroll
      for (int i = 0; i < kNpt; i++) st[j * Cc + cb + 32 * i] = win[q][i][j];
  }
}

template <int DK, bool kPre, typename St>
__global__ void __launch_bounds__(DK * 4) gdn_kernel(const GdnArgs a, const StepIO* __restrict__ io) {
  constexpr int kL = 4, kC = DK / 16;  // lanes per row, float4 chunks per lane
  __shared__ __align__(16) float sq[DK];
  __shared__ __align__(16) float sk[DK];
  __shared__ float red[32];
  const int h = blockIdx.x, s = blockIdx.y;
  const int tid = threadIdx.x, j = tid / kL, r = tid % kL;
  const int nv = a.n_v_heads, kh = h % a.n_k_heads;  // GGUF tiled V-head order (spec §2.5)
  const int64_t Kd = (int64_t)a.n_k_heads * DK;
  St* M = state_at<St>(io, s, a.state_off) + ((int64_t)h * DK + j) * DK;
  float4 m[kC];
#pragma unroll
  for (int c = 0; c < kC; c++) m[c] = ld_chunk(M, r + kL * c);
  const float sa = a.ssm_a[h], dtb = a.dt_bias[h], nw = a.norm_w[j];
  pdl_wait();  // the state and weights above: written by no kernel of the step before this one
  pdl_trigger();
  const float4* q4 = reinterpret_cast<const float4*>(sq);
  const float4* k4 = reinterpret_cast<const float4*>(sk);

  const int t0 = io->start[s], t1 = io->start[s + 1];
  for (int t = t0; t < t1; t++) {
    const float* ut = a.u + (int64_t)t * a.ldu;
    float qv = 0.f, kv0 = 0.f, av = 0.f, bv = 0.f, vv = 0.f, zv = 0.f;
    if constexpr (kPre) {  // every input of this token in flight at once (with the state, for the first)
      if (tid < DK) {
        qv = ut[(int64_t)kh * DK + tid];
        kv0 = ut[Kd + (int64_t)kh * DK + tid];
      }
      av = a.a[(int64_t)t * a.lda + h];
      bv = a.b[(int64_t)t * a.ldb + h];
      vv = ut[2 * Kd + (int64_t)h * DK + j];
      if (r == 0) zv = a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j];
    }
    __syncthreads();  // the previous token's readers of sq/sk are done
    if (tid < DK) {
      sq[tid] = kPre ? qv : ut[(int64_t)kh * DK + tid];
      sk[tid] = kPre ? kv0 : ut[Kd + (int64_t)kh * DK + tid];
    }
    __syncthreads();
    const float g = sa * softplus_f((kPre ? av : a.a[(int64_t)t * a.lda + h]) + dtb);
    const float beta = sigmoid_f(kPre ? bv : a.b[(int64_t)t * a.ldb + h]);
    const float decay = expf(g);
    const float vj = kPre ? vv : ut[2 * Kd + (int64_t)h * DK + j];
    const float o = rule_row<DK>(m, k4, q4, r, decay, beta, vj, a.scale);
    const float ss = block_sum(r == 0 ? o * o : 0.f, red);
    const float rs = 1.0f / sqrtf(ss / (float)DK + a.eps);
    if (r == 0) {
      const float zz = kPre ? zv : a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j];
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
}

// ---- gdn_conv_kernel<DK, KC, kS> (cg18; DS_GDN_CONV_FUSE=1): conv_silu_l2 + gdn_kernel<DK, true> in one launch ----
// Why: at batch 1 every kernel of the step costs ~4.8 us of latency in the graph (0.8B: ~157 of them), not bandwidth;
// this drops one per GDN layer. Everything the conv gives value head h is local to it: the q / k channels of its k
// head kh = h % nk and its own v channels. kS = 1: one CTA per (value head, sequence), gdn_kernel's DK * 4 threads:
// thread tid < 3 DK also owns one conv channel (q of kh, k of kh, v of h: warp-uniform parts), computes it as
// conv_warp_kernel does (taps oldest first, KC at compile time, SiLU; the q / k norm: each warp's warp_sum added in
// warp order from 0.f, i.e. conv_warp_kernel's p[i] sum), and puts it in shared memory where gdn_kernel reads u;
// the rule, the gated norm (block_sum) and the state are gdn_kernel<DK, true>'s arithmetic: the same bits as the two
// kernels. The windows: v channels are one CTA's own; the q / k channels of kh are read by the nv / nk CTAs of kh
// (blockIdx.x = kh * g + m, h = kh + m * nk, g = nv / nk), so these form one thread-block cluster of g CTAs: each CTA
// arrives at the cluster barrier (release) once it has read its windows, and the CTA with m = 0 (the q / k windows'
// only writer) waits on it (acquire) before writing them at its end: no CTA of kh reads a window that was already
// moved. kS = 1 has no other cluster code (none at all where g = 1) and no distributed shared memory.
// Debug outputs: not written (the forward takes the two kernels when it dumps).
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// kS = 2 / 4 (gs18; DS_GDN_SPLIT_B1): each value head's rows over kS CTAs. Why: at batch 1 the kernel is nv CTAs
// (0.8B 16, 9B 32) of DK * 4 threads on a 132-SM GPU, latency bound; the delta rule is independent per value row j
// of the state (k^T S[:, j], the update, q^T S[:, j]), so kS CTAs can each take DK / kS rows: kS times the SMs on the
// same state. Each CTA recomputes the q / k conv + L2 of kh (2 DK channels, cheap) and its own DK / kS v channels,
// kPer channels per thread (channel i = tid + p * threads: q, k, v slice; each 32-channel q / k group is one warp,
// whose warp_sum goes to rqk in group order: conv_warp_kernel's sum, as at kS = 1). Only the gated RMSNorm's sum of
// squares crosses CTAs: each warp's warp_sum (the same lanes and values as warp sp * kWarps + wi at kS = 1) is stored
// into every head CTA's red[global warp] through distributed shared memory, one cluster barrier, then each CTA adds
// red[0 .. DK / 8) from 0.f (block_sum's order): the same bits as kS = 1. red is double-buffered by token parity: a
// CTA writes buffer b again only after the next token's barrier, which every CTA reaches after reading b. Cluster:
// the g = nv / nk heads of kh, kS CTAs each (blockIdx.x = (kh * g + mi) * kS + sp, cluster rank mi * kS + sp; g * kS
// <= 8). The q / k windows of kh: read by all of them in the prologue, before each CTA's first cluster arrive (which
// also says it runs: CUDA wants every CTA of a cluster started before DSMEM stores into it, so the first token's
// stores wait on that phase), written at the end by rank 0 only, after waiting on it; the v slice's windows: this
// CTA's own. (One template since clean20: it was gdn_conv_split_kernel beside gdn_conv_kernel, the same code at kS = 1
// but for the norm's reduction and the cluster barriers.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void st_cluster_f32(float* p, unsigned rank, float v) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(ra), "f"(v) : "memory");
}
#else
__device__ __forceinline__ void st_cluster_f32(float* p, unsigned, float v) { *p = v; }
#endif

template <int DK, int KC, int kS, typename St>
__global__ void __launch_bounds__(DK * 4 / kS) gdn_conv_kernel(const ConvArgs c, const GdnArgs a,
                                                               const StepIO* __restrict__ io) {
  constexpr int kL = 4, kC = DK / 16, W = KC - 1, kWh = DK / 32;
  constexpr int kT = DK * 4 / kS, kRows = DK / kS, kCh = 2 * DK + kRows, kPer = (kCh + kT - 1) / kT;
  constexpr int kWarps = kT / 32, kAllW = DK * 4 / 32;  // this CTA's warps, a head's (kS = 1)
  __shared__ __align__(16) float sq[DK];
  __shared__ __align__(16) float sk[DK];
  __shared__ float sv[kRows];
  __shared__ float red[kS == 1 ? 1 : 2][kAllW];  // kS = 1: block_sum's
  __shared__ float rqk[2 * kWh];
  const int nk = a.n_k_heads, nv = a.n_v_heads, g = nv / nk;
  const int sp = (int)blockIdx.x % kS, hm = (int)blockIdx.x / kS, kh = hm / g, mi = hm - kh * g, h = kh + mi * nk;
  const int s = blockIdx.y, tid = threadIdx.x, jl = tid / kL, j = sp * kRows + jl, r = tid % kL, lane = tid & 31;
  const int64_t Kd = (int64_t)nk * DK, Cc = c.n_channels;
  float* cst = state_ptr(io, s, c.state_off);
  float w[kPer][KC], win[kPer][KC];  // win: W used
  int64_t chn[kPer];
#pragma unroll
  for (int p = 0; p < kPer; p++) {
    const int i = tid + p * kT;
    const int part = i < DK ? 0 : i < 2 * DK ? 1 : 2;
    chn[p] = conv_channel<DK>(part, i - part * DK + (part == 2 ? sp * kRows : 0), kh, h, Kd);
    if (i < kCh) {
#pragma unroll
      for (int q = 0; q < KC; q++) w[p][q] = c.w[chn[p] * KC + q];
#pragma unroll
      for (int q = 0; q < W; q++) win[p][q] = cst[q * Cc + chn[p]];
    } else if constexpr (kS > 1) {  // no channel (the last pass's tail): computed, never stored
#pragma unroll
      for (int q = 0; q < KC; q++) w[p][q] = 0.f;
#pragma unroll
      for (int q = 0; q < W; q++) win[p][q] = 0.f;
    }  // kS = 1: threads tid >= 3 DK own no channel and skip the conv below
  }
  St* M = state_at<St>(io, s, a.state_off) + ((int64_t)h * DK + j) * DK;
  float4 m[kC];
#pragma unroll
  for (int i = 0; i < kC; i++) m[i] = ld_chunk(M, r + kL * i);
  const float sa = a.ssm_a[h], dtb = a.dt_bias[h], nw = a.norm_w[j];
  if (kS > 1 || g > 1) cluster_arrive();  // its window reads are done and it runs (kS > 1: DSMEM stores wait for it)
  pdl_wait();  // the windows, state and weights above: written by no kernel of the step before this one
  pdl_trigger();
  const float4* q4 = reinterpret_cast<const float4*>(sq);
  const float4* k4 = reinterpret_cast<const float4*>(sk);
  const int t0 = io->start[s], t1 = io->start[s + 1];
  for (int t = t0; t < t1; t++) {
    float x[kPer], y[kPer], zv = 0.f;
#pragma unroll
    for (int p = 0; p < kPer; p++) x[p] = tid + p * kT < kCh ? c.x[(int64_t)t * c.ldx + chn[p]] : 0.f;
    const float av = a.a[(int64_t)t * a.lda + h], bv = a.b[(int64_t)t * a.ldb + h];
    if (r == 0) zv = a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j];
#pragma unroll
    for (int p = 0; p < kPer; p++) {
      const int i = tid + p * kT;
      y[p] = kS > 1 || i < kCh ? conv_silu_channel(w[p], win[p], W, x[p]) : 0.f;
      if (i < 2 * DK) {  // warp-uniform: a 32-channel q / k group
        const float pw = warp_sum(y[p] * y[p]);
        if (lane == 0) rqk[i >> 5] = pw;
      }
    }
    __syncthreads();  // (1) rqk; the previous token's readers of sq / sk / sv passed its norm's barriers
#pragma unroll
    for (int p = 0; p < kPer; p++) {
      const int i = tid + p * kT;
      if (i < 2 * DK) {
        const int part = i / DK;
        float ss = 0.f;
#pragma unroll
        for (int q = 0; q < kWh; q++) ss += rqk[part * kWh + q];
        y[p] *= 1.0f / sqrtf(ss + c.eps);
      }
      if (i < DK) sq[i] = y[p];
      else if (i < 2 * DK) sk[i - DK] = y[p];
      else if (i < kCh) sv[i - 2 * DK] = y[p];
    }
    __syncthreads();  // (2)
    const float gg = sa * softplus_f(av + dtb);
    const float beta = sigmoid_f(bv);
    const float decay = expf(gg);
    const float o = rule_row<DK>(m, k4, q4, r, decay, beta, sv[jl], a.scale);
    float ss = 0.f;
    if constexpr (kS == 1) {
      ss = block_sum(r == 0 ? o * o : 0.f, red[0]);
    } else {
      const float pw = warp_sum(r == 0 ? o * o : 0.f);
      float* rb = red[(t - t0) & 1];
      if (t == t0) cluster_wait();  // the prologue's phase: every CTA of the cluster started, windows read
      if (lane < kS) st_cluster_f32(rb + sp * kWarps + (tid >> 5), (unsigned)(mi * kS + lane), pw);
      cluster_arrive();
      cluster_wait();  // every head CTA's warp sums are in rb
#pragma unroll
      for (int i = 0; i < kAllW; i++) ss += rb[i];
    }
    const float rs = 1.0f / sqrtf(ss / (float)DK + a.eps);
    if (r == 0) a.out[(int64_t)t * a.ldo + (int64_t)h * DK + j] = o * rs * nw * silu_f(zv);
  }
#pragma unroll
  for (int i = 0; i < kC; i++) st_chunk(M, r + kL * i, m[i]);
  if (kS > 1 ? t1 == t0 : g > 1) cluster_wait();  // the prologue's phase (every CTA read the q / k windows), if no
                                                  // token waited on it
#pragma unroll
  for (int p = 0; p < kPer; p++) {
    const int i = tid + p * kT;
    if (i < kCh && (i >= 2 * DK || (mi == 0 && sp == 0))) {
#pragma unroll
      for (int q = 0; q < W; q++) cst[q * Cc + chn[p]] = win[p][q];
    }
  }
}

// ---- The bulk-copy helpers of gdn_tma_out_kernel ----
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DS_GDN_TMA_ARCH 1
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, unsigned parity) {
  const uint32_t ad = smem_addr(b);
  uint32_t ok = 0;
  while (!ok)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(ok)
        : "r"(ad), "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_addr(src)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// All but the newest n bulk stores have finished reading shared memory.
template <int n>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(n) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// This thread's shared-memory writes ordered before the copy engine's later reads.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

// An item's first token's inputs (gdn_kernel<DK, true>'s loads) and its head's constants, loaded one item ahead.
struct ItemIn {
  float q, k, a, b, v, z, sa, dtb;
  int t0, t1;
};

template <int DK>
__device__ __forceinline__ void load_item(const GdnArgs& a, const StepIO* io, int item, ItemIn& in) {
  const int nv = a.n_v_heads, h = item % nv, s = item / nv, tid = threadIdx.x, j = tid / 4;
  const int kh = h % a.n_k_heads;  // GGUF tiled V-head order (spec §2.5)
  const int64_t Kd = (int64_t)a.n_k_heads * DK;
  in.t0 = io->start[s];
  in.t1 = io->start[s + 1];
  in.sa = a.ssm_a[h];
  in.dtb = a.dt_bias[h];
  in.q = in.k = in.a = in.b = in.v = in.z = 0.f;
  if (in.t0 < in.t1) {
    const int t = in.t0;
    const float* ut = a.u + (int64_t)t * a.ldu;
    if (tid < DK) {
      in.q = ut[(int64_t)kh * DK + tid];
      in.k = ut[Kd + (int64_t)kh * DK + tid];
    }
    in.a = a.a[(int64_t)t * a.lda + h];
    in.b = a.b[(int64_t)t * a.ldb + h];
    in.v = ut[2 * Kd + (int64_t)h * DK + j];
    if (tid % 4 == 0) in.z = a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j];
  }
}

int sm_count() {
  static const int v = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 132;
    return std::max(1, n);
  }();
  return v;
}

// ---- gdn_tma_out_kernel (gdn12; DS_GDN_TMA_OUT=2 default, 1): the state through shared memory by bulk copies,
// persistent CTAs ----
// One CTA per SM (DK * 4 threads: gdn_kernel's thread layout and arithmetic) loops over the (value head, sequence)
// items blockIdx.x, + gridDim.x, ...; each item's whole state (DK * DK floats, contiguous) comes in by ONE
// cp.async.bulk into a load slot. Why: the register kernels keep at most ~128 bytes per thread in flight and pay a
// CTA launch, a PDL wait and an input round trip per 16-64 KB of state; here the copy engine keeps kIn items in
// flight per SM while the threads update another, and the next item's inputs are loaded during the current item.
// The state is in registers during the update, so its load slot is not needed after the threads have read it:
// kIn load slots are refilled right after the read (item k + kIn into item k's slot, after the item's first
// barrier), and the update goes back through ONE dedicated out slot by one bulk store. In flight during an item's
// update: the loads of the next kIn items (2 at DK 128: 128 KB per SM, each issued a whole update earlier than in
// gdn11's gdn_tma_kernel, removed in sync13, where a stage was refilled only after its bulk store had read it, so one
// load was in flight) and the previous item's store. Shared memory: (kIn + 1) slots (192 KB at DK 128).
// Shared memory reads / writes of the state: rows are 4 * DK bytes apart (a multiple of 128), so the two rows of a
// quarter warp would hit the same banks; odd rows take the chunk pairs in swapped order.
// The out slot is free again once the previous item's store has read it: thread 0 (which issues every store)
// waits for that (bulk wait_group.read 0) before the item's last barrier, a whole update after the store began.
// Token loop: 2 barriers per token instead of 4: (1) q / k in shared memory, (2) the warp sums of o^2 in red;
// single buffers suffice, as every reader of sq / sk passes (2) before any thread writes them again, and every
// reader of red passes the next token's (1) (or the item's out-slot barrier) before red is written again. The
// norm adds the same warp sums in the same order as block_sum, rule_row does the same arithmetic: the same bits.
// kSIn (DS_GDN_TMA_OUT=2): the next item's first-token inputs and head constants go to shared memory by cp.async
// (issued at the start of the item before, waited for at the item's first barrier) instead of registers (the
// 40 B of spills at the 128-register cap); the first token reads q and k from there (no copy into sq / sk); the
// items' token ranges come from StepIO's start[] copied to shared memory once.
template <int DK, typename St>
struct TmaOutCfg {
  static constexpr int kThreads = DK * 4;
  static constexpr unsigned kBytes = DK * DK * sizeof(St);  // one value head's state
  // load slots; + 1 out slot (DK 128: 3 x 64 KB = 192 KB as float, 6 x 32 KB as f16)
  static constexpr int kIn = DK == 128 ? (sizeof(St) == 2 ? 5 : 2) : 12;
  static constexpr size_t kSmem = (size_t)(kIn + 1) * kBytes;
};

// An item's first-token inputs and head constants in shared memory (kSIn).
template <int DK>
struct TmoIn {
  float q[DK], k[DK], v[DK], z[DK];  // v, z: of rows j = 0 .. DK-1
  float a, b, sa, dtb;
};

#ifdef DS_GDN_TMA_ARCH
__device__ __forceinline__ void cp_async4(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Item `item`'s inputs into `in` by cp.async (one group per thread, committed also when empty); t0 / t1: its
// token range. The same elements gdn_kernel<DK, true> loads for the first token.
template <int DK>
__device__ __forceinline__ void issue_item_in(const GdnArgs& a, int item, int t0, int t1, TmoIn<DK>& in) {
  const int nv = a.n_v_heads, h = item % nv, tid = threadIdx.x;
  if (t0 < t1) {
    const int kh = h % a.n_k_heads;  // GGUF tiled V-head order (spec §2.5)
    const int64_t Kd = (int64_t)a.n_k_heads * DK;
    const float* ut = a.u + (int64_t)t0 * a.ldu;
    if (tid < DK) {
      cp_async4(&in.q[tid], ut + (int64_t)kh * DK + tid);
      cp_async4(&in.k[tid], ut + Kd + (int64_t)kh * DK + tid);
      cp_async4(&in.v[tid], ut + 2 * Kd + (int64_t)h * DK + tid);
      cp_async4(&in.z[tid], a.z + (int64_t)t0 * a.ldz + (int64_t)h * DK + tid);
    } else if (tid == DK) {
      cp_async4(&in.a, a.a + (int64_t)t0 * a.lda + h);
    } else if (tid == DK + 1) {
      cp_async4(&in.b, a.b + (int64_t)t0 * a.ldb + h);
    }
  }
  if (tid == DK + 2) cp_async4(&in.sa, a.ssm_a + h);
  if (tid == DK + 3) cp_async4(&in.dtb, a.dt_bias + h);
  cp_async_commit();
}
#endif

// kCopy: the data path alone (the state read into registers and written back unchanged): its roofline; with
// copy_shift > 0 (gdn18) item i's state is stored over item (i + copy_shift) % n_items's (out of place; bench only).
template <int DK, bool kCopy, bool kSIn, typename St>
__global__ void __launch_bounds__(DK * 4, 1)
    gdn_tma_out_kernel(const GdnArgs a, const StepIO* __restrict__ io, int n_items, int copy_shift) {
#ifdef DS_GDN_TMA_ARCH
  using C = TmaOutCfg<DK, St>;
  constexpr int kL = 4, kC = DK / 16, kIn = C::kIn, kW = DK * 4 / 32;
  static_assert(kC % 2 == 0, "chunk pairs");
  static_assert(DK * 4 >= DK + 4, "threads for the scalar inputs");
  extern __shared__ __align__(128) unsigned char gdn_tmo_smem[];
  __shared__ __align__(16) float sq[DK];
  __shared__ __align__(16) float sk[DK];
  __shared__ float red[kW];
  __shared__ __align__(8) uint64_t full[kIn];
  __shared__ __align__(16) TmoIn<DK> ins[kSIn ? 2 : 1];  // kSIn: item k's inputs in ins[k & 1]
  __shared__ int sstart[kSIn ? kMaxStepTokens + 1 : 1];
  const int tid = threadIdx.x, j = tid / kL, r = tid % kL, odd = j & 1;
  const int nv = a.n_v_heads, G = (int)gridDim.x;
  const int n_my = (n_items - (int)blockIdx.x + G - 1) / G;  // >= 1: the grid has at most n_items CTAs
  if constexpr (kSIn) {  // StepIO: uploaded before the step
    for (int i = tid; i <= n_items / nv; i += DK * 4) sstart[i] = io->start[i];
  }
  auto slot = [&](int k) { return gdn_tmo_smem + (size_t)(k % kIn) * C::kBytes; };
  unsigned char* const out = gdn_tmo_smem + (size_t)kIn * C::kBytes;
  auto gstate = [&](int k) {
    const int item = (int)blockIdx.x + k * G;
    return state_at<St>(io, item / nv, a.state_off) + (int64_t)(item % nv) * DK * DK;
  };
  if (tid == 0) {
    for (int i = 0; i < kIn; i++) mbar_init(&full[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (tid == 0)  // the states: written by no kernel of the step before this one (StepIO: uploaded before it)
    for (int k = 0; k < kIn && k < n_my; k++) {
      mbar_expect(&full[k], C::kBytes);
      bulk_load(slot(k), gstate(k), C::kBytes, &full[k]);
    }
  const float nw = a.norm_w[j];
  pdl_wait();
  pdl_trigger();
  ItemIn nxt{}, cur{};
  if constexpr (!kCopy && !kSIn) load_item<DK>(a, io, (int)blockIdx.x, nxt);
  if constexpr (!kCopy && kSIn) {  // sstart: written before the barrier after the mbarrier init
    const int s0 = (int)blockIdx.x / nv;
    issue_item_in<DK>(a, (int)blockIdx.x, sstart[s0], sstart[s0 + 1], ins[0]);
  }
  St* const Orow = reinterpret_cast<St*>(out) + j * DK;
  for (int k = 0; k < n_my; k++) {
    const int item = (int)blockIdx.x + k * G, h = item % nv;
    const St* const Lrow = reinterpret_cast<const St*>(slot(k)) + j * DK;
    // Item k's slot, once every thread has read it (called after a barrier that follows the reads), refilled
    // with item k + kIn; every thread has passed its wait on this slot's current phase (before the reads).
    auto refill = [&] {
      if (tid == 0 && k + kIn < n_my) {
        mbar_expect(&full[k % kIn], C::kBytes);
        bulk_load(slot(k), gstate(k + kIn), C::kBytes, &full[k % kIn]);
      }
    };
    if constexpr (!kCopy && !kSIn) {  // the next item's inputs in flight during this one
      cur = nxt;
      if (k + 1 < n_my) load_item<DK>(a, io, item + G, nxt);
    }
    const TmoIn<DK>& in = ins[kSIn ? k & 1 : 0];
    if constexpr (!kCopy && kSIn) {
      const int s = item / nv;
      cur.t0 = sstart[s];
      cur.t1 = sstart[s + 1];
      // The next item's inputs in flight during this one: into ins[(k + 1) & 1], whose last readers (item
      // k - 1) have passed that item's out-slot barrier.
      if (k + 1 < n_my) {
        const int s1 = (item + G) / nv;
        issue_item_in<DK>(a, item + G, sstart[s1], sstart[s1 + 1], ins[(k + 1) & 1]);
      } else {
        cp_async_commit();  // an empty group: "all but the newest" stays item k's
      }
      cp_async_wait1();  // this thread's copies of item k's inputs (issued an item ago) have landed
    }
    mbar_wait(&full[k % kIn], (unsigned)(k / kIn) & 1u);
    float4 m[kC];
#pragma unroll
    for (int p = 0; p < kC; p += 2) {  // chunk c = p ^ odd, then p + 1 ^ odd (the bank note above)
      const float4 x0 = ld_chunk(Lrow, r + kL * (p + odd)), x1 = ld_chunk(Lrow, r + kL * (p + 1 - odd));
      m[p] = odd ? x1 : x0;
      m[p + 1] = odd ? x0 : x1;
    }
    bool refilled = false;
    if constexpr (!kCopy) {
      for (int t = cur.t0; t < cur.t1; t++) {  // gdn_kernel<DK, true>'s token loop, 2 barriers per token
        const bool first = t == cur.t0;
        float qv = cur.q, kv0 = cur.k, av = cur.a, bv = cur.b, vj = cur.v, zv = cur.z;
        if (!first) {
          const float* ut = a.u + (int64_t)t * a.ldu;
          const int kh = h % a.n_k_heads;
          const int64_t Kd = (int64_t)a.n_k_heads * DK;
          if (tid < DK) {
            qv = ut[(int64_t)kh * DK + tid];
            kv0 = ut[Kd + (int64_t)kh * DK + tid];
          }
          av = a.a[(int64_t)t * a.lda + h];
          bv = a.b[(int64_t)t * a.ldb + h];
          vj = ut[2 * Kd + (int64_t)h * DK + j];
          zv = r == 0 ? a.z[(int64_t)t * a.ldz + (int64_t)h * DK + j] : 0.f;
        }
        // every reader of the previous token's sq / sk has passed its barrier (2); kSIn: the first token's
        // q and k are read from `in`
        if (tid < DK && !(kSIn && first)) {
          sq[tid] = qv;
          sk[tid] = kv0;
        }
        __syncthreads();  // (1) sq / sk written; on the first token also: the slot read by every thread (and,
                          // kSIn, every thread's copies of `in` landed)
        if (!refilled) {
          refill();
          refilled = true;
        }
        if (kSIn && first) {
          av = in.a, bv = in.b, vj = in.v[j], zv = in.z[j];
        }
        const float sa = kSIn ? in.sa : cur.sa, dtb = kSIn ? in.dtb : cur.dtb;
        const float4* q4 = reinterpret_cast<const float4*>(kSIn && first ? in.q : sq);
        const float4* k4 = reinterpret_cast<const float4*>(kSIn && first ? in.k : sk);
        const float g = sa * softplus_f(av + dtb);
        const float beta = sigmoid_f(bv);
        const float decay = expf(g);
        const float o = rule_row<DK>(m, k4, q4, r, decay, beta, vj, a.scale);
        // block_sum's arithmetic: warp sums, then every thread adds them in warp order from 0.f
        const float wv = warp_sum(r == 0 ? o * o : 0.f);
        if ((tid & 31) == 0) red[tid >> 5] = wv;  // every reader of red has passed this token's barrier (1)
        if (tid == 0 && t + 1 == cur.t1) bulk_wait_read<0>();  // the out slot: read by item k - 1's store
        __syncthreads();  // (2)
        float ss = 0.f;
#pragma unroll
        for (int w = 0; w < kW; w++) ss += red[w];
        const float rs = 1.0f / sqrtf(ss / (float)DK + a.eps);
        if (r == 0) {
          a.out[(int64_t)t * a.ldo + (int64_t)h * DK + j] = o * rs * nw * silu_f(zv);
          if (a.dbg_core) a.dbg_core[((int64_t)t * nv + h) * DK + j] = o;
        }
        if (tid == 0 && a.dbg_g) {
          a.dbg_g[(int64_t)t * nv + h] = g;
          a.dbg_beta[(int64_t)t * nv + h] = beta;
        }
      }
    }
    if (!refilled) {  // no tokens (or kCopy): uniform over the block
      if (tid == 0) bulk_wait_read<0>();
      __syncthreads();  // the slot read by every thread; the out slot free
      refill();
    }
    // The out slot: free (thread 0 waited for the previous store's read before the last barrier above).
#pragma unroll
    for (int p = 0; p < kC; p += 2) {
      st_chunk(Orow, r + kL * (p + odd), odd ? m[p + 1] : m[p]);
      st_chunk(Orow, r + kL * (p + 1 - odd), odd ? m[p] : m[p + 1]);
    }
    fence_async_smem();
    __syncthreads();  // the out slot complete; also: every reader of red / sq / sk of the last token is done
    if (tid == 0) {
      if constexpr (kCopy) {
        const int to = ((int)blockIdx.x + k * G + copy_shift) % n_items;
        bulk_store(state_at<St>(io, to / nv, a.state_off) + (int64_t)(to % nv) * DK * DK, out, C::kBytes);
      } else {
        bulk_store(gstate(k), out, C::kBytes);
      }
    }
  }
  if (tid == 0) bulk_wait_all();  // shared memory stays until the stores have read it
#endif
}

template <int DK, bool kCopy, bool kSIn, typename St>
cudaError_t launch_tma_out(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream, int copy_shift = 0) {
  using C = TmaOutCfg<DK, St>;
  auto* k = gdn_tma_out_kernel<DK, kCopy, kSIn, St>;
  static const cudaError_t attr = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int n_items = a.n_v_heads * n_seqs;
  return launch_pdl(k, dim3((unsigned)std::min(n_items, sm_count())), dim3(C::kThreads), C::kSmem, stream, step_pdl(),
                    a, io, n_items, copy_shift);
}

// ---- Rooflines of the state's access pattern (bench only, gdn_state_copy) ----
// Every (value head, sequence) state read and written back times `one` (1.0f at run time) by CTAs of
// DK * 4 / kSplit threads (DK / kSplit rows of a head each), 8 float4 per thread: kCoal false: gdn_kernel's
// pattern (lane r of row j: chunks r + 4c, a warp instruction = 64 bytes of 8 rows), true: each warp instruction
// 512 contiguous bytes. shift > 0 (gdn18): written over sequence (s + shift) % S's state instead (out of place;
// the grid reads that sequence half a launch earlier or later; the states end up permuted copies of each other).
template <int DK, int kSplit, bool kCoal>
__global__ void __launch_bounds__(DK * 4 / kSplit, 1024 / (DK * 4 / kSplit))
    copy_rows_kernel(const GdnArgs a, const StepIO* __restrict__ io, float one, int shift) {
  constexpr int kL = 4, kC = DK / 16, kRows = DK / kSplit, kThreads = kRows * kL;
  const int rank = blockIdx.x % kSplit, h = blockIdx.x / kSplit, s = blockIdx.y, tid = threadIdx.x;
  const int64_t off = ((int64_t)h * DK + rank * kRows) * DK;
  const float4* M = reinterpret_cast<const float4*>(state_ptr(io, s, a.state_off) + off);
  float4* Mo = reinterpret_cast<float4*>(state_ptr(io, (s + shift) % (int)gridDim.y, a.state_off) + off);
  float4 m[kC];
#pragma unroll
  for (int c = 0; c < kC; c++) m[c] = M[kCoal ? tid + kThreads * c : (tid / kL) * (DK / 4) + tid % kL + kL * c];
#pragma unroll
  for (int c = 0; c < kC; c++) {
    m[c].x *= one; m[c].y *= one; m[c].z *= one; m[c].w *= one;
  }
#pragma unroll
  for (int c = 0; c < kC; c++) Mo[kCoal ? tid + kThreads * c : (tid / kL) * (DK / 4) + tid % kL + kL * c] = m[c];
}

// gdn18: every state read and written (times `one`) by a grid-stride copy at full occupancy (256 threads, 8 CTAs per
// SM; each thread's kU float4 loads in flight, then its stores, at a stride of the whole grid), in place (shift 0)
// or out of place as copy_rows_kernel's shift. H200 (gdn18): the same kernel 6.6% (9B, B = 64) to 9% (27B) faster
// out of place than in place.
template <int kU>
__global__ void __launch_bounds__(256) copy_dense_kernel(const StepIO* __restrict__ io, int S, int shift,
                                                         int64_t state_off, int per_seq4, float one) {
  const int total4 = per_seq4 * S;
  const int T = (int)(gridDim.x * blockDim.x);
  for (int i0 = (int)(blockIdx.x * blockDim.x + threadIdx.x); i0 < total4; i0 += kU * T) {
    float4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; u++) {
      const int i = i0 + u * T;
      if (i < total4)
        v[u] = reinterpret_cast<const float4*>(state_ptr(io, i / per_seq4, state_off))[i % per_seq4];
    }
#pragma unroll
    for (int u = 0; u < kU; u++) {
      const int i = i0 + u * T;
      if (i < total4) {
        v[u].x *= one; v[u].y *= one; v[u].z *= one; v[u].w *= one;
        reinterpret_cast<float4*>(state_ptr(io, (i / per_seq4 + shift) % S, state_off))[i % per_seq4] = v[u];
      }
    }
  }
}

bool gdn_prefetch() {
  static const bool v = [] {
    const char* e = std::getenv("DS_GDN_PREFETCH");
    return !(e && e[0] == '0');
  }();
  return v;
}

// DS_GDN_TMA: 1 (default) = gdn_tma_out_kernel from DS_GDN_TMA_MIN sequences (default 16), 0 = gdn_kernel at every
// batch. H200, one layer of the 9B (gdn11, with the bulk-copy path's predecessor gdn_tma_kernel): gdn_kernel 6.0 us
// vs 7.1 at B = 1 (hence the threshold), 27.8 vs 23.1 at B = 16; session 10: B = 8 6.628 vs 6.636 ms per step with
// DS_GDN_TMA_MIN=8 (no gain below 16).
bool gdn_tma() {
  static const bool v = [] {
    const char* e = std::getenv("DS_GDN_TMA");
    return !(e && e[0] == '0');
  }();
  return v;
}
int gdn_tma_min() {
  static const int v = [] {
    const char* e = std::getenv("DS_GDN_TMA_MIN");
    return e ? std::max(1, std::atoi(e)) : 16;
  }();
  return v;
}

// DS_GDN_TMA_OUT: 2 (default) = gdn_tma_out_kernel with the next item's inputs in shared memory (kSIn), 1 = without
// (registers). The same bits. H200, session 10 (9B, cuda-bench --batch B --tg 32 --reps 2 --select 0): B = 64
// 8.948 / 8.981 ms with 2, 9.025 / 9.039 with 1 (and 9.189 / 9.205 with gdn_tma_kernel, removed in sync13; the
// value 0 that selected it now means 2); GdnBench B = 64 80.6 / 84.0 us.
int gdn_tma_out() {
  static const int v = [] {
    const char* e = std::getenv("DS_GDN_TMA_OUT");
    return e && e[0] == '1' ? 1 : 2;
  }();
  return v;
}

std::atomic<int> g_force{-1};  // gdn_force_kernel

// DS_GDN_CONV_FUSE: 1 (default) = gdn_conv_step's one kernel where it applies, 0 the two; gdn_force_conv_fuse
// overrides it. H200 (cg18 call 1, 1 / 0 interleaved): tg128 0.8B 1340.3 / 1326.0 vs 1319.7 / 1321.5 tok/s, 9B
// 431.9 / 431.0 vs 429.4 / 428.9; 0.8B cuda-bench step 0.740 vs 0.748 ms (157 -> 139 ops; op by op the fused
// kernel 8.8 us vs 7.8 + 5.6 for gdn_kernel + conv: under PDL the conv mostly hid behind gdn_kernel's prologue).
std::atomic<int> g_conv_fuse_force{-1};
bool conv_fuse_env() {
  static const bool v = [] {
    const char* e = std::getenv("DS_GDN_CONV_FUSE");
    return !(e && e[0] == '0');
  }();
  return v;
}

// DS_GDN_SPLIT_B1: 0 = gdn_conv_kernel<DK, 4, 1>, 2 / 4 = kS 2 / 4: each value head over 2 / 4 CTAs (below 16
// sequences, where the cluster g * kS <= 8); unset (the default): 4 where g = nv / nk is 1, else 0. gdn_force_split_b1
// overrides it. The same bits. H200 (session 15, binaries of gs18 f9f926b, tg128, interleaved 0 / 2 / 4 twice): 0.8B
// (g 1) 1331.7 / 1317.8 vs 1360.0 / 1346.7 (2) vs 1359.3 / 1360.6 (4), graph step 0.744 -> 0.728 ms with 4; 9B (g 2)
// 431.5 / 431.3 vs 430.8 / 429.8 (2) vs 430.5 / 431.2 (4): no gain where g > 1 (27B, g 3, not measured).
std::atomic<int> g_split_force{-1};
int split_b1_env() {  // -1: by g
  static const int v = [] {
    const char* e = std::getenv("DS_GDN_SPLIT_B1");
    if (!e || !*e) return -1;
    const int n = std::atoi(e);
    return n == 2 || n == 4 ? n : 0;
  }();
  return v;
}

template <int DK, typename St>
Status launch_gdn(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  const int force = g_force.load(std::memory_order_relaxed);
  if (force >= 1 || (force < 0 && gdn_tma() && n_seqs >= gdn_tma_min())) {
    const bool s_in = force >= 1 ? force == 2 : gdn_tma_out() == 2;
    const cudaError_t e = s_in ? launch_tma_out<DK, false, true, St>(a, io, n_seqs, stream)
                               : launch_tma_out<DK, false, false, St>(a, io, n_seqs, stream);
    if (e != cudaSuccess) return cu_err("cuda gdn_step (tma): launch: {}", cudaGetErrorString(e));
    const cudaError_t st = launch_status(stream);
    if (st != cudaSuccess) return cu_err("cuda gdn_step (tma): after launch: {}", cudaGetErrorString(st));
    return {};
  }
  const dim3 grid(a.n_v_heads, n_seqs), block(DK * 4);
  if (gdn_prefetch()) return launch_step(gdn_kernel<DK, true, St>, grid, block, 0, stream, "gdn_step", a, io);
  return launch_step(gdn_kernel<DK, false, St>, grid, block, 0, stream, "gdn_step", a, io);
}

// DS_CONV_SEQS: sequences per conv_kernel block (1 default, 2, 4); conv_force_seqs overrides it (tests).
int conv_seqs() {
  static const int v = [] {
    const char* e = std::getenv("DS_CONV_SEQS");
    const int n = e ? std::atoi(e) : 1;
    return n == 2 || n == 4 ? n : 1;
  }();
  return v;
}
std::atomic<int> g_conv_force{0};

// DS_CONV_WARP: sequences per warp of conv_warp_kernel (1 default, 2, 4; 0: conv_kernel with DS_CONV_SEQS);
// conv_force_warp overrides it.
int conv_warp() {
  static const int v = [] {
    const char* e = std::getenv("DS_CONV_WARP");
    const int n = e ? std::atoi(e) : 1;
    return n == 0 || n == 2 || n == 4 ? n : 1;
  }();
  return v;
}
std::atomic<int> g_conv_warp_force{-1};

template <int kNpt, int kSeqs>
Status launch_conv_warp(const ConvArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  const int64_t warps = a.n_channels / a.head_dim * ((n_seqs + kSeqs - 1) / kSeqs);
  const dim3 grid((unsigned)((warps + kConvWarps - 1) / kConvWarps)), block(kConvWarps * 32);
  return launch_step(conv_warp_kernel<kNpt, 4, kSeqs>, grid, block, 0, stream, "conv_silu_l2 (warp)", a, io, n_seqs);
}

template <int kNpt>
Status launch_conv_warp(int k, const ConvArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  if (k == 4) return launch_conv_warp<kNpt, 4>(a, io, n_seqs, stream);
  if (k == 2) return launch_conv_warp<kNpt, 2>(a, io, n_seqs, stream);
  return launch_conv_warp<kNpt, 1>(a, io, n_seqs, stream);
}

// gdn_conv_step's kernel for kS = ks (1, 2, 4).
template <int DK, typename St>
auto conv_kernel_for(int ks) {
  return ks == 4   ? gdn_conv_kernel<DK, 4, 4, St>
         : ks == 2 ? gdn_conv_kernel<DK, 4, 2, St>
                   : gdn_conv_kernel<DK, 4, 1, St>;
}

}  // namespace

void conv_force_seqs(int k) { g_conv_force.store(k == 1 || k == 2 || k == 4 ? k : 0); }
void conv_force_warp(int k) { g_conv_warp_force.store(k == 0 || k == 1 || k == 2 || k == 4 ? k : -1); }

Status conv_silu_l2(const ConvArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  if (a.head_dim < 32 || a.head_dim > 1024 || a.head_dim % 32 != 0 || a.n_channels % a.head_dim != 0 ||
      a.n_norm_channels % a.head_dim != 0)
    return cu_err("cuda conv_silu_l2: head dim {} (channels {}, normalized {}) must be a multiple of 32 <= 1024 "
                  "dividing both", a.head_dim, a.n_channels, a.n_norm_channels);
  if (a.kernel < 1 || a.kernel > kMaxConvKernel)
    return cu_err("cuda conv_silu_l2: conv kernel {} outside [1, {}]", a.kernel, kMaxConvKernel);
  if (n_seqs < 1 || n_seqs > kMaxStepTokens) return cu_err("cuda conv_silu_l2: {} sequences", n_seqs);
  // conv_force_seqs alone (GdnBench's conv lines) means conv_kernel, whatever DS_CONV_WARP says.
  const int f = g_conv_force.load(std::memory_order_relaxed), fw = g_conv_warp_force.load(std::memory_order_relaxed);
  const int kw = fw >= 0 ? fw : f > 0 ? 0 : conv_warp();
  if (kw > 0 && a.kernel == 4) {  // the kernel size at compile time (Qwen3.5: 4); others: conv_kernel
    if (a.head_dim == 128) return launch_conv_warp<4>(kw, a, io, n_seqs, stream);
    if (a.head_dim == 64) return launch_conv_warp<2>(kw, a, io, n_seqs, stream);
  }
  const int k = f > 0 ? f : conv_seqs();
  const dim3 block(a.head_dim);
  const unsigned gx = (unsigned)(a.n_channels / a.head_dim), gy = (unsigned)((n_seqs + k - 1) / k);
  if (k == 4) return launch_step(conv_kernel<4>, dim3(gx, gy), block, 0, stream, "conv_silu_l2", a, io, n_seqs);
  if (k == 2) return launch_step(conv_kernel<2>, dim3(gx, gy), block, 0, stream, "conv_silu_l2", a, io, n_seqs);
  return launch_step(conv_kernel<1>, dim3(gx, gy), block, 0, stream, "conv_silu_l2", a, io, n_seqs);
}

bool gdn_supports(int d_k) { return d_k == 64 || d_k == 128; }

void gdn_force_kernel(int k) { g_force.store(k >= 0 && k <= 2 ? k : -1); }

// Modes 0 / 1 / 2 as model_kernels.cuh says; gdn18: 3 / 4 / 5 = 0 / 1 / 2 out of place (each sequence's states over
// those of sequence s + S / 2; S >= 2), 6 / 7 copy_dense_kernel in place with 4 / 8 float4 per thread, 8 the former
// out of place. The out-of-place modes leave the states permuted copies of each other.
template <int DK>
cudaError_t state_copy(int mode, const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t s) {
  const unsigned nv = (unsigned)a.n_v_heads, S = (unsigned)n_seqs;
  const bool oop = mode == 3 || mode == 4 || mode == 5 || mode == 8;
  if (oop && S < 2) return cudaErrorInvalidValue;
  const int sh = oop ? (int)S / 2 : 0, per_seq4 = (int)(nv * DK * DK / 4);
  switch (mode) {
    case 0:
    case 3: copy_rows_kernel<DK, 1, false><<<dim3(nv, S), DK * 4, 0, s>>>(a, io, 1.0f, sh); break;
    case 1:
    case 4: copy_rows_kernel<DK, 4, true><<<dim3(nv * 4, S), DK, 0, s>>>(a, io, 1.0f, sh); break;
    case 2:
    case 5: return launch_tma_out<DK, true, false, float>(a, io, n_seqs, s, sh * (int)nv);
    case 6:
    case 8: copy_dense_kernel<4><<<sm_count() * 8, 256, 0, s>>>(io, (int)S, sh, a.state_off, per_seq4, 1.0f); break;
    case 7: copy_dense_kernel<8><<<sm_count() * 8, 256, 0, s>>>(io, (int)S, 0, a.state_off, per_seq4, 1.0f); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

Status gdn_state_copy(int mode, const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  if (n_seqs < 1 || n_seqs > kMaxStepTokens) return cu_err("cuda gdn_state_copy: {} sequences", n_seqs);
  if (a.state_half) return cu_err("cuda gdn_state_copy: the copy rooflines take float states (state_half is set)");
  const cudaError_t e = a.d_k == 64    ? state_copy<64>(mode, a, io, n_seqs, stream)
                        : a.d_k == 128 ? state_copy<128>(mode, a, io, n_seqs, stream)
                                       : cudaErrorInvalidValue;
  if (e != cudaSuccess) return cu_err("cuda gdn_state_copy mode {} (d_k {}): {}", mode, a.d_k, cudaGetErrorString(e));
  return {};
}

Status gdn_step(const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  if (a.lazy) return gdn_lazy_step(a, io, n_seqs, stream);
  if (n_seqs < 1 || n_seqs > kMaxStepTokens) return cu_err("cuda gdn_step: {} sequences", n_seqs);
  if (a.state_off % 16 != 0) return cu_err("cuda gdn_step: state offset {} is not 16-byte aligned", a.state_off);
  switch (a.d_k) {
    case 64:
      return a.state_half ? launch_gdn<64, __half>(a, io, n_seqs, stream) : launch_gdn<64, float>(a, io, n_seqs, stream);
    case 128:
      return a.state_half ? launch_gdn<128, __half>(a, io, n_seqs, stream)
                          : launch_gdn<128, float>(a, io, n_seqs, stream);
    default: return cu_err("cuda gdn_step: head dim {} (supported: 64, 128)", a.d_k);
  }
}


void gdn_force_conv_fuse(int on) { g_conv_fuse_force.store(on == 0 || on == 1 ? on : -1); }

bool gdn_conv_fused(const ConvArgs& c, const GdnArgs& a, int n_seqs) {
  const int f = g_conv_fuse_force.load(std::memory_order_relaxed);
  if (!(f < 0 ? conv_fuse_env() : f == 1) || a.lazy) return false;
  const int kf = g_force.load(std::memory_order_relaxed);
  const bool tma = kf >= 1 || (kf < 0 && gdn_tma() && n_seqs >= gdn_tma_min());
  const int64_t Kd = (int64_t)a.n_k_heads * a.d_k;
  return !tma && c.kernel == 4 && (a.d_k == 64 || a.d_k == 128) && c.head_dim == a.d_k && a.n_k_heads > 0 &&
         a.n_v_heads % a.n_k_heads == 0 && a.n_v_heads / a.n_k_heads <= 8 && c.n_norm_channels == 2 * Kd &&
         c.n_channels == 2 * Kd + (int64_t)a.n_v_heads * a.d_k && !c.dbg_pre && !a.dbg_core && !a.dbg_g &&
         !a.dbg_beta && a.state_off % 16 == 0 && n_seqs >= 1 && n_seqs <= kMaxStepTokens;
}

void gdn_force_split_b1(int k) { g_split_force.store(k == 0 || k == 2 || k == 4 ? k : -1); }

int gdn_conv_split(const ConvArgs& c, const GdnArgs& a, int n_seqs) {
  const int f = g_split_force.load(std::memory_order_relaxed), e = f >= 0 ? f : split_b1_env();
  const int k = e >= 0 ? e : (a.n_k_heads > 0 && a.n_v_heads == a.n_k_heads ? 4 : 0);
  if (k == 0 || n_seqs >= 16 || !gdn_conv_fused(c, a, n_seqs)) return 0;
  return a.n_v_heads / a.n_k_heads * k <= 8 ? k : 0;
}

Status gdn_conv_step(const ConvArgs& c, const GdnArgs& a, const StepIO* io, int n_seqs, cudaStream_t stream) {
  if (!gdn_conv_fused(c, a, n_seqs)) return cu_err("cuda gdn_conv_step: not applicable here (gdn_conv_fused)");
  const int g = a.n_v_heads / a.n_k_heads, ks = std::max(1, gdn_conv_split(c, a, n_seqs));
  auto k = a.d_k == 64 ? (a.state_half ? conv_kernel_for<64, __half>(ks) : conv_kernel_for<64, float>(ks))
                       : (a.state_half ? conv_kernel_for<128, __half>(ks) : conv_kernel_for<128, float>(ks));
  if (step_carveout()) cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
  const dim3 grid(a.n_v_heads * ks, n_seqs), block(a.d_k * 4 / ks);
  const cudaError_t e = launch_pdl_cluster(k, grid, block, 0, stream, step_pdl(), g * ks, c, a, io);
  if (e != cudaSuccess) return cu_err("cuda gdn_conv_step (split {}): launch: {}", ks, cudaGetErrorString(e));
  const cudaError_t st = launch_status(stream);
  if (st != cudaSuccess) return cu_err("cuda gdn_conv_step (split {}): after launch: {}", ks, cudaGetErrorString(st));
  return {};
}

namespace {
__global__ void state_widen_kernel(const __half* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = __half2float(x[i]);
}
__global__ void state_narrow_kernel(const float* __restrict__ x, __half* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = __float2half_rn(f16_sat(x[i]));
}
unsigned blocks_for(int64_t n) { return (unsigned)std::clamp<int64_t>((n + 255) / 256, 1, 4096); }
}  // namespace

Status state_widen(const void* h, float* f, int64_t n, cudaStream_t stream) {
  state_widen_kernel<<<blocks_for(n), 256, 0, stream>>>(static_cast<const __half*>(h), f, n);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return cu_err("cuda state_widen ({} values): {}", n, cudaGetErrorString(e));
  return {};
}

Status state_narrow(const float* f, void* h, int64_t n, cudaStream_t stream) {
  state_narrow_kernel<<<blocks_for(n), 256, 0, stream>>>(f, static_cast<__half*>(h), n);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return cu_err("cuda state_narrow ({} values): {}", n, cudaGetErrorString(e));
  return {};
}

}  // namespace ds::cuda::mk

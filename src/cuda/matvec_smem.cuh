// Batch-1 matvec for Q4_K and Q6_K with the activations staged in shared memory (matvec.h; the
// direct-load kernel of matvec_direct.cuh is the alternative, DS_MATVEC_PATH selects). Two kernels:
// kernel<S> (register pipeline, described here) and kernel_async<S, N> (cp.async ring + programmatic
// dependent launch, described at its definition); launch() picks by type and size (Tune). Both can
// apply an input transform while staging x (Pre: RMSNorm or SwiGLU, matvec_fused). kernel<S>'s mapping:
//   - a CTA is 8 warps (256 threads), launched at most 2 per SM (<= 128 registers/thread, so >= 16
//     warps per SM); the grid is min(ceil(rows / 16), 2 * #SMs) CTAs, each warp walks row pairs
//     p = blockIdx.x * 8 + warp, p + 8 * gridDim.x, ... (rows 2p, 2p + 1; an odd last row re-reads
//     itself and discards the second result);
//   - the CTA first copies x[cols] (fp32) into dynamic shared memory, float4 at a time, in a
//     task-major order (below), then never reads x from global memory again;
//   - a row pair is walked in steps of 32 tasks (a task is a fixed piece of a row, as in
//     matvec_direct.cuh: 64 elements = one sub-block pair of a Q4_K block, 32 elements = one unit
//     (n, m) of a Q6_K block); lane l takes task 32 s + l of both rows at step s;
//   - software pipeline: before decoding step s, the lane issues the weight loads of the next step
//     (the next 32 tasks, or the first 32 of the warp's next row pair) into a second register set,
//     so a warp has about two steps = 2 rows x 32 lanes x (48 B Q4_K | 66 B Q6_K) in flight;
//     the first step's loads are issued before the x copy, overlapping it;
//   - a task's x values are read from shared memory once per row pair (float4 loads) and used for
//     both rows; results meet through warp shuffles; lane 0 writes y[2p], y[2p + 1].
// Shared-memory layout of x: float4 chunk k of task t sits at slot k * T + t (T = tasks per row), so
// the 32 lanes of a step (consecutive t, same k) read 32 consecutive float4s: no bank conflicts. The
// one-time copy writes with a stride of T slots (conflicted, but it is cols / 4 stores per CTA).
// Decoding is matvec_direct.cuh's (same loads, bf<>, q4k_finish, q6k_codes / q6k_finish): weights are
// exact, fp32 products and sums.
#pragma once
#include <algorithm>
#include <cstdlib>

#include "cuda/launch.cuh"
#include "cuda/matvec_direct.cuh"

namespace ds::cuda {
namespace mvs {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kCtasPerSm = 2;
constexpr int64_t kMaxXBytes = 100 * 1024;  // larger x: the caller takes the direct-load path

// Input transform of the prologue (matvec.h, matvec_fused): both null = plain x.
struct Pre {
  const float* norm_w = nullptr;  // RMSNorm: x * (1 / sqrt(mean(x^2) + eps)) * norm_w
  float eps = 0.f;
  const float* gate = nullptr;    // SwiGLU: silu(gate) * x
};

struct Args {
  const uint8_t* w;
  int64_t row_bytes;
  int rows, tasks;  // tasks per row
  const float* x;
  float* y;
  bool accumulate;
  Pre pre;
  int cols;
};

// Same formula as mk::swiglu / cpu::swiglu.
__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// Copies x (transformed per a.pre) into shared memory in S's slot order. Every CTA computes the RMSNorm
// sum of squares itself (cols floats, L2-resident): cheaper than a separate launch. Ends with a barrier.
template <class S, int NT = kThreads>
__device__ __forceinline__ void stage_x(const Args& a, float4* xs, int T) {
  const float4* x4 = reinterpret_cast<const float4*>(a.x);
  const int n4 = T * S::kX4;
  if (a.pre.gate) {
    const float4* g4 = reinterpret_cast<const float4*>(a.pre.gate);
    for (int f = threadIdx.x; f < n4; f += NT) {
      const float4 u = __ldg(x4 + f), g = __ldg(g4 + f);
      xs[S::slot(f, T)] = make_float4(silu(g.x) * u.x, silu(g.y) * u.y, silu(g.z) * u.z, silu(g.w) * u.w);
    }
  } else if (a.pre.norm_w) {
    __shared__ float red[NT / 32];
    float ss = 0.f;
    for (int f = threadIdx.x; f < n4; f += NT) {
      const float4 v = __ldg(x4 + f);
      ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
      xs[S::slot(f, T)] = v;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float tot = 0.f;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) tot += red[i];
    const float scale = 1.0f / sqrtf(tot / (float)a.cols + a.pre.eps);
    const float4* w4 = reinterpret_cast<const float4*>(a.pre.norm_w);
    // Each thread rescales the slots it wrote: no barrier needed in between.
    for (int f = threadIdx.x; f < n4; f += NT) {
      const float4 w = __ldg(w4 + f);
      float4& v = xs[S::slot(f, T)];
      v = make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
    }
  } else {
    for (int f = threadIdx.x; f < n4; f += NT) xs[S::slot(f, T)] = __ldg(x4 + f);
  }
  __syncthreads();
}

// ---- Q4_K: task t = (block t / 4, sub-block pair c = t % 4); chunks k = 0..7 hold elements
// 64c + 4k .. + 3 (low nibbles of code word k), k = 8..15 elements 64c + 32 + 4(k - 8) (high nibbles).
// cp.async (sm_80+): global -> shared copies that complete asynchronously, in commit groups.
// DS_MATVEC_EMU (bench/cuda/emu host emulation): plain copies, done at once.
#ifndef DS_MATVEC_EMU
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#else
inline void cp_async16(void* smem, const void* gmem) { std::memcpy(smem, gmem, 16); }
inline void cp_async8(void* smem, const void* gmem) { std::memcpy(smem, gmem, 8); }
inline void cp_async4(void* smem, const void* gmem) { std::memcpy(smem, gmem, 4); }
inline void cp_commit() {}
template <int N>
inline void cp_wait() {}
#endif

// Programmatic dependent launch (sm_90): kernel_async is launched so that it may start while the kernel
// before it finishes; it issues its first weight copies (weights never depend on earlier kernels), then
// waits for the preceding grid to complete (grid_dep_wait: a no-op when launched without the
// attribute) before touching x, y or anything else an earlier kernel writes. It lets the next kernel
// start early (grid_dep_trigger) once its own x is staged, so the next product's weight stream fills
// this one's tail.
#if !defined(DS_MATVEC_EMU) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
__device__ __forceinline__ void grid_dep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void grid_dep_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" :::); }
#else
__device__ __forceinline__ void grid_dep_wait() {}
__device__ __forceinline__ void grid_dep_trigger() {}
#endif

struct Q4KS {
  using D = mvd::Q4K;
  static constexpr bool kAsync = true;  // has the cp.async ring kernel (kernel_async)
  static constexpr bool kAsyncAlways = false;  // only small products (Tune::async_max_elems), see launch()
  using Piece = uint4;
  static constexpr int kVec = 3;        // 16-byte pieces of one task of one row: header, two code chunks
  static constexpr int kAWarps = 16;    // warps of a kernel_async CTA
  static constexpr int kX4 = 16;  // float4 chunks per task
  // Piece v of the task goes to dst[32 v] (the ring is lane-interleaved: lane l's pieces at l + 32 v).
  __device__ __forceinline__ static void copy_async(const uint8_t* row, int t, uint4* dst) {
    const uint8_t* b = row + (t >> 2) * D::kBlockBytes;
    const int c = t & 3;
    cp_async16(dst, b);
    cp_async16(dst + 32, b + 16 + 32 * c);
    cp_async16(dst + 64, b + 32 + 32 * c);
  }
  __device__ __forceinline__ static void read(const uint4* src, const uint8_t* const (&)[2], int, D::Raw (&r)[2]) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      r[k].h = src[96 * k];
      r[k].q0 = src[96 * k + 32];
      r[k].q1 = src[96 * k + 64];
    }
  }
  __device__ __forceinline__ static int slot(int f, int T) { return (f & 15) * T + (f >> 4); }
  __device__ __forceinline__ static void dot2(const D::Raw (&r)[2], int t, const float4* xt, int T, float (&acc)[2]) {
    float a[2][4];  // per row: two chains for the low sub-block, two for the high one
#pragma unroll
    for (int k = 0; k < 2; k++) a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0.f;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const float4 lo = xt[j * T], hi = xt[(8 + j) * T];
      s0 += (lo.x + lo.y) + (lo.z + lo.w);
      s1 += (hi.x + hi.y) + (hi.z + hi.w);
#pragma unroll
      for (int k = 0; k < 2; k++) {
        const uint4& q4 = j < 4 ? r[k].q0 : r[k].q1;
        const uint32_t q = (j & 3) == 0 ? q4.x : (j & 3) == 1 ? q4.y : (j & 3) == 2 ? q4.z : q4.w;
        const uint32_t l = q & 0x0F0F0F0Fu, h = (q >> 4) & 0x0F0F0F0Fu;
        a[k][0] = fmaf(mvd::bf<0>(l, 0.f), lo.x, a[k][0]); a[k][1] = fmaf(mvd::bf<1>(l, 0.f), lo.y, a[k][1]);
        a[k][0] = fmaf(mvd::bf<2>(l, 0.f), lo.z, a[k][0]); a[k][1] = fmaf(mvd::bf<3>(l, 0.f), lo.w, a[k][1]);
        a[k][2] = fmaf(mvd::bf<0>(h, 0.f), hi.x, a[k][2]); a[k][3] = fmaf(mvd::bf<1>(h, 0.f), hi.y, a[k][3]);
        a[k][2] = fmaf(mvd::bf<2>(h, 0.f), hi.z, a[k][2]); a[k][3] = fmaf(mvd::bf<3>(h, 0.f), hi.w, a[k][3]);
      }
    }
#pragma unroll
    for (int k = 0; k < 2; k++)
      acc[k] += mvd::q4k_finish(r[k].h, t & 3, a[k][0] + a[k][1], a[k][2] + a[k][3], s0, s1);
  }
};

// ---- Q6_K: task t = (block t / 8, n = (t / 4) % 2, m = t % 4), elements 128n + 8m + 32u + 4j + 0..3
// (run u = 0..3, j = 0..1) of the block; chunk k = 2u + j.
struct Q6KS {
  using D = mvd::Q6K;
  static constexpr bool kAsync = true;
  static constexpr bool kAsyncAlways = true;  // faster than kernel<Q6KS> at every measured shape
  using Piece = uint2;
  // Pieces 2i, 2i + 1: the two aligned 8-byte words around piece i of D::load (ql, ql + 32, qh, scales;
  // the second only when the block is misaligned), piece 8: the aligned 4-byte word holding d.
  static constexpr int kVec = 9;
  static constexpr int kAWarps = 8;  // 8 warps x 2 rows x 72 B x 32 lanes = 37 KB per ring slot
  __device__ __forceinline__ static void copy_async(const uint8_t* row, int t, uint2* dst) {
    const uint8_t* b = row + (t >> 3) * D::kBlockBytes;
    const int n = (t >> 2) & 1, m = t & 3;
    const int mis = (int)((uintptr_t)b & 7);
    const uint8_t* base = b - mis;
    const int off[4] = {64 * n + 8 * m, 64 * n + 32 + 8 * m, 128 + 32 * n + 8 * m, 192 + 8 * n};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      cp_async8(dst + 64 * i, base + off[i]);
      if (mis) cp_async8(dst + 64 * i + 32, base + off[i] + 8);
    }
    cp_async4(dst + 256, reinterpret_cast<const uint8_t*>((uintptr_t)(b + 208) & ~(uintptr_t)3));
  }
  __device__ __forceinline__ static void read(const uint2* src, const uint8_t* const (&rows)[2], int t,
                                              D::Raw (&r)[2]) {
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const uint2* q = src + 9 * 32 * k;
      const uint8_t* b = rows[k] + (t >> 3) * D::kBlockBytes;
      r[k].mis = (int)((uintptr_t)b & 7);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        r[k].p[i][0] = q[64 * i];
        r[k].p[i][1] = r[k].mis ? q[64 * i + 32] : make_uint2(0, 0);
      }
      const uint32_t dw = q[256].x;
      r[k].d = ((uintptr_t)(b + 208) & 2) ? dw >> 16 : dw & 0xFFFFu;
    }
  }
  static constexpr int kX4 = 8;
  // float4 f = x[4f .. 4f + 3]: within its block (64 chunks) bits are n:1 u:2 m:2 j:1.
  __device__ __forceinline__ static int slot(int f, int T) {
    const int t = (f >> 6) * 8 + ((f >> 5) & 1) * 4 + ((f >> 1) & 3);
    const int k = ((f >> 3) & 3) * 2 + (f & 1);
    return k * T + t;
  }
  __device__ __forceinline__ static void dot2(const D::Raw (&r)[2], int t, const float4* xt, int T, float (&acc)[2]) {
    const mvd::Q6Words w[2] = {D::words(r[0]), D::words(r[1])};
    float a[2][4];
#pragma unroll
    for (int k = 0; k < 2; k++) a[k][0] = a[k][1] = a[k][2] = a[k][3] = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) {
      uint32_t q[2][4];
      mvd::q6k_codes(w[0], j, q[0]);
      mvd::q6k_codes(w[1], j, q[1]);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const float4 v = xt[(2 * u + j) * T];
#pragma unroll
        for (int k = 0; k < 2; k++) {
          float s = mvd::bf<0>(q[k][u], 32.f) * v.x;
          s = fmaf(mvd::bf<1>(q[k][u], 32.f), v.y, s);
          s = fmaf(mvd::bf<2>(q[k][u], 32.f), v.z, s);
          s = fmaf(mvd::bf<3>(q[k][u], 32.f), v.w, s);
          a[k][u] += s;
        }
      }
    }
#pragma unroll
    for (int k = 0; k < 2; k++) acc[k] += mvd::q6k_finish(w[k].sc, t, a[k], r[k].d);
  }
};

// Weight loads of task t (if it exists) of rows 2p, 2p + 1 (clamped to the last row).
template <class S>
__device__ __forceinline__ void load_pair(const Args& a, int p, int t, typename S::D::Raw (&r)[2]) {
  if (t >= a.tasks) return;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const int row = min(2 * p + k, a.rows - 1);
    S::D::load(a.w + (int64_t)row * a.row_bytes, t, r[k]);
  }
}

// Row pair p done: the warp's sums of rows 2p, 2p + 1 into y (lanes 0 and 1), acc cleared for the next pair.
__device__ __forceinline__ void finish_pair(const Args& a, int p, int lane, float (&acc)[2]) {
#pragma unroll
  for (int k = 0; k < 2; k++)
    for (int o = 16; o > 0; o >>= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
  if (lane < 2 && 2 * p + lane < a.rows) {
    const int row = 2 * p + lane;
    const float v = lane ? acc[1] : acc[0];
    a.y[row] = a.accumulate ? a.y[row] + v : v;
  }
  acc[0] = acc[1] = 0.f;
}

template <class S>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) kernel(const Args a) {
  extern __shared__ float4 xs[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T = a.tasks, steps = (T + 31) / 32, npairs = (a.rows + 1) / 2;
  const int pstride = gridDim.x * kWarps;
  int p = blockIdx.x * kWarps + warp, s = 0;
  typename S::D::Raw cur[2], nxt[2];
  if (p < npairs) load_pair<S>(a, p, lane, cur);  // in flight during the x copy

  grid_dep_wait();  // see kernel_async; a no-op unless launched with Tune::pdl_register
  stage_x<S>(a, xs, T);
  grid_dep_trigger();
  if (p >= npairs) return;

  float acc[2] = {0.f, 0.f};
  for (;;) {
    int pn = p, sn = s + 1;
    if (sn == steps) { sn = 0; pn += pstride; }
    if (pn < npairs) load_pair<S>(a, pn, 32 * sn + lane, nxt);
    const int t = 32 * s + lane;
    if (t < T) S::dot2(cur, t, xs + t, T, acc);
    if (sn == 0) {  // row pair p done
      finish_pair(a, p, lane, acc);
      if (pn >= npairs) break;
    }
    cur[0] = nxt[0];
    cur[1] = nxt[1];
    p = pn;
    s = sn;
  }
}

// ---- cp.async ring variant (types with S::kAsync): one 16-warp CTA per SM, x staged once per SM, and
// each warp streams its (row pair, step) items through a ring of kStages slots in shared memory
// (cp.async.cg, L2 only): kStages - 1 items (2 rows x 32 lanes x 48 B for Q4_K) are in flight while the
// warp decodes the current one, without holding them in registers. A lane reads back only the bytes it
// copied itself, so cp.async.wait_group is the only synchronisation. Item order, decoding and the
// reduction are kernel<S>'s.
constexpr int kSmemMax = 226 * 1024;  // dynamic shared memory per CTA (sm_90 allows 227 KB with the static part)

template <class S>
constexpr int ring_bytes_per_stage() { return S::kAWarps * 2 * S::kVec * 32 * (int)sizeof(typename S::Piece); }

template <class S, int kStages>
__global__ void __launch_bounds__(S::kAWarps * 32, 1) kernel_async(const Args a) {
  constexpr int kAWarps = S::kAWarps;
  using Piece = typename S::Piece;
  extern __shared__ float4 xs[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T = a.tasks, steps = (T + 31) / 32, npairs = (a.rows + 1) / 2;
  const int pstride = gridDim.x * kAWarps;
  constexpr int kSlot = 2 * S::kVec * 32;  // pieces per ring slot of one warp
  Piece* ring = reinterpret_cast<Piece*>(xs + T * S::kX4) + warp * kStages * kSlot + lane;
  int pi = blockIdx.x * kAWarps + warp, si = 0;  // next item to issue
  auto issue = [&](int slot) {
    if (pi < npairs) {
      const int t = 32 * si + lane;
      if (t < T) {
#pragma unroll
        for (int k = 0; k < 2; k++) {
          const int row = min(2 * pi + k, a.rows - 1);
          S::copy_async(a.w + (int64_t)row * a.row_bytes, t, ring + slot * kSlot + k * S::kVec * 32);
        }
      }
      if (++si == steps) { si = 0; pi += pstride; }
    }
    cp_commit();  // empty groups keep the group count uniform
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; i++) issue(i);  // in flight during the x copy (and the previous kernel)
  grid_dep_wait();
  stage_x<S, kAWarps * 32>(a, xs, T);
  grid_dep_trigger();
  int p = blockIdx.x * kAWarps + warp, s = 0;
  if (p >= npairs) return;

  float acc[2] = {0.f, 0.f};
  int rd = 0, wr = kStages - 1;  // ring slots: item being decoded, item being issued
  for (;;) {
    issue(wr);
    cp_wait<kStages - 1>();  // the group of the item in slot rd is complete
    const int t = 32 * s + lane;
    if (t < T) {
      typename S::D::Raw r[2];
      const uint8_t* rows[2] = {a.w + (int64_t)(2 * p) * a.row_bytes,
                                a.w + (int64_t)min(2 * p + 1, a.rows - 1) * a.row_bytes};
      S::read(ring + rd * kSlot, rows, t, r);
      S::dot2(r, t, xs + t, T, acc);
    }
    rd = rd + 1 == kStages ? 0 : rd + 1;
    wr = wr + 1 == kStages ? 0 : wr + 1;
    if (++s == steps) {  // row pair p done
      finish_pair(a, p, lane, acc);
      s = 0;
      p += pstride;
      if (p >= npairs) break;
    }
  }
  cp_wait<0>();
}

}  // namespace mvs
}  // namespace ds::cuda

namespace ds::cuda {
namespace mvs {

// Launch choice (bench/cuda/matvec_bench_standalone.cu compares): grid cap in CTAs per SM (0: no cap,
// one row pair per warp).
struct Tune {
  int grid_ctas_per_sm = kCtasPerSm;
  int async_stages = 4;  // kernel_async with at most this many ring slots (2..4) where it fits; 0: kernel<S>
  bool pdl = true;       // launch kernel_async as a programmatic dependent of the previous kernel
  // The same for kernel<S> (DS_MATVEC_PDL_REGISTER=1). Off: not measured yet (kernel_async: +6% on the
  // whole 9B decode with PDL, bench/cuda/NOTES.md).
  bool pdl_register = false;
  // Q4_K takes kernel_async only for products of at most this many weights or rows of at most
  // async_max_cols (H200, mvbench: faster on every 0.8B shape and 9B ssm_out [4096 x 4096], 2-37% slower
  // than kernel<Q4KS> on the larger 9B / 27B products); -1: every size.
  int64_t async_max_elems = (int64_t)1 << 24;
  int64_t async_max_cols = 2048;
};
// DS_MATVEC_ASYNC=N sets async_stages (0: the register-pipeline kernel), for A/B runs of the whole model.
inline Tune& tune() {
  static Tune t = [] {
    Tune d;
    if (const char* e = std::getenv("DS_MATVEC_ASYNC")) d.async_stages = std::atoi(e);
    if (const char* e = std::getenv("DS_MATVEC_PDL")) d.pdl = e[0] != '0';
    if (const char* e = std::getenv("DS_MATVEC_PDL_REGISTER")) d.pdl_register = e[0] == '1';
    return d;
  }();
  return t;
}

// DS_STEP_CARVEOUT=1 (decode8 A/B): the matvec kernels prefer the largest shared-memory carveout, as the
// model's step kernels do then (cuda/model/device_util.cuh).
template <class K>
cudaError_t carveout_max(K k) {
  static const bool on = [] {
    const char* e = std::getenv("DS_STEP_CARVEOUT");
    return e && e[0] == '1';
  }();
  return on ? cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100) : cudaSuccess;
}

namespace {
// Lets kernel<S> take up to kMaxXBytes of dynamic shared memory, once per translation unit: every
// .cu file that launches it has its own copy of the kernel (the bench links two), and the attribute
// is per kernel, so a process-wide static would leave the second copy at the 48 KB default.
template <class S>
cudaError_t allow_smem() {
  static const cudaError_t e =
      cudaFuncSetAttribute(kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kMaxXBytes);
  return e != cudaSuccess ? e : carveout_max(kernel<S>);
}
template <class S, int N>
cudaError_t allow_smem_async() {
  static const cudaError_t e =
      cudaFuncSetAttribute(kernel_async<S, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax);
  return e != cudaSuccess ? e : carveout_max(kernel_async<S, N>);
}
// Launches k<<<grid, threads, smem, stream>>>(a), as a programmatic dependent launch when pdl is set.
template <class K>
Status launch_maybe_pdl(K k, unsigned grid, int threads, size_t smem, cudaStream_t stream, bool pdl, const Args& a) {
  const cudaError_t e = launch_pdl(k, dim3(grid), dim3(threads), smem, stream, pdl, a);
  if (e != cudaSuccess) return cu_err("cuda matvec_smem: launch: {}", cudaGetErrorString(e));
  return {};
}

template <class S, int N>
Status launch_async(const Args& a, int64_t npairs, size_t x_bytes, cudaStream_t stream) {
  const cudaError_t attr = allow_smem_async<S, N>();
  if (attr != cudaSuccess) return cu_err("cuda matvec_smem: cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
  const int64_t grid = std::min<int64_t>((npairs + S::kAWarps - 1) / S::kAWarps, sm_count());
  const size_t smem = x_bytes + (size_t)N * ring_bytes_per_stage<S>();
  DS_TRY(launch_maybe_pdl(kernel_async<S, N>, (unsigned)grid, S::kAWarps * 32, smem, stream, tune().pdl, a));
  CUDA_TRY_LAUNCH("matvec_smem_async", stream);
  return {};
}
}  // namespace

// Whether this path takes [rows, cols] (x must fit in shared memory).
inline bool fits(int64_t cols) { return cols * 4 <= kMaxXBytes; }

// Checks done by the caller (matvec.cu): rows, cols > 0, cols % 256 == 0, alignment of w / x / y, fits().
template <class S>
Status launch(const uint8_t* w, int64_t rows, int64_t cols, const float* x, float* y, bool accumulate,
              cudaStream_t stream, const Pre& pre = {}) {
  if (!fits(cols) || rows > (int64_t)1 << 30)
    return cu_err("cuda matvec_smem: [{}, {}] too large (x over {} bytes or rows over 2^30)", rows, cols, kMaxXBytes);
  const cudaError_t attr = allow_smem<S>();
  if (attr != cudaSuccess) return cu_err("cuda matvec_smem: cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
  using D = typename S::D;
  const Args a{w, cols / D::kBlockElems * D::kBlockBytes, (int)rows,
               (int)(cols / D::kBlockElems * D::kTasksPerBlock), x, y, accumulate, pre, (int)cols};
  const int64_t npairs = (rows + 1) / 2;
  const Tune& tn = tune();
  const bool small = tn.async_max_elems < 0 || rows * cols <= tn.async_max_elems || cols <= tn.async_max_cols;
  if constexpr (S::kAsync) {
    if (S::kAsyncAlways || small) {
      const size_t xb = (size_t)cols * 4;
      int n = std::min(tn.async_stages, 4);
      while (n >= 2 && xb + (size_t)n * ring_bytes_per_stage<S>() > (size_t)kSmemMax) n--;
      if (n == 4) return launch_async<S, 4>(a, npairs, xb, stream);
      if (n == 3) return launch_async<S, 3>(a, npairs, xb, stream);
      if (n == 2) return launch_async<S, 2>(a, npairs, xb, stream);
    }
  }
  const int cap = tune().grid_ctas_per_sm;
  int64_t grid = (npairs + kWarps - 1) / kWarps;
  if (cap > 0) grid = std::min<int64_t>(grid, (int64_t)cap * sm_count());
  DS_TRY(launch_maybe_pdl(kernel<S>, (unsigned)grid, kThreads, (size_t)(cols * 4), stream, tn.pdl_register, a));
  CUDA_TRY_LAUNCH("matvec_smem", stream);
  return {};
}

}  // namespace mvs
}  // namespace ds::cuda

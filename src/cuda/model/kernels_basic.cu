// Row and elementwise kernels of the model: embedding lookup (one block per token, one thread per
// quantization unit), RMSNorm (one block per row), residual add and SwiGLU (one thread per element).
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"
#include "cuda/model/rms_row.cuh"
#include "cuda/quant_traits.cuh"

namespace ds::cuda::mk {
namespace {

constexpr int kThreads = 256;

template <class QT>
__global__ void __launch_bounds__(kThreads)
    embed_kernel(const uint8_t* __restrict__ w, int64_t n_cols, const StepIO* __restrict__ io, float* __restrict__ y) {
  const int t = blockIdx.x;
  const int64_t blocks_row = n_cols / QT::kBlockElems;
  const uint8_t* row = w + (int64_t)io->tok[t] * blocks_row * QT::kBlockBytes;
  float* yr = y + (int64_t)t * n_cols;
  const int64_t units = blocks_row * QT::kUnits;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    const int64_t blk = u / QT::kUnits;
    const int k = (int)(u % QT::kUnits);
    float v[QT::kE];
    QT::dequant(row + blk * QT::kBlockBytes, k, v);
    float* yb = yr + blk * QT::kBlockElems;
#pragma unroll
    for (int r = 0; r < QT::kRuns; r++) {
      const int s = QT::run_start(k, r);
#pragma unroll
      for (int i = 0; i < QT::kRunLen; i++) yb[s + i] = v[r * QT::kRunLen + i];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w, float* __restrict__ y,
                    int64_t ldy, int64_t n, float eps) {
  __shared__ float red[32];
  const float* xr = x + (int64_t)blockIdx.x * ldx;
  float* yr = y + (int64_t)blockIdx.x * ldy;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, red);
  const float scale = 1.0f / sqrtf(ss / (float)n + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

// The same for rows of at most kV4 · 4 · kThreads elements, n % 4 == 0, 16-byte-aligned rows: each thread loads
// its float4s of x and w once, all at the start (one memory round trip instead of a dependent loop per pass),
// keeps them in registers for the scaling pass. Sums per thread in index order, then block_sum (rms_row_scale, shared
// with the batched products' folded norm): deterministic.
constexpr int kV4 = kRmsV4;
__global__ void __launch_bounds__(kThreads)
    rms_norm_v4_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ w, float* __restrict__ y,
                       int64_t ldy, int64_t n, float eps) {
  __shared__ float red[32];
  const float4* xr = reinterpret_cast<const float4*>(x + (int64_t)blockIdx.x * ldx);
  const float4* wr = reinterpret_cast<const float4*>(w);
  float4* yr = reinterpret_cast<float4*>(y + (int64_t)blockIdx.x * ldy);
  const int n4 = (int)(n / 4);
  float4 v[kV4], g[kV4];
#pragma unroll
  for (int j = 0; j < kV4; j++) {
    const int i = threadIdx.x + j * kThreads;
    v[j] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    g[j] = i < n4 ? __ldg(wr + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  const float scale = rms_row_scale(v, n, eps, red);
#pragma unroll
  for (int j = 0; j < kV4; j++) {
    const int i = threadIdx.x + j * kThreads;
    if (i < n4)
      yr[i] = make_float4(v[j].x * scale * g[j].x, v[j].y * scale * g[j].y, v[j].z * scale * g[j].z,
                          v[j].w * scale * g[j].w);
  }
}

__global__ void add_kernel(float* __restrict__ y, const float* __restrict__ x, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void swiglu_kernel(const float* __restrict__ g, int64_t ldg, const float* __restrict__ u, int64_t ldu,
                              float* __restrict__ y, int64_t n_cols) {
  const int64_t r = blockIdx.y;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_cols; i += (int64_t)gridDim.x * blockDim.x)
    y[r * n_cols + i] = silu_f(g[r * ldg + i]) * u[r * ldu + i];
}

// swiglu_kernel with one float4 per thread (n_cols, ldg, ldu % 4 == 0, 16-byte-aligned rows): the same
// arithmetic per element, so the same bits; a quarter of the load instructions.
__global__ void swiglu_v4_kernel(const float4* __restrict__ g, int64_t ldg4, const float4* __restrict__ u, int64_t ldu4,
                                 float4* __restrict__ y, int64_t n4) {
  const int64_t r = blockIdx.y;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    const float4 a = g[r * ldg4 + i], b = u[r * ldu4 + i];
    y[r * n4 + i] = make_float4(silu_f(a.x) * b.x, silu_f(a.y) * b.y, silu_f(a.z) * b.z, silu_f(a.w) * b.w);
  }
}

std::atomic<int> g_rms_force{-1}, g_swiglu_force{-1};

template <class QT>
Status launch_embed(const void* w, int64_t n_cols, const StepIO* io, int n_tokens, float* y, cudaStream_t stream) {
  if (n_cols % QT::kBlockElems != 0)
    return cu_err("cuda embed: row of {} elements is not a whole number of {}-element blocks", n_cols,
                  QT::kBlockElems);
  embed_kernel<QT><<<n_tokens, kThreads, 0, stream>>>(static_cast<const uint8_t*>(w), n_cols, io, y);
  CUDA_TRY_LAUNCH("embed", stream);
  return {};
}

}  // namespace

bool env_on(const char* name, bool dflt) {
  const char* e = std::getenv(name);
  return e && e[0] ? e[0] != '0' : dflt;
}

bool step_pdl() {
  static const bool on = env_on("DS_STEP_PDL", true);
  return on;
}
bool step_carveout() {
  static const bool on = env_on("DS_STEP_CARVEOUT", false);
  return on;
}

Status embed(GgmlType type, const void* w, int64_t n_cols, const StepIO* io, int n_tokens, float* y,
             cudaStream_t stream) {
  if (n_tokens < 1 || n_tokens > kMaxStepTokens) return cu_err("cuda embed: {} tokens", n_tokens);
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return launch_embed<qt::QuantTraits<GgmlType::T>>(w, n_cols, io, n_tokens, y, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda embed: no kernel for type {}", type_cstr(type));
  }
}

Status rms_norm(const float* x, int64_t ldx, const float* w, float* y, int64_t ldy, int n_rows, int64_t n_cols,
                float eps, cudaStream_t stream) {
  if (n_rows < 1 || n_cols < 1) return cu_err("cuda rms_norm: {} rows of {}", n_rows, n_cols);
  static const int env_kind = env_on("DS_RMS_V4", true) ? 1 : 0;
  const int kind = g_rms_force.load() >= 0 ? g_rms_force.load() : env_kind;
  const bool v4 = kind >= 1 && n_cols % 4 == 0 && n_cols <= 4 * kV4 * kThreads && ldx % 4 == 0 && ldy % 4 == 0 &&
                  (uintptr_t)x % 16 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)y % 16 == 0;
  if (v4) rms_norm_v4_kernel<<<n_rows, kThreads, 0, stream>>>(x, ldx, w, y, ldy, n_cols, eps);
  else rms_norm_kernel<<<n_rows, kThreads, 0, stream>>>(x, ldx, w, y, ldy, n_cols, eps);
  CUDA_TRY_LAUNCH("rms_norm", stream);
  return {};
}

void rms_force_kernel(int k) { g_rms_force.store(k >= 0 && k <= 1 ? k : -1); }
void swiglu_force_kernel(int k) { g_swiglu_force.store(k >= 0 && k <= 1 ? k : -1); }

Status add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n < 1) return {};
  add_kernel<<<(unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(y, x, n);
  CUDA_TRY_LAUNCH("add", stream);
  return {};
}

Status swiglu(const float* g, int64_t ldg, const float* u, int64_t ldu, float* y, int n_rows, int64_t n_cols,
              cudaStream_t stream) {
  if (n_rows < 1 || n_cols < 1) return cu_err("cuda swiglu: {} rows of {}", n_rows, n_cols);
  static const bool env_v4 = env_on("DS_SWIGLU_V4", true);  // DS_SWIGLU_V4=0: one float per thread (A/B)
  const bool v4_on = g_swiglu_force.load() >= 0 ? g_swiglu_force.load() == 1 : env_v4;
  if (v4_on && n_cols % 4 == 0 && ldg % 4 == 0 && ldu % 4 == 0 && (uintptr_t)g % 16 == 0 && (uintptr_t)u % 16 == 0 &&
      (uintptr_t)y % 16 == 0) {
    const int64_t n4 = n_cols / 4;
    const unsigned gx = (unsigned)std::min<int64_t>((n4 + kThreads - 1) / kThreads, 1024);
    swiglu_v4_kernel<<<dim3(gx, n_rows), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(g), ldg / 4, reinterpret_cast<const float4*>(u), ldu / 4,
        reinterpret_cast<float4*>(y), n4);
  } else {
    const unsigned gx = (unsigned)std::min<int64_t>((n_cols + kThreads - 1) / kThreads, 1024);
    swiglu_kernel<<<dim3(gx, n_rows), kThreads, 0, stream>>>(g, ldg, u, ldu, y, n_cols);
  }
  CUDA_TRY_LAUNCH("swiglu", stream);
  return {};
}

}  // namespace ds::cuda::mk

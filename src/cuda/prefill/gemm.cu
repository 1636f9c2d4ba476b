// PrefillGemm: Y[T, N] (+)= X[T, K] · W[N, K]ᵀ for GGUF-typed W. The weight is dequantized (exactly, with
// the shared QuantTraits decoders) into a reusable scratch in the product's input type, the activations are
// converted once per input, and cuBLAS runs the product with fp32 accumulation. Row-major Y = X Wᵀ is the
// column-major product Yᵀ[N, T] = W_cm[K, N]ᵀ · X_cm[K, T]: cuBLAS "TN", lda = K, ldb = ldx, ldc = ldy.
// Dequant thread mapping: one thread per QuantTraits unit (a 16..32-element piece of a block), 16-byte stores.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/dequant.h"
#include "cuda/prefill/common.cuh"
#include "cuda/prefill/prefill.cuh"
#include "cuda/quant_traits.cuh"

namespace ds::cuda::prefill {
namespace {
using qt::QuantTraits;

constexpr size_t kCublasWorkspace = 32u << 20;

template <bool kBf>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (kBf) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // .x = a (low half)
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// One thread per unit: decode kE values, store each run of kRunLen (8, 16 or 32) as 16-byte vectors.
template <class QT, bool kBf>
__global__ void dequant_half_kernel(const uint8_t* __restrict__ src, uint16_t* __restrict__ dst, int64_t n_units) {
  const int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= n_units) return;
  const int64_t blk = u / QT::kUnits;
  const int k = (int)(u % QT::kUnits);
  float w[QT::kE];
  QT::dequant(src + blk * QT::kBlockBytes, k, w);
  uint16_t* y = dst + blk * QT::kBlockElems;
#pragma unroll
  for (int r = 0; r < QT::kRuns; r++) {
    uint4* o = reinterpret_cast<uint4*>(y + QT::run_start(k, r));
#pragma unroll
    for (int v = 0; v < QT::kRunLen / 8; v++) {
      const float* e = w + r * QT::kRunLen + 8 * v;
      o[v] = make_uint4(pack2<kBf>(e[0], e[1]), pack2<kBf>(e[2], e[3]), pack2<kBf>(e[4], e[5]), pack2<kBf>(e[6], e[7]));
    }
  }
}

// f16 inputs and X past f16's range (65,504; pf26): X is scaled by s = 2^-e before the conversion, e >= 0 the
// smallest with max |X|·s <= 2^15, and the products use alpha = 2^e, exactly (powers of two). e = 0 unless some |x|
// exceeds 32,768, so ordinary activations keep the bits they had. The conversion runs with s = 1 and also records the
// largest finite |x| above 2^15 (one atomic per warp that holds one; none for ordinary activations); rescale_x_kernel
// then writes alpha and, only when that max exists, converts X again with s. consts[0] holds the max's bits (0: none),
// consts[1] alpha (read by cuBLAS in device pointer mode), consts[2] / [3] the betas 0 / 1. DS_PREFILL_F16_SCALE=0
// turns it off (X past 65,504 then becomes inf).
constexpr float kScaleAbove = 32768.f;

// The scale s = 2^-e for the recorded max m (0: none, s = 1).
__device__ __forceinline__ float x_scale(unsigned mbits) {
  const float m = __uint_as_float(mbits);
  if (!(m > kScaleAbove)) return 1.f;
  int e;
  frexpf(m / kScaleAbove, &e);  // m / 2^15 = f·2^e, f in [0.5, 1): m·2^-e <= 2^15
  return ldexpf(1.f, -e);
}

// The warp's largest finite |x| past kScaleAbove into *mx (atomicMax on the bits: non-negative floats order as
// their bits). Every lane of the warp calls it.
__device__ __forceinline__ void record_max(float m, unsigned* mx) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0 && m > kScaleAbove) atomicMax(mx, __float_as_uint(m));
}

// 8 consecutive elements of X (p) times sc into y (packed bf16 / f16), or split into hi = f16(x·sc) at y and lo =
// f16(x·sc - hi) at y_lo. Returns the largest finite |x|.
template <bool kBf, bool kSplit>
__device__ __forceinline__ float convert8(const float* p, float sc, uint16_t* y, uint16_t* y_lo) {
  float s[8], lo[8], m = 0.f;
#pragma unroll
  for (int e = 0; e < 8; e++) {
    const float v = fabsf(p[e]);
    if (v <= 3.0e38f) m = fmaxf(m, v);  // finite values only: inf / NaN stay what they are
    s[e] = p[e] * sc;
    if constexpr (kSplit) lo[e] = s[e] - __half2float(__float2half_rn(s[e]));
  }
  *reinterpret_cast<uint4*>(y) =
      make_uint4(pack2<kBf>(s[0], s[1]), pack2<kBf>(s[2], s[3]), pack2<kBf>(s[4], s[5]), pack2<kBf>(s[6], s[7]));
  if constexpr (kSplit)
    *reinterpret_cast<uint4*>(y_lo) = make_uint4(pack2<false>(lo[0], lo[1]), pack2<false>(lo[2], lo[3]),
                                                 pack2<false>(lo[4], lo[5]), pack2<false>(lo[6], lo[7]));
  return m;
}

// X [T, K] fp32 (row stride ldx) -> packed [T, K] bf16 / f16 (kSplit: hi into y, lo into y_lo), unscaled; each thread
// converts 8 consecutive elements (K % 8 == 0: they share a row). With mx, the max past 2^15 is recorded.
template <bool kBf, bool kSplit>
__global__ void convert_x_kernel(const float* __restrict__ x, int64_t ldx, int64_t T, int64_t K,
                                 uint16_t* __restrict__ y, uint16_t* __restrict__ y_lo, unsigned* __restrict__ mx) {
  const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  float m = 0.f;
  if (i < T * K) m = convert8<kBf, kSplit>(x + (i / K) * ldx + i % K, 1.f, y + i, kSplit ? y_lo + i : nullptr);
  if (mx) record_max(m, mx);
}

// After convert_x_kernel with mx: alpha = 1 / s and, only when s != 1, X converted again times s (grid-stride).
template <bool kSplit>
__global__ void rescale_x_kernel(const float* __restrict__ x, int64_t ldx, int64_t T, int64_t K,
                                 uint16_t* __restrict__ y, uint16_t* __restrict__ y_lo, const unsigned* __restrict__ mx,
                                 float* __restrict__ alpha) {
  const float sc = x_scale(*mx);
  if (blockIdx.x == 0 && threadIdx.x == 0) *alpha = 1.f / sc;
  if (sc == 1.f) return;
  for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < T * K; i += (int64_t)gridDim.x * blockDim.x * 8)
    convert8<false, kSplit>(x + (i / K) * ldx + i % K, sc, y + i, kSplit ? y_lo + i : nullptr);
}

// DS_PREFILL_F16_SCALE=0 turns the scaling off (measured in session 27 at 64 x 512 on the 9B synth, whose ffn_down
// inputs reach ~9e5 and are scaled: prefill 15,559 / 15,623 tok/s off (NaN logits), 15,050 / 15,027 on; alpha / betas
// from the host instead of device memory changed nothing measurable, so device pointer mode stays).
bool f16_scale_on() {
  static const bool on = [] {
    const char* e = std::getenv("DS_PREFILL_F16_SCALE");
    return !(e && e[0] == '0' && !e[1]);
  }();
  return on;
}

template <class QT, bool kBf>
Status launch_dequant_half(const void* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if ((uintptr_t)src % QT::kAlign != 0)
    return cu_err("cuda prefill gemm: weight {} is not {}-byte aligned", src, QT::kAlign);
  const int64_t units = n / QT::kBlockElems * QT::kUnits;
  constexpr int kT = 256;
  dequant_half_kernel<QT, kBf><<<(unsigned)((units + kT - 1) / kT), kT, 0, stream>>>(
      static_cast<const uint8_t*>(src), dst, units);
  CUDA_TRY_LAUNCH("prefill gemm dequantize", stream);
  return {};
}

template <bool kBf>
Status dequant_half(GgmlType type, const void* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return launch_dequant_half<QuantTraits<GgmlType::T>, kBf>(src, dst, n, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda prefill gemm: no kernel for weight type {}", type_cstr(type));
  }
}

const char* cublas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(other)";
  }
}

#define CUBLAS_TRY(expr)                                                                                   \
  do {                                                                                                     \
    cublasStatus_t _ds_cb = (expr);                                                                        \
    if (_ds_cb != CUBLAS_STATUS_SUCCESS)                                                                   \
      return cu_err("cuda prefill gemm: {} failed: {} ({}:{})", #expr, cublas_name(_ds_cb), __FILE__, __LINE__); \
  } while (0)

bool is_half(GemmInputs in) {
  return in == GemmInputs::kBf16 || in == GemmInputs::kF16 || in == GemmInputs::kF16Split;
}

}  // namespace

const char* gemm_inputs_name(GemmInputs in) {
  switch (in) {
    case GemmInputs::kF32: return "f32";
    case GemmInputs::kTf32: return "tf32";
    case GemmInputs::kBf16: return "bf16";
    case GemmInputs::kF16: return "f16";
    case GemmInputs::kF16Split: return "f16x2";
  }
  return "?";
}

GemmInputs default_gemm_inputs(Mode mode, GgmlType type) {
  // Measured on the fixture files (CPU emulation of the rounding, every prefill product but the LM head):
  // bf16 inputs land 0.06-0.27 max |dlogit| from the references, f16 inputs 0.012-0.038, f16 with the GDN qkv
  // projection's activations exact 0.005-0.013. So f16, and the model asks for kF16Split on the qkv projection.
  (void)type;
  return mode == Mode::kPrecise ? GemmInputs::kF32 : GemmInputs::kF16;
}

struct PrefillGemm::Impl {
  cublasHandle_t handle = nullptr;
  DeviceBuffer cublas_ws, wbuf, xbuf, consts;  // consts: [max |X| bits, alpha, 0.f, 1.f] (f16 scaling)
  ~Impl() {
    if (handle) cublasDestroy(handle);
  }
};

Result<std::unique_ptr<PrefillGemm>> PrefillGemm::create() {
  std::unique_ptr<PrefillGemm> g(new PrefillGemm());
  g->impl_ = std::make_unique<Impl>();
  CUBLAS_TRY(cublasCreate(&g->impl_->handle));
  // A fixed workspace: cuBLAS allocates nothing during graph capture then.
  auto ws = DeviceBuffer::alloc(kCublasWorkspace);
  if (!ws.ok()) return ws.error();
  g->impl_->cublas_ws = std::move(ws).value();
  CUBLAS_TRY(cublasSetWorkspace(g->impl_->handle, g->impl_->cublas_ws.data(), kCublasWorkspace));
  CUBLAS_TRY(cublasSetMathMode(g->impl_->handle, CUBLAS_DEFAULT_MATH));
  auto cb = DeviceBuffer::alloc(4 * sizeof(float));
  if (!cb.ok()) return cb.error();
  g->impl_->consts = std::move(cb).value();
  const float init[4] = {0.f, 1.f, 0.f, 1.f};
  DS_TRY(g->impl_->consts.upload(init, sizeof(init)));
  return std::move(g);
}

PrefillGemm::~PrefillGemm() = default;

size_t PrefillGemm::scratch_bytes() const {
  return impl_->cublas_ws.size() + impl_->wbuf.size() + impl_->xbuf.size();
}

static Status grow(DeviceBuffer& b, size_t bytes) {
  if (b.size() >= bytes && !b.empty()) return {};
  b.reset();  // cudaFree waits for the device: work still reading the old buffer finishes first
  auto n = DeviceBuffer::alloc(std::max<size_t>(bytes, 256));
  if (!n.ok()) return n.error();
  b = std::move(n).value();
  return {};
}

Status PrefillGemm::reserve(int64_t max_weight_elems, int64_t max_act_elems, GemmInputs widest) {
  const size_t eb = is_half(widest) ? 2 : 4;
  DS_TRY(grow(impl_->wbuf, (size_t)std::max<int64_t>(max_weight_elems, 0) * eb));
  const size_t xn = widest == GemmInputs::kF16Split ? 2 : 1;
  if (is_half(widest)) DS_TRY(grow(impl_->xbuf, (size_t)std::max<int64_t>(max_act_elems, 0) * 2 * xn));
  return {};
}

Status PrefillGemm::matmul(const ops::MatmulParams& p, const void* w, const float* x, int64_t ldx, float* y,
                           int64_t ldy, GemmInputs in, bool accumulate, cudaStream_t stream) {
  const GemmOut o{p.type, w, p.n_rows, y, ldy, accumulate};
  return matmul_many(std::span<const GemmOut>(&o, 1), x, ldx, p.n_tokens, p.n_cols, in, stream);
}

Status PrefillGemm::matmul_many(std::span<const GemmOut> outs, const float* x, int64_t ldx, int64_t T, int64_t K,
                                GemmInputs in, cudaStream_t stream) {
  if (ldx == 0) ldx = K;
  if (T < 0 || K < 1 || ldx < K || T > INT32_MAX || K > INT32_MAX || ldx > INT32_MAX)
    return cu_err("cuda prefill gemm: bad shape: {} tokens, {} columns, row stride {}", T, K, ldx);
  const bool half = is_half(in);
  if (half && K % 8 != 0)
    return cu_err("cuda prefill gemm: {} columns: the {} inputs need a multiple of 8", K, gemm_inputs_name(in));
  for (const auto& o : outs) {
    const auto info = ggml_type_info(o.type);
    if (!info || !has_kernel(o.type))
      return cu_err("cuda prefill gemm: no kernel for weight type {}", type_cstr(o.type));
    if (K % info->block_size != 0)
      return cu_err("cuda prefill gemm: {} columns is not a whole number of {}-element {} blocks", K,
                    info->block_size, type_cstr(o.type));
    const int64_t ldy = o.ldy ? o.ldy : o.n_rows;
    if (o.n_rows < 1 || o.n_rows > INT32_MAX || ldy < o.n_rows || ldy > INT32_MAX || !o.w || (!o.y && T > 0))
      return cu_err("cuda prefill gemm: bad output: {} rows, row stride {}", o.n_rows, ldy);
  }
  if (T == 0 || outs.empty()) return {};
  if (!x) return cu_err("cuda prefill gemm: null input");
  cublasHandle_t h = impl_->handle;
  CUBLAS_TRY(cublasSetStream(h, stream));

  const void* xb = x;
  int64_t ldb = ldx;
  const bool split = in == GemmInputs::kF16Split;
  const void* xlo = nullptr;
  // f16 inputs: alpha and the betas from device memory (consts), alpha = 2^e of the scaling above
  const bool scaled = (in == GemmInputs::kF16 || split) && f16_scale_on();
  unsigned* mx = scaled ? impl_->consts.as<unsigned>() : nullptr;
  float* dalpha = scaled ? impl_->consts.as<float>() + 1 : nullptr;
  if (half) {
    DS_TRY(grow(impl_->xbuf, (size_t)(T * K) * 2 * (split ? 2 : 1)));
    uint16_t* xh = impl_->xbuf.as<uint16_t>();
    const int64_t n8 = T * K / 8;
    const bool bf = in == GemmInputs::kBf16;
    if (scaled) CUDA_TRY(cudaMemsetAsync(mx, 0, sizeof(unsigned), stream));
    const unsigned grid = (unsigned)((n8 + 255) / 256);
    if (split) {
      xlo = xh + T * K;
      convert_x_kernel<false, true><<<grid, 256, 0, stream>>>(x, ldx, T, K, xh, xh + T * K, mx);
    } else if (bf) {
      convert_x_kernel<true, false><<<grid, 256, 0, stream>>>(x, ldx, T, K, xh, nullptr, nullptr);
    } else {
      convert_x_kernel<false, false><<<grid, 256, 0, stream>>>(x, ldx, T, K, xh, nullptr, mx);
    }
    CUDA_TRY_LAUNCH("prefill gemm convert x", stream);
    if (scaled) {
      const unsigned g2 = std::min(grid, 512u);  // grid-stride; all blocks return at once when nothing is scaled
      if (split) rescale_x_kernel<true><<<g2, 256, 0, stream>>>(x, ldx, T, K, xh, xh + T * K, mx, dalpha);
      else rescale_x_kernel<false><<<g2, 256, 0, stream>>>(x, ldx, T, K, xh, nullptr, mx, dalpha);
      CUDA_TRY_LAUNCH("prefill gemm rescale x", stream);
    }
    xb = xh;
    ldb = K;
  }
  const cudaDataType_t dt = in == GemmInputs::kBf16                   ? CUDA_R_16BF
                            : in == GemmInputs::kF16 || split ? CUDA_R_16F
                                                              : CUDA_R_32F;
  const cublasComputeType_t ct = in == GemmInputs::kF32    ? CUBLAS_COMPUTE_32F_PEDANTIC
                                 : in == GemmInputs::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                           : CUBLAS_COMPUTE_32F;
  for (const auto& o : outs) {
    const int64_t N = o.n_rows, ldy = o.ldy ? o.ldy : o.n_rows;
    // The weight as the product reads it: used in place when it already has the input type.
    const void* wa = o.w;
    const bool direct = (o.type == GgmlType::F32 && !half) || (o.type == GgmlType::BF16 && in == GemmInputs::kBf16) ||
                        (o.type == GgmlType::F16 && (in == GemmInputs::kF16 || split));
    if (!direct) {
      DS_TRY(grow(impl_->wbuf, (size_t)(N * K) * (half ? 2 : 4)));
      if (half) {
        if (in == GemmInputs::kBf16) DS_TRY(dequant_half<true>(o.type, o.w, impl_->wbuf.as<uint16_t>(), N * K, stream));
        else DS_TRY(dequant_half<false>(o.type, o.w, impl_->wbuf.as<uint16_t>(), N * K, stream));
      } else {
        DS_TRY(dequantize(o.type, o.w, impl_->wbuf.as<float>(), N * K, stream));
      }
      wa = impl_->wbuf.data();
    }
    const float alpha = 1.f, beta = o.accumulate ? 1.f : 0.f, one = 1.f;
    const float* pc = impl_->consts.as<float>();
    const float* pa = scaled ? pc + 1 : &alpha;  // device pointers when scaled (pointer mode below)
    const float* pb = scaled ? pc + (o.accumulate ? 3 : 2) : &beta;
    const float* p1 = scaled ? pc + 3 : &one;
    CUBLAS_TRY(cublasSetPointerMode(h, scaled ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
    CUBLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)T, (int)K, pa, wa, dt, (int)K, xb, dt,
                            (int)ldb, pb, o.y, CUDA_R_32F, (int)ldy, ct, CUBLAS_GEMM_DEFAULT));
    if (split)  // + W · X_lo
      CUBLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)T, (int)K, pa, wa, dt, (int)K, xlo, dt,
                              (int)ldb, p1, o.y, CUDA_R_32F, (int)ldy, ct, CUBLAS_GEMM_DEFAULT));
  }
  CUBLAS_TRY(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  return {};
}

}  // namespace ds::cuda::prefill

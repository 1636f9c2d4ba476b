// Batch-1 matrix-vector product (matvec.h) and its fused-input form matvec_fused (RMSNorm / SwiGLU in the
// kernels' prologue, else a transform kernel + the plain product). Which kernel runs, in order of preference
// (Auto path; every choice measured on the H200, bench/cuda/NOTES.md; tests in tests/cuda/matvec_test.cpp,
// timings with bench/cuda/matvec_bench_standalone.cu "mvbench"):
//   Q4_K  matvec_stream.cuh     weights streamed by cp.async.bulk into a shared-memory ring, x as 4 exact int8
//                               digits, integer mma: rows >= 16 x SMs, not vocab-sized short rows (takes());
//                               DS_MATVEC_STREAM=0 off; one CTA of 16 consumer warps per SM where x + 2 stages
//                               need more than half the SM or rows have >= 32 super-blocks (decode9), else 2 x 8
//         matvec_tc.cuh         tensor cores, x in fp16 terms: the other shapes it takes; DS_MATVEC_TC=0 off
//                               (both tensor-core kernels)
//         matvec_smem.cuh       x in shared memory (cols <= 25600), else matvec_direct.cuh
//   Q6_K  matvec_stream_q6.cuh  the Q6_K stream kernel: even super-blocks per row, rows >= 16 x SMs with
//                               cols >= 2048 or vocab-sized rows with cols >= 1024; DS_MATVEC_STREAM_Q6K=0 off
//                               (16 consumer warps where one CTA per SM, decode9)
//         matvec_tc.cuh         Q6_K form only with DS_MATVEC_TC_Q6K=1 (accurate, not faster)
//         matvec_direct.cuh     direct loads; matvec_smem.cuh for vocab-sized short rows
//   Both streamed kernels prefetch the first 8 MB of the next product's weights into L2 at their end when the
//   caller names them (set_matvec_next; the batch-1 forward does; DS_MATVEC_PREFETCH_KB, 0 = off; decode8).
//   Q8_0  matvec_direct.cuh
//   Q3_K        matvec_direct.cuh (kq21; DS_MATVEC_DIRECT_KQ=0: the tile kernel below)
//   Q5_K        the tile kernel below (its direct decoder with DS_MATVEC_DIRECT_KQ=1: slower, see matvec.h)
//   other types: the shared-memory tile kernel of matvec_kernel.cuh (also the batched kernel's template).
// Thread mapping of the tile kernel: a CTA is 8 warps; a warp owns a row group of kR = 4 rows (or a 1/ks share
// of their columns when ks warps split the columns of few, long rows). A warp walks its rows in tiles of
// `lpr` units (quant_traits.cuh) per row: it copies the tile's bytes of all kR rows into its
// shared-memory slice with aligned 16-byte loads, then each lane decodes one unit per row from shared
// memory. Partial sums meet through shuffles within the group and shared memory across the ks warps.
#include <cstdlib>
#include <cstring>

#include "cuda/matvec_batched_fold.h"
#include "cuda/matvec_direct.cuh"
#include "cuda/matvec_kernel.cuh"
#include "cuda/matvec_smem.cuh"
#include "cuda/matvec_stream.cuh"
#include "cuda/matvec_stream_q6.cuh"
#include "cuda/matvec_tc.cuh"
#include "cuda/ops.h"

namespace ds::cuda {

namespace mvq {
// x in the stream kernels' shared-memory layout (Tune::xprep, decode10): two per device (a __device__ array, so
// no allocation while a graph is being captured; decode11: alternate products take alternate halves).
__device__ uint4 g_stream_x[2 * kXgMax / 16];
uint4* stream_x_buffer(int i) {
  constexpr int kDev = 16;
  static uint4* ptr[kDev] = {};
  static bool tried[kDev] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDev) return nullptr;
  if (!tried[dev]) {
    void* q = nullptr;
    if (cudaGetSymbolAddress(&q, g_stream_x) == cudaSuccess) ptr[dev] = static_cast<uint4*>(q);
    else (void)cudaGetLastError();
    tried[dev] = true;
  }
  return ptr[dev] ? ptr[dev] + (i & 1) * (kXgMax / 16) : nullptr;
}

// The probe (dec15, set_matvec_probe): the buffer, its size in stamps and the launches that took regions of it.
struct ProbeState {
  uint64_t* buf = nullptr;
  size_t cap = 0, used = 0;
  std::vector<MatvecProbeLaunch> log;
};
ProbeState& probe_state() {
  static ProbeState p;
  return p;
}
uint64_t* probe_take(int grid, int64_t rows, int64_t cols, bool q6) {
  ProbeState& p = probe_state();
  const size_t n = (size_t)grid * kProbeN;
  if (!p.buf || grid <= 0 || p.used + n > p.cap) return nullptr;
  uint64_t* r = p.buf + p.used;
  p.log.push_back({q6 ? GgmlType::Q6_K : GgmlType::Q4_K, rows, cols, grid, p.used});
  p.used += n;
  return r;
}
}  // namespace mvq

void set_matvec_probe(uint64_t* buf, size_t stamps) {
  mvq::ProbeState& p = mvq::probe_state();
  p = {};
  p.buf = buf;
  p.cap = buf ? stamps : 0;
}
std::vector<MatvecProbeLaunch> matvec_probe_log() { return mvq::probe_state().log; }

namespace {
// The checks every path shares (the tile launcher repeats them).
template <class QT>
Status check_args(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, const float* y) {
  if (rows <= 0 || cols <= 0) return cu_err("cuda matvec: empty matrix [{}, {}]", rows, cols);
  if (cols % QT::kBlockElems != 0)
    return cu_err("cuda matvec: {} weights need cols to be a multiple of {}, got {}", type_cstr(type),
                  QT::kBlockElems, cols);
  if ((uintptr_t)w % 16 != 0) return cu_err("cuda matvec: weights {} are not 16-byte aligned", w);
  if ((uintptr_t)x % 16 != 0) return cu_err("cuda matvec: x {} is not 16-byte aligned", (const void*)x);
  if ((uintptr_t)y % 4 != 0) return cu_err("cuda matvec: y {} is not 4-byte aligned", (const void*)y);
  return {};
}

int& direct_kq_ref() {
  static int mode = [] {
    const char* e = std::getenv("DS_MATVEC_DIRECT_KQ");
    return !e ? -1 : !std::strcmp(e, "1") ? 1 : !std::strcmp(e, "0") ? 0 : -1;
  }();
  return mode;
}

MatvecPath& path_ref() {
  static MatvecPath p = [] {
    const char* e = std::getenv("DS_MATVEC_PATH");
    if (e && !std::strcmp(e, "direct")) return MatvecPath::Direct;
    if (e && !std::strcmp(e, "smem")) return MatvecPath::Smem;
    return MatvecPath::Auto;
  }();
  return p;
}

// Whether the streamed kernel of the type (matvec_stream.cuh for Q4_K, matvec_stream_q6.cuh for Q6_K) takes
// [rows, cols]: Auto path only, and DS_MATVEC_TC=0 turns it off with the other tensor-core kernel.
bool stream_takes(bool q6, int64_t rows, int64_t cols) {
  return path_ref() == MatvecPath::Auto && mvt::tune().on && (q6 ? mvq6::takes(rows, cols) : mvq::takes(rows, cols));
}

// Q4_K / Q6_K: the shared-memory kernel (S) or the direct-load one (D), per matvec_path().
template <GgmlType T, class D, class S>
Status direct_or_smem(const void* w, int64_t rows, int64_t cols, const float* x, float* y, cudaStream_t stream,
                      bool accumulate) {
  if (auto st = check_args<qt::QuantTraits<T>>(T, w, rows, cols, x, y); !st.ok()) return st;
  const MatvecPath p = path_ref();
  // Auto: Q4_K on the tensor cores (matvec_tc.cuh) where it takes the shape.
  // Q6_K too with DS_MATVEC_TC_Q6K=1 (decode5; off by default until measured).
  constexpr bool q6 = T == GgmlType::Q6_K;
  // Q4_K: the streamed form of that kernel (matvec_stream.cuh) where it takes the shape.
  if (!q6 && stream_takes(false, rows, cols))
    return mvq::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
  // Q6_K: its streamed form (matvec_stream_q6.cuh, decode7) where it takes the shape.
  if (q6 && stream_takes(true, rows, cols))
    return mvq6::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
  if (p == MatvecPath::Auto && mvt::takes(rows, cols, q6))
    return mvt::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream, {}, q6);
  // Auto, from the H200 sweep in bench/cuda/NOTES.md: Q4_K is ~2x faster in shared memory at every
  // measured shape; Q6_K is 2-33% slower there except on vocab-sized short rows (0.8B output
  // [248320 x 1024]: 115 vs 134 us).
  const bool auto_smem = T == GgmlType::Q4_K || (rows >= 65536 && cols <= 2048);
  if (p != MatvecPath::Direct && mvs::fits(cols) && (p == MatvecPath::Smem || auto_smem))
    return mvs::launch<S>(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
  return mvd::launch<D>(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
}

// Q6_K: the fused (shared-memory) kernel unless the plain product would take the direct kernel and is
// large enough that the shared-memory kernel's deficit there outweighs the saved launch (the 9B/27B
// output heads: 425 vs 383 us; 27B ffn_down [5120 x 17408]: 49 vs 39 us; 9B ffn_down [4096 x 12288]:
// 24.9 vs 24.8 us, where the saved launch wins; bench/cuda/NOTES.md).
bool fuse_q6k(int64_t rows, int64_t cols) { return (rows >= 65536 && cols <= 2048) || rows * cols <= (int64_t)1 << 26; }

template <GgmlType T, class D>
Status direct(const void* w, int64_t rows, int64_t cols, const float* x, float* y, cudaStream_t stream,
              bool accumulate) {
  if (auto st = check_args<qt::QuantTraits<T>>(T, w, rows, cols, x, y); !st.ok()) return st;
  return mvd::launch<D>(static_cast<const uint8_t*>(w), rows, cols, x, y, accumulate, stream);
}
}  // namespace

MatvecPath matvec_path() { return path_ref(); }
MatvecTcTune matvec_tc_tune() {
  const mvt::Tune& t = mvt::tune();
  return {t.on, t.terms, t.ks, t.q6k};
}
void set_matvec_next(const void* w, size_t bytes) {
  mvq::next_hint() = {static_cast<const uint8_t*>(w), w ? bytes : 0};
}

MatvecStreamTune matvec_stream_tune() {
  const mvq::Tune& t = mvq::tune();
  return {t.mode, t.kc, t.stages, t.ctas_per_sm, t.i8, t.prefetch_kb, t.wide, t.one_cta_nb, t.xprep, t.xprep_q6k,
          t.xone, t.lean};
}
void set_matvec_stream_tune(const MatvecStreamTune& t) {
  mvq::tune().mode = t.mode;
  mvq::tune().kc = std::max(0, t.kc);
  mvq::tune().stages = t.stages;
  mvq::tune().ctas_per_sm = t.ctas_per_sm;
  mvq::tune().i8 = t.i8;
  mvq::tune().prefetch_kb = std::max(0, t.prefetch_kb);
  mvq::tune().wide = t.wide;
  mvq::tune().one_cta_nb = std::max(0, t.one_cta_nb);
  mvq::tune().xprep = std::max(0, t.xprep);
  mvq::tune().xprep_q6k = std::max(-1, t.xprep_q6k);
  mvq::tune().xone = std::clamp(t.xone, 0, 2);
  mvq::tune().lean = t.lean;
}
MatvecStreamQ6Tune matvec_stream_q6_tune() {
  const mvq6::Tune& t = mvq6::tune();
  return {t.mode, t.kc, t.stages, t.ctas_per_sm, t.wide, t.lean};
}
bool matvec_stream_q6_takes(int64_t rows, int64_t cols) {
  return stream_takes(true, rows, cols);
}
bool matvec_stream_takes(int64_t rows, int64_t cols) { return stream_takes(false, rows, cols); }
void set_matvec_stream_q6_tune(const MatvecStreamQ6Tune& t) {
  mvq6::tune().mode = t.mode;
  mvq6::tune().kc = std::max(0, t.kc);
  mvq6::tune().stages = t.stages;
  mvq6::tune().ctas_per_sm = t.ctas_per_sm;
  mvq6::tune().wide = t.wide;
  mvq6::tune().lean = t.lean;
}
void set_matvec_tc_tune(const MatvecTcTune& t) {
  mvt::tune().on = t.on;
  mvt::tune().terms = t.terms == 2 ? 2 : 3;
  mvt::tune().ks = t.ks;
  mvt::tune().q6k = t.q6k;
}
int matvec_async_stages() { return mvs::tune().async_stages; }
void set_matvec_async_stages(int n) { mvs::tune().async_stages = n; }

bool matvec_fuses(GgmlType type, int64_t rows, int64_t cols) {
  if ((type == GgmlType::Q4_K || type == GgmlType::Q6_K) && path_ref() == MatvecPath::Auto &&
      mvt::takes(rows, cols, type == GgmlType::Q6_K))
    return true;
  if ((type == GgmlType::Q4_K || type == GgmlType::Q6_K) && stream_takes(type == GgmlType::Q6_K, rows, cols)) return true;
  if (path_ref() == MatvecPath::Direct || !mvs::fits(cols)) return false;
  if (type == GgmlType::Q4_K) return true;
  if (type == GgmlType::Q6_K) return path_ref() == MatvecPath::Smem || fuse_q6k(rows, cols);
  return false;
}

Status matvec_fused(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecInput& in, float* y,
                    float* scratch, cudaStream_t stream, bool accumulate) {
  if (in.norm_w && in.gate) return cu_err("cuda matvec_fused: RMSNorm and SwiGLU inputs at once");
  if (!in.norm_w && !in.gate) return matvec(type, w, rows, cols, in.x, y, stream, accumulate);
  if (cols > (int64_t)1 << 30) return cu_err("cuda matvec_fused: {} cols", cols);
  const mvs::Pre pre{in.norm_w, in.eps, in.gate};
  // The prologue reads x, gate, norm_w as float4; other alignments take the two-launch path.
  const bool aligned = ((uintptr_t)in.x | (uintptr_t)in.gate | (uintptr_t)in.norm_w) % 16 == 0;
  if (aligned && matvec_fuses(type, rows, cols)) {
    const auto* wb = static_cast<const uint8_t*>(w);
    if (type == GgmlType::Q4_K) {
      if (auto st = check_args<qt::QuantTraits<GgmlType::Q4_K>>(type, w, rows, cols, in.x, y); !st.ok()) return st;
      if (stream_takes(false, rows, cols))
        return mvq::launch(wb, rows, cols, in.x, y, accumulate, stream, pre);
      if (path_ref() == MatvecPath::Auto && mvt::takes(rows, cols))
        return mvt::launch(wb, rows, cols, in.x, y, accumulate, stream, pre);
      return mvs::launch<mvs::Q4KS>(wb, rows, cols, in.x, y, accumulate, stream, pre);
    }
    if (auto st = check_args<qt::QuantTraits<GgmlType::Q6_K>>(type, w, rows, cols, in.x, y); !st.ok()) return st;
    if (stream_takes(true, rows, cols))
      return mvq6::launch(wb, rows, cols, in.x, y, accumulate, stream, pre);
    if (path_ref() == MatvecPath::Auto && mvt::takes(rows, cols, true))
      return mvt::launch(wb, rows, cols, in.x, y, accumulate, stream, pre, true);
    return mvs::launch<mvs::Q6KS>(wb, rows, cols, in.x, y, accumulate, stream, pre);
  }
  if (!scratch) return cu_err("cuda matvec_fused: {} [{}, {}] needs a scratch buffer", type_cstr(type), rows, cols);
  // The fallback: the input transform by the model's own kernels, then the plain product.
  if (in.gate) DS_TRY(swiglu(ops::SwigluParams{1, cols}, in.gate, in.x, scratch, stream));
  else DS_TRY(rms_norm(ops::RmsNormParams::packed(1, cols, in.eps), in.x, in.norm_w, scratch, stream));
  return matvec(type, w, rows, cols, scratch, y, stream, accumulate);
}
void set_matvec_path(MatvecPath p) { path_ref() = p; }
int matvec_direct_kq() { return direct_kq_ref(); }
void set_matvec_direct_kq(int mode) { direct_kq_ref() = mode == 0 || mode == 1 ? mode : -1; }

Status matvec(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
              cudaStream_t stream, bool accumulate) {
  switch (type) {
    case GgmlType::Q4_K:
      return direct_or_smem<GgmlType::Q4_K, mvd::Q4K, mvs::Q4KS>(w, rows, cols, x, y, stream, accumulate);
    case GgmlType::Q6_K:
      return direct_or_smem<GgmlType::Q6_K, mvd::Q6K, mvs::Q6KS>(w, rows, cols, x, y, stream, accumulate);
    case GgmlType::Q8_0: return direct<GgmlType::Q8_0, mvd::Q80>(w, rows, cols, x, y, stream, accumulate);
    case GgmlType::Q3_K:
      if (direct_kq_ref() != 0) return direct<GgmlType::Q3_K, mvd::Q3K>(w, rows, cols, x, y, stream, accumulate);
      break;
    case GgmlType::Q5_K:
      if (direct_kq_ref() == 1) return direct<GgmlType::Q5_K, mvd::Q5K>(w, rows, cols, x, y, stream, accumulate);
      break;
    default: break;
  }
  const mv::MvArgs a{static_cast<const uint8_t*>(w), 0, rows, cols, x, y, 1, 0, 0, accumulate};
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return mv::launch<qt::QuantTraits<GgmlType::T>, false>(type, a, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda matvec: no kernel for weight type {}", type_cstr(type));
  }
}

bool matvec_multi_takes(GgmlType type, int64_t rows, int64_t cols, int nseq) {
  if (nseq < 1 || nseq > 4) return false;
  const int kB = nseq <= 2 ? 2 : 4;
  if (type == GgmlType::Q4_K) return stream_takes(false, rows, cols) && mvq::takes_multi(rows, cols, kB);
  if (type == GgmlType::Q6_K) return stream_takes(true, rows, cols) && mvq6::takes_multi(rows, cols, kB);
  return false;
}

namespace {
// matvec_multi and matvec_multi_norm (pre: the RMSNorm or nothing; xn: the normalised x's destination or null).
Status multi_launch(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int nseq,
                    cudaStream_t stream, bool accumulate, const mvs::Pre& pre, float* xn) {
  const auto* wb = static_cast<const uint8_t*>(w);
  if (type == GgmlType::Q6_K) {  // no RMSNorm form (matvec_multi_norm_takes)
    if (auto st = check_args<qt::QuantTraits<GgmlType::Q6_K>>(type, w, rows, cols, x, y); !st.ok()) return st;
    if (pre.norm_w || pre.gate) return cu_err("cuda matvec_multi: no Q6_K form with an input transform");
    return mvq6::launch_multi(wb, rows, cols, x, y, nseq, accumulate, stream);
  }
  if (auto st = check_args<qt::QuantTraits<GgmlType::Q4_K>>(type, w, rows, cols, x, y); !st.ok()) return st;
  return mvq::launch_multi(wb, rows, cols, x, y, nseq, accumulate, stream, pre, xn);
}
}  // namespace

Status matvec_multi(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int nseq,
                    cudaStream_t stream, bool accumulate) {
  if (!matvec_multi_takes(type, rows, cols, nseq))
    return cu_err("cuda matvec_multi: {} [{}, {}] for {} sequences is not taken by the stream kernel", type_cstr(type),
                  rows, cols, nseq);
  return multi_launch(type, w, rows, cols, x, y, nseq, stream, accumulate, {}, nullptr);
}

MatvecStreamPlan matvec_stream_plan(GgmlType type, int64_t cols, int kB) {
  if (cols <= 0 || cols % 256 != 0 || (kB != 1 && kB != 2 && kB != 4)) return {};
  const int nb = (int)(cols / 256);
  if (type == GgmlType::Q6_K) {
    mvq6::Plan p;
    return mvq6::plan(nb, mvq6::tune(), p, kB) ? MatvecStreamPlan{p.warps, p.stages} : MatvecStreamPlan{};
  }
  if (type != GgmlType::Q4_K) return {};
  mvq::Plan p;
  return mvq::plan(3, nb, mvq::tune(), p, kB) ? MatvecStreamPlan{p.warps, p.stages} : MatvecStreamPlan{};
}

bool matvec_multi_norm_takes(GgmlType type, int64_t rows, int64_t cols, int nseq, bool xn) {
  if (type != GgmlType::Q4_K || !matvec_multi_takes(type, rows, cols, nseq)) return false;
  return !xn || mvq::multi_xn_takes(cols, nseq <= 2 ? 2 : 4);
}

Status matvec_multi_norm(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecInput& in, float* y,
                         int nseq, float* xn, cudaStream_t stream, bool accumulate) {
  if (!in.norm_w || in.gate) return cu_err("cuda matvec_multi_norm: needs norm weights and no SwiGLU gate");
  if (!matvec_multi_norm_takes(type, rows, cols, nseq, xn != nullptr))
    return cu_err("cuda matvec_multi_norm: {} [{}, {}] for {} sequences{} is not taken by the stream kernel",
                  type_cstr(type), rows, cols, nseq, xn ? " (writing xn)" : "");
  if (((uintptr_t)in.norm_w | (uintptr_t)xn) % 16 != 0)
    return cu_err("cuda matvec_multi_norm: norm weights {} / xn {} are not 16-byte aligned", (const void*)in.norm_w,
                  (const void*)xn);
  return multi_launch(type, w, rows, cols, in.x, y, nseq, stream, accumulate, mvs::Pre{in.norm_w, in.eps, nullptr}, xn);
}

}  // namespace ds::cuda

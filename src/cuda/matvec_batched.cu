// Batched matrix-vector products Y[B, rows] = X[B, cols] · Wᵀ for 1 < B <= 64 (matvec.h).
// Small batches first (session 28): Q4_K at B <= 8 and Q6_K at B <= 4 run as groups of 4 / 3 / 2 sequences through the
// batch-1 stream kernels' multi-sequence forms where those take the shape (matvec_multi, matvec_batched_fold.h: one
// pass over the weights per group instead of the batched kernels' A build at ~750 GB/s), and other Q4_K / Q6_K
// batches of <= 2 as batch-1 products (DS_MVB_COLUMNS). Then:
// Q4_K weights go to the scale-folding kernel (matvec_fold.cuh: sub-block scale inside the fp16 operand, x in
// two fp16 terms; mode 2 by default, mode 0 when 2 terms are asked for), at 25 <= B <= 64 on sm_90a builds
// and compute capability 9.0 to its wgmma form (matvec_wgmma.cuh: same operands, Hopper warpgroup MMA);
// Q6_K with fp16 x terms at 25 <= B <= 64 likewise to matvec_wgmma_q6k.cuh (and its ring); Q6_K and Q8_0 weights (and Q4_K
// with DS_MVB_FOLD=0) go to the GEMM-structured tensor-core kernel (matvec_gemm.cuh: weight tiles
// staged once per CTA, x split once per call into 2 fp16 terms of the column-scaled x, or with DS_MVB_FOLD=0
// into 3 (DS_MVB_TERMS=2: 2) bf16 terms); other block-quantized, BF16 and F16 weights
// to the per-warp tensor-core kernel (matvec_mma.cuh); both multiply integer codes as bf16 by x split into
// bf16 terms with fp32 accumulation (near-fp32 accuracy). F32 weights and F16/BF16 rows whose length is
// not a multiple of 16 use the FMA tile kernel (matvec_kernel.cuh).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "cuda/matvec_batched_fold.h"
#include "cuda/matvec_fold.cuh"
#include "cuda/matvec_gemm.cuh"
#include "cuda/matvec_kernel.cuh"
#include "cuda/matvec_mma.cuh"
#include "cuda/matvec_wgmma.cuh"
#include "cuda/matvec_wgmma_q6k.cuh"
#include "cuda/matvec_wgmma_ring.cuh"
#include "cuda/matvec_wgmma_block.cuh"
#include "cuda/matvec_wgmma_q6k_ring.cuh"

namespace ds::cuda {
namespace {

Status fma_path(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                cudaStream_t stream, bool accumulate) {
  const mv::MvArgs a{static_cast<const uint8_t*>(w), 0, rows, cols, x, y, batch, 0, 0, accumulate};
  switch (type) {
#define DS_CASE(T) \
  case GgmlType::T: return mv::launch<qt::QuantTraits<GgmlType::T>, true>(type, a, stream);
    DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
    default:
      return cu_err("cuda matvec_batched: no kernel for weight type {}", type_cstr(type));
  }
}

MatvecBatchedPath& path_setting() {
  static MatvecBatchedPath p = [] {
    const char* e = std::getenv("DS_MVB_PATH");
    return e && !std::strcmp(e, "mma") ? MatvecBatchedPath::Mma : MatvecBatchedPath::Gemm;
  }();
  return p;
}

int& terms_setting() {
  static int t = [] {
    const char* e = std::getenv("DS_MVB_TERMS");
    return e && !std::strcmp(e, "2") ? 2 : 3;
  }();
  return t;
}

// Fold kernel: 0 off, 1 + kMode (matvec_fold.cuh) on. DS_MVB_FOLD = 0 (off) or 1 (on, default);
// DS_MVB_FOLD_MODE = 0 | 1 | 2 picks where d is applied (default kFoldDefaultMode).
constexpr int kFoldDefaultMode = 2;
int& fold_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_FOLD");
    if (e && !std::strcmp(e, "0")) return 0;
    const char* m = std::getenv("DS_MVB_FOLD_MODE");
    return 1 + (m && m[0] >= '0' && m[0] <= '2' && !m[1] ? m[0] - '0' : kFoldDefaultMode);
  }();
  return v;
}

// wgmma kernel for Q4_K at 25 <= B <= 64 (matvec_wgmma.cuh): 0 off, 1 on (warpgroups per CTA chosen per
// shape), 2 or 3 warpgroups forced; DS_MVB_WG_SWAP=1 swaps the descriptor strides (layout check in the standalone
// bench). Block form (matvec_wgmma_block.cuh: one accumulator set per block; by shape): 9 = hi / lo as n64 wgmmas into
// one sum; 12 = n128; 13 (the default) below. DS_MVB_WG = 0 .. 3, 9, 12, 13. (8, 10, 11, x multicast to clusters of
// row tiles, were removed in splitk11: slower everywhere; 4 .. 7, the mbarrier-ring form of the first kernel
// (matvec_wgmma_ring.cuh's ring_kernel, the same bits as 1 .. 3), in session 42; those values now mean the default.)
// Where the driver has no tensor-map encoder the block settings fall back to wgmma_kernel by shape.
// 12 (batched9, the default until mvb15; H200, B = 64 kernel times vs the ring form (4, session 7's default; removed in
// session 42): ffn_gate_up 54.7 vs 58.2 us, output 478.6 vs 507.6, the 2-warpgroup shapes within 1%; n64 (9) is ~3%
// faster on ffn_gate_up / output but its float64 worst error is 3.5e-7 of sum|w x| against 2.05e-7 (12) and 1.15e-7
// (ring); the clusters were slower everywhere: x from L2 is not the limit). Not bit-equal to the ring (one chain per
// block).
// Default 13 (mvb15): 12 with the mins as one mma.sync per n-tile on sub-block sums (wgb::block_kernel's kMin2: half the
// mins' mma.sync, 2 KB less shared-memory traffic per block, <2> 205 -> 180 registers, <3> spill 48 -> 8 bytes); H200,
// B = 64, mvb_bench timedef vs 12: ffn_gate_up 51.7 / 51.9 vs 54.4 / 53.9 us, output 448 / 450 vs 473 / 472, ffn_down
// 37.6 / 37.8 vs 38.3 / 38.2; 9B step 8.334 / 8.314 vs 8.437 / 8.419 ms at 64, 8.964 vs 9.074 at 512+ positions, 7.124
// vs 7.208 at 32; float64 worst 2.03e-7 of sum|w x| (12: 2.05e-7). Other bits than 12 (sums over 32 elements, hi + lo
// in one product), the same plan (column independent of B).
constexpr int kWgDefault = 13, kWgMax = 13;
bool wg_valid(long n) { return (n >= 0 && n <= 3) || n == 9 || n == 12 || n == kWgMax; }
int& wg_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_WG");
    char* end = nullptr;
    const long n = e ? std::strtol(e, &end, 10) : -1;
    return e && *e && end && !*end && wg_valid(n) ? (int)n : kWgDefault;
  }();
  return v;
}
// wgmma kernel for Q6_K at 25 <= B <= 64 (matvec_wgmma_q6k.cuh; threshold wg6::min_batch()), independent of DS_MVB_WG: 0 off, 1 on
// (warpgroups per CTA chosen per shape), 2 or 3 forced, 4 = 2 pipelined. 11, the default: its ring form's scaled-A
// product (matvec_wgmma_q6k_ring.cuh, q6k16; A = fp16(sc·(q − 32)) and its exact remainder, three n64 wgmmas per
// sub-block into one sum per block, d once per block, 3 A sets in flight; shapes with cols / 256 a multiple of 8, else
// variant 1). DS_MVB_WG_Q6K = 0 .. 4, 11. H200, B = 64 (q6k16): 9B step 7.961 vs 8.177 ms at 64 against the sub-block
// form that was the default before it (8,039 vs 7,827 tok/s), 8.594 vs 8.850 at 512+ positions; Q6_K layer products
// 1,214 vs 1,350 us per step; output head 572 us in ncu; float64 worst in the tests 1.27e-7 (the sub-block form 1.03e-7).
// (Removed: 5 / 7, x multicast to clusters, in splitk11; 12, 4 A sets, the same step time; in session 42 the ring forms
// slower than 11 on every shape: 6, q6k_kernel's rounds on the ring (the default batched9 .. q6k13), 8, the block
// form, and 9, the sub-block form (the default q6k13 .. q6k16). Those values now mean the default.)
constexpr int kWgQ6kDefault = 11;
bool wg_q6k_valid(long v) { return (v >= 0 && v <= 4) || v == 11; }
int& wg_q6k_setting() {
  static int v = [] {
    const char* e = std::getenv("DS_MVB_WG_Q6K");
    char* end = nullptr;
    const long n = e ? std::strtol(e, &end, 10) : -1;
    return e && *e && end && !*end && wg_q6k_valid(n) ? (int)n : kWgQ6kDefault;
  }();
  return v;
}
bool wg_swap() {
  static const bool v = [] {
    const char* e = std::getenv("DS_MVB_WG_SWAP");
    return e && e[0] == '1';
  }();
  return v;
}
// sm_90a SASS in this build and a compute capability 9.0 device (the wgmma kernel's body exists only there).
bool wg_available() {
#if defined(DS_HAVE_SM90A)
  static const bool v = [] {
    auto d = device_info();
    return d && d->cc_major == 9 && d->cc_minor == 0;
  }();
  return v;
#else
  return false;
#endif
}

template <class DG, class D>
Status gemm_or_mma(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                   cudaStream_t stream, bool accumulate) {
  if (path_setting() == MatvecBatchedPath::Gemm && gemm::supports<DG>(rows, cols, batch)) {
    if (rows <= 0 || cols <= 0) return cu_err("cuda matvec_batched: empty matrix [{}, {}]", rows, cols);
    if ((uintptr_t)w % 16 != 0) return cu_err("cuda matvec_batched: weights {} are not 16-byte aligned", w);
    if ((uintptr_t)x % 16 != 0)
      return cu_err("cuda matvec_batched: x {} is not 16-byte aligned", (const void*)x);
    if ((uintptr_t)y % 4 != 0) return cu_err("cuda matvec_batched: y {} is not 4-byte aligned", (const void*)y);
    if constexpr (std::is_same_v<DG, mma::DecQ4K>)
      if (fold_setting() && wg_setting() && wg_available() && wg::supports(rows, cols, batch)) {
        if (wg_setting() >= 8 && wgr::tensor_map_encoder())  // block form: 9 (n64), 12 (n128), 13 (n128, kMin2)
          return wgb::launch(w, rows, cols, x, y, batch, stream, accumulate, wg_setting() == 9, wg_setting() == 13);
        return wg::launch(w, rows, cols, x, y, batch, stream, accumulate, wg_setting() >= 4 ? 1 : wg_setting(), wg_swap());
      }
    if constexpr (std::is_same_v<DG, gemm::DecQ6KQuarterH>)
      if (wg_q6k_setting() && wg_available() && wg6::supports(rows, cols, batch))
      {
        if (wg_q6k_setting() == 11 && wg6r::supports(cols))  // the ring's scaled-A form
          return wg6r::launch(w, rows, cols, x, y, batch, stream, accumulate, false);
        return wg6::launch(w, rows, cols, x, y, batch, stream, accumulate, wg_q6k_setting() == 11 ? 1 : wg_q6k_setting());
      }
    if constexpr (std::is_same_v<DG, mma::DecQ4K>)
      if (fold_setting() && fold::supports(rows, cols, batch))  // 2 terms: the fold kernel's fastest mode
        return fold::launch(w, rows, cols, x, y, batch, stream, accumulate, terms_setting() == 2 ? 0 : fold_setting() - 1);
    return gemm::launch<DG>(w, rows, cols, x, y, batch, stream, accumulate, terms_setting());
  }
  return mma::launch<D>(type, w, rows, cols, x, y, batch, stream, accumulate);
}

}  // namespace

MatvecBatchedPath matvec_batched_path() { return path_setting(); }
void set_matvec_batched_path(MatvecBatchedPath p) { path_setting() = p; }
int matvec_batched_terms() { return terms_setting(); }
void set_matvec_batched_terms(int terms) { terms_setting() = terms == 2 ? 2 : 3; }
bool matvec_batched_fold() { return fold_setting() != 0; }
void set_matvec_batched_fold(bool on) {
  if (!on) fold_setting() = 0;
  else if (fold_setting() == 0) fold_setting() = 1 + kFoldDefaultMode;
}
int matvec_batched_fold_mode() { return fold_setting() - 1; }
void set_matvec_batched_fold_mode(int mode) { fold_setting() = mode < 0 ? 0 : 1 + (mode > 2 ? 2 : mode); }

int matvec_batched_wgmma() { return wg_available() ? wg_setting() : 0; }
void set_matvec_batched_wgmma(int n_wg) { wg_setting() = wg_valid(n_wg) ? n_wg : 0; }
int matvec_batched_wgmma_q6k() { return wg_available() ? wg_q6k_setting() : 0; }
int matvec_batched_wgmma_min_batch(GgmlType type) {
  if (path_setting() != MatvecBatchedPath::Gemm) return 65;
  if (type == GgmlType::Q4_K) return matvec_batched_fold() && matvec_batched_wgmma() ? wg::kMinBatch : 65;
  if (type == GgmlType::Q6_K) return matvec_batched_fold() && matvec_batched_wgmma_q6k() ? wg6::min_batch() : 65;
  return 65;
}
bool matvec_batched_prep_reg() { return wg::prep_reg_setting(); }
void set_matvec_batched_prep_reg(bool on) { wg::prep_reg_setting() = on; }
int matvec_batched_block_build() { return wgb::build_setting(); }
void set_matvec_batched_block_build(int form) { wgb::build_setting() = form == 0 ? 0 : 1; }
int matvec_batched_block_lean() { return wgb::lean_setting(); }
void set_matvec_batched_block_lean(int on) { wgb::lean_setting() = on == 0 ? 0 : on == 2 ? 2 : 1; }
bool matvec_batched_mins_wgmma() { return wg::minw_setting() == 1; }
void set_matvec_batched_mins_wgmma(bool on) { wg::minw_setting() = on ? 1 : 0; }
int matvec_batched_split_reduce() { return wg::red_setting(); }
void set_matvec_batched_split_reduce(int mode) { wg::red_setting() = mode >= 0 && mode <= 2 ? mode : 1; }
void set_matvec_batched_wgmma_q6k(int v) { wg_q6k_setting() = wg_q6k_valid(v) ? v : 0; }

namespace {
// The size of the next group of matvec_batched's small-batch split from `rest` sequences left: 4 (or 3) where kB 4
// fits, else 2, a last single one.
int multi_group(GgmlType type, int64_t rows, int64_t cols, int rest) {
  return rest >= 3 && matvec_multi_takes(type, rows, cols, 4) ? std::min(rest, 4) : std::min(rest, 2);
}
// fold29's limit: the norm folded at B <= N. Default 6 (H100, 9B step, prompts of 4, fold vs DS_MVB_MULTI_NORM=0, session
// 29 calls 3 and 6): B = 2 3.020 / 3.026 vs 3.245 / 3.233 ms (-6.7%), 3 3.966 / 3.954 vs 4.094 / 4.077 (-3.1%), 4 4.149
// / 4.174 vs 4.246 / 4.258 (-2.1%), 6 6.081 / 6.082 vs 6.270 / 6.239 (-2.8%, call 3), 8 6.585 / 6.584 vs 6.513 / 6.525
// (+1.0%: two groups of 4 each folding cost more than one rms_norm launch); B = 7 not measured.
// An integer setting from the environment, clamped to [0, hi]; def where unset.
int env_setting(const char* name, int def, int hi) {
  const char* e = std::getenv(name);
  return e ? std::clamp(std::atoi(e), 0, hi) : def;
}
int& multi_norm_setting() {
  static int n = env_setting("DS_MVB_MULTI_NORM", 6, 8);
  return n;
}
// fold29: matvec_batched_in through matvec_multi_norm, every group of the split (a last single one as nseq 1).
bool multi_folds(GgmlType type, int64_t rows, int64_t cols, int batch, const MatvecBatchedInput& in) {
  if (batch < 2 || batch > multi_norm_setting() || batch > matvec_batched_multi(type) || in.ldx != cols ||
      !matvec_multi_takes(type, rows, cols, 2))
    return false;
  for (int b = 0; b < batch;) {
    const int n = multi_group(type, rows, cols, batch - b);
    if (!matvec_multi_norm_takes(type, rows, cols, n, in.xn != nullptr)) return false;
    b += n;
  }
  return true;
}
}  // namespace

int matvec_batched_multi_norm() { return multi_norm_setting(); }
void set_matvec_batched_multi_norm(int max_batch) { multi_norm_setting() = std::clamp(max_batch, 0, 8); }

// As matvec_batched would dispatch Q4_K there: the block form with kMin2 (13); fold29: the small batches' multi kernels.
bool matvec_batched_folds(GgmlType type, int64_t rows, int64_t cols, int batch, const MatvecBatchedInput& in) {
  auto a16 = [](const void* p) { return (uintptr_t)p % 16 == 0; };
  if (in.x && in.norm_w && a16(in.x) && a16(in.norm_w) && a16(in.xn) && multi_folds(type, rows, cols, batch, in))
    return true;
  if (type != GgmlType::Q4_K || batch < wg::kMinBatch || batch > 64 || !in.x || !in.norm_w) return false;
  if (path_setting() != MatvecBatchedPath::Gemm || !gemm::supports<mma::DecQ4K>(rows, cols, batch)) return false;
  if (!fold_setting() || wg_setting() != 13 || !wg_available() || !wg::supports(rows, cols, batch) ||
      !wgr::tensor_map_encoder() || !wg::prep_reg_setting())
    return false;
  return a16(in.x) && in.ldx % 4 == 0 && in.ldx >= cols && cols <= 4 * mk::kRmsV4 * 256 && a16(in.norm_w) &&
         a16(in.xn);
}

// The same launches as wgb::launch's kMin2 form, with the norm's preparation.
Status matvec_batched_in(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecBatchedInput& in,
                         float* y, int batch, cudaStream_t stream, bool accumulate) {
  if (!matvec_batched_folds(type, rows, cols, batch, in))
    return cu_err("cuda matvec_batched_in: no folded preparation for {} [{} x {}] at batch {}", type_cstr(type), rows,
                  cols, batch);
  if ((uintptr_t)w % 16 != 0) return cu_err("cuda matvec_batched_in: weights {} are not 16-byte aligned", w);
  if ((uintptr_t)y % 4 != 0) return cu_err("cuda matvec_batched_in: y {} is not 4-byte aligned", (const void*)y);
  if (multi_folds(type, rows, cols, batch, in)) {
    for (int b = 0; b < batch;) {
      const int n = multi_group(type, rows, cols, batch - b);
      const MatvecInput mi{in.x + (int64_t)b * cols, in.norm_w, in.eps};
      DS_TRY(matvec_multi_norm(type, w, rows, cols, mi, y + (int64_t)b * rows, n, in.xn ? in.xn + (int64_t)b * cols : nullptr,
                               stream, accumulate));
      b += n;
    }
    return {};
  }
  const int n_wg = wgb::wg_force() ? wgb::wg_force() : wg::choose_wg(rows, cols, sm_count());
  wg::Args a;
  dim3 grid;
  DS_TRY(wg::prepare(w, rows, cols, nullptr, y, batch, stream, accumulate, n_wg, false, a, grid, true, &in));
  return wgb::launch_min2(a, grid, n_wg, stream);
}

namespace {
int& columns_setting() {
  static int n = env_setting("DS_MVB_COLUMNS", 2, kMatvecMaxBatch);
  return n;
}
int& multi_setting() {
  static int n = env_setting("DS_MVB_MULTI", 8, kMatvecMaxBatch);
  return n;
}
}  // namespace

int matvec_batched_multi(GgmlType type) {
  // Q6_K: two groups of 4 lost to the batched kernel (H100, session 28 call 3: 9B step at B = 8 7.800 vs 6.775 ms)
  return type == GgmlType::Q6_K ? std::min(multi_setting(), 4) : multi_setting();
}
void set_matvec_batched_multi(int n) { multi_setting() = std::clamp(n, 0, kMatvecMaxBatch); }

int matvec_batched_columns(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q6_K ? columns_setting() : 0;
}
void set_matvec_batched_columns(int n) { columns_setting() = std::clamp(n, 0, kMatvecMaxBatch); }

bool matvec_batched_hi_supported(GgmlType type, int64_t rows, int64_t cols, int batch) {
  return type == GgmlType::Q6_K && batch <= kMatvecMaxBatch && wg_available() && wg6::supports(rows, cols, batch) &&
         wg6r::supports(cols);
}

Status matvec_batched_hi(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                         cudaStream_t stream) {
  if (!matvec_batched_hi_supported(type, rows, cols, batch))
    return cu_err("cuda matvec_batched_hi: no hi-only kernel for {} [{}, {}] at batch {}", type_cstr(type), rows, cols,
                  batch);
  if ((uintptr_t)w % 16 != 0 || (uintptr_t)x % 16 != 0 || (uintptr_t)y % 4 != 0)
    return cu_err("cuda matvec_batched_hi: misaligned operands");
  return wg6r::launch(w, rows, cols, x, y, batch, stream, false, true);
}

Status matvec_batched(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
                      int batch, cudaStream_t stream, bool accumulate) {
  if (batch < 1 || batch > kMatvecMaxBatch)
    return cu_err("cuda matvec_batched: batch {} outside [1, {}]", batch, kMatvecMaxBatch);
  if (batch == 1) return matvec(type, w, rows, cols, x, y, stream, accumulate);
  if (batch <= matvec_batched_multi(type) && matvec_multi_takes(type, rows, cols, 2)) {
    for (int b = 0; b < batch;) {  // groups of 4 (or 3) where kB 4 fits, else 2, a last single one by matvec
      const int n = multi_group(type, rows, cols, batch - b);
      const float* xb = x + (int64_t)b * cols;
      float* yb = y + (int64_t)b * rows;
      DS_TRY(n == 1 ? matvec(type, w, rows, cols, xb, yb, stream, accumulate)
                    : matvec_multi(type, w, rows, cols, xb, yb, n, stream, accumulate));
      b += n;
    }
    return {};
  }
  if (batch <= matvec_batched_columns(type)) {
    for (int b = 0; b < batch; b++) DS_TRY(matvec(type, w, rows, cols, x + b * cols, y + b * rows, stream, accumulate));
    return {};
  }
  const auto args = std::make_tuple(type, w, rows, cols, x, y, batch, stream, accumulate);
  switch (type) {
    case GgmlType::Q4_K: return std::apply(gemm_or_mma<mma::DecQ4K, mma::DecQ4K>, args);
    case GgmlType::Q5_K: return std::apply(mma::launch<mma::DecQ5K>, args);
    case GgmlType::Q6_K:  // fold on: x as 2 fp16 terms (gemm::DecQ6KQuarterH), else 3 (or 2) bf16 terms
      return fold_setting() ? std::apply(gemm_or_mma<gemm::DecQ6KQuarterH, mma::DecQ6K>, args)
                            : std::apply(gemm_or_mma<gemm::DecQ6KQuarter, mma::DecQ6K>, args);
    case GgmlType::Q8_0:
      return fold_setting() ? std::apply(gemm_or_mma<gemm::DecQ8_0H, mma::DecQ8_0>, args)
                            : std::apply(gemm_or_mma<mma::DecQ8_0, mma::DecQ8_0>, args);
    case GgmlType::Q4_0: return std::apply(mma::launch<mma::DecQ4_0>, args);
    case GgmlType::Q5_0: return std::apply(mma::launch<mma::DecQ5_0>, args);
    case GgmlType::IQ4_NL: return std::apply(mma::launch<mma::DecIQ4NL>, args);
    case GgmlType::IQ4_XS: return std::apply(mma::launch<mma::DecIQ4XS>, args);
    case GgmlType::BF16:
      if (cols % 16 == 0) return std::apply(mma::launch<mma::DecBF16>, args);
      break;
    case GgmlType::F16:
      if (cols % 16 == 0) return std::apply(mma::launch<mma::DecF16>, args);
      break;
    default: break;
  }
  return fma_path(type, w, rows, cols, x, y, batch, stream, accumulate);
}

}  // namespace ds::cuda

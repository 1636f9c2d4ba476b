// cuda::matvec_batched vs a float64 reference (the exact dequantized weights times x, summed in double),
// per type and per batch row, for B in {2, 7, 8, 33, 64} (a partial 8-column tile, exactly one tile, 4 tiles
// + 1 column, 8 tiles), rows that are not a multiple of the 16-row tensor-core tile or of the GEMM kernel's
// 256-row CTA tile, rows shorter than one warp's tile, long rows split over warps (matvec_mma.cuh) or over
// CTAs (matvec_gemm.cuh's split K), and accumulate = true; and run-to-run bit-identical results. Both
// batched paths (gemm, mma), both term counts (3, 2) and Q4_K with and without the scale-folding kernel
// (matvec_fold.cuh; its mode comes from DS_MVB_FOLD_MODE, default 2) are checked, and Q4_K at B >= 25 with
// the wgmma kernel (matvec_wgmma.cuh) off, per-shape, and forced to 2 or 3 warpgroups (and its ring and block forms),
// and likewise Q6_K with the wgmma Q6_K kernel (matvec_wgmma_q6k.cuh and its ring form; also at the ends of its scale
// and code ranges). Error metric per output:
//   |y_cuda - y_ref| / sum_k |w_k x_k|
// Bounds: 1e-5 with 3 bf16 terms (24 significant bits of x, as fp32: only the fp32 summation order differs
// from exact; measured ~1e-7) and 4e-5 with 2 terms (16 bits: worst case 2^-17 relative per element, so
// ~1.5e-5 for a sum of same-sign products; ~1e-6 typical). The worst errors are printed (the measured
// accuracy of each path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "cuda/matvec.h"
#include "cuda/matvec_batched_fold.h"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

double tol() { return cuda::matvec_batched_terms() == 2 ? 4e-5 : 1e-5; }

struct Config {
  cuda::MatvecBatchedPath path;
  int terms;
  bool fold;  // Q4_K through the scale-folding kernel (matvec_fold.cuh), Q6_K / Q8_0 with fp16 x terms
  int wg;     // Q4_K at 25 <= B <= 64 through the wgmma kernel (matvec_wgmma.cuh): 0 off, 1 auto, 2 / 3
              // warpgroups forced; its block form (matvec_wgmma_block.cuh, one sum per block): 9 n64, 12 n128, 13
              // n128 with the mins on sub-block sums (one mma.sync per n-tile);
              // -1 leave the default
  int wg6 = -1;  // Q6_K at 25 <= B <= 64 through the wgmma Q6_K kernel (matvec_wgmma_q6k.cuh): the same values,
                 // and 4 = 2 warpgroups pipelined; 11 = its ring form's scaled-A product (matvec_wgmma_q6k_ring.cuh:
                 // A = fp16(sc·(q − 32)) + its exact remainder, one sum per block)
};
// The block kernels' defaults (Q4_K 13, Q6_K 11) run in the default config; config 9 (n64), 12 (the Q4_K default before
// mvb15) and Q6_K 1 (the cp.async kernel, the default before batched9; still the product on shapes the ring does not
// take) are listed, and the defaults 13 / Q6_K 11 once more as configs of their own (Q4_K / Q6_K only:
// DS_TEST_MVB_WG=13,q11 selects them, e.g. under compute-sanitizer). (The x-cluster forms, Q4_K 8, 10, 11 and Q6_K 5,
// 7, were removed in splitk11; the Q4_K ring forms 4 .. 7 and the Q6_K ring forms 6, 8, 9 in session 42.)
// Default first (gemm, 3 terms, Q4_K folded), then the 3-term GEMM kernel for Q4_K, 2 terms, the mma kernel,
// and the fold kernel / wgmma kernel choice at B > 32 both ways (the wgmma kernel: sm_90a builds on
// compute capability 9.0 only; elsewhere those configs run the fold kernel).
const Config kConfigs[] = {{cuda::MatvecBatchedPath::Gemm, 3, true, -1},
                           {cuda::MatvecBatchedPath::Gemm, 3, false, -1},
                           {cuda::MatvecBatchedPath::Gemm, 2, true, -1},
                           {cuda::MatvecBatchedPath::Mma, 3, true, -1},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 0},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 1},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 2},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 3},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 9},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 12},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, 13},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 0},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 2},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 3},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 4},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 1},
                           {cuda::MatvecBatchedPath::Gemm, 3, true, -1, 11}};

// DS_TEST_MVB_WG = a comma-separated list of wg values (e.g. "2,9"; "-1": the configs that force neither switch) and
// qN for wg6 value N (e.g. "q8"): only the configs with those (a shorter run, e.g. under compute-sanitizer); unset:
// every config.
std::vector<Config> configs() {
  const char* e = std::getenv("DS_TEST_MVB_WG");
  if (!e || !*e) return std::vector<Config>(std::begin(kConfigs), std::end(kConfigs));
  std::vector<Config> v;
  const std::string list = std::string(",") + e + ",";
  for (const Config& c : kConfigs)
    if (c.wg6 >= 0 ? list.find(",q" + std::to_string(c.wg6) + ",") != std::string::npos
                   : list.find("," + std::to_string(c.wg) + ",") != std::string::npos)
      v.push_back(c);
  return v;
}

// Sets the batched path, term count and fold switch for one scope, restoring the previous ones after it.
struct PathScope {
  cuda::MatvecBatchedPath path0 = cuda::matvec_batched_path();
  int terms0 = cuda::matvec_batched_terms();
  int fold0 = cuda::matvec_batched_fold_mode();  // -1 off, else the mode (DS_MVB_FOLD_MODE picks it)
  int wg0 = cuda::matvec_batched_wgmma();
  int wg60 = cuda::matvec_batched_wgmma_q6k();
  explicit PathScope(const Config& c) {
    cuda::set_matvec_batched_path(c.path);
    cuda::set_matvec_batched_terms(c.terms);
    cuda::set_matvec_batched_fold_mode(c.fold ? (fold0 >= 0 ? fold0 : 2) : -1);
    if (c.wg >= 0) cuda::set_matvec_batched_wgmma(c.wg);
    if (c.wg6 >= 0) cuda::set_matvec_batched_wgmma_q6k(c.wg6);
  }
  ~PathScope() {
    cuda::set_matvec_batched_path(path0);
    cuda::set_matvec_batched_terms(terms0);
    cuda::set_matvec_batched_fold_mode(fold0);
    cuda::set_matvec_batched_wgmma(wg0);
    cuda::set_matvec_batched_wgmma_q6k(wg60);
  }
  static std::string name() {
    return std::string(cuda::matvec_batched_path() == cuda::MatvecBatchedPath::Gemm ? "gemm" : "mma") + "/" +
           std::to_string(cuda::matvec_batched_terms()) + " terms" +
           (cuda::matvec_batched_fold() ? "/fold" + std::to_string(cuda::matvec_batched_fold_mode()) : "/nofold") +
           (cuda::matvec_batched_fold() && cuda::matvec_batched_wgmma() ? "/wg" + std::to_string(cuda::matvec_batched_wgmma())
                                                                        : "") +
           (cuda::matvec_batched_fold() && cuda::matvec_batched_wgmma_q6k()
                ? "/wg6_" + std::to_string(cuda::matvec_batched_wgmma_q6k())
                : "");
  }
};

bool is_default(const Config& c) {
  const Config& d = kConfigs[0];
  return c.path == d.path && c.terms == d.terms && c.fold == d.fold && c.wg == d.wg && c.wg6 == d.wg6;
}
// Every type under the default configuration (the first); the others only change the GEMM kernel's types.
std::vector<GgmlType> types_for(const Config& cfg) {
  if (is_default(cfg)) return test::cuda_types();
  if (cfg.wg >= 0) return {GgmlType::Q4_K};   // the wgmma switch changes Q4_K only
  if (cfg.wg6 >= 0) return {GgmlType::Q6_K};  // and the Q6_K one Q6_K only

  return {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0};
}

struct Case {
  int64_t rows, cols;
  const char* what;
};

// Runs one product and returns the worst error over every checked (row, batch column); rms_out gets the
// root mean square of the errors.
// shape_x (optional) rewrites x (batch rows of c.cols) before the product.
double run_case(GgmlType t, const Case& c, int batch, bool accumulate, uint64_t seed, std::string& where,
                double* rms_out = nullptr, void (*shape_x)(std::vector<float>&, int64_t) = nullptr,
                void (*shape_w)(std::vector<uint8_t>&) = nullptr) {
  auto w = test::random_weights(t, c.rows * c.cols, seed);
  if (shape_w) shape_w(w);
  auto x = test::random_floats(batch * c.cols, seed + 1);
  if (shape_x) shape_x(x, c.cols);
  const auto y0 = test::random_floats(batch * c.rows, seed + 2);
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto dy = cuda::DeviceBuffer::alloc(batch * c.rows * 4);
  EXPECT_TRUE(dy.ok());
  if (!dy.ok()) return INFINITY;
  if (accumulate) {
    EXPECT_TRUE(dy->upload(y0.data(), y0.size() * 4).ok());
  } else {
    const std::vector<float> nan(batch * c.rows, NAN);  // every output must be written
    EXPECT_TRUE(dy->upload(nan.data(), nan.size() * 4).ok());
  }
  auto st = cuda::matvec_batched(t, dw.data(), c.rows, c.cols, dx.as<float>(), dy->as<float>(), batch, nullptr,
                                 accumulate);
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (!st.ok()) return INFINITY;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = test::to_host<float>(*dy, batch * c.rows);

  const uint64_t rb = ggml_row_bytes(*ggml_type_info(t), c.cols);
  std::vector<float> deq(c.cols);
  double worst = 0, sq = 0;
  int64_t n = 0;
  const int64_t stride = c.rows > 2000 ? 7 : 1;
  for (int64_t r = 0; r < c.rows; r = (r == c.rows - 1) ? c.rows : std::min(r + stride, c.rows - 1)) {
    quant::dequantize_row(t, w.data() + r * rb, deq.data(), c.cols);
    for (int b = 0; b < batch; b++) {
      const float* xb = x.data() + (int64_t)b * c.cols;
      double mag = 0, ref = 0;
      for (int64_t k = 0; k < c.cols; k++) {
        mag += std::fabs((double)deq[k] * xb[k]);
        ref += (double)deq[k] * xb[k];
      }
      if (accumulate) ref += y0[(int64_t)b * c.rows + r];
      const double got = y[(int64_t)b * c.rows + r];
      const double e = std::fabs(got - ref) / std::max(mag, 1e-30);
      sq += e * e;
      n++;
      if (!(e <= worst)) {
        worst = std::isnan(e) ? INFINITY : e;
        where = "row " + std::to_string(r) + " batch " + std::to_string(b) + ": got " + std::to_string(got) +
                " want " + std::to_string(ref);
      }
    }
  }
  if (rms_out) *rms_out = std::sqrt(sq / (double)std::max<int64_t>(n, 1));
  return worst;
}

std::vector<Case> cases_for(GgmlType t) {
  std::vector<Case> v = {
      {77, 256, "77 rows: one partial 16-row tile per warp"},
      {1027, 512, "rows % 16 = 3"},
      {333, 1280, "5 super-blocks per row"},
      {21, 17408, "long rows, few of them: split over column slices"},
      {515, 4096, "9B hidden size"},
      {300, 12288, "9B ffn_down width: K split over CTAs"},
  };
  if (ggml_type_info(t)->block_size < 256) v.push_back({45, 96, "3 blocks of 32 per row"});
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) v.push_back({19, 40, "cols % 16 = 8"});
  return v;
}

TEST(CudaMatvecBatched, MatchesFloat64PerBatchRow) {
  DS_REQUIRE_GPU();
  for (const Config& cfg : configs()) {
    PathScope scope(cfg);
    uint64_t seed = 1000;
    for (GgmlType t : types_for(cfg)) {
      double type_worst = 0, type_rms = 0;
      for (const Case& c : cases_for(t))
        for (int batch : {2, 7, 8, 25, 33, 41, 64}) {
          std::string where;
          double rms = 0;
          const double e = run_case(t, c, batch, false, seed += 3, where, &rms);
          type_worst = std::max(type_worst, e);
          type_rms = std::max(type_rms, rms);
          EXPECT_LE(e, tol()) << PathScope::name() << " " << ggml_type_name(t) << " [" << c.rows << " x " << c.cols
                              << "] B " << batch << " (" << c.what << "): worst " << where;
        }
      std::printf("matvec_batched %-12s %-7s worst %.3g of sum|w x|, largest per-case rms %.3g\n",
                  PathScope::name().c_str(), std::string(ggml_type_name(t)).c_str(), type_worst, type_rms);
    }
  }
}

TEST(CudaMatvecBatched, Accumulate) {
  DS_REQUIRE_GPU();
  for (const Config& cfg : configs()) {
    PathScope scope(cfg);
    uint64_t seed = 5000;
    for (GgmlType t : types_for(cfg))
      for (int batch : {7, 64})
        for (const Case& c : {Case{301, 2048, "301 rows"}, Case{21, 17408, "long rows, K split"}}) {
          std::string where;
          const double e = run_case(t, c, batch, true, seed += 3, where);
          EXPECT_LE(e, tol()) << PathScope::name() << " " << ggml_type_name(t) << " accumulate [" << c.rows << " x "
                              << c.cols << "] B " << batch << ": worst " << where;
        }
  }
}

// Batch rows of very different magnitudes (the fold kernel scales each row of x by its own power of two):
// tiny (1e-30), all zeros, huge (1e20), and one large outlier per 256 elements among small values.
TEST(CudaMatvecBatched, RowScalesAndOutliers) {
  DS_REQUIRE_GPU();
  auto shape = [](std::vector<float>& x, int64_t cols) {
    for (int64_t k = 0; k < cols; k++) {
      x[k] *= 1e-30f;
      x[cols + k] = 0.f;
      x[2 * cols + k] *= 1e20f;
      x[3 * cols + k] *= k % 256 == 17 ? 1e4f : 1e-3f;
    }
  };
  for (const Config& cfg : configs()) {
    PathScope scope(cfg);
    uint64_t seed = 7000;
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
      for (int batch : {4, 48}) {  // 48: the wgmma kernels (their 64 columns hold the 4 shaped rows)
        std::string where;
        const double e = run_case(t, Case{300, 4096, "row scales"}, batch, false, seed += 3, where, nullptr, shape);
        EXPECT_LE(e, tol()) << PathScope::name() << " " << ggml_type_name(t) << " B " << batch << ": worst " << where;
      }
  }
}

// Q6_K at the ends of its ranges: sub-block scales -128, 127, -127, 16, -16, 15 and codes 0 or 63 (q − 32 =
// -32 or 31), so sc·(q − 32) reaches 4096 in magnitude (the wgmma kernel's two fp16 parts 16·sh·(q − 32) and
// sl·(q − 32) at their limits), at batch sizes on both sides of the wgmma kernel's threshold.
TEST(CudaMatvecBatched, Q6KExtremeScalesAndCodes) {
  DS_REQUIRE_GPU();
  auto shape = [](std::vector<uint8_t>& w) {
    static const int8_t kScales[] = {-128, 127, -127, 16, -16, 15, -128, -128};
    for (size_t b = 0; b + 210 <= w.size(); b += 210) {
      uint8_t* p = &w[b];
      for (int i = 0; i < 192; i++) p[i] = (b / 210 + i) % 3 == 0 ? 0x00 : (b / 210 + i) % 3 == 1 ? 0xFF : p[i];
      for (int j = 0; j < 16; j++) p[192 + j] = (uint8_t)kScales[(j + b / 210) % 8];
    }
  };
  for (const Config& cfg : configs()) {
    if (!is_default(cfg) && cfg.wg6 < 0) continue;
    PathScope scope(cfg);
    uint64_t seed = 8000;
    double worst = 0;
    for (int batch : {7, 25, 41, 64})
      for (const Case& c : {Case{333, 4096, "333 rows"}, Case{200, 12288, "K split"}}) {
        std::string where;
        const double e = run_case(GgmlType::Q6_K, c, batch, false, seed += 3, where, nullptr, nullptr, shape);
        worst = std::max(worst, e);
        EXPECT_LE(e, tol()) << PathScope::name() << " Q6_K extremes [" << c.rows << " x " << c.cols << "] B "
                            << batch << ": worst " << where;
      }
    std::printf("matvec_batched %-12s Q6_K extremes worst %.3g of sum|w x|\n", PathScope::name().c_str(), worst);
  }
}

TEST(CudaMatvecBatched, BatchOneIsMatvec) {
  DS_REQUIRE_GPU();
  const GgmlType t = GgmlType::Q4_K;
  const int64_t rows = 300, cols = 1024;
  const auto w = test::random_weights(t, rows * cols, 9);
  const auto x = test::random_floats(cols, 10);
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto d1 = cuda::DeviceBuffer::alloc(rows * 4);
  auto d2 = cuda::DeviceBuffer::alloc(rows * 4);
  ASSERT_TRUE(d1.ok() && d2.ok());
  ASSERT_TRUE(cuda::matvec(t, dw.data(), rows, cols, dx.as<float>(), d1->as<float>(), nullptr).ok());
  ASSERT_TRUE(cuda::matvec_batched(t, dw.data(), rows, cols, dx.as<float>(), d2->as<float>(), 1, nullptr).ok());
  EXPECT_EQ(test::to_host<float>(*d1, rows), test::to_host<float>(*d2, rows));
}

// The same inputs give the same bits on every call (no atomics in the reduction): greedy decoding of a
// batch must be reproducible.
TEST(CudaMatvecBatched, RunToRunIdentical) {
  DS_REQUIRE_GPU();
  for (const Config& cfg : configs()) {
    PathScope scope(cfg);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0})
      for (const Case& c : {Case{333, 12288, "K split over CTAs"}, Case{4099, 4096, "17 row tiles"}}) {
        const int batch = 33;
        const auto w = test::random_weights(t, c.rows * c.cols, 21);
        const auto x = test::random_floats(batch * c.cols, 22);
        auto dw = test::to_device(w);
        auto dx = test::to_device(x);
        auto dy = cuda::DeviceBuffer::alloc(batch * c.rows * 4);
        ASSERT_TRUE(dy.ok());
        std::vector<float> first;
        for (int rep = 0; rep < 5; rep++) {
          ASSERT_TRUE(cuda::matvec_batched(t, dw.data(), c.rows, c.cols, dx.as<float>(), dy->as<float>(), batch,
                                           nullptr).ok());
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const auto y = test::to_host<float>(*dy, batch * c.rows);
          if (rep == 0) first = y;
          else EXPECT_EQ(y, first) << PathScope::name() << " " << ggml_type_name(t) << " [" << c.rows << " x "
                                   << c.cols << "] repetition " << rep;
        }
      }
  }
}

// A batch column's result does not depend on the other columns or on B's n-tile count (the same row of x
// alone in a batch of 2 and among 64 gives the same bits): greedy decoding is the same in any batch. With
// a wgmma kernel on, Q4_K at B >= 25 and Q6_K at B >= 33 (matvec_batched_wgmma_min_batch) run a different
// kernel (its own bits, identical for every B from the threshold to 64) whose results agree with the fold /
// gemm kernel's to the products' accuracy. With matvec_batched_columns N > 0 (cols27), B <= N gives batch 1's bits.
TEST(CudaMatvecBatched, ColumnIndependentOfBatch) {
  DS_REQUIRE_GPU();
  const int kBatches[] = {2, 9, 25, 32, 33, 40, 41, 64};
  for (const Config& cfg : configs()) {
    PathScope scope(cfg);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
      const int64_t rows = 700, cols = 4096;
      const auto w = test::random_weights(t, rows * cols, 31);
      const auto x = test::random_floats(64 * cols, 32);
      auto dw = test::to_device(w);
      auto dx = test::to_device(x);
      auto dy = cuda::DeviceBuffer::alloc(64 * rows * 4);
      ASSERT_TRUE(dy.ok());
      std::vector<std::vector<float>> col0;
      for (int batch : kBatches) {
        ASSERT_TRUE(cuda::matvec_batched(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), batch, nullptr).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        col0.push_back(test::to_host<float>(*dy, rows));  // batch column 0
      }
      const std::string what = PathScope::name() + " " + std::string(ggml_type_name(t));
      const int min_wg = cuda::matvec_batched_wgmma_min_batch(t), n_cols = cuda::matvec_batched_columns(t);
      ASSERT_LT(n_cols, 9) << "the regimes below assume DS_MVB_COLUMNS <= 8";
      std::vector<float> b1;  // B = 2 as two batch-1 products (n_cols >= 2): matvec's bits; or (pair28) by matvec_pair
      const bool pair = cuda::matvec_batched_multi(t) >= 2 && cuda::matvec_multi_takes(t, rows, cols, 2);  // <= 44 SMs
      if (n_cols >= 2 || pair) {
        ASSERT_TRUE(cuda::matvec(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), nullptr).ok());
        if (!pair) EXPECT_EQ(col0[0], test::to_host<float>(*dy, rows)) << what << " B 2 vs batch 1";
        b1 = col0[0];
        col0[0] = col0[1];  // B = 9: the fold / gemm regime, the reference of the checks below
      }
      if (t == GgmlType::Q8_0) {
        EXPECT_EQ(min_wg, 65) << what;
      }
      float scale = 0;
      for (float v : col0[0]) scale = std::max(scale, std::fabs(v));
      const size_t last = std::size(kBatches) - 1;
      for (size_t r = 0; r < b1.size(); r++)
        ASSERT_NEAR(b1[r], col0[last][r], 1e-5f * scale) << what << " B 2 (batch-1 products) vs 64, row " << r;
      for (size_t i = 0; i < last; i++) {
        const int b = kBatches[i];
        const std::string pair = what + " B " + std::to_string(b) + " vs 64";
        if ((b >= min_wg) == (64 >= min_wg)) {
          EXPECT_EQ(col0[i], col0[last]) << pair;
        } else {  // B below the wgmma kernel's threshold: the same bits as B = 2, near the wgmma kernel's
          EXPECT_EQ(col0[i], col0[0]) << what << " B " << b << " vs 2";
          for (int64_t r = 0; r < rows; r++)
            ASSERT_NEAR(col0[i][r], col0[last][r], 1e-5f * scale) << pair << " (fold / gemm vs wgmma), row " << r;
        }
      }
    }
  }
}

// pair28 / quad28 / q6m28: Q4_K and Q6_K batches of 2..5 through the batch-1 stream kernels' multi-sequence forms
// (matvec_multi: kB 2, and kB 4 where four x regions fit, else pairs; B = 5 adds a batch-1 product): at shapes their
// own rules take on an H100 / H200 (>= 16 x the SM count rows) and, with the stream kernels forced on (mode 1), at
// small and awkward ones; x staged in one round (xone 2) and per sequence (xone 0; and kB 4 with 8 consumer warps: 2
// super-blocks per warp for 4 sequences); 8 and 16 consumer warps (nb 48, the 9B ffn_down's 12288 columns: 16 by
// default, 8 with wide off; nb 68 always staged per sequence); plain and accumulating. Each sequence against float64
// (run_case: every output overwritten, or y0 + the product); sequence 0's result independent of the others' x.
TEST(CudaMatvecBatched, MultiMatchesFloat64) {
  DS_REQUIRE_GPU();
  const cuda::MatvecStreamTune saved = cuda::matvec_stream_tune();
  const cuda::MatvecStreamQ6Tune saved6 = cuda::matvec_stream_q6_tune();
  struct Variant {
    int mode, xone;
    bool wide;
    const char* what;
  };
  const Variant variants[] = {{-1, saved.xone, saved.wide, "default"},
                              {1, 0, true, "forced, staged per sequence"},
                              {1, 2, false, "forced, 8 consumer warps"}};
  // Q6_K takes even super-block counts only (512: 2, 1536: 6).
  const Case cases[] = {{2200, 4096, "9B hidden, rows % 16 = 8"},
                        {4096, 12288, "9B ffn_down width: no room for 4 x regions"},
                        {2112, 17408, "27B ffn_down width (68 super-blocks)"},
                        {77, 512, "two super-blocks, a partial row group"},
                        {1027, 1536, "6 super-blocks, rows % 16 = 3"}};
  // DS_MVB_SAN_SHORT=1 (compute-sanitizer runs): the forced variants on small shapes only, one of them with 16
  // consumer warps (32 super-blocks: one CTA per SM), B = 2 and 4, no accumulate.
  const bool short_run = std::getenv("DS_MVB_SAN_SHORT") != nullptr;
  const std::vector<Case> short_cases = {{160, 8192, "32 super-blocks: 16 consumer warps"}, cases[3], cases[4]};
  uint64_t seed = 9100;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    int taken2 = 0, taken4 = 0;
    const std::string tn = std::string(ggml_type_name(t));
    for (const Variant& v : variants) {
      cuda::MatvecStreamTune tq = saved;
      tq.mode = v.mode;
      tq.xone = v.xone;
      tq.wide = v.wide;
      cuda::set_matvec_stream_tune(tq);
      cuda::MatvecStreamQ6Tune t6 = saved6;
      t6.mode = v.mode;
      t6.wide = v.wide;
      cuda::set_matvec_stream_q6_tune(t6);
      if (short_run && v.mode != 1) continue;
      for (const Case& c : short_run ? short_cases : std::vector<Case>(std::begin(cases), std::end(cases))) {
        const bool t2 = cuda::matvec_multi_takes(t, c.rows, c.cols, 2);
        const bool t4 = cuda::matvec_multi_takes(t, c.rows, c.cols, 4);
        // Q6_K's 68 super-blocks: two x regions of 87 KB leave no room for 2 stages
        const bool room2 = !(t == GgmlType::Q6_K && c.cols == 17408);
        if (v.mode == 1) EXPECT_EQ(t2, room2) << tn << " " << v.what << " [" << c.rows << " x " << c.cols << "]";
        if (c.cols == 12288 || c.cols == 17408) EXPECT_FALSE(t4) << tn << " [" << c.rows << " x " << c.cols << "]";
        taken2 += t2;
        taken4 += t4;
        for (int batch : {2, 3, 4, 5})
          for (bool acc : {false, true}) {
            if (short_run && (batch % 2 || acc)) continue;
            std::string where;
            const double e = run_case(t, c, batch, acc, seed += 3, where);
            EXPECT_LE(e, tol()) << tn << " " << v.what << (t2 ? " multi" : " not multi") << (t4 ? " (kB 4)" : "")
                                << " B " << batch << (acc ? " accumulate" : "") << " [" << c.rows << " x " << c.cols
                                << "] (" << c.what << "): worst " << where;
          }
      }
    }
    if (short_run) continue;
    EXPECT_GE(taken2, t == GgmlType::Q4_K ? 10 : 8) << tn << ": the forced variants take every shape with room";
    if (t == GgmlType::Q4_K || std::getenv("DS_MVB_Q6K_QUAD") == nullptr)
      EXPECT_GE(taken4, 6) << tn << ": the forced variants take kB 4 at 4096, 512 and 1536 columns";
  }
  // Sequence 0's outputs do not depend on the other sequences' x (its own digits, Sx / C and factors).
  cuda::set_matvec_stream_tune(saved);
  cuda::set_matvec_stream_q6_tune(saved6);
  if (short_run) return;
  const int64_t rows = 4096, cols = 4096;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})
    for (int nseq : {2, 4}) {
      if (!cuda::matvec_multi_takes(t, rows, cols, nseq)) continue;
      const auto w = test::random_weights(t, rows * cols, 77);
      auto x = test::random_floats(nseq * cols, 78);
      auto dw = test::to_device(w);
      auto dy = cuda::DeviceBuffer::alloc(nseq * rows * 4);
      ASSERT_TRUE(dy.ok());
      std::vector<std::vector<float>> y0;
      for (float s1 : {1.f, -1e6f}) {
        for (int64_t k = cols; k < nseq * cols; k++) x[k] *= s1;
        auto dx = test::to_device(x);
        ASSERT_TRUE(cuda::matvec_multi(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), nseq, nullptr).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        y0.push_back(test::to_host<float>(*dy, rows));
      }
      EXPECT_EQ(y0[0], y0[1]) << ggml_type_name(t) << ", " << nseq << " sequences: sequence 0 after the others' x were "
                              << "scaled by -1e6";
    }
}

// The same-bits tests' product: weights, 64 columns of x and y0 on the device (seed: weights, + 1: x, + 2: y0); run() under
// the caller's switches starts y from y0 (the accumulate input; without accumulate every output must be overwritten).
struct BitsProduct {
  GgmlType t;
  Case c;
  std::vector<float> y0;
  cuda::DeviceBuffer dw, dx;
  Result<cuda::DeviceBuffer> dy;
  BitsProduct(GgmlType type, const Case& cs, uint64_t seed)
      : t(type), c(cs), y0(test::random_floats(64 * cs.rows, seed + 2)),
        dw(test::to_device(test::random_weights(type, cs.rows * cs.cols, seed))),
        dx(test::to_device(test::random_floats(64 * cs.cols, seed + 1))), dy(cuda::DeviceBuffer::alloc(64 * cs.rows * 4)) {
    EXPECT_TRUE(dy.ok());
  }
  std::vector<float> run(int batch, bool accumulate) {
    if (!dy.ok()) return {};
    EXPECT_TRUE(dy->upload(y0.data(), (size_t)batch * c.rows * 4).ok());
    const auto st = cuda::matvec_batched(t, dw.data(), c.rows, c.cols, dx.as<float>(), dy->as<float>(), batch, nullptr,
                                         accumulate);
    EXPECT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return test::to_host<float>(*dy, (size_t)batch * c.rows);
  }
  std::string what(int batch, bool accumulate) const {
    return std::string(ggml_type_name(t)) + " [" + std::to_string(c.rows) + " x " + std::to_string(c.cols) + "] B " +
           std::to_string(batch) + (accumulate ? " accumulate" : "");
  }
  // "" when a and ref hold the same bits (and the same length), else how many differ and the first.
  std::string diff(const std::vector<float>& a, const std::vector<float>& ref) const {
    if (a.size() != ref.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(ref.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < a.size(); i++)
      if (!(a[i] == ref[i]) && bad++ == 0) first = i;
    if (!bad) return "";
    return std::to_string(bad) + " differ, first at row " + std::to_string(first % c.rows) + " batch " +
           std::to_string(first / c.rows) + ": " + std::to_string(a[first]) + " vs " + std::to_string(ref[first]);
  }
  // Outputs that are finite and moved off y0 (over half of them: the product wrote its outputs).
  void expect_written(const std::vector<float>& y, const std::string& label) const {
    size_t moved = 0, finite = 0;
    for (size_t i = 0; i < y.size(); i++) {
      moved += !(y[i] == y0[i]);
      finite += std::isfinite(y[i]);
    }
    EXPECT_GT(moved, y.size() / 2) << "outputs were not written: " << label;
    EXPECT_EQ(finite, y.size()) << label;
  }
};

// The split-K reduction of the wgmma kernels (store_acc): reduce_splits (DS_MVB_RED=1; 2 with one fence by thread 0)
// sums the same partials in the same order as the serial loop (0): the same bits, for Q4_K (block kernel 12 and the
// first kernel 1; 13, its sub-block-sum mins) and Q6_K (the ring's scaled-A form 11 and kernel 1) on shapes with 2, 4
// and more splits, partial row tiles (rows % 4 != 0), accumulate on and off, B = 25, 33 and 64.
TEST(CudaMatvecBatched, SplitReduceSameBits) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma() == 0) GTEST_SKIP() << "no wgmma kernel on this device / build";
  const int wg0 = cuda::matvec_batched_wgmma(), wg60 = cuda::matvec_batched_wgmma_q6k();
  const int red0 = cuda::matvec_batched_split_reduce();
  const Case cases[] = {{4096, 4096, "9B ssm_out: 4 splits"}, {8192, 4096, "9B attn_qkv: 2 splits"},
                        {300, 12288, "K split"}, {21, 17408, "few long rows"}, {4099, 1024, "22 tiles + 3 rows"},
                        {4161, 4096, "z + ba + 1 row"}};
  uint64_t seed = 9700;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    const std::vector<int> kinds = t == GgmlType::Q4_K ? std::vector<int>{12, 13, 1} : std::vector<int>{11, 1};
    for (const Case& c : cases) {
      BitsProduct pr(t, c, seed += 3);
      for (int kind : kinds)
        for (int batch : {25, 33, 64})
          for (bool accumulate : {false, true}) {
            auto run = [&](int red) {
              if (t == GgmlType::Q4_K) cuda::set_matvec_batched_wgmma(kind);
              else cuda::set_matvec_batched_wgmma_q6k(kind);
              cuda::set_matvec_batched_split_reduce(red);
              return pr.run(batch, accumulate);
            };
            const auto fast = run(1), ref = run(0), again = run(1), fence1 = run(2);
            const std::string label = "kind " + std::to_string(kind) + " " + pr.what(batch, accumulate);
            EXPECT_EQ(pr.diff(fence1, ref), "") << label << ": mode 2 vs 0";
            EXPECT_EQ(pr.diff(fast, ref), "") << label << ": mode 1 vs 0";
            EXPECT_EQ(pr.diff(fast, again), "") << label << ": run to run";
            pr.expect_written(fast, label);
          }
    }
  }
  cuda::set_matvec_batched_split_reduce(red0);
  cuda::set_matvec_batched_wgmma(wg0);
  cuda::set_matvec_batched_wgmma_q6k(wg60);
}

TEST(CudaMatvecBatched, RejectsBadBatch) {
  DS_REQUIRE_GPU();
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q4_K, nullptr, 16, 256, nullptr, nullptr, 0, nullptr).ok());
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q4_K, nullptr, 16, 256, nullptr, nullptr, 65, nullptr).ok());
}

// mvb16: the Q4_K x preparation by prep_reg_kernel (set_matvec_batched_prep_reg, DS_MVB_PREP_REG) writes the same xw,
// scales and block sums as prep_kernel: the same output bits for 13 (block sums of kSums 2) and 12 (fold's sums), on the
// 9B's 3-warpgroup ffn_gate_up (no split), 4-split ffn_down (cols 12288: 12 prep items per thread, 4 past the
// registers), a one-block row, few long rows (17408 and 32768 columns: the prep's overflow loop), a partial tile; B = 25,
// 33, 64 (columns >= B zero), accumulate on and off; also with the serial split reduction (DS_MVB_RED=0).
TEST(CudaMatvecBatched, PrepRegSameBits) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma() == 0) GTEST_SKIP() << "no wgmma kernel on this device / build";
  const int wg0 = cuda::matvec_batched_wgmma(), red0 = cuda::matvec_batched_split_reduce();
  const bool prep0 = cuda::matvec_batched_prep_reg();
  const Case cases[] = {{24576, 4096, "9B ffn_gate_up"}, {4096, 12288, "9B ffn_down: 4 splits"}, {77, 256, "one block"},
                        {21, 17408, "few long rows"}, {64, 32768, "widest rows"}, {4161, 4096, "z + ba + 1 row"}};
  uint64_t seed = 16100;
  for (const Case& c : cases) {
    BitsProduct pr(GgmlType::Q4_K, c, seed += 3);
    for (int batch : {25, 33, 64})
      for (bool accumulate : {false, true}) {
        auto run = [&](int wg, bool prep_reg, int red) {
          cuda::set_matvec_batched_wgmma(wg);
          cuda::set_matvec_batched_prep_reg(prep_reg);
          cuda::set_matvec_batched_split_reduce(red);
          return pr.run(batch, accumulate);
        };
        const std::string what = pr.what(batch, accumulate);
        const auto ref13 = run(13, false, 1);
        pr.expect_written(ref13, what);
        EXPECT_EQ(pr.diff(run(13, true, 1), ref13), "") << "13 prep_reg vs 13 " << what;
        EXPECT_EQ(pr.diff(run(13, true, 0), ref13), "") << "13 prep_reg serial reduction vs 13 " << what;
        const auto ref12 = run(12, false, 1);
        EXPECT_EQ(pr.diff(run(12, true, 1), ref12), "") << "12 prep_reg vs 12 " << what;
      }
  }
  cuda::set_matvec_batched_wgmma(wg0);
  cuda::set_matvec_batched_split_reduce(red0);
  cuda::set_matvec_batched_prep_reg(prep0);
}

// ---- q6k16: the Q6_K scaled-A form (DS_MVB_WG_Q6K=11) ----
// A = fp16(sc·(q − 32)) is inexact exactly where sc·(q − 32) is odd and above 2048 in magnitude (odd |sc| >= 67); the
// remainder (0 or ±1) goes through a third wgmma with x's hi terms. Weights made mostly of those cases (odd scales
// 67..127 of both signs, odd codes with |q − 32| in 17..31, so |sc·(q − 32)| in 1139..3937; d = 2^-8) on the ring's
// shapes, B = 25 / 64, form 11: within 1e-6 of float64 (the forms measure ~1e-7; A rounded to fp16 without the
// remainder would be off by up to 2^-12 of these terms).
TEST(CudaMatvecBatched, Q6KScaledAOddLargeScales) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma_q6k() == 0) GTEST_SKIP() << "no wgmma Q6_K kernel on this device / build";
  const int wg60 = cuda::matvec_batched_wgmma_q6k();
  auto shape = [](std::vector<uint8_t>& w) {
    for (size_t b = 0; b + 210 <= w.size(); b += 210) {
      uint8_t* p = &w[b];
      const size_t blk = b / 210;
      for (int i = 0; i < 128; i++) p[i] = (uint8_t)(((blk + i) % 8) * 0x22 + 0x11);  // both nibbles odd: 1, 3, .. 15
      for (int i = 128; i < 192; i++) p[i] = (uint8_t)((blk * 7 + i) % 3 == 0 ? 0x00 : 0xFF);  // high bits 00 / 11
      for (int j = 0; j < 16; j++) {
        const int m = 67 + 2 * (int)((blk * 5 + 3 * j) % 31);  // odd, 67..127
        p[192 + j] = (uint8_t)(int8_t)((blk + j) % 2 ? -m : m);
      }
      p[208] = 0x00;  // d = 2^-8 (fp16 0x1C00)
      p[209] = 0x1C;
    }
  };
  const Case cases[] = {{333, 4096, "333 rows"}, {200, 12288, "K split"}, {4161, 4096, "z + ba + 1 row"}};
  uint64_t seed = 9900;
  cuda::set_matvec_batched_wgmma_q6k(11);
  for (const Case& c : cases)
    for (int batch : {25, 64}) {
      std::string where;
      const double e = run_case(GgmlType::Q6_K, c, batch, false, seed, where, nullptr, nullptr, shape);
      EXPECT_LE(e, 1e-6) << "[" << c.rows << " x " << c.cols << "] B " << batch << ": worst " << where;
      std::printf("matvec_batched Q6_K odd large scales [%lld x %lld] B %d: worst %.3g of sum|w x|\n",
                  (long long)c.rows, (long long)c.cols, batch, e);
      seed += 3;
    }
  cuda::set_matvec_batched_wgmma_q6k(wg60);
}

// ---- build17 / mvb18: the block kernel's shorter A build (DS_MVB_BUILD=1, set_matvec_batched_block_build(1): one LOP3
// per half2, descriptors from one base per block, the scale terms once per half block) computes the same integer and
// fp16 operations as the form before it (0): the same bits on the 9B's Q4_K shapes (3 and 2 warpgroups, split K),
// B = 25 / 40 / 64, accumulate on and off, with block form 13 (kMin2).
TEST(CudaMatvecBatched, BlockBuildFastSameBits) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma() == 0) GTEST_SKIP() << "no wgmma kernel on this device / build";
  const int wg0 = cuda::matvec_batched_wgmma(), build0 = cuda::matvec_batched_block_build();
  cuda::set_matvec_batched_wgmma(13);
  const Case cases[] = {{24576, 4096, "9B ffn_gate_up"}, {4096, 12288, "9B ffn_down"}, {8192, 4096, "9B attn_qkv"},
                        {4096, 4096, "9B ssm_out"}};
  uint64_t seed = 9700;
  for (const Case& c : cases) {
    BitsProduct pr(GgmlType::Q4_K, c, seed += 3);
    for (int batch : {25, 40, 64})
      for (bool accumulate : {false, true}) {
        auto run = [&](int form) {
          cuda::set_matvec_batched_block_build(form);
          return pr.run(batch, accumulate);
        };
        const std::string what = pr.what(batch, accumulate);
        const auto ref = run(0);
        pr.expect_written(ref, what);
        EXPECT_EQ(pr.diff(run(1), ref), "") << "DS_MVB_BUILD 1 vs 0 " << what;
      }
  }
  cuda::set_matvec_batched_block_build(build0);
  cuda::set_matvec_batched_wgmma(wg0);
}

// ---- sp19: the block kernel's kLean form (DS_MVB_LEAN=1 everywhere; 2, the default, on the <3> kernels only: the
// producer's state in shared memory, the epilogue's indices re-read; no spill in the <3> kernel) computes the same operations in the same order for every float
// result as the form before it (0): the same bits, on all 9B Q4_K shapes (2 and 3 warpgroups per CTA), B = 25 / 40 / 64,
// accumulate on and off, and on shapes with partial row tiles and 1..few blocks per CTA (the producer's issues: blocks
// 0 and 1 before the loop, i + 1 in it, row tiles past the end). (Measured as BlockFormsSameBits with DS_MVB_MINQ, which
// was removed: passed on the H200.)
TEST(CudaMatvecBatched, BlockLeanSameBits) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma() == 0) GTEST_SKIP() << "no wgmma kernel on this device / build";
  const int wg0 = cuda::matvec_batched_wgmma(), build0 = cuda::matvec_batched_block_build();
  const int lean0 = cuda::matvec_batched_block_lean();
  cuda::set_matvec_batched_wgmma(13);
  cuda::set_matvec_batched_block_build(1);
  const Case cases[] = {{24576, 4096, "9B ffn_gate_up"}, {4096, 12288, "9B ffn_down"}, {8192, 4096, "9B attn_qkv"},
                        {4096, 4096, "9B ssm_out"},     {77, 256, "one block, partial tile"}, {300, 12288, "K split"},
                        {4099, 1024, "22 tiles + 3 rows"}, {21, 17408, "few long rows"}};
  uint64_t seed = 9900;
  for (const Case& c : cases) {
    BitsProduct pr(GgmlType::Q4_K, c, seed += 3);
    for (int batch : {25, 40, 64})
      for (bool accumulate : {false, true}) {
        auto run = [&](int lean) {
          cuda::set_matvec_batched_block_lean(lean);
          return pr.run(batch, accumulate);
        };
        const std::string what = pr.what(batch, accumulate);
        const auto ref = run(0);
        pr.expect_written(ref, what);
        EXPECT_EQ(pr.diff(run(1), ref), "") << "DS_MVB_LEAN 1 vs 0 " << what;
      }
  }
  cuda::set_matvec_batched_block_lean(lean0);
  cuda::set_matvec_batched_block_build(build0);
  cuda::set_matvec_batched_wgmma(wg0);
}


// ---- s32: the 2-warpgroup block kernel's mins as one wgmma per block (DS_MVB_MINW=1) ----
// The sums are prepared in another layout (kSums 3) and the mins summed by the tensor pipe's wgmma instead of 8
// mma.sync per warp: the same products in another order, so held to float64 like every form (the 9B's 2-warpgroup
// shapes, one 3-warpgroup shape that must not change at all, partial row tiles and few blocks per CTA), accumulate on
// and off; and against the mma.sync form within the products' rounding.
TEST(CudaMatvecBatched, MinsByWgmmaMatchFloat64) {
  DS_REQUIRE_GPU();
  if (cuda::matvec_batched_wgmma() == 0) GTEST_SKIP() << "no wgmma kernel on this device / build";
  const bool minw0 = cuda::matvec_batched_mins_wgmma();
  const Case two_wg[] = {{4096, 12288, "9B ffn_down: 4 splits"}, {8192, 4096, "9B attn_qkv"}, {4096, 4096, "9B ssm_out"},
                         {4161, 4096, "z + ba + 1 row"}, {77, 256, "one block"}, {21, 17408, "few long rows"}};
  uint64_t seed = 32000;
  double worst = 0;
  for (const Case& c : two_wg)
    for (int batch : {25, 41, 64})
      for (bool accumulate : {false, true}) {
        cuda::set_matvec_batched_mins_wgmma(true);
        std::string where;
        const double e = run_case(GgmlType::Q4_K, c, batch, accumulate, seed += 3, where);
        worst = std::max(worst, e);
        EXPECT_LE(e, tol()) << "DS_MVB_MINW=1 [" << c.rows << " x " << c.cols << "] B " << batch
                            << (accumulate ? " accumulate" : "") << ": worst " << where;
      }
  std::printf("matvec_batched Q4_K mins by wgmma: worst %.3g of sum|w x|\n", worst);
  // Against the mma.sync form on the same data; and a 3-warpgroup shape, which takes the same kernel either way.
  const Case pairs[] = {{4096, 12288, "9B ffn_down"}, {24576, 4096, "9B ffn_gate_up (3 warpgroups)"}};
  for (const Case& c : pairs) {
    BitsProduct pr(GgmlType::Q4_K, c, seed += 3);
    for (int batch : {33, 64}) {
      cuda::set_matvec_batched_mins_wgmma(false);
      const auto ref = pr.run(batch, false);
      cuda::set_matvec_batched_mins_wgmma(true);
      const auto y = pr.run(batch, false);
      pr.expect_written(y, pr.what(batch, false));
      if (c.rows == 24576) {
        EXPECT_EQ(pr.diff(y, ref), "") << "a 3-warpgroup product changed with DS_MVB_MINW=1: " << pr.what(batch, false);
        continue;
      }
      double scale = 0, dmax = 0;
      for (size_t i = 0; i < y.size(); i++) {
        scale = std::max(scale, (double)std::fabs(ref[i]));
        dmax = std::max(dmax, (double)std::fabs(y[i] - ref[i]));
      }
      EXPECT_LE(dmax, 1e-5 * scale) << "DS_MVB_MINW=1 vs 0: " << pr.what(batch, false);
    }
  }
  cuda::set_matvec_batched_mins_wgmma(minw0);
}

}  // namespace
}  // namespace ds

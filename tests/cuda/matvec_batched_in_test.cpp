// fold17: cuda::matvec_batched_in (the RMSNorm made inside the Q4_K block kernel's x preparation) against the unfused
// path (mk::rms_norm into a buffer, then matvec_batched): the same output bits and the same xn, on the 9B's shapes
// (ffn_gate_up, z + ba), a row of 8192 (the norm's widest: items past the prep's registers), a one-block row and a
// partial tile, x with a row stride past cols; B = 25, 33, 64, accumulate on and off; run to run identical; a column's
// bits the same at B = 25 and 64; and vs a float64 reference of norm and product (1e-5 of sum|w x'|, as the other
// batched tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cuda/matvec.h"
#include "cuda/matvec_batched_fold.h"
#include "cuda/model/model_kernels.cuh"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

struct Shape {
  int64_t rows, cols, ldx;
  bool f64;  // also check against float64 (small shapes: the reference runs on the CPU)
};

size_t count_diff(const std::vector<float>& a, const std::vector<float>& b, size_t* first) {
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); i++)
    if (!(a[i] == b[i]) && bad++ == 0) *first = i;
  return bad;
}

// |y - ref| / sum|w x'| worst over rows and the first `batch` columns; xp: x' per column [batch][cols] in double.
double f64_worst(const std::vector<uint8_t>& w, const Shape& c, const std::vector<double>& xp, int batch,
                 const std::vector<float>& y, const std::vector<float>& y0, bool accumulate,
                 GgmlType t = GgmlType::Q4_K) {
  const size_t rb = w.size() / (size_t)c.rows;
  std::vector<float> deq((size_t)c.cols);
  double worst = 0;
  for (int64_t r = 0; r < c.rows; r++) {
    quant::dequantize_row(t, w.data() + r * rb, deq.data(), c.cols);
    for (int b = 0; b < batch; b++) {
      double mag = 0, ref = 0;
      for (int64_t k = 0; k < c.cols; k++) {
        const double p = (double)deq[k] * xp[(size_t)b * c.cols + k];
        mag += std::fabs(p);
        ref += p;
      }
      if (accumulate) ref += y0[(size_t)b * c.rows + r];
      worst = std::max(worst, std::fabs(y[(size_t)b * c.rows + r] - ref) / std::max(mag, 1e-30));
    }
  }
  return worst;
}

// x' = rms_norm(x) * nw per row of x ([batch][ldx] floats), in double ([batch][cols]).
std::vector<double> norm_f64(const std::vector<float>& x, const std::vector<float>& nw, const Shape& c, int batch,
                             float eps) {
  std::vector<double> xd((size_t)batch * c.cols);
  for (int b = 0; b < batch; b++) {
    const float* r = x.data() + (size_t)b * c.ldx;
    double ss = 0;
    for (int64_t k = 0; k < c.cols; k++) ss += (double)r[k] * r[k];
    const double f = 1.0 / std::sqrt(ss / (double)c.cols + eps);
    for (int64_t k = 0; k < c.cols; k++) xd[(size_t)b * c.cols + k] = r[k] * f * nw[k];
  }
  return xd;
}

// A norm test's product: weights, x ([n][ldx]), norm weights and y0 ([n][rows]) on the host and the device, and n
// columns of xn, of the unfused pair's input and of y on the device.
struct NormProduct {
  Shape c;
  int n;
  std::vector<uint8_t> w;
  std::vector<float> x, nw, y0;
  cuda::DeviceBuffer dw, dx, dnw;
  Result<cuda::DeviceBuffer> dxn, dref_in, dy;
  NormProduct(GgmlType t, const Shape& cs, int cols, uint64_t w_seed, std::vector<float> xs, uint64_t nw_seed,
              uint64_t y0_seed)
      : c(cs), n(cols), w(test::random_weights(t, cs.rows * cs.cols, w_seed)), x(std::move(xs)),
        nw(test::random_floats(cs.cols, nw_seed)), y0(test::random_floats(cols * cs.rows, y0_seed)),
        dw(test::to_device(w)), dx(test::to_device(x)), dnw(test::to_device(nw)),
        dxn(cuda::DeviceBuffer::alloc(cols * cs.cols * 4)), dref_in(cuda::DeviceBuffer::alloc(cols * cs.cols * 4)),
        dy(cuda::DeviceBuffer::alloc(cols * cs.rows * 4)) {}
  bool ok() const { return dxn.ok() && dref_in.ok() && dy.ok(); }
  cuda::MatvecBatchedInput input(float eps, bool with_xn) {
    cuda::MatvecBatchedInput in;
    in.x = dx.as<float>();
    in.ldx = c.ldx;
    in.norm_w = dnw.as<float>();
    in.eps = eps;
    in.xn = with_xn ? dxn->as<float>() : nullptr;
    return in;
  }
  // The unfused pair: mk::rms_norm into dref_in, then matvec_batched from y0 into dy (synchronised).
  Status unfused(GgmlType t, int batch, bool accumulate, float eps) {
    DS_TRY(cuda::mk::rms_norm(dx.as<float>(), c.ldx, dnw.as<float>(), dref_in->as<float>(), c.cols, batch, c.cols, eps,
                              nullptr));
    DS_TRY(dy->upload(y0.data(), (size_t)batch * c.rows * 4));
    DS_TRY(cuda::matvec_batched(t, dw.data(), c.rows, c.cols, dref_in->as<float>(), dy->as<float>(), batch, nullptr,
                                accumulate));
    if (cudaDeviceSynchronize() != cudaSuccess) return err("unfused pair: cudaDeviceSynchronize failed");
    return {};
  }
};

bool folds_here() {
  cuda::MatvecBatchedInput in;
  in.x = reinterpret_cast<const float*>(256);
  in.ldx = 4096;
  in.norm_w = in.x;
  return cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 64, in);
}

TEST(CudaMatvecBatchedIn, RmsNormSameBitsAsUnfused) {
  DS_REQUIRE_GPU();
  if (!folds_here()) GTEST_SKIP() << "no folded preparation on this device / build (sm_90a block form)";
  const Shape shapes[] = {{24576, 4096, 4096, false}, {4160, 4096, 4096, false}, {300, 8192, 8192, true},
                          {77, 256, 260, true}};
  const GgmlType t = GgmlType::Q4_K;
  uint64_t seed = 17100;
  const float eps = 1e-6f;
  double worst64 = 0;
  for (const Shape& c : shapes) {
    seed += 3;
    NormProduct P(t, c, 64, seed, test::random_floats(64 * c.ldx, seed + 1), seed + 2, seed + 4);
    ASSERT_TRUE(P.ok());
    const std::vector<uint8_t>& w = P.w;
    const std::vector<float> &x = P.x, &nw = P.nw, &y0 = P.y0;
    cuda::DeviceBuffer& dw = P.dw;
    Result<cuda::DeviceBuffer> &dxn = P.dxn, &dref_in = P.dref_in, &dy = P.dy;
    const cuda::MatvecBatchedInput in = P.input(eps, true);
    std::vector<float> y64;  // B = 64 outputs (accumulate off), for the column check at B = 25
    for (int batch : {64, 33, 25})
      for (bool accumulate : {false, true}) {
        const std::string what = "[" + std::to_string(c.rows) + " x " + std::to_string(c.cols) + "] B " +
                                 std::to_string(batch) + (accumulate ? " accumulate" : "");
        ASSERT_TRUE(cuda::matvec_batched_folds(t, c.rows, c.cols, batch, in)) << what;
        // unfused: the norm's kernel, then the product
        Status st = P.unfused(t, batch, accumulate, eps);
        ASSERT_TRUE(st.ok()) << st.error().message;
        const auto ref = test::to_host<float>(*dy, (size_t)batch * c.rows);
        const auto ref_in = test::to_host<float>(*dref_in, (size_t)batch * c.cols);
        // folded, twice
        std::vector<float> got[2];
        for (int rep = 0; rep < 2; rep++) {
          ASSERT_TRUE(dy->upload(y0.data(), (size_t)batch * c.rows * 4).ok());
          ASSERT_EQ(cudaMemset(dxn->data(), 0xFF, 64 * c.cols * 4), cudaSuccess);
          st = cuda::matvec_batched_in(t, dw.data(), c.rows, c.cols, in, dy->as<float>(), batch, nullptr, accumulate);
          ASSERT_TRUE(st.ok()) << st.error().message;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          got[rep] = test::to_host<float>(*dy, (size_t)batch * c.rows);
        }
        size_t first = 0, moved = 0;
        for (size_t i = 0; i < ref.size(); i++) moved += !(ref[i] == y0[i]);
        EXPECT_GT(moved, ref.size() / 2) << "outputs were not written " << what;
        size_t bad = count_diff(got[0], ref, &first);
        EXPECT_EQ(bad, 0u) << what << " folded vs unfused: first at row " << first % c.rows << " column "
                           << first / c.rows << ": " << got[0][first] << " vs " << ref[first];
        bad = count_diff(got[1], got[0], &first);
        EXPECT_EQ(bad, 0u) << what << " run to run";
        const auto xn = test::to_host<float>(*dxn, (size_t)batch * c.cols);
        bad = count_diff(xn, ref_in, &first);
        EXPECT_EQ(bad, 0u) << what << " xn vs rms_norm's: first at " << first << ": " << xn[first] << " vs "
                           << ref_in[first];
        if (!accumulate && batch == 64) y64 = got[0];
        if (!accumulate && batch == 25) {
          bad = count_diff(got[0], std::vector<float>(y64.begin(), y64.begin() + got[0].size()), &first);
          EXPECT_EQ(bad, 0u) << what << " column bits at B = 25 vs 64";
        }
        if (c.f64 && batch != 33) {
          const double e = f64_worst(w, c, norm_f64(x, nw, c, batch, eps), batch, got[0], y0, accumulate);
          EXPECT_LE(e, 1e-5) << what << " vs float64";
          worst64 = std::max(worst64, e);
        }
      }
  }
  std::printf("matvec_batched_in rms_norm: folded == unfused bits on every shape; float64 worst %.3g of sum|w x'|\n",
              worst64);
}

// Where it does not fold (B < 25, Q6_K, Q8_0, no norm, unaligned, a row past the norm's 8192), it says so and
// matvec_batched_in refuses (the step then runs the separate kernels).
TEST(CudaMatvecBatchedIn, RefusesWhatItDoesNotFold) {
  DS_REQUIRE_GPU();
  if (!folds_here()) GTEST_SKIP() << "no folded preparation on this device / build (sm_90a block form)";
  cuda::MatvecBatchedInput in;
  in.x = reinterpret_cast<const float*>(256);
  in.ldx = 4096;
  in.norm_w = in.x;
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 24, in));
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q6_K, 4096, 4096, 64, in));
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q8_0, 4096, 4096, 64, in));
  auto wide = in;
  wide.ldx = 12288;
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 12288, 64, wide));
  auto plain = in;
  plain.norm_w = nullptr;
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 64, plain));
  auto odd = in;
  odd.x = reinterpret_cast<const float*>(260);
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 64, odd));
  EXPECT_FALSE(cuda::matvec_batched_in(GgmlType::Q4_K, nullptr, 4096, 4096, in, nullptr, 24, nullptr).ok());
}

// fold29: Q4_K at 2 <= B <= 8: matvec_batched_in runs the multi-sequence stream kernels with each
// sequence's RMSNorm in their staging (and xn written by CTA 0 where asked). Each sequence's rows differ in magnitude
// by 10^b (a shared factor would hide a wrong per-sequence scale). Checked: matvec_batched_folds says so on the shapes
// the multi kernels take (the 9B's hidden-width products, at the default rules of an H100 / H200, and small / awkward
// ones with the stream kernels forced on) and not for Q6_K, the output against float64 (1e-5 of sum|w x'|) and against the unfused
// pair (mk::rms_norm, then matvec_batched) to the same bound, xn against float64 (1e-6 relative), accumulate on and
// off, run to run identical; DS_MVB_MULTI_NORM 0 or below B refuses.
TEST(CudaMatvecBatchedIn, MultiRmsNormMatchesFloat64) {
  DS_REQUIRE_GPU();
  const cuda::MatvecStreamTune saved = cuda::matvec_stream_tune();
  const cuda::MatvecStreamQ6Tune saved6 = cuda::matvec_stream_q6_tune();
  struct Case {
    GgmlType t;
    Shape c;
    bool forced;  // the stream kernels forced on (mode 1): small shapes
  };
  const Case cases[] = {{GgmlType::Q4_K, {4096, 4096, 4096, true}, false},  {GgmlType::Q4_K, {2200, 4096, 4096, false}, false},
                        {GgmlType::Q6_K, {4096, 4096, 4096, true}, false},  {GgmlType::Q4_K, {77, 512, 512, true}, true},
                        {GgmlType::Q4_K, {1027, 1536, 1536, true}, true},   {GgmlType::Q6_K, {1027, 1536, 1536, true}, true},
                        {GgmlType::Q4_K, {160, 8192, 8192, true}, true}};
  const float eps = 1e-6f;
  uint64_t seed = 29100;
  double worst = 0, worst_xn = 0;
  int folded = 0, with_xn = 0;
  const bool short_run = std::getenv("DS_MVB_SAN_SHORT") != nullptr;  // compute-sanitizer runs: the forced shapes
  const int saved_n = cuda::matvec_batched_multi_norm();
  cuda::set_matvec_batched_multi_norm(8);  // every batch the multi kernels take, whatever the default limit
  for (const Case& k : cases) {
    if (short_run && !k.forced) continue;
    const Shape& c = k.c;
    cuda::MatvecStreamTune tq = saved;
    cuda::MatvecStreamQ6Tune t6 = saved6;
    if (k.forced) tq.mode = t6.mode = 1;
    cuda::set_matvec_stream_tune(tq);
    cuda::set_matvec_stream_q6_tune(t6);
    const int max_b = cuda::matvec_batched_multi(k.t);
    seed += 5;
    auto xs = test::random_floats(8 * c.ldx, seed + 1);
    for (int b = 0; b < 8; b++)
      for (int64_t i = 0; i < c.ldx; i++) xs[(size_t)b * c.ldx + i] *= (float)std::pow(10.0, b - 3);
    NormProduct P(k.t, c, 8, seed, std::move(xs), seed + 2, seed + 3);
    ASSERT_TRUE(P.ok());
    const std::vector<uint8_t>& w = P.w;
    const std::vector<float> &x = P.x, &nw = P.nw, &y0 = P.y0;
    cuda::DeviceBuffer& dw = P.dw;
    Result<cuda::DeviceBuffer> &dxn = P.dxn, &dy = P.dy;
    const std::string tn(ggml_type_name(k.t));
    for (int batch = 2; batch <= max_b; batch++)
      for (bool want_xn : {false, true}) {
        const bool accumulate = batch % 2 == 1;
        const cuda::MatvecBatchedInput in = P.input(eps, want_xn);
        const std::string what = tn + " [" + std::to_string(c.rows) + " x " + std::to_string(c.cols) + "] B " +
                                 std::to_string(batch) + (want_xn ? " with xn" : "") + (accumulate ? " accumulate" : "");
        // Q6_K: no RMSNorm form (its kernel's spills grew with it): refused, the step keeps the rms_norm kernel
        const bool takes = k.t == GgmlType::Q4_K && cuda::matvec_multi_takes(k.t, c.rows, c.cols, 2);
        const bool folds = cuda::matvec_batched_folds(k.t, c.rows, c.cols, batch, in);
        if (!want_xn) {
          EXPECT_EQ(folds, takes) << what;
        }
        if (!folds) continue;
        folded++;
        with_xn += want_xn;
        const int saved_n = cuda::matvec_batched_multi_norm();
        cuda::set_matvec_batched_multi_norm(0);
        EXPECT_FALSE(cuda::matvec_batched_folds(k.t, c.rows, c.cols, batch, in)) << what << " with the switch off";
        cuda::set_matvec_batched_multi_norm(batch - 1);
        EXPECT_FALSE(cuda::matvec_batched_folds(k.t, c.rows, c.cols, batch, in)) << what << " with the limit B - 1";
        cuda::set_matvec_batched_multi_norm(saved_n);
        // the unfused pair
        Status st = P.unfused(k.t, batch, accumulate, eps);
        ASSERT_TRUE(st.ok()) << st.error().message;
        const auto ref = test::to_host<float>(*dy, (size_t)batch * c.rows);
        std::vector<float> got[2];
        for (int rep = 0; rep < 2; rep++) {
          ASSERT_TRUE(dy->upload(y0.data(), (size_t)batch * c.rows * 4).ok());
          ASSERT_EQ(cudaMemset(dxn->data(), 0xFF, 8 * c.cols * 4), cudaSuccess);
          st = cuda::matvec_batched_in(k.t, dw.data(), c.rows, c.cols, in, dy->as<float>(), batch, nullptr, accumulate);
          ASSERT_TRUE(st.ok()) << what << ": " << st.error().message;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          got[rep] = test::to_host<float>(*dy, (size_t)batch * c.rows);
        }
        size_t first = 0;
        EXPECT_EQ(count_diff(got[1], got[0], &first), 0u) << what << " run to run";
        const auto xd = norm_f64(x, nw, c, batch, eps);
        const double e = f64_worst(w, c, xd, batch, got[0], y0, accumulate, k.t);
        EXPECT_LE(e, 1e-5) << what << " vs float64";
        worst = std::max(worst, e);
        const double e_ref = f64_worst(w, c, xd, batch, ref, y0, accumulate, k.t);
        EXPECT_LE(e_ref, 1e-5) << what << " (the unfused pair) vs float64";
        if (want_xn) {
          const auto xn = test::to_host<float>(*dxn, 8 * (size_t)c.cols);
          for (size_t i = 0; i < (size_t)batch * c.cols; i++) {
            const double r = std::fabs(xn[i] - xd[i]) / std::max(std::fabs(xd[i]), 1e-30);
            ASSERT_LE(r, 1e-6) << what << " xn element " << i << ": " << xn[i] << " vs " << xd[i];
            worst_xn = std::max(worst_xn, r);
          }
          for (size_t i = (size_t)batch * c.cols; i < 8 * (size_t)c.cols; i++)
            ASSERT_TRUE(std::isnan(xn[i])) << what << " xn written past the batch at " << i;
        }
      }
  }
  cuda::set_matvec_stream_tune(saved);
  cuda::set_matvec_stream_q6_tune(saved6);
  cuda::set_matvec_batched_multi_norm(saved_n);
  EXPECT_GE(folded, short_run ? 12 : 20) << "the forced shapes fold at every batch";
  EXPECT_GE(with_xn, short_run ? 4 : 8) << "some shapes write xn";
  std::printf("matvec_batched_in multi rms_norm: %d folded cases (%d with xn); float64 worst %.3g of sum|w x'|, xn %.3g\n",
              folded, with_xn, worst, worst_xn);
}

}  // namespace
}  // namespace ds

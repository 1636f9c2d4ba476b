// fold17: cuda::matvec_batched_in (the RMSNorm or the SwiGLU made inside the Q4_K block kernel's x preparation) against
// the unfused path the step ran before (mk::rms_norm / mk::swiglu into a buffer, then matvec_batched): the same output
// bits (and for the norm the same xn), on the 9B's shapes (ffn_gate_up, z + ba, ffn_down with g / u as strided views of
// one buffer, Q4_K and Q6_K (the ring's scaled-A form)), a row of 8192 (the norm's widest: items past the prep's registers), a one-block row and a partial tile;
// B = 25, 33, 64, accumulate on and off; run to run identical; a column's bits the same at B = 25 and 64; and vs a
// float64 reference of transform and product (1e-5 of sum|w x'|, as the other batched tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/matvec.h"
#include "cuda/model/model_kernels.cuh"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

struct Shape {
  int64_t rows, cols;
  bool f64;  // also check against float64 (small shapes: the reference runs on the CPU)
  GgmlType t = GgmlType::Q4_K;
};

size_t count_diff(const std::vector<float>& a, const std::vector<float>& b, size_t* first) {
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); i++)
    if (!(a[i] == b[i]) && bad++ == 0) *first = i;
  return bad;
}

// |y - ref| / sum|w x'| worst over rows and the first `batch` columns; xp: x' per column [batch][cols] in double.
double f64_worst(const std::vector<uint8_t>& w, const Shape& c, const std::vector<double>& xp, int batch,
                 const std::vector<float>& y, const std::vector<float>& y0, bool accumulate) {
  const size_t rb = w.size() / (size_t)c.rows;
  std::vector<float> deq((size_t)c.cols);
  double worst = 0;
  for (int64_t r = 0; r < c.rows; r++) {
    quant::dequantize_row(c.t, w.data() + r * rb, deq.data(), c.cols);
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

void run_fold(bool norm) {
  const std::vector<Shape> shapes = norm ? std::vector<Shape>{{24576, 4096, false}, {4160, 4096, false},
                                                              {300, 8192, true}, {77, 256, true}}
                                         : std::vector<Shape>{{4096, 12288, false},
                                                              {333, 4096, true},
                                                              {150, 512, true},
                                                              {4096, 12288, false, GgmlType::Q6_K},
                                                              {200, 4096, true, GgmlType::Q6_K}};
  uint64_t seed = norm ? 17100 : 17200;
  const float eps = 1e-6f;
  double worst64 = 0;
  for (const Shape& c : shapes) {
    const int64_t ldx = norm ? c.cols : 2 * c.cols;  // swiglu: g and u as the two halves of one row, as in the step
    const auto w = test::random_weights(c.t, c.rows * c.cols, seed += 3);
    auto x = test::random_floats(64 * ldx, seed + 1);
    const auto nw = test::random_floats(c.cols, seed + 2);
    const auto y0 = test::random_floats(64 * c.rows, seed + 4);
    auto dw = test::to_device(w);
    auto dx = test::to_device(x);
    auto dnw = test::to_device(nw);
    auto dxn = cuda::DeviceBuffer::alloc(64 * c.cols * 4);
    auto dref_in = cuda::DeviceBuffer::alloc(64 * c.cols * 4);
    auto dy = cuda::DeviceBuffer::alloc(64 * c.rows * 4);
    ASSERT_TRUE(dxn.ok() && dref_in.ok() && dy.ok());
    const float* xp = dx.as<float>();
    cuda::MatvecBatchedInput in;
    if (norm) {
      in.x = xp;
      in.ldx = ldx;
      in.norm_w = dnw.as<float>();
      in.eps = eps;
      in.xn = dxn->as<float>();
    } else {
      in.gate = xp;
      in.ldg = ldx;
      in.x = xp + c.cols;
      in.ldx = ldx;
    }
    std::vector<float> y64_cols;  // B = 64 outputs (accumulate off), for the column check at B = 25
    for (int batch : {64, 33, 25})
      for (bool accumulate : {false, true}) {
        const std::string what = std::string(norm ? "rms_norm " : "swiglu ") + cuda::type_cstr(c.t) + " [" +
                                 std::to_string(c.rows) + " x " +
                                 std::to_string(c.cols) + "] B " + std::to_string(batch) +
                                 (accumulate ? " accumulate" : "");
        ASSERT_TRUE(cuda::matvec_batched_folds(c.t, c.rows, c.cols, batch, in)) << what;
        // unfused: the transform's kernel, then the product
        Status st = norm ? cuda::mk::rms_norm(xp, ldx, in.norm_w, dref_in->as<float>(), c.cols, batch, c.cols, eps,
                                              nullptr)
                         : cuda::mk::swiglu(xp, ldx, xp + c.cols, ldx, dref_in->as<float>(), batch, c.cols, nullptr);
        ASSERT_TRUE(st.ok()) << st.error().message;
        ASSERT_TRUE(dy->upload(y0.data(), (size_t)batch * c.rows * 4).ok());
        st = cuda::matvec_batched(c.t, dw.data(), c.rows, c.cols, dref_in->as<float>(), dy->as<float>(),
                                  batch, nullptr, accumulate);
        ASSERT_TRUE(st.ok()) << st.error().message;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const auto ref = test::to_host<float>(*dy, (size_t)batch * c.rows);
        const auto ref_in = test::to_host<float>(*dref_in, (size_t)batch * c.cols);
        // folded, twice
        std::vector<float> got[2];
        for (int rep = 0; rep < 2; rep++) {
          ASSERT_TRUE(dy->upload(y0.data(), (size_t)batch * c.rows * 4).ok());
          ASSERT_EQ(cudaMemset(dxn->data(), 0xFF, 64 * c.cols * 4), cudaSuccess);
          st = cuda::matvec_batched_in(c.t, dw.data(), c.rows, c.cols, in, dy->as<float>(), batch, nullptr, accumulate);
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
        if (norm) {
          const auto xn = test::to_host<float>(*dxn, (size_t)batch * c.cols);
          bad = count_diff(xn, ref_in, &first);
          EXPECT_EQ(bad, 0u) << what << " xn vs rms_norm's: first at " << first << ": " << xn[first] << " vs "
                             << ref_in[first];
        }
        if (!accumulate && batch == 64) y64_cols = got[0];
        if (!accumulate && batch == 25) {
          bad = count_diff(got[0], std::vector<float>(y64_cols.begin(), y64_cols.begin() + got[0].size()), &first);
          EXPECT_EQ(bad, 0u) << what << " column bits at B = 25 vs 64";
        }
        if (c.f64 && batch != 33) {
          std::vector<double> xd((size_t)batch * c.cols);
          for (int b = 0; b < batch; b++) {
            const float* r = x.data() + (size_t)b * ldx;
            double ss = 0;
            if (norm)
              for (int64_t k = 0; k < c.cols; k++) ss += (double)r[k] * r[k];
            const double f = 1.0 / std::sqrt(ss / (double)c.cols + eps);
            for (int64_t k = 0; k < c.cols; k++)
              xd[(size_t)b * c.cols + k] = norm ? r[k] * f * nw[k] : r[k] / (1.0 + std::exp(-(double)r[k])) * r[c.cols + k];
          }
          const double e = f64_worst(w, c, xd, batch, got[0], y0, accumulate);
          EXPECT_LE(e, 1e-5) << what << " vs float64";
          worst64 = std::max(worst64, e);
        }
      }
  }
  std::printf("matvec_batched_in %s: folded == unfused bits on every shape; float64 worst %.3g of sum|w x'|\n",
              norm ? "rms_norm" : "swiglu", worst64);
}

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
  run_fold(true);
}

TEST(CudaMatvecBatchedIn, SwigluSameBitsAsUnfused) {
  DS_REQUIRE_GPU();
  if (!folds_here()) GTEST_SKIP() << "no folded preparation on this device / build (sm_90a block form)";
  run_fold(false);
}

// Where it does not fold (B < 25, Q6_K with the norm, Q8_0, both transforms, unaligned, a row past the norm's 8192), it says so and
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
  auto both = in;
  both.gate = in.x;
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 64, both));
  auto odd = in;
  odd.x = reinterpret_cast<const float*>(260);
  EXPECT_FALSE(cuda::matvec_batched_folds(GgmlType::Q4_K, 4096, 4096, 64, odd));
  EXPECT_FALSE(cuda::matvec_batched_in(GgmlType::Q4_K, nullptr, 4096, 4096, in, nullptr, 24, nullptr).ok());
}

}  // namespace
}  // namespace ds

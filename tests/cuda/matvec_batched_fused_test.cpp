// cuda::matvec_batched_fused (batched11): the RMSNorm / SwiGLU input folded into the batched product's x preparation
// (wg::prep_kernel, Q4_K / Q6_K at 25 <= B <= 64 on sm_90a), else a separate kernel + matvec_batched. Checked per
// (type, shape, B, transform, accumulate) against
//   * the float64 reference of "transform then product" (the transform in double too): matvec_batched's bound
//     (1e-5 of sum|w x'| with 3 terms);
//   * the unfused path (mk::rms_norm / mk::swiglu into a buffer, then matvec_batched): at most 1e-6 of sum|w x'|
//     (the prep's transform uses the same per-element arithmetic and the same norm sum order as the separate
//     kernels, so it is expected to be bitwise equal; the count of differing outputs is printed);
//   * the scratch (X') against the separate kernel's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/matvec.h"
#include "cuda/model/model_kernels.cuh"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

double tol() { return cuda::matvec_batched_terms() == 2 ? 4e-5 : 1e-5; }

struct FCase {
  int64_t rows, cols;
};

struct Result {
  double worst_ref = 0, worst_unfused = 0, worst_scratch = 0;
  int64_t differ = 0, n = 0;
};

// One product: transform norm (true) or swiglu (false); the inputs laid out as in the model's step (norm: x rows
// packed; swiglu: gate and up views of one [B, 2 cols] buffer, row stride 2 cols).
Result run(GgmlType t, const FCase& c, int batch, bool norm, bool accumulate, uint64_t seed) {
  Result r;
  const int64_t ld = norm ? c.cols : 2 * c.cols;
  auto w = test::random_weights(t, c.rows * c.cols, seed);
  auto buf = test::random_floats(batch * ld, seed + 1);   // norm: x; swiglu: [gate | up] per row
  auto nw = test::random_floats(c.cols, seed + 2);       // norm weights
  for (float& v : nw) v = 1.f + 0.25f * v;
  const auto y0 = test::random_floats(batch * c.rows, seed + 3);
  const float eps = 1e-6f;
  auto dw = test::to_device(w);
  auto dbuf = test::to_device(buf);
  auto dnw = test::to_device(nw);
  auto dy = cuda::DeviceBuffer::alloc(batch * c.rows * 4);
  auto dy2 = cuda::DeviceBuffer::alloc(batch * c.rows * 4);
  auto ds1 = cuda::DeviceBuffer::alloc(batch * c.cols * 4);
  auto ds2 = cuda::DeviceBuffer::alloc(batch * c.cols * 4);
  EXPECT_TRUE(dy.ok() && dy2.ok() && ds1.ok() && ds2.ok());
  if (!dy.ok() || !dy2.ok() || !ds1.ok() || !ds2.ok()) return {INFINITY, INFINITY, INFINITY};
  const std::vector<float> nan(batch * c.rows, NAN);  // every output must be written
  const std::vector<float>& init = accumulate ? y0 : nan;
  EXPECT_TRUE(dy->upload(init.data(), init.size() * 4).ok());
  EXPECT_TRUE(dy2->upload(init.data(), init.size() * 4).ok());

  cuda::MatvecInput in;
  const float* x = dbuf.as<float>();
  if (norm) {
    in.x = x;
    in.norm_w = dnw.as<float>();
    in.eps = eps;
  } else {
    in.gate = x;
    in.x = x + c.cols;
    in.ld = ld;
  }
  auto st = cuda::matvec_batched_fused(t, dw.data(), c.rows, c.cols, in, dy->as<float>(), batch, ds1->as<float>(),
                                       nullptr, accumulate);
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (!st.ok()) return {INFINITY, INFINITY, INFINITY};
  // the unfused path: the model's separate kernel, then the plain product
  st = norm ? cuda::mk::rms_norm(x, ld, dnw.as<float>(), ds2->as<float>(), c.cols, batch, c.cols, eps, nullptr)
            : cuda::mk::swiglu(x, ld, x + c.cols, ld, ds2->as<float>(), batch, c.cols, nullptr);
  EXPECT_TRUE(st.ok()) << st.error().message;
  st = cuda::matvec_batched(t, dw.data(), c.rows, c.cols, ds2->as<float>(), dy2->as<float>(), batch, nullptr,
                            accumulate);
  EXPECT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = test::to_host<float>(*dy, batch * c.rows);
  const auto y2 = test::to_host<float>(*dy2, batch * c.rows);
  const auto s1 = test::to_host<float>(*ds1, batch * c.cols);
  const auto s2 = test::to_host<float>(*ds2, batch * c.cols);

  // X' in double, and the scratch against the separate kernel (relative to the column's max |x'|)
  std::vector<double> xr(batch * c.cols);
  for (int b = 0; b < batch; b++) {
    const float* row = buf.data() + (int64_t)b * ld;
    double ss = 0, mx = 0;
    if (norm)
      for (int64_t k = 0; k < c.cols; k++) ss += (double)row[k] * row[k];
    const double rs = 1.0 / std::sqrt(ss / (double)c.cols + eps);
    for (int64_t k = 0; k < c.cols; k++) {
      double v;
      if (norm) {
        v = row[k] * rs * nw[k];
      } else {
        const double g = row[k];
        v = g / (1.0 + std::exp(-g)) * row[c.cols + k];
      }
      xr[(int64_t)b * c.cols + k] = v;
      mx = std::max(mx, std::fabs(v));
    }
    for (int64_t k = 0; k < c.cols; k++) {
      const int64_t i = (int64_t)b * c.cols + k;
      r.worst_scratch = std::max(r.worst_scratch, std::fabs((double)s1[i] - s2[i]) / std::max(mx, 1e-30));
    }
  }
  const uint64_t rb = ggml_row_bytes(*ggml_type_info(t), c.cols);
  std::vector<float> deq(c.cols);
  const int64_t stride = c.rows > 2000 ? 7 : 1;
  for (int64_t row = 0; row < c.rows; row = (row == c.rows - 1) ? c.rows : std::min(row + stride, c.rows - 1)) {
    quant::dequantize_row(t, w.data() + row * rb, deq.data(), c.cols);
    for (int b = 0; b < batch; b++) {
      double mag = 0, ref = 0;
      for (int64_t k = 0; k < c.cols; k++) {
        const double p = (double)deq[k] * xr[(int64_t)b * c.cols + k];
        mag += std::fabs(p);
        ref += p;
      }
      const int64_t i = (int64_t)b * c.rows + row;
      if (accumulate) ref += y0[i];
      mag = std::max(mag, 1e-30);
      const double e = std::fabs(y[i] - ref) / mag, e2 = std::fabs((double)y[i] - y2[i]) / mag;
      r.worst_ref = std::isnan(e) ? INFINITY : std::max(r.worst_ref, e);
      r.worst_unfused = std::isnan(e2) ? INFINITY : std::max(r.worst_unfused, e2);
      r.differ += std::memcmp(&y[i], &y2[i], 4) != 0;
      r.n++;
    }
  }
  return r;
}

TEST(CudaMatvecBatchedFused, MatchesReferenceAndUnfused) {
  DS_REQUIRE_GPU();
  // 9B shapes (hidden 4096, ffn 12288), rows not a multiple of the 128 / 192-row tiles, and 10 super-blocks per
  // row (the Q6_K ring needs a multiple of 8: the non-ring Q6_K kernel)
  const FCase cases[] = {{515, 4096}, {300, 12288}, {333, 2560}};
  uint64_t seed = 9100;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    double worst_ref = 0, worst_unfused = 0, worst_scratch = 0;
    int64_t differ = 0, n = 0;
    for (const FCase& c : cases)
      for (int batch : {7, 25, 33, 64})
        for (bool norm : {true, false})
          for (bool acc : {false, true}) {
            const Result r = run(t, c, batch, norm, acc, seed += 5);
            const std::string what = std::string(ggml_type_name(t)) + " [" + std::to_string(c.rows) + " x " +
                                     std::to_string(c.cols) + "] B " + std::to_string(batch) +
                                     (norm ? " rms_norm" : " swiglu") + (acc ? " accumulate" : "") +
                                     (cuda::matvec_batched_fuses(t, c.rows, c.cols, batch) ? " (fused)" : " (separate)");
            EXPECT_LE(r.worst_ref, tol()) << what;
            EXPECT_LE(r.worst_unfused, 1e-6) << what;
            EXPECT_LE(r.worst_scratch, 1e-6) << what;
            worst_ref = std::max(worst_ref, r.worst_ref);
            worst_unfused = std::max(worst_unfused, r.worst_unfused);
            worst_scratch = std::max(worst_scratch, r.worst_scratch);
            differ += r.differ;
            n += r.n;
          }
    std::printf("matvec_batched_fused %s: fused at B 64 [515 x 4096]: %s; worst vs float64 %.3g, vs unfused %.3g "
                "(%lld of %lld outputs not bit-equal), scratch vs separate kernel %.3g\n",
                std::string(ggml_type_name(t)).c_str(),
                cuda::matvec_batched_fuses(t, 515, 4096, 64) ? "yes" : "no", worst_ref, worst_unfused,
                (long long)differ, (long long)n, worst_scratch);
  }
}

}  // namespace
}  // namespace ds

// cuda::matvec_batched vs the CPU oracle ds::quant::dot_row, per type and per batch row, for
// B in {2, 7, 8, 33, 64} (a partial 8-column tile, exactly one tile, 4 tiles + 1 column, 8 tiles), rows
// that are not a multiple of the 16-row tensor-core tile, rows shorter than one warp's tile, long rows
// split over the warps of a CTA, and accumulate = true; and run-to-run bit-identical results. Error metric per output:
//   |y_cuda - y_ref| / sum_k |w_k x_k|
// Bound 1e-5 for every type. The tensor-core path (matvec_mma.cuh) splits x into 3 bf16 terms (24
// significant bits, as fp32) and multiplies exact integer codes, so only the fp32 summation order
// differs from the oracle (measured ~1e-7 rms, like the FMA path); with DS_MMA_TERMS=2 (16 bits) the
// worst case per element is 2^-17 relative, still under the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/matvec.h"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

constexpr double kTol = 1e-5;

struct Case {
  int64_t rows, cols;
  const char* what;
};

// Runs one product and returns the worst error over every checked (row, batch column).
double run_case(GgmlType t, const Case& c, int batch, bool accumulate, uint64_t seed, std::string& where) {
  const auto w = test::random_weights(t, c.rows * c.cols, seed);
  const auto x = test::random_floats(batch * c.cols, seed + 1);
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
  double worst = 0;
  const int64_t stride = c.rows > 2000 ? 7 : 1;
  for (int64_t r = 0; r < c.rows; r = (r == c.rows - 1) ? c.rows : std::min(r + stride, c.rows - 1)) {
    quant::dequantize_row(t, w.data() + r * rb, deq.data(), c.cols);
    for (int b = 0; b < batch; b++) {
      const float* xb = x.data() + (int64_t)b * c.cols;
      double mag = 0;
      for (int64_t k = 0; k < c.cols; k++) mag += std::fabs((double)deq[k] * xb[k]);
      double ref = quant::dot_row(t, w.data() + r * rb, xb, c.cols);
      if (accumulate) ref += y0[(int64_t)b * c.rows + r];
      const double got = y[(int64_t)b * c.rows + r];
      const double e = std::fabs(got - ref) / std::max(mag, 1e-30);
      if (!(e <= worst)) {
        worst = std::isnan(e) ? INFINITY : e;
        where = "row " + std::to_string(r) + " batch " + std::to_string(b) + ": got " + std::to_string(got) +
                " want " + std::to_string(ref);
      }
    }
  }
  return worst;
}

std::vector<Case> cases_for(GgmlType t) {
  std::vector<Case> v = {
      {77, 256, "77 rows: one partial 16-row tile per warp"},
      {1027, 512, "rows % 16 = 3"},
      {333, 1280, "5 super-blocks per row"},
      {21, 17408, "long rows, few of them: split over column slices"},
      {515, 4096, "9B hidden size"},
  };
  if (ggml_type_info(t)->block_size < 256) v.push_back({45, 96, "3 blocks of 32 per row"});
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) v.push_back({19, 40, "cols % 16 = 8"});
  return v;
}

TEST(CudaMatvecBatched, MatchesCpuDotRowPerBatchRow) {
  DS_REQUIRE_GPU();
  uint64_t seed = 1000;
  for (GgmlType t : test::cuda_types())
    for (const Case& c : cases_for(t))
      for (int batch : {2, 7, 8, 33, 64}) {
        std::string where;
        const double e = run_case(t, c, batch, false, seed += 3, where);
        EXPECT_LE(e, kTol) << ggml_type_name(t) << " [" << c.rows << " x " << c.cols << "] B " << batch << " ("
                           << c.what << "): worst " << where;
      }
}

TEST(CudaMatvecBatched, Accumulate) {
  DS_REQUIRE_GPU();
  uint64_t seed = 5000;
  for (GgmlType t : test::cuda_types())
    for (int batch : {7, 64})
      for (const Case& c : {Case{301, 2048, "301 rows"}, Case{21, 17408, "long rows, column slices per warp"}}) {
        std::string where;
        const double e = run_case(t, c, batch, true, seed += 3, where);
        EXPECT_LE(e, kTol) << ggml_type_name(t) << " accumulate [" << c.rows << " x " << c.cols << "] B "
                           << batch << ": worst " << where;
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
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
    const int64_t rows = 333, cols = 12288;
    const int batch = 33;
    const auto w = test::random_weights(t, rows * cols, 21);
    const auto x = test::random_floats(batch * cols, 22);
    auto dw = test::to_device(w);
    auto dx = test::to_device(x);
    auto dy = cuda::DeviceBuffer::alloc(batch * rows * 4);
    ASSERT_TRUE(dy.ok());
    std::vector<float> first;
    for (int rep = 0; rep < 5; rep++) {
      ASSERT_TRUE(cuda::matvec_batched(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), batch, nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto y = test::to_host<float>(*dy, batch * rows);
      if (rep == 0) first = y;
      else EXPECT_EQ(y, first) << ggml_type_name(t) << " repetition " << rep;
    }
  }
}

TEST(CudaMatvecBatched, RejectsBadBatch) {
  DS_REQUIRE_GPU();
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q4_K, nullptr, 16, 256, nullptr, nullptr, 0, nullptr).ok());
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q4_K, nullptr, 16, 256, nullptr, nullptr, 65, nullptr).ok());
}

}  // namespace
}  // namespace ds

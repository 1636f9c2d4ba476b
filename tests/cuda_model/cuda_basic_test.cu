// The model's row kernels of src/cuda/model/kernels_basic.cu called directly: both rms_norm kernels (the plain
// loop, float4 x 8 per thread) against cpu::rms_norm on the shapes decode
// batches use (64 rows of 4096, strided rows) and awkward ones (n not a multiple of 128: the kernels that cannot
// take it fall back), and the float4 swiglu against the scalar one (same arithmetic per element: same bits) and
// cpu::swiglu.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/cuda_util.h"
#include "cuda/model/model_kernels.cuh"

using namespace ds;
namespace mk = ds::cuda::mk;

namespace {

#define BASIC_SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                        \
    if (ds::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)
#define CU(x) ASSERT_EQ((x), cudaSuccess) << #x

std::vector<float> randv(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Dev {
  float* p = nullptr;
  explicit Dev(const std::vector<float>& h) {
    if (cudaMalloc(&p, h.size() * sizeof(float)) == cudaSuccess)
      cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  explicit Dev(size_t n) { cudaMalloc(&p, n * sizeof(float)); }
  ~Dev() { cudaFree(p); }
  std::vector<float> get(size_t n) const {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
  }
};

struct ForceReset {
  ~ForceReset() {
    mk::rms_force_kernel(-1);
    mk::swiglu_force_kernel(-1);
  }
};

// rows x n, rows ld apart in x and y; every kernel vs cpu::rms_norm (relative to max |y|).
void check_rms(int rows, int64_t n, int64_t ld, uint32_t seed) {
  ForceReset reset;
  const float eps = 1e-6f;
  const std::vector<float> x = randv((size_t)rows * ld, seed, -3.f, 3.f), w = randv((size_t)n, seed + 1, 0.5f, 1.5f);
  std::vector<float> ref((size_t)rows * ld, 0.f);
  ops::RmsNormParams p{rows, 1, n, ld, n, ld, n, eps};
  cpu::rms_norm(p, x.data(), w.data(), ref.data());
  Dev dx(x), dw(w), dy((size_t)rows * ld);
  for (int k = 0; k <= 1; k++) {
    mk::rms_force_kernel(k);
    CU(cudaMemset(dy.p, 0, (size_t)rows * ld * sizeof(float)));
    ASSERT_TRUE(mk::rms_norm(dx.p, ld, dw.p, dy.p, ld, rows, n, eps, nullptr).ok());
    CU(cudaDeviceSynchronize());
    const std::vector<float> y = dy.get((size_t)rows * ld);
    double worst = 0.0, scale = 0.0;
    for (int r = 0; r < rows; r++)
      for (int64_t i = 0; i < n; i++) {
        const size_t j = (size_t)r * ld + i;
        worst = std::max(worst, (double)std::fabs(y[j] - ref[j]));
        scale = std::max(scale, (double)std::fabs(ref[j]));
      }
    EXPECT_LE(worst, 2e-6 * scale) << "kernel " << k << " rows " << rows << " n " << n << " ld " << ld;
    for (int r = 0; r < rows; r++)  // the gap between rows is untouched
      for (int64_t i = n; i < ld; i++) ASSERT_EQ(y[(size_t)r * ld + i], 0.f) << "kernel " << k;
  }
}

TEST(RmsNormKernels, MatchReferenceAtDecodeShapes) {
  BASIC_SKIP_WITHOUT_GPU();
  check_rms(64, 4096, 4096, 1);  // 9B hidden, a 64-sequence decode step
  check_rms(3, 1024, 1024, 2);   // 0.8B hidden
  check_rms(5, 2560, 2560, 3);   // 4B hidden
}

TEST(RmsNormKernels, MatchReferenceAtAwkwardShapes) {
  BASIC_SKIP_WITHOUT_GPU();
  check_rms(7, 4096, 4100, 4);  // strided rows
  check_rms(4, 1000, 1000, 5);  // n % 128 != 0: the one-float4 kernel falls back
  check_rms(2, 5120, 5120, 6);  // 27B hidden: more than 4 x 1024 elements
  check_rms(1, 130, 131, 7);    // odd stride: only the plain loop
}

TEST(SwigluKernels, Float4GivesScalarBitsAndMatchesReference) {
  BASIC_SKIP_WITHOUT_GPU();
  ForceReset reset;
  const int rows = 9;
  const int64_t n = 12288, ld = 2 * n;  // gate and up interleaved per row as in the ffn_gate_up output
  const std::vector<float> gu = randv((size_t)rows * ld, 11, -8.f, 8.f);
  std::vector<float> g((size_t)rows * n), u((size_t)rows * n), ref((size_t)rows * n);
  for (int r = 0; r < rows; r++)
    for (int64_t i = 0; i < n; i++) g[(size_t)r * n + i] = gu[(size_t)r * ld + i], u[(size_t)r * n + i] = gu[(size_t)r * ld + n + i];
  cpu::swiglu(ops::SwigluParams{rows, n}, g.data(), u.data(), ref.data());
  Dev dgu(gu), dy0((size_t)rows * n), dy1((size_t)rows * n);
  mk::swiglu_force_kernel(0);
  ASSERT_TRUE(mk::swiglu(dgu.p, ld, dgu.p + n, ld, dy0.p, rows, n, nullptr).ok());
  mk::swiglu_force_kernel(1);
  ASSERT_TRUE(mk::swiglu(dgu.p, ld, dgu.p + n, ld, dy1.p, rows, n, nullptr).ok());
  CU(cudaDeviceSynchronize());
  const std::vector<float> y0 = dy0.get((size_t)rows * n), y1 = dy1.get((size_t)rows * n);
  EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)), 0);
  double worst = 0.0;
  for (size_t j = 0; j < y1.size(); j++)
    worst = std::max(worst, (double)std::fabs(y1[j] - ref[j]) / (std::fabs(ref[j]) + 1e-3));
  EXPECT_LE(worst, 1e-5);
}

}  // namespace

// The certified greedy head (cg38: matvec_batched_hi + certified_argmax, src/cuda/model/kernels_certify.cu) against
// a float64 reference on random Q6_K weights: the hi-only head stays within its stated bound of W x, the row norms
// are the dequantized rows' L1 norms, and the selected token is the exact argmax of W x (ties: the lowest id) with
// its exact logit, also on exact ties (a duplicated row), near ties (one code apart), a zero row, a zero column and a
// column holding NaN. Skips without a GPU or without the sm_90a kernels (matvec_batched_hi_supported).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/fp16.h"
#include "cuda/matvec.h"
#include "cuda_test_util.h"
#include "device_copy.h"
#include "quant/quant.h"
#include "quant/random_blocks.h"

using namespace ds;
using ds::cuda::DeviceBuffer;

namespace {

constexpr int64_t kBlockBytes = 210;  // Q6_K

struct Case {
  int64_t V, H;
  int B;
  std::vector<uint8_t> w;  // [V][H] Q6_K
  std::vector<float> x;    // [B][H]
  std::vector<float> wf;   // dequantized
};

Case make_case(int64_t V, int64_t H, int B, uint64_t seed) {
  Case c{V, H, B, random_blocks(GgmlType::Q6_K, V * H, seed), random_normal(B * H, seed + 1), {}};
  const int64_t rb = H / 256 * kBlockBytes;
  // Row 700 copies row 300 (an exact tie: 700 never wins); row 701 is row 300 with one code one step up (a near tie);
  // row 702 is zero (d = 0 in every block). Column 1 is row 300's weights (so rows 300 / 700 / 701 lead it), column 2
  // is zero, column 3 is column 0 with one NaN.
  std::memcpy(&c.w[700 * rb], &c.w[300 * rb], rb);
  std::memcpy(&c.w[701 * rb], &c.w[300 * rb], rb);
  c.w[701 * rb + 5] ^= 0x01;  // a low nibble of ql: q changes by one
  for (int64_t b = 0; b < H / 256; b++) c.w[702 * rb + b * kBlockBytes + 208] = c.w[702 * rb + b * kBlockBytes + 209] = 0;
  c.wf.resize(V * H);
  for (int64_t r = 0; r < V; r++) quant::dequantize_row(GgmlType::Q6_K, &c.w[r * rb], &c.wf[r * H], H);
  for (int64_t k = 0; k < H; k++) {
    c.x[1 * H + k] = c.wf[300 * H + k] * 300.f;
    c.x[2 * H + k] = 0.f;
    c.x[3 * H + k] = c.x[k];
  }
  c.x[3 * H + 17] = std::numeric_limits<float>::quiet_NaN();
  return c;
}

double dot64(const Case& c, int64_t r, int b) {
  double s = 0;
  for (int64_t k = 0; k < c.H; k++) s += (double)c.wf[r * c.H + k] * c.x[b * c.H + k];
  return s;
}

void run_case(int64_t V, int64_t H, int B, uint64_t seed) {
  const Case c = make_case(V, H, B, seed);
  if (!cuda::matvec_batched_hi_supported(GgmlType::Q6_K, V, H, B))
    GTEST_SKIP() << "no hi-only Q6_K kernel here (needs sm_90a and a compute capability 9.0 device)";
  DeviceBuffer w = test::to_device(c.w), x = test::to_device(c.x);
  auto y = DeviceBuffer::alloc((size_t)B * V * 4), l1 = DeviceBuffer::alloc((size_t)V * 4);
  auto scratch = DeviceBuffer::alloc(cuda::certify_scratch_bytes(B, V));
  auto res = DeviceBuffer::alloc((size_t)B * 12);
  ASSERT_TRUE(y.ok() && l1.ok() && scratch.ok() && res.ok());
  ASSERT_TRUE(cuda::matvec_batched_hi(GgmlType::Q6_K, w.data(), V, H, x.as<float>(), y->as<float>(), B, nullptr).ok());
  ASSERT_TRUE(cuda::row_l1_norms(GgmlType::Q6_K, w.data(), V, H, l1->as<float>(), nullptr).ok());
  cuda::SelectResultDev out;
  out.argmax = res->as<int32_t>();
  out.max = reinterpret_cast<float*>(out.argmax + B);
  out.nonfinite = reinterpret_cast<int32_t*>(out.max + B);
  ASSERT_TRUE(cuda::certified_argmax(GgmlType::Q6_K, y->as<float>(), x.as<float>(), w.data(), l1->as<float>(), B, V, H,
                                     scratch->data(), scratch->size(), out, nullptr)
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto yh = test::to_host<float>(*y, (size_t)B * V), l1h = test::to_host<float>(*l1, V);
  const auto r = test::to_host<int32_t>(*res, (size_t)B * 3);

  // Row norms: the dequantized rows' L1 norms, rounded up.
  for (int64_t i = 0; i < V; i++) {
    double s = 0;
    for (int64_t k = 0; k < H; k++) s += std::fabs((double)c.wf[i * H + k]);
    ASSERT_GE((double)l1h[i], s) << "row " << i;
    ASSERT_LE((double)l1h[i], s * (1 + 1e-6)) << "row " << i;
  }
  double worst = 0;  // |y - W x| / (||w_r||_1 max|x| 2^-10), over the finite columns
  for (int b = 0; b < B; b++) {
    float xm = 0;
    bool nan = false;
    for (int64_t k = 0; k < H; k++) {
      nan = nan || std::isnan(c.x[b * H + k]);
      xm = std::max(xm, std::fabs(c.x[b * H + k]));
    }
    const int32_t am = r[b], bad = r[2 * B + b];
    float mx;
    std::memcpy(&mx, &r[B + b], 4);
    if (nan) {
      EXPECT_GT(bad, 0) << "column " << b << " holds a NaN";
      continue;
    }
    EXPECT_EQ(bad, 0) << "column " << b;
    int64_t best = 0;
    double bv = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
      const double t = dot64(c, i, b);
      if (t > bv) bv = t, best = i;
      const double bound = (double)l1h[i] * xm * 0x1p-10 * (1 + 0x1p-9);
      const double err = std::fabs((double)yh[(size_t)b * V + i] - t);
      ASSERT_LE(err, bound) << "column " << b << " row " << i << ": the hi-only head left its bound";
      if (bound > 0) worst = std::max(worst, err / bound);
    }
    EXPECT_EQ(am, best) << "column " << b;
    EXPECT_EQ(mx, (float)bv) << "column " << b;
  }
  std::printf("[certify] V %lld H %lld B %d: worst |hi-only - W x| = %.3g of the bound\n", (long long)V, (long long)H, B,
              worst);
  EXPECT_TRUE(r[1] == 300 || r[1] == 701) << "column 1 is led by rows 300 / 700 (equal) and 701: got " << r[1];
  EXPECT_EQ(r[2], 0) << "x = 0: every logit is 0, the lowest id wins";
  EXPECT_GT(worst, 0.0) << "the hi-only head gave W x exactly: it is not the bound form";
}

// The bound itself (no GPU): the hi-only head's arithmetic emulated exactly in double (x·s and sc·(q − 32) rounded to
// fp16 as the kernel rounds them, every product and sum exact), against W x, on rows with random and with extreme
// scales (every sub-block scale -128 / 127: |sc·(q − 32)| past 2048, so fp16 drops its odd part) and columns of small,
// large, outlying and fp16-midpoint values. The kernel adds only fp32 rounding (< 2^-17 of the bound's scale).
TEST(CertifiedHead, BoundOfTheHiOnlyArithmetic) {
  const int64_t H = 2048, V = 64, nb = H / 256;
  std::vector<uint8_t> w = random_blocks(GgmlType::Q6_K, V * H, 5);
  for (int64_t b = 0; b < nb; b++)
    for (int i = 0; i < 16; i++) {
      w[(0 * nb + b) * kBlockBytes + 192 + i] = 0x80;  // -128
      w[(1 * nb + b) * kBlockBytes + 192 + i] = 0x7F;
    }
  std::vector<std::vector<float>> cols = {random_normal(H, 7), random_normal(H, 8, 1e-3f), random_normal(H, 9, 1e4f)};
  cols.push_back(cols[0]);
  cols.back()[100] = 1e3f;  // an outlier: the rest is small against max|x|
  std::vector<float> mid(H);
  for (int64_t k = 0; k < H; k++) mid[k] = (float)(1 + (k % 7)) * (1.f + 0x1p-11f) * ((k % 3) ? 1.f : -1.f);
  cols.push_back(mid);  // x·s at fp16 midpoints: the largest |x·s − hi|
  double worst = 0;
  for (const auto& x : cols) {
    float m = 0;
    for (float v : x) m = std::max(m, std::fabs(v));
    int e = 0;
    std::frexp(m, &e);
    const float s = std::ldexp(1.f, 14 - e);
    const double inv = std::ldexp(1.0, e - 14);
    std::vector<double> hi(H);
    for (int64_t k = 0; k < H; k++) hi[k] = f16_to_f32(f32_to_f16(x[k] * s));
    for (int64_t r = 0; r < V; r++) {
      double F = 0, T = 0, l1 = 0;
      for (int64_t b = 0; b < nb; b++) {
        uint8_t blk[kBlockBytes];
        std::memcpy(blk, &w[(r * nb + b) * kBlockBytes], kBlockBytes);
        const double d = f16_to_f32(load_u16(blk + 208));
        blk[208] = 0x00, blk[209] = 0x3C;  // d = 1: the block decodes to P = sc·(q − 32)
        float P[256];
        quant::dequantize_row(GgmlType::Q6_K, blk, P, 256);
        double sum = 0;
        for (int k = 0; k < 256; k++) {
          sum += (double)f16_to_f32(f32_to_f16(P[k])) * hi[b * 256 + k];
          T += d * P[k] * x[b * 256 + k];
          l1 += std::fabs(d * P[k]);
        }
        F += d * sum;
      }
      F *= inv;
      const double bound = l1 * m * 0x1p-10 * (1 + 0x1p-10);
      ASSERT_LE(std::fabs(F - T), bound) << "row " << r << ", max|x| " << m;
      worst = std::max(worst, std::fabs(F - T) / bound);
    }
  }
  std::printf("[certify] emulated hi-only head: worst |F - W x| = %.3g of the bound\n", worst);
  EXPECT_GT(worst, 0.0);
}

TEST(CertifiedHead, ExactArgmaxFromTheHiOnlyHead) {
  DS_SKIP_WITHOUT_GPU();
  run_case(5000, 2048, 64, 11);
}

TEST(CertifiedHead, PartialBatchAndWiderRows) {
  DS_SKIP_WITHOUT_GPU();
  run_case(3001, 4096, 25, 23);
}

}  // namespace

// CUDA infrastructure: CUDA_TRY turns a failure into an Error naming the expression and file:line
// (no GPU needed), device info, DeviceBuffer round trips, and the dequantization kernels bit-exact
// against the gguf-py goldens (formats.md §7).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cuda/cuda_util.h"
#include "cuda/dequant.h"
#include "cuda_test_util.h"
#include "testutil.h"

namespace ds {
namespace {

constexpr int kTryLine = __LINE__ + 2;
Status fails_with_invalid_value() {
  CUDA_TRY(cudaErrorInvalidValue);
  return {};
}

TEST(CudaInfra, CudaTryReportsExpressionAndLocation) {
  const int line = kTryLine;
  auto s = fails_with_invalid_value();
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  EXPECT_NE(m.find("cudaErrorInvalidValue"), std::string::npos) << m;
  EXPECT_NE(m.find("infra_test.cpp:" + std::to_string(line)), std::string::npos) << m;
  EXPECT_EQ(m.rfind("cuda: ", 0), 0u) << m;
}

TEST(CudaInfra, WeightTypeCheckNamesTensorAndType) {
  EXPECT_TRUE(cuda::check_weight_type(GgmlType::Q4_K, "blk.0.ffn_up.weight").ok());
  auto s = cuda::check_weight_type(GgmlType::IQ1_S, "blk.3.ffn_down.weight");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("blk.3.ffn_down.weight"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("IQ1_S"), std::string::npos) << s.error().message;
  for (GgmlType t : test::cuda_types()) EXPECT_TRUE(cuda::has_kernel(t)) << ggml_type_name(t);
}

TEST(CudaInfra, DeviceInfo) {
  DS_REQUIRE_GPU();
  auto d = cuda::device_info();
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_FALSE(d->name.empty());
  EXPECT_GT(d->sm_count, 0);
  EXPECT_GT(d->total_mem, 0u);
  EXPECT_GT(d->peak_bw, 1e11) << "memory clock " << d->mem_clock_khz << " kHz, bus " << d->bus_width_bits;
  std::printf("device %d: %s, cc %d.%d, %d SMs, %.1f GiB, L2 %.0f MiB, peak %.2f TB/s\n", d->id,
              d->name.c_str(), d->cc_major, d->cc_minor, d->sm_count, d->total_mem / 1073741824.0,
              d->l2_bytes / 1048576.0, d->peak_bw / 1e12);
}

TEST(CudaInfra, DeviceBufferRoundTrip) {
  DS_REQUIRE_GPU();
  const auto v = test::random_floats(1000, 3);
  auto b = test::to_device(v);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.size(), v.size() * 4);
  EXPECT_EQ(test::to_host<float>(b, v.size()), v);
  auto moved = std::move(b);
  EXPECT_TRUE(b.empty());
  EXPECT_FALSE(moved.empty());
  EXPECT_FALSE(moved.upload(v.data(), 8, moved.size() - 4).ok());  // past the end: an Error
  auto huge = cuda::DeviceBuffer::alloc(size_t(1) << 50);         // 1 PiB: cudaMalloc fails cleanly
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("cudaMalloc"), std::string::npos) << huge.error().message;
}

TEST(CudaDequant, MatchesGoldensBitExact) {
  DS_REQUIRE_GPU();
  for (GgmlType t : test::cuda_types()) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    std::vector<uint8_t> blocks;
    std::vector<float> gold;
    if (t == GgmlType::F32) {  // no golden file: the identity on random floats, odd length
      gold = test::random_floats(1001, 5);
      blocks.resize(gold.size() * 4);
      std::memcpy(blocks.data(), gold.data(), blocks.size());
    } else {
      const std::string name(ggml_type_name(t));
      blocks = test::read_file(test::fixture("quant/" + name + ".blocks"));
      const auto raw = test::read_file(test::fixture("quant/" + name + ".f32"));
      gold.resize(raw.size() / 4);
      std::memcpy(gold.data(), raw.data(), raw.size());
    }
    ASSERT_FALSE(gold.empty());
    auto src = test::to_device(blocks);
    auto dst = cuda::DeviceBuffer::alloc(gold.size() * 4);
    ASSERT_TRUE(dst.ok());
    ASSERT_TRUE(dst->fill_zero().ok());
    auto s = cuda::dequantize(t, src.data(), dst->as<float>(), (int64_t)gold.size(), nullptr);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = test::to_host<float>(*dst, gold.size());
    int bad = 0;
    for (size_t i = 0; i < gold.size(); i++)
      if (!(got[i] == gold[i]) && bad++ < 5) ADD_FAILURE() << "element " << i << ": " << got[i] << " != " << gold[i];
    EXPECT_EQ(bad, 0);
  }
}

TEST(CudaDequant, RejectsBadInput) {
  DS_REQUIRE_GPU();
  auto buf = cuda::DeviceBuffer::alloc(4096);
  ASSERT_TRUE(buf.ok());
  float* dst = buf->as<float>();
  auto s = cuda::dequantize(GgmlType::IQ1_S, buf->data(), dst, 256, nullptr);  // a type without CUDA kernels
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("IQ1_S"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("dequantize"), std::string::npos) << s.error().message;
  s = cuda::dequantize(GgmlType::Q4_K, buf->data(), dst, 100, nullptr);  // not whole blocks
  EXPECT_FALSE(s.ok());
  s = cuda::dequantize(GgmlType::Q4_K, buf->as<uint8_t>() + 2, dst, 256, nullptr);  // misaligned
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace ds

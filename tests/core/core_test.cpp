#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "core/ggml_type.h"

namespace ds {

TEST(Fp16, RoundTripsEveryHalf) {
  // Every finite f16 converts to f32 and back to the same bits; NaNs stay NaN.
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = f16_to_f32((uint16_t)h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "half bits " << h;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(GgmlType, TableMatchesFormatsDoc) {
  auto q4k = ggml_type_info(GgmlType::Q4_K);
  ASSERT_TRUE(q4k);
  EXPECT_EQ(q4k->block_size, 256u);
  EXPECT_EQ(q4k->type_size, 144u);
  EXPECT_EQ(ggml_type_info(GgmlType::Q6_K)->type_size, 210u);
  EXPECT_EQ(ggml_type_info(GgmlType::Q8_0)->type_size, 34u);
  EXPECT_FALSE(ggml_type_info(4u));   // retired
  EXPECT_FALSE(ggml_type_info(42u));  // unknown
  EXPECT_EQ(ggml_type_from_name("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(ggml_row_bytes(*q4k, 512), 288u);
}

Result<int> half(int x) {
  if (x % 2) return err("odd: {}", x);
  return x / 2;
}
Result<int> quarter(int x) {
  DS_ASSIGN(int h, half(x));
  return half(h);
}

TEST(Result, PropagatesErrors) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "odd: 3");
}

}  // namespace ds

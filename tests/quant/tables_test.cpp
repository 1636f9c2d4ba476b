// The codebook tables (copied mechanically from ggml, see iq_tables.cpp): every byte belongs to the
// alphabet of formats.md §5.13, and entries are distinct and increasing in ggml's order (a copy error
// would almost surely break one of these; the goldens only reach the entries random blocks hit).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "quant/kernels.h"

namespace ds::quant::detail {
namespace {

template <typename T>
void check_grid(const char* name, const T* grid, int n, int elems, std::set<uint8_t> alphabet) {
  SCOPED_TRACE(name);
  std::vector<uint8_t> order(alphabet.begin(), alphabet.end());
  if (alphabet.count(0xFF)) order = {0xFF, 0x00, 0x01};  // iq1s: -1 < 0 < +1
  auto rank = [&](uint8_t b) { return (uint64_t)(std::find(order.begin(), order.end(), b) - order.begin()); };
  uint64_t prev_key = 0;
  for (int i = 0; i < n; i++) {
    uint64_t key = 0, mul = 1;
    for (int j = 0; j < elems; j++) {
      const uint8_t b = (uint8_t)(grid[i] >> (8 * j));
      ASSERT_TRUE(alphabet.count(b)) << "entry " << i << " byte " << j << " = " << (int)b;
      key += rank(b) * mul;
      mul *= order.size();
    }
    if (i > 0) {
      ASSERT_GT(key, prev_key) << "entry " << i;
    }
    prev_key = key;
  }
}

TEST(QuantTables, GridsUseTheirAlphabetAndAreOrdered) {
  check_grid("iq2xxs", iq2xxs_grid, 256, 8, {0x08, 0x19, 0x2b});
  check_grid("iq2xs", iq2xs_grid, 512, 8, {0x08, 0x19, 0x2b});
  check_grid("iq2s", iq2s_grid, 1024, 8, {0x08, 0x19, 0x2b});
  check_grid("iq3xxs", iq3xxs_grid, 256, 4, {4, 12, 20, 28, 36, 44, 52, 62});
  check_grid("iq3s", iq3s_grid, 512, 4, {1, 3, 5, 7, 9, 11, 13, 15});
  check_grid("iq1s", iq1s_grid, 2048, 8, {0xFF, 0x00, 0x01});
}

TEST(QuantTables, KnownEntries) {
  // Spot values from ggml-common.h.
  EXPECT_EQ(iq2xxs_grid[1], 0x080808080808082bull);
  EXPECT_EQ(iq2xxs_grid[3], 0x0808080808082b08ull);
  EXPECT_EQ(iq1s_grid[0], 0xffffffffffffffffull);
  EXPECT_EQ(iq1s_grid[2047], 0x0101010101010101ull);
  EXPECT_EQ(ksigns(0), 0);
  EXPECT_EQ(ksigns(1), 129);
  EXPECT_EQ(ksigns(3), 3);
  EXPECT_EQ(ksigns(127), 255);
}

}  // namespace
}  // namespace ds::quant::detail

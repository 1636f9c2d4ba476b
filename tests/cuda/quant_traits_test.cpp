// The CUDA decode code (src/cuda/quant_traits.cuh) built for the CPU: every unit of every block must
// reproduce the gguf-py goldens bit for bit (and the CPU backend's decoding of random blocks with valid
// scales: the goldens are few blocks, random ones reach every scale and code), the units must tile each
// block exactly once, and the factored dot products must match a float64 dot of the expected values.
// Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "cuda/quant_traits.cuh"
#include "quant/quant.h"
#include "quant/random_blocks.h"
#include "cuda_test_util.h"
#include "testutil.h"

namespace ds {
namespace {
using cuda::qt::QuantTraits;

struct Golden {
  std::vector<uint8_t> blocks;
  std::vector<float> values;
};

// F32 has no golden file (gguf-py's F32 "dequantization" is the identity): random floats stand in.
Golden load_golden(GgmlType t) {
  Golden g;
  if (t == GgmlType::F32) {
    g.values = test::random_floats(512, 7);
    g.blocks.resize(g.values.size() * 4);
    std::memcpy(g.blocks.data(), g.values.data(), g.blocks.size());
    return g;
  }
  const std::string name(ggml_type_name(t));
  g.blocks = test::read_file(test::fixture("quant/" + name + ".blocks"));
  auto raw = test::read_file(test::fixture("quant/" + name + ".f32"));
  g.values.resize(raw.size() / 4);
  std::memcpy(g.values.data(), raw.data(), g.values.size() * 4);
  return g;
}

// 64 random blocks (of 256 elements or 8 of 32) decoded by the CPU backend's reference decoder.
Golden random_golden(GgmlType t) {
  Golden g;
  const int64_t n = 64 * 256;
  g.blocks = random_blocks(t, n, 23);
  g.values.resize(n);
  quant::dequantize_row_ref(t, g.blocks.data(), g.values.data(), n);
  return g;
}

template <class QT>
void check_traits(GgmlType t, const Golden& g, const char* source) {
  SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + source);
  const auto info = *ggml_type_info(t);
  // The trait block is a whole number of GGML blocks with the same byte density.
  ASSERT_EQ(QT::kBlockElems % (int)info.block_size, 0);
  ASSERT_EQ((int64_t)QT::kBlockBytes * info.block_size, (int64_t)info.type_size * QT::kBlockElems);
  ASSERT_EQ(QT::kRuns * QT::kRunLen, QT::kE);
  ASSERT_EQ(QT::kUnits * QT::kE, QT::kBlockElems);
  ASSERT_EQ(QT::kRunLen % 4, 0);  // activations are loaded as float4

  ASSERT_FALSE(g.values.empty());
  const int64_t n_blocks = (int64_t)g.values.size() / QT::kBlockElems;
  ASSERT_EQ((int64_t)g.blocks.size(), n_blocks * QT::kBlockBytes);
  const auto x = test::random_floats((int64_t)g.values.size(), 11);

  int mismatches = 0;
  double max_rel = 0;
  for (int64_t b = 0; b < n_blocks; b++) {
    const uint8_t* blk = g.blocks.data() + b * QT::kBlockBytes;
    const float* gold = g.values.data() + b * QT::kBlockElems;
    const float* xb = x.data() + b * QT::kBlockElems;
    std::vector<int> covered(QT::kBlockElems, 0);
    double dot = 0, ref = 0, mag = 0;
    for (int k = 0; k < QT::kUnits; k++) {
      float w[QT::kE], v[QT::kE], s[QT::kRuns];
      QT::dequant(blk, k, w);
      for (int r = 0; r < QT::kRuns; r++) {
        s[r] = 0;
        for (int i = 0; i < QT::kRunLen; i++) {
          const int e = QT::run_start(k, r) + i;
          ASSERT_GE(e, 0);
          ASSERT_LT(e, QT::kBlockElems);
          covered[e]++;
          const float got = w[r * QT::kRunLen + i];
          if (!(got == gold[e]) && mismatches++ < 5)
            ADD_FAILURE() << "block " << b << " unit " << k << " element " << e << ": " << got
                          << " != golden " << gold[e];
          v[r * QT::kRunLen + i] = xb[e];
          s[r] += xb[e];
          ref += (double)gold[e] * xb[e];
          mag += std::fabs((double)gold[e] * xb[e]);
        }
      }
      dot += QT::dot(blk, k, v, s);
    }
    for (int e = 0; e < QT::kBlockElems; e++) ASSERT_EQ(covered[e], 1) << "element " << e;
    if (mag > 0) max_rel = std::max(max_rel, std::fabs(dot - ref) / mag);
  }
  EXPECT_EQ(mismatches, 0);
  // Factored float32 sums over <= 256 terms: a few units of float32 rounding relative to sum |w x|.
  EXPECT_LT(max_rel, 2e-6) << "dot vs float64 reference";
}

template <class QT>
void check_traits(GgmlType t) {
  check_traits<QT>(t, load_golden(t), "golden");
  if (!QT::kIsFloat) check_traits<QT>(t, random_golden(t), "random blocks");
}

TEST(CudaQuantTraits, DecodeMatchesGoldensOnCpu) {
  for (GgmlType t : test::cuda_types()) {
    switch (t) {
#define DS_CASE(T) \
  case GgmlType::T: check_traits<QuantTraits<GgmlType::T>>(t); break;
      DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
      default: FAIL() << "type without traits in cuda_types()";
    }
  }
}

// The codebook packed for the GPU's byte-permute lookup must be formats.md §5.11's table.
TEST(CudaQuantTraits, Iq4CodebookPacking) {
  const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (uint32_t q = 0; q < 65536; q += 1 + (q % 7)) {
    const uint32_t r = cuda::qt::iq4_lut(q);
    for (int k = 0; k < 4; k++)
      ASSERT_EQ((int)((r >> (8 * k)) & 0xFF) - 128, kv[(q >> (4 * k)) & 0xF]) << "q " << q << " k " << k;
  }
}

}  // namespace
}  // namespace ds

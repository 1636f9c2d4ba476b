#include "cuda_test_util.h"


namespace ds::test {

bool have_gpu() { return cuda::device_count() > 0; }

const std::vector<GgmlType>& cuda_types() {
  static const std::vector<GgmlType> v = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q8_0,
                                          GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_K,
                                          GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::Q4_1,
                                          GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ3_XXS,
                                          GgmlType::IQ3_S};
  return v;
}

}  // namespace ds::test

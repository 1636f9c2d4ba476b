#include "cuda/dequant.h"

namespace ds::cuda {

Status check_weight_type(GgmlType t, std::string_view tensor_name) {
  if (has_kernel(t)) return {};
  return err("cuda: tensor '{}' has type {}, which the CUDA backend cannot read (supported: F32, F16, "
             "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_XXS, "
             "IQ3_S); the CPU backend reads it: run with --backend cpu, or use a file quantized to one of "
             "those types (e.g. Q4_K_M)",
             tensor_name, ggml_type_name(t));
}

}  // namespace ds::cuda

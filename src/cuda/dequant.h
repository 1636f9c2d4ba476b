// Dequantization on the GPU: dst[0..n) = the float values of n elements of GGML type `type` stored at
// src (device memory, whole blocks). Bit-identical to gguf-py (formats.md §6) for every type that
// has_kernel() accepts: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_XS, IQ3_XXS, IQ3_S.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/ggml_type.h"

namespace ds::cuda {

// True if the CUDA backend can read weights of this type (dequantize, matvec, row lookup).
bool has_kernel(GgmlType t);

// Load-time check: an Error naming the tensor and its type when no CUDA kernel reads that type.
Status check_weight_type(GgmlType t, std::string_view tensor_name);

// src must be aligned to the type's QuantTraits::kAlign: 16 bytes for Q4_K / Q5_K, 8 for IQ4_XS and
// Q5_1, 4 for Q4_1 and Q2_K, 2 otherwise (the float types: their element size); n must be a
// multiple of the type's block size. Enqueued on `stream`; no host synchronization.
Status dequantize(GgmlType type, const void* src, float* dst, int64_t n, cudaStream_t stream);

}  // namespace ds::cuda

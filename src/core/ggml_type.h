// The GGML tensor type table (formats.md §4): id, name, elements per block, bytes per block.
// Lives in core because both the GGUF reader (size validation) and quant (kernels) need it.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace ds {

// Values are the ggml_type ids stored in GGUF tensor records.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  uint32_t block_size;   // elements per block
  uint32_t type_size;    // bytes per block
};

// Info for a known, non-retired id; nullopt for ids 4, 5, 31-33, 36-38 and >= 42.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
inline std::optional<GgmlTypeInfo> ggml_type_info(GgmlType t) { return ggml_type_info((uint32_t)t); }
std::string_view ggml_type_name(GgmlType t);  // "Q4_K"; "?" for an unknown id
std::optional<GgmlType> ggml_type_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of n elements (n must be a multiple of the block size).
inline uint64_t ggml_row_bytes(const GgmlTypeInfo& t, uint64_t n) { return n / t.block_size * t.type_size; }

}  // namespace ds

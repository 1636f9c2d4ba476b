// CPU reference for GGML block formats (formats.md §5): dequantization (bit-exact with gguf-py),
// float-activation dot products, and quantizers. Every function takes whole rows: n is a multiple
// of the type's block size (a violation aborts via DS_CHECK: validate types with check_supported and
// shapes at load time). These are the oracles the CUDA kernels are tested against.
// The entry points pick AVX2+FMA kernels at run time when the CPU has them, else the scalar code
// (the *_ref functions). Block layouts: quant/blocks.h. Thread-safe; no global state.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/ggml_type.h"

namespace ds::quant {

// True if dequantize_row supports the type.
bool can_dequantize(GgmlType t);
// True if dot_row supports the type (every type can_dequantize supports).
bool can_dot(GgmlType t);
// True if quantize_row can produce the type.
bool can_quantize(GgmlType t);

// dst[0..n) = the values of n elements of type t starting at src (a whole number of blocks).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// sum_i w[i] * x[i] over one row of n elements of type t, with float activations x and float32
// accumulation per block (no activation quantization). The matrix-vector building block.
float dot_row(GgmlType t, const void* row, const float* x, int64_t n);

// The matrix-vector product over a block of rows: y[r] = dot_row(t, w + r * row_stride, x, n) for
// r in [0, n_rows) (row_stride in bytes). Faster than calling dot_row per row, because the work that
// depends only on x (partial sums of x for the min/offset terms) is done once for all rows. Results
// agree with dot_row within float32 rounding (not bit for bit). Single-threaded: split rows across
// threads in the caller.
void dot_rows(GgmlType t, const void* w, size_t row_stride, int64_t n_rows, const float* x, int64_t n, float* y);

// Quantizes n floats into blocks of type t (ggml's reference algorithms, no importance matrix).
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. Returns bytes written.
uint64_t quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// The plain scalar versions of dequantize_row / dot_row (the readable reference and the oracle the
// fast paths are tested against). dequantize_row is bit-identical to these; dot_row is not (it sums
// in a different order), but agrees within float32 rounding.
void dequantize_row_ref(GgmlType t, const void* src, float* dst, int64_t n);
float dot_row_ref(GgmlType t, const void* row, const float* x, int64_t n);

// Checks that a type is supported for use (dequantize + dot); the error names the type and `what`.
Status check_supported(GgmlType t, const std::string& what);

}  // namespace ds::quant

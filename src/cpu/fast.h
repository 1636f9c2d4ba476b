// The fast CPU paths the model forward uses. Each computes the same function as its reference in cpu.h
// (same params structs, same layouts, fp32 unless asked otherwise) and is tested against it in
// tests/ops/*_fast_test.cpp; only the order of the floating-point sums differs. They pick AVX-512 or
// AVX2 kernels at run time (isa.h) and call the reference on other CPUs.
//   matmul_fast         decode: quant::dot_rows over slices of rows; prefill: each 16/32-row weight panel
//                       dequantized once to fp32 and multiplied with all T tokens by a register-blocked
//                       FMA micro-kernel. Several weights that share the input run in one parallel region.
//   gdn_chunked_fast    the chunked delta rule (§4.6) as blocked row-times-matrix products
//   gdn_recurrent_fast  the recurrent rule (§4.4), one pass over each state row
//   attention_fast      causal attention with vectorized dot products and value sums
//   conv1d_silu_fast    the causal conv + SiLU over a prompt, parallel over tokens, channels vectorized
//   swiglu_fast         SwiGLU with the vector exp
#pragma once
#include <cstdint>
#include <span>

#include "cpu/cpu.h"

namespace ds::cpu {

// Precision of the prefill matrix products. Bf16 (the approximate `--fast` mode, issue 6) rounds the
// dequantized weights and the activations to bf16 and multiplies them with AVX-512 BF16 dot products
// (fp32 accumulation); on CPUs without them it is the same as Fp32. Decode (T = 1) is always fp32.
enum class Precision { Fp32, Bf16 };

// One product of a group that shares its input: y [n_tokens, p.n_rows] = x W^T (ops/matmul.h).
struct MatmulJob {
  ops::MatmulParams p;
  const void* w = nullptr;
  float* y = nullptr;
};

// Runs every job with the same x [n_tokens, n_cols] (all jobs must agree on n_tokens and n_cols).
void matmul_fast(std::span<const MatmulJob> jobs, const float* x, Precision prec = Precision::Fp32);
inline void matmul_fast(const ops::MatmulParams& p, const void* w, const float* x, float* y,
                        Precision prec = Precision::Fp32) {
  const MatmulJob j{p, w, y};
  matmul_fast(std::span<const MatmulJob>(&j, 1), x, prec);
}

void gdn_chunked_fast(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                      float* out);
void gdn_recurrent_fast(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                        const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                        float* out);
// Prefill (>= 2 Kc tokens per sequence) only; fewer tokens run the reference conv1d_silu.
void conv1d_silu_fast(const ops::ConvParams& p, const float* x, const float* w, float* state,
                      const int32_t* seq_starts, const int32_t* state_slots, float* y);
// y = silu(gate) * up (ops/swiglu.h) with the vector exp; y may alias gate or up.
void swiglu_fast(const ops::SwigluParams& p, const float* gate, const float* up, float* y);
void attention_fast(const ops::AttentionParams& p, const float* q, const float* k, const float* v, float* k_cache,
                    float* v_cache, const int32_t* pos, const int32_t* seq_starts, const int32_t* slots, float* out);

}  // namespace ds::cpu

// Prefill kernels for the CUDA forward (issue 6): the pieces a model forward calls when it runs T > 1
// tokens of a prompt at once. Host-only header (compiles with the host compiler and nvcc alike).
//   PrefillGemm      Y[T, N] (+)= X[T, K] · W[N, K]ᵀ for GGUF-typed W: W dequantized into a reusable scratch,
//                    then a cuBLAS tensor-core product with fp32 accumulation (spec §4.1, §5, §6).
//   gdn_chunked      the chunked gated delta rule, chunk 64 (spec §4.6), as named stages; same params, layouts
//                    and state as cpu::gdn_chunked (ops/gdn.h); the final state is what decode continues from.
//   attention_prefill causal GQA attention of T new tokens over the KV cache prefix and themselves, flash
//                    style (online softmax), storing K/V first; same contract as cpu::attention (ops/attention.h).
// Every pointer is device memory (index arrays too); calls enqueue on `stream` with no host synchronization
// (graph-capturable once the scratch is reserved). Bad parameters return an Error and launch nothing.
// Precision (Mode): kPrecise = fp32 arithmetic everywhere (the CPU reference's 2e-3 logit bound);
// kFast = tensor-core inputs (bf16/f16/tf32, chosen per product) with fp32 accumulation; the delta rule's
// state and its within-chunk solve stay fp32 in both modes.
//
// How a model forward uses them (one sequence or a packed batch of prompts, T tokens per piece):
//   once:       gemm = PrefillGemm::create(); gemm->reserve(largest trunk matrix elems, max piece tokens * largest K)
//               and device scratch of max(gdn_chunked_workspace_bytes, attention_prefill_workspace_bytes) for the
//               largest piece (9B at 4096 tokens: about 340 MB for the delta rule, 16 KB for attention).
//   per piece:  positions n_past .. n_past+T-1; a prompt longer than the piece size runs piece after piece, the
//               delta-rule states and the KV cache carrying everything between pieces (memory stays bounded).
//   GDN layer:  matmul_many(x_norm -> qkv|z|beta|alpha) ; cuda::conv1d_silu_l2 ; cuda::gdn_gates ;
//               gdn_chunked(q, k, v views of the conv output; state in/out) ; cuda::rms_norm_gated ;
//               matmul(ssm_out, accumulate = true into the residual)
//   attn layer: matmul_many(x_norm -> q|gate, k, v) ; q/k RMSNorm + RoPE ; attention_prefill (stores K/V) ;
//               cuda::output_gate ; matmul(attn_output, accumulate = true)
//   FFN:        matmul_many(gate, up) ; cuda::swiglu ; matmul(ffn_down, accumulate = true)
//   the last token of each sequence then goes through the output norm and the (matvec) LM head.
// Positions must fit the cache: the caller turns "context full" into an Error before launching anything.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/error.h"
#include "core/ggml_type.h"
#include "cuda/cuda_util.h"
#include "ops/attention.h"
#include "ops/gdn.h"
#include "ops/matmul.h"

namespace ds::cuda::prefill {

enum class Mode { kPrecise, kFast };

// ---------------------------------------------------------------------------------------------------
// Matrix products
// ---------------------------------------------------------------------------------------------------

// What the tensor cores (or FMA units) read. The weight is dequantized exactly into the input type:
//   kF32   fp32 W and X, plain fp32 SGEMM (no TF32): the precise mode
//   kTf32  fp32 W and X, TF32 tensor cores (10-bit mantissa inputs), fp32 accumulation
//   kBf16  bf16 W and X (8-bit mantissa), fp32 accumulation: the fastest, widest range
//   kF16   f16 W and X (11-bit mantissa), fp32 accumulation: as fast as bf16; X past 32768 anywhere scales the whole
//          X by a power of two (and the product back, exactly; pf26, gemm.cu), so no input becomes inf, at the cost of
//          the small values' precision in that call
//   kF16Split  f16 W; X as two f16 terms hi + lo (hi = f16(X), lo = f16(X - hi): ~22 bits), two products
//          accumulated in fp32: twice the f16 cost, X's rounding gone (the GDN qkv projection needs it)
enum class GemmInputs { kF32, kTf32, kBf16, kF16, kF16Split };
const char* gemm_inputs_name(GemmInputs in);

// The inputs a mode uses for a weight type (the measured choice lives here, in one place).
GemmInputs default_gemm_inputs(Mode mode, GgmlType type);

// One output of a (possibly shared-input) product: Y[T, n_rows] (row stride ldy) = X · Wᵀ, or += when
// accumulate (Y += X Wᵀ, e.g. a residual). W: n_rows rows of the caller's n_cols, GGUF type `type`.
struct GemmOut {
  GgmlType type = GgmlType::F32;
  const void* w = nullptr;
  int64_t n_rows = 0;
  float* y = nullptr;
  int64_t ldy = 0;  // 0: n_rows
  bool accumulate = false;
};

// Owns a cuBLAS handle and the scratch (dequantized weight, converted activations, cuBLAS workspace).
// Not thread-safe; one instance per stream of work. Scratch grows on demand (cudaMalloc, which is not
// allowed during graph capture): call reserve() with the largest shapes first to capture graphs.
class PrefillGemm {
 public:
  static Result<std::unique_ptr<PrefillGemm>> create();
  ~PrefillGemm();
  PrefillGemm(const PrefillGemm&) = delete;
  PrefillGemm& operator=(const PrefillGemm&) = delete;

  // Scratch for weights of up to max_weight_elems elements and activations of up to max_act_elems
  // (T * K) elements, in the widest inputs that will be used (kF32/kTf32: 4 bytes, else 2).
  Status reserve(int64_t max_weight_elems, int64_t max_act_elems, GemmInputs widest = GemmInputs::kF32);

  // ops/matmul.h semantics with row strides: y[t*ldy + n] (+)= sum_k W[n, k] * x[t*ldx + k].
  // ldx, ldy = 0 mean packed (n_cols, n_rows).
  Status matmul(const ops::MatmulParams& p, const void* w, const float* x, int64_t ldx, float* y, int64_t ldy,
                GemmInputs in, bool accumulate, cudaStream_t stream);

  // Several weights applied to one input X [n_tokens, n_cols] (stride ldx): X is converted once.
  Status matmul_many(std::span<const GemmOut> outs, const float* x, int64_t ldx, int64_t n_tokens, int64_t n_cols,
                     GemmInputs in, cudaStream_t stream);

  size_t scratch_bytes() const;

 private:
  PrefillGemm() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------------
// Chunked gated delta rule (spec §4.6; ops/gdn.h contract)
// ---------------------------------------------------------------------------------------------------

inline constexpr int kGdnChunk = 64;  // == ops::kGdnChunk

// Scratch bytes gdn_chunked needs for these params (p.n_tokens tokens in p.n_seqs sequences).
size_t gdn_chunked_workspace_bytes(const ops::GdnParams& p);

// cpu::gdn_chunked on the GPU: same params, layouts and state (read as the initial state, overwritten with
// the final one; zero = fresh sequence). Sequences are packed (seq_starts, n_seqs + 1 entries, device) and
// each one's chunks start at its first token. d_k == d_v, 64 or 128. `workspace` holds
// gdn_chunked_workspace_bytes(p) bytes (256-byte aligned). Stages, in order (see GdnStages):
// chunk table, cumsum of g, K·Kᵀ and Q·Kᵀ with decay, (I + A)⁻¹, W and U, state recurrence, outputs.
Status gdn_chunked(const ops::GdnParams& p, const float* q, const float* k, const float* v, const float* g,
                   const float* beta, float* state, const int32_t* seq_starts, const int32_t* state_slots,
                   float* out, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                   Mode mode = Mode::kPrecise);

// The stages one by one, for tests and benchmarks. The workspace holds every intermediate, indexed by
// chunk c (0 .. n_chunks-1, chunks of sequence s contiguous, in order) and value head h (nv heads), C = 64:
//   tiles   int32 [max_chunks][4]: {sequence, first token, tokens (0 = unused slot), chunk index in seq}
//   seq_first int32 [n_seqs + 1]: first chunk of each sequence (seq_first[n_seqs] = n_chunks)
//   gcum    f32 [max_chunks][nv][C]: G = cumsum of g within the chunk (rows >= tokens: 0)
//   a       f32 [max_chunks][nv][C][C]: after kkt: A = strictly_lower(β_τ k_τ·k_σ exp(G_τ - G_σ));
//           after solve: Tm = (I + A)⁻¹ (unit lower triangular)
//   aqk     f32 [max_chunks][nv][C][C]: (scale q_τ)·k_σ exp(G_τ - G_σ) for σ <= τ, else 0
//   w       f32 [max_chunks][nv][C][dk]: W = Tm · diag(β exp(G)) K
//   u       f32 [max_chunks][nv][C][dv]: after wu: U = Tm · diag(β) V; after state: V' = U - W S_c
//   hs      f32 [max_chunks][nv][dv][dk]: S_c, the state before chunk c, in the state's layout (M = Sᵀ)
struct GdnLayout {
  int64_t max_chunks = 0, n_seqs = 0, nv = 0, dk = 0, dv = 0;
  size_t tiles = 0, seq_first = 0, gcum = 0, a = 0, aqk = 0, w = 0, u = 0, hs = 0, total = 0;  // byte offsets
  static GdnLayout make(const ops::GdnParams& p);
};

struct GdnStages {
  ops::GdnParams p;
  const float *q, *k, *v, *g, *beta;
  float* state;
  const int32_t *seq_starts, *state_slots;
  float* out;
  uint8_t* ws;  // workspace base
  GdnLayout L;
  cudaStream_t stream;
  int recur_cols = 0;  // value columns per recur block: 8, 16 or 32; 0 = chosen from the SM count (tests pin it)

  Status check() const;   // parameter validation (every stage assumes it passed)
  Status table() const;   // tiles, seq_first
  Status cumsum() const;  // gcum
  Status kkt() const;     // a (= A), aqk
  Status solve() const;   // a := Tm
  Status wu() const;      // w, u
  Status recur() const;   // hs, u := V', final state
  Status output() const;  // out
};

// ---------------------------------------------------------------------------------------------------
// Causal prefill attention (spec §5; ops/attention.h contract)
// ---------------------------------------------------------------------------------------------------

size_t attention_prefill_workspace_bytes(const ops::AttentionParams& p);

// cpu::attention on the GPU for prompts: stores every token's k, v rows in its sequence's cache at row pos[t],
// then each (token, head) attends to cache rows 0 .. pos[t] (positions increasing within a sequence). GQA
// query heads of one kv head share each K/V tile. head_dim 64, 128 or 256; n_head / n_head_kv <= 16.
// Positions outside [0, max_ctx) are not written or read (the caller checks the context limit and reports
// it as an Error before calling). kPrecise: fp32 FMA; kFast: f16 tensor-core products (Q·Kᵀ and P·V) with
// fp32 accumulation and an fp32 online softmax. kv_half (kv19): the caches hold f16 rows (k, v rounded to
// nearest on the store), else f32.
Status attention_prefill(const ops::AttentionParams& p, const float* q, const float* k, const float* v,
                         void* k_cache, void* v_cache, const int32_t* pos, const int32_t* seq_starts,
                         const int32_t* slots, float* out, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream, Mode mode = Mode::kFast, bool kv_half = false);

// ---------------------------------------------------------------------------------------------------
// Scratch owner for callers that do not manage their own: grows on demand (not during graph capture).
// ---------------------------------------------------------------------------------------------------
class Scratch {
 public:
  Result<void*> get(size_t bytes);  // a buffer of at least `bytes`, valid until the next get() that grows
  size_t size() const { return buf_.size(); }

 private:
  DeviceBuffer buf_;
};

}  // namespace ds::cuda::prefill

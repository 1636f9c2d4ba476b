// The Qwen3.5 dense hybrid model (qwen35-spec.md): weights bound from a `qwen35` GGUF with every shape
// taken from metadata and checked, per-sequence state (conv windows, delta-rule states, KV caches), and
// the fp32 CPU reference forward pass. Prefill (T > 1) runs the chunked gated delta rule (§4.6), decode
// (T == 1) the recurrent one (§4.4); both hand the same state on. The MTP block is loaded and checked but
// never run (spec "How deltaserve must treat this" 4). Matrices stay in the GGUF mapping (quantized);
// small vectors (norms, gates, conv taps) are dequantized to fp32 at load.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ggml_type.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace ds {

// A GGUF matrix as the products use it: ne {n_cols, n_rows}, n_rows rows of n_cols elements of `type`.
struct QTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  int64_t n_rows = 0;  // outputs (ne1)
  int64_t n_cols = 0;  // inputs (ne0)
  const void* data = nullptr;  // in the GGUF mapping
  uint64_t n_bytes = 0;
};

struct Qwen35GdnWeights {
  QTensor qkv;     // attn_qkv   [Cc rows, H]   rows = [q: Kd | k: Kd | v: Vd (tiled head order)]
  QTensor gate;    // attn_gate  [Vd, H]        z
  QTensor beta;    // ssm_beta   [nv, H]
  QTensor alpha;   // ssm_alpha  [nv, H]
  QTensor out;     // ssm_out    [H, Vd]
  std::vector<float> conv;     // ssm_conv1d [Cc][Kc], tap 0 = oldest
  std::vector<float> dt_bias;  // ssm_dt.bias [nv]
  std::vector<float> ssm_a;    // ssm_a [nv] = -exp(A_log)
  std::vector<float> norm;     // ssm_norm [dv] (plain multiplier, no +1)
};

struct Qwen35AttnWeights {
  QTensor q;  // attn_q      [nh * 2hd, H]  per head [q | gate]
  QTensor k;  // attn_k      [nkv * hd, H]
  QTensor v;  // attn_v      [nkv * hd, H]
  QTensor o;  // attn_output [H, nh * hd]
  std::vector<float> q_norm;  // [hd] (+1 baked in)
  std::vector<float> k_norm;  // [hd]
};

struct Qwen35Layer {
  LayerKind kind = LayerKind::GatedDeltaNet;
  std::vector<float> attn_norm;  // [H] input norm (+1 baked in)
  std::vector<float> post_norm;  // [H] post_attention_norm
  Qwen35GdnWeights gdn;          // when kind == GatedDeltaNet
  Qwen35AttnWeights attn;        // when kind == FullAttention
  QTensor ffn_gate, ffn_up;      // [I, H]
  QTensor ffn_down;              // [H, I]
};

// One multi-token-prediction block (spec §2.6): a full-attention layer plus its input projection and norms.
// Loaded and checked for the future speculative decoder; the trunk forward never touches it.
struct Qwen35Mtp {
  Qwen35Layer layer;
  QTensor eh_proj;  // nextn.eh_proj [H, 2H]
  std::vector<float> enorm, hnorm, shared_head_norm;  // [H]
  QTensor embed_tokens, shared_head_head;  // optional (n_rows == 0 when absent)
};

struct Qwen35Model {
  Qwen35Config cfg;
  QTensor token_embd;             // [V, H]
  QTensor output;                 // [V, H]; a copy of token_embd's view when the embeddings are tied
  std::vector<float> output_norm; // [H]
  std::vector<Qwen35Layer> layers;  // cfg.n_layer trunk layers
  std::vector<Qwen35Mtp> mtp;       // cfg.n_mtp blocks
  uint64_t trunk_bytes = 0;  // tensor bytes used by the forward pass
  uint64_t mtp_bytes = 0;    // tensor bytes of the MTP block(s)
  std::shared_ptr<const gguf::File> file;  // set by load_file; with load() the caller keeps the File alive

  // Binds and checks every tensor (presence, shape from metadata, supported type). An error names the tensor.
  static Result<Qwen35Model> load(const gguf::File& f);
  // Opens `path` and loads it; the model keeps the mapping alive.
  static Result<Qwen35Model> load_file(const std::string& path);
};

// Everything one sequence carries between forward calls, sized from the config for max_ctx positions.
struct SequenceState {
  int64_t max_ctx = 0;
  int64_t n_past = 0;  // tokens already processed (the next token's position)
  // Per trunk layer; empty for layers of the other kind.
  std::vector<std::vector<float>> conv;     // GDN: [Kc-1, Cc] rolling window, oldest row first
  std::vector<std::vector<float>> ssm;      // GDN: [nv, dv, dk] delta-rule state M = S^T per value head
  std::vector<std::vector<float>> k_cache;  // attention: [max_ctx, nkv, hd] post-norm, post-RoPE keys
  std::vector<std::vector<float>> v_cache;  // attention: [max_ctx, nkv, hd] values

  static Result<SequenceState> create(const Qwen35Config& cfg, int64_t max_ctx);
  void reset();             // back to an empty sequence (zero states, n_past = 0)
  uint64_t bytes() const;   // memory held
};

// Called with every named intermediate ("embd", "L<i>.<name>", "final_norm", "logits") and its shape
// (row-major, outermost first). The data is only valid during the call.
using DumpFn = std::function<void(std::string_view name, const float* data, std::span<const int64_t> shape)>;

// Runs tokens at positions n_past .. n_past+T-1 and advances the state. logits_out receives
// [T, V] (all_logits) or [1, V] (the last token) floats. T > 1 uses the chunked delta rule, T == 1 the
// recurrent one. Errors (state unchanged): empty input, a token id outside [0, V), or n_past + T > max_ctx.
// Which CPU op implementations a forward call runs. kReference: the plain float32 functions of
// src/cpu/cpu.h, one per op (the specification). kFast: the blocked/vectorized twins of src/cpu/fast.h
// (same functions, same fp32 arithmetic; only the order of the sums differs, each tested against its
// reference), with the products that share an input run in one parallel region. Both are held to the
// same 2e-3 fixture bound.
enum class CpuPath { kFast, kReference };

Status forward(const Qwen35Model& model, SequenceState& state, std::span<const int32_t> tokens,
               float* logits_out, bool all_logits, const DumpFn& dump = {}, CpuPath path = CpuPath::kFast);

}  // namespace ds

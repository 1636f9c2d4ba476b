// The Qwen3.5 model config, derived from a GGUF's metadata alone (qwen35-spec.md, "How deltaserve
// must treat this" and §3.1). Nothing here is keyed on the model size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"

namespace ds {

enum class LayerKind { GatedDeltaNet, FullAttention };

struct Qwen35Config {
  std::string arch;            // "qwen35"
  int64_t n_embd = 0;          // H = embedding_length
  int64_t n_ff = 0;            // I = feed_forward_length
  int64_t n_block = 0;         // block_count (trunk + MTP)
  int64_t n_mtp = 0;           // nextn_predict_layers (0 if absent)
  int64_t n_layer = 0;         // L = trunk layers = n_block - n_mtp
  int64_t n_head = 0;          // nh = attention.head_count
  int64_t n_head_kv = 0;       // nkv = attention.head_count_kv
  int64_t head_dim = 0;        // hd = attention.key_length (== value_length)
  int64_t n_k_heads = 0;       // nk = ssm.group_count
  int64_t n_v_heads = 0;       // nv = ssm.time_step_rank
  int64_t d_k = 0;             // dk = ssm.state_size
  int64_t d_v = 0;             // dv = ssm.inner_size / nv (== dk)
  int64_t conv_kernel = 0;     // Kc = ssm.conv_kernel
  int64_t n_rot = 0;           // rope.dimension_count
  std::vector<int64_t> rope_sections;  // rope.dimension_sections (accepted, text ignores it)
  double rope_base = 0;        // rope.freq_base
  double rms_eps = 0;          // attention.layer_norm_rms_epsilon
  int64_t full_attn_interval = 4;
  int64_t n_ctx_train = 0;     // context_length
  int64_t n_vocab = 0;         // V = number of tokenizer.ggml.tokens
  bool tied_embeddings = false;  // no output.weight: logits use token_embd.weight
  std::vector<LayerKind> layers;  // size n_layer: the trunk schedule

  int64_t key_dim() const { return n_k_heads * d_k; }      // Kd
  int64_t value_dim() const { return n_v_heads * d_v; }    // Vd
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // Cc
  int64_t n_full_attn() const;
  int64_t n_gdn() const;
};

// Reads and checks the config; an Error names the missing or inconsistent key.
// Refuses architectures other than qwen35 with a clear message.
Result<Qwen35Config> qwen35_config_from_gguf(const gguf::File& f);

}  // namespace ds

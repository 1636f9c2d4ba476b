// Qwen3.5 config from GGUF metadata (qwen35-spec.md "How deltaserve must treat this" §2, §1.1, §3.1).
// Every key is checked: a missing key names the key; an inconsistent pair names both keys and values.
#include "model/config.h"

#include <cmath>

namespace ds {
namespace {

constexpr int64_t kMaxDim = int64_t(1) << 31;  // no real dimension comes near; keeps products in int64
constexpr int64_t kMaxBlocks = 1 << 16;        // the layer schedule is allocated per block

class Keys {
 public:
  Keys(const gguf::File& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  const std::string& file() const { return f_.path(); }

  // A required integer in [lo, kMaxDim].
  Result<int64_t> integer(std::string_view suffix, int64_t lo = 1) const {
    std::string k = key(suffix);
    DS_ASSIGN(int64_t v, f_.get_int(k));
    if (v < lo || v > kMaxDim)
      return err("config: {}: key '{}' = {}, expected {} .. {}", file(), k, v, lo, kMaxDim);
    return v;
  }
  Result<int64_t> integer_or(std::string_view suffix, int64_t def, int64_t lo) const {
    if (!f_.has(key(suffix))) return def;
    return integer(suffix, lo);
  }
  // A required finite float > 0.
  Result<double> positive(std::string_view suffix) const {
    std::string k = key(suffix);
    DS_ASSIGN(double v, f_.get_float(k));
    if (!(v > 0) || !std::isfinite(v)) return err("config: {}: key '{}' = {}, expected a finite value > 0", file(), k, v);
    return v;
  }

 private:
  const gguf::File& f_;
  std::string arch_;
};

}  // namespace

int64_t Qwen35Config::n_full_attn() const {
  int64_t n = 0;
  for (auto k : layers) n += k == LayerKind::FullAttention;
  return n;
}
int64_t Qwen35Config::n_gdn() const { return (int64_t)layers.size() - n_full_attn(); }

Result<Qwen35Config> qwen35_config_from_gguf(const gguf::File& f) {
  Qwen35Config c;
  const std::string& file = f.path();
  DS_ASSIGN(c.arch, f.get_string("general.architecture"));
  if (c.arch != "qwen35")
    return err("config: {}: architecture '{}' is not supported; deltaserve runs only 'qwen35' (dense Qwen3.5)", file, c.arch);
  Keys k(f, c.arch);

  DS_ASSIGN(c.n_embd, k.integer("embedding_length"));
  DS_ASSIGN(c.n_ff, k.integer("feed_forward_length"));
  DS_ASSIGN(c.n_block, k.integer("block_count"));
  if (c.n_block > kMaxBlocks)
    return err("config: {}: key '{}' = {} is implausible (more than {} blocks)", file, k.key("block_count"), c.n_block, kMaxBlocks);
  DS_ASSIGN(c.n_mtp, k.integer_or("nextn_predict_layers", 0, 0));
  if (c.n_mtp >= c.n_block)
    return err("config: {}: '{}' = {} leaves no trunk layers: it must be smaller than '{}' = {}", file,
               k.key("nextn_predict_layers"), c.n_mtp, k.key("block_count"), c.n_block);
  c.n_layer = c.n_block - c.n_mtp;
  DS_ASSIGN(c.n_ctx_train, k.integer("context_length"));

  // Gated full attention.
  DS_ASSIGN(c.n_head, k.integer("attention.head_count"));
  DS_ASSIGN(c.n_head_kv, k.integer("attention.head_count_kv"));
  if (c.n_head % c.n_head_kv != 0)
    return err("config: {}: '{}' = {} is not a multiple of '{}' = {}", file, k.key("attention.head_count"), c.n_head,
               k.key("attention.head_count_kv"), c.n_head_kv);
  DS_ASSIGN(c.head_dim, k.integer("attention.key_length"));
  DS_ASSIGN(int64_t value_length, k.integer("attention.value_length"));
  if (value_length != c.head_dim)
    return err("config: {}: '{}' = {} differs from '{}' = {}; Qwen3.5 attention needs equal key and value head sizes",
               file, k.key("attention.key_length"), c.head_dim, k.key("attention.value_length"), value_length);
  DS_ASSIGN(c.n_rot, k.integer("rope.dimension_count"));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    return err("config: {}: '{}' = {} must be even and at most '{}' = {}", file, k.key("rope.dimension_count"), c.n_rot,
               k.key("attention.key_length"), c.head_dim);
  DS_ASSIGN(c.rope_base, k.positive("rope.freq_base"));
  DS_ASSIGN(c.rms_eps, k.positive("attention.layer_norm_rms_epsilon"));
  {
    std::string key = k.key("rope.dimension_sections");
    DS_ASSIGN(c.rope_sections, f.get_int_array(key));
    if (c.rope_sections.empty() || c.rope_sections.size() > 4)
      return err("config: {}: key '{}' has {} entries, expected 1 .. 4", file, key, c.rope_sections.size());
    for (int64_t s : c.rope_sections)
      if (s < 0 || s > c.n_rot) return err("config: {}: key '{}' has entry {}, expected 0 .. {}", file, key, s, c.n_rot);
    c.rope_sections.resize(4, 0);  // llama.cpp pads the M-RoPE sections to 4
  }

  // Gated DeltaNet.
  DS_ASSIGN(c.conv_kernel, k.integer("ssm.conv_kernel"));
  DS_ASSIGN(c.d_k, k.integer("ssm.state_size"));
  DS_ASSIGN(c.n_k_heads, k.integer("ssm.group_count"));
  DS_ASSIGN(c.n_v_heads, k.integer("ssm.time_step_rank"));
  if (c.n_v_heads % c.n_k_heads != 0)
    return err("config: {}: '{}' = {} (value heads) is not a multiple of '{}' = {} (key heads)", file,
               k.key("ssm.time_step_rank"), c.n_v_heads, k.key("ssm.group_count"), c.n_k_heads);
  DS_ASSIGN(int64_t inner, k.integer("ssm.inner_size"));
  if (inner % c.n_v_heads != 0)
    return err("config: {}: '{}' = {} is not a multiple of '{}' = {}", file, k.key("ssm.inner_size"), inner,
               k.key("ssm.time_step_rank"), c.n_v_heads);
  c.d_v = inner / c.n_v_heads;
  if (c.d_v != c.d_k)
    return err("config: {}: value head size '{}' / '{}' = {} / {} = {} differs from key head size '{}' = {}", file,
               k.key("ssm.inner_size"), k.key("ssm.time_step_rank"), inner, c.n_v_heads, c.d_v, k.key("ssm.state_size"), c.d_k);

  // Layer schedule: the optional bool array wins over the interval (as in newer llama.cpp loaders).
  DS_ASSIGN(c.full_attn_interval, k.integer_or("full_attention_interval", 4, 1));
  c.layers.resize(c.n_layer);
  std::string rkey = k.key("attention.recurrent_layers");
  if (const gguf::Value* r = f.find(rkey)) {
    if (r->type != gguf::ValueType::ARRAY || r->elem_type != gguf::ValueType::BOOL)
      return err("config: {}: key '{}': expected ARRAY of BOOL, got {}", file, rkey, gguf::value_type_name(r->type));
    // One entry per block (llama.cpp) or per trunk layer; entries for MTP blocks are not used.
    if ((int64_t)r->arr_u.size() != c.n_block && (int64_t)r->arr_u.size() != c.n_layer)
      return err("config: {}: key '{}' has {} entries, expected '{}' = {} (or the {} trunk layers)", file, rkey,
                 r->arr_u.size(), k.key("block_count"), c.n_block, c.n_layer);
    for (int64_t i = 0; i < c.n_layer; i++)
      c.layers[i] = r->arr_u[i] ? LayerKind::GatedDeltaNet : LayerKind::FullAttention;
  } else {
    for (int64_t i = 0; i < c.n_layer; i++)
      c.layers[i] = (i + 1) % c.full_attn_interval != 0 ? LayerKind::GatedDeltaNet : LayerKind::FullAttention;
  }

  // Vocabulary and embeddings.
  const gguf::Value* tok = f.find("tokenizer.ggml.tokens");
  if (!tok) return err("config: {}: missing key 'tokenizer.ggml.tokens' (the vocabulary size comes from it)", file);
  if (tok->type != gguf::ValueType::ARRAY || tok->elem_type != gguf::ValueType::STRING || tok->arr_s.empty())
    return err("config: {}: key 'tokenizer.ggml.tokens': expected a non-empty ARRAY of STRING", file);
  c.n_vocab = (int64_t)tok->arr_s.size();

  auto check_vocab_matrix = [&](const gguf::TensorInfo& t) -> Status {
    if (t.ne[0] != c.n_embd || t.ne[1] != c.n_vocab || t.ne[2] != 1 || t.ne[3] != 1)
      return err("config: {}: tensor '{}' has shape {}, expected [{}, {}] from '{}' and the {} entries of 'tokenizer.ggml.tokens'",
                 file, t.name, t.shape_string(), c.n_embd, c.n_vocab, k.key("embedding_length"), c.n_vocab);
    return {};
  };
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb)
    return err("config: {}: no tensor 'token_embd.weight' ({} tensors in the file); not a complete qwen35 model",
               file, f.tensors().size());
  DS_TRY(check_vocab_matrix(*emb));
  const gguf::TensorInfo* out = f.find_tensor("output.weight");
  c.tied_embeddings = out == nullptr;
  if (out) DS_TRY(check_vocab_matrix(*out));
  return c;
}

}  // namespace ds

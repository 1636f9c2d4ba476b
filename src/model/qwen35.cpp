// Loading a `qwen35` GGUF (qwen35-spec.md §2, §3, "How deltaserve must treat this"): every tensor is looked
// up by its GGUF name (the only place those names appear), its shape checked against the metadata-derived
// config and its type against what the quant module supports. Also the per-sequence state.
#include "model/qwen35.h"

#include <fmt/format.h>

#include <set>

#include <spdlog/spdlog.h>
#include "quant/quant.h"

namespace ds {
namespace {

std::string shape_str(std::span<const int64_t> ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); i++) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Looks tensors up, checks them and records which were used and how many bytes they hold.
class Binder {
 public:
  explicit Binder(const gguf::File& f) : f_(f) {}

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // A tensor of exactly the ggml shape `ne` (ne[0] first).
  Result<const gguf::TensorInfo*> find(const std::string& name, std::vector<int64_t> ne, uint64_t* bytes) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t)
      return err("model: {}: tensor '{}' is missing (expected shape {}); the file is not a complete qwen35 model",
                 f_.path(), name, shape_str(ne));
    bool same = true;
    for (size_t i = 0; i < 4; i++) same &= t->ne[i] == (i < ne.size() ? ne[i] : 1);
    if (!same)
      return err("model: {}: tensor '{}' has shape {}, expected {} from the metadata", f_.path(), name,
                 t->shape_string(), shape_str(ne));
    used_.insert(name);
    *bytes += t->n_bytes;
    return t;
  }

  // A matrix for the products: ggml ne {n_cols, n_rows}, any type quant can dot.
  Result<QTensor> matrix(const std::string& name, int64_t n_cols, int64_t n_rows, uint64_t* bytes) {
    DS_ASSIGN(const gguf::TensorInfo* t, find(name, {n_cols, n_rows}, bytes));
    DS_TRY(quant::check_supported(t->type, fmt::format("model: {}: tensor '{}'", f_.path(), name)));
    return QTensor{name, t->type, n_rows, n_cols, f_.tensor_data(*t), t->n_bytes};
  }

  // A small tensor dequantized to fp32 (norms, gates, conv taps), any type quant can dequantize.
  Result<std::vector<float>> floats(const std::string& name, std::vector<int64_t> ne, uint64_t* bytes) {
    DS_ASSIGN(const gguf::TensorInfo* t, find(name, ne, bytes));
    if (!quant::can_dequantize(t->type))
      return err("model: {}: tensor '{}' has type {}, which deltaserve cannot read", f_.path(), name,
                 ggml_type_name(t->type));
    std::vector<float> v(t->n_elements);
    const int64_t row = t->ne[0];
    const uint64_t row_bytes = t->n_bytes / (t->n_elements / row);
    for (int64_t r = 0; r < t->rows(); r++)
      quant::dequantize_row(t->type, f_.tensor_data(*t) + r * row_bytes, v.data() + r * row, row);
    return v;
  }

  void warn_unused() const {
    for (const auto& t : f_.tensors())
      if (!used_.count(t.name))
        spdlog::warn("model: {}: tensor '{}' is not part of the qwen35 layout deltaserve knows; ignored", f_.path(), t.name);
  }

 private:
  const gguf::File& f_;
  std::set<std::string> used_;
};

std::string blk(int64_t i, const char* name) { return fmt::format("blk.{}.{}", i, name); }

Status load_ffn_and_norms(Binder& b, const Qwen35Config& c, int64_t i, Qwen35Layer& L, uint64_t* bytes) {
  const int64_t H = c.n_embd, I = c.n_ff;
  DS_ASSIGN(L.attn_norm, b.floats(blk(i, "attn_norm.weight"), {H}, bytes));
  DS_ASSIGN(L.post_norm, b.floats(blk(i, "post_attention_norm.weight"), {H}, bytes));
  DS_ASSIGN(L.ffn_gate, b.matrix(blk(i, "ffn_gate.weight"), H, I, bytes));
  DS_ASSIGN(L.ffn_up, b.matrix(blk(i, "ffn_up.weight"), H, I, bytes));
  DS_ASSIGN(L.ffn_down, b.matrix(blk(i, "ffn_down.weight"), I, H, bytes));
  return {};
}

Status load_attention(Binder& b, const Qwen35Config& c, int64_t i, Qwen35AttnWeights& A, uint64_t* bytes) {
  const int64_t H = c.n_embd, hd = c.head_dim;
  DS_ASSIGN(A.q, b.matrix(blk(i, "attn_q.weight"), H, 2 * c.n_head * hd, bytes));
  DS_ASSIGN(A.k, b.matrix(blk(i, "attn_k.weight"), H, c.n_head_kv * hd, bytes));
  DS_ASSIGN(A.v, b.matrix(blk(i, "attn_v.weight"), H, c.n_head_kv * hd, bytes));
  DS_ASSIGN(A.o, b.matrix(blk(i, "attn_output.weight"), c.n_head * hd, H, bytes));
  DS_ASSIGN(A.q_norm, b.floats(blk(i, "attn_q_norm.weight"), {hd}, bytes));
  DS_ASSIGN(A.k_norm, b.floats(blk(i, "attn_k_norm.weight"), {hd}, bytes));
  return {};
}

Status load_gdn(Binder& b, const Qwen35Config& c, int64_t i, Qwen35GdnWeights& G, uint64_t* bytes) {
  const int64_t H = c.n_embd, Cc = c.conv_dim(), Vd = c.value_dim(), nv = c.n_v_heads;
  DS_ASSIGN(G.qkv, b.matrix(blk(i, "attn_qkv.weight"), H, Cc, bytes));
  DS_ASSIGN(G.gate, b.matrix(blk(i, "attn_gate.weight"), H, Vd, bytes));
  DS_ASSIGN(G.beta, b.matrix(blk(i, "ssm_beta.weight"), H, nv, bytes));
  DS_ASSIGN(G.alpha, b.matrix(blk(i, "ssm_alpha.weight"), H, nv, bytes));
  DS_ASSIGN(G.out, b.matrix(blk(i, "ssm_out.weight"), Vd, H, bytes));
  DS_ASSIGN(G.conv, b.floats(blk(i, "ssm_conv1d.weight"), {c.conv_kernel, Cc}, bytes));
  DS_ASSIGN(G.dt_bias, b.floats(blk(i, "ssm_dt.bias"), {nv}, bytes));
  DS_ASSIGN(G.ssm_a, b.floats(blk(i, "ssm_a"), {nv}, bytes));
  DS_ASSIGN(G.norm, b.floats(blk(i, "ssm_norm.weight"), {c.d_v}, bytes));
  return {};
}

// Facts the forward pass relies on beyond what the config reader checks.
Status check_config(const Qwen35Config& c, const std::string& path) {
  if ((int64_t)c.layers.size() != c.n_layer)
    return err("model: {}: layer schedule has {} entries for {} trunk layers", path, c.layers.size(), c.n_layer);
  if (c.n_head % c.n_head_kv != 0 || c.n_v_heads % c.n_k_heads != 0 || c.d_v != c.d_k)
    return err("model: {}: inconsistent head counts (nh {}, nkv {}, nk {}, nv {}, dk {}, dv {})", path, c.n_head,
               c.n_head_kv, c.n_k_heads, c.n_v_heads, c.d_k, c.d_v);
  if (c.conv_kernel < 1 || c.conv_kernel > 16)
    return err("model: {}: ssm.conv_kernel = {}, expected 1 .. 16", path, c.conv_kernel);
  if (c.n_rot % 2 != 0 || c.n_rot > c.head_dim)
    return err("model: {}: rope.dimension_count = {} must be even and <= head dim {}", path, c.n_rot, c.head_dim);
  return {};
}

}  // namespace

Result<Qwen35Model> Qwen35Model::load(const gguf::File& f) {
  Qwen35Model m;
  DS_ASSIGN(m.cfg, qwen35_config_from_gguf(f));
  const Qwen35Config& c = m.cfg;
  DS_TRY(check_config(c, f.path()));
  Binder b(f);
  const int64_t H = c.n_embd, V = c.n_vocab;
  uint64_t* tb = &m.trunk_bytes;
  DS_ASSIGN(m.token_embd, b.matrix("token_embd.weight", H, V, tb));
  DS_ASSIGN(m.output_norm, b.floats("output_norm.weight", {H}, tb));
  if (b.has("output.weight")) {
    DS_ASSIGN(m.output, b.matrix("output.weight", H, V, tb));
  } else {
    m.output = m.token_embd;  // tied embeddings (spec §2.1)
  }
  m.layers.resize(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; i++) {
    Qwen35Layer& L = m.layers[i];
    L.kind = c.layers[i];
    DS_TRY(load_ffn_and_norms(b, c, i, L, tb));
    if (L.kind == LayerKind::GatedDeltaNet) {
      DS_TRY(load_gdn(b, c, i, L.gdn, tb));
    } else {
      DS_TRY(load_attention(b, c, i, L.attn, tb));
    }
  }
  // MTP blocks: full-attention layers after the trunk plus the nextn.* tensors (spec §2.6). Never run.
  m.mtp.resize(c.n_mtp);
  for (int64_t j = 0; j < c.n_mtp; j++) {
    const int64_t i = c.n_layer + j;
    Qwen35Mtp& M = m.mtp[j];
    uint64_t* mb = &m.mtp_bytes;
    M.layer.kind = LayerKind::FullAttention;
    DS_TRY(load_ffn_and_norms(b, c, i, M.layer, mb));
    DS_TRY(load_attention(b, c, i, M.layer.attn, mb));
    DS_ASSIGN(M.eh_proj, b.matrix(blk(i, "nextn.eh_proj.weight"), 2 * H, H, mb));
    DS_ASSIGN(M.enorm, b.floats(blk(i, "nextn.enorm.weight"), {H}, mb));
    DS_ASSIGN(M.hnorm, b.floats(blk(i, "nextn.hnorm.weight"), {H}, mb));
    DS_ASSIGN(M.shared_head_norm, b.floats(blk(i, "nextn.shared_head_norm.weight"), {H}, mb));
    if (b.has(blk(i, "nextn.embed_tokens.weight"))) {  // optional in newer converters
      DS_ASSIGN(M.embed_tokens, b.matrix(blk(i, "nextn.embed_tokens.weight"), H, V, mb));
    }
    if (b.has(blk(i, "nextn.shared_head_head.weight"))) {
      DS_ASSIGN(M.shared_head_head, b.matrix(blk(i, "nextn.shared_head_head.weight"), H, V, mb));
    }
  }
  b.warn_unused();
  return m;
}

Result<Qwen35Model> Qwen35Model::load_file(const std::string& path) {
  DS_ASSIGN(gguf::File f, gguf::File::open(path));
  auto owned = std::make_shared<const gguf::File>(std::move(f));
  DS_ASSIGN(Qwen35Model m, load(*owned));
  m.file = std::move(owned);  // the QTensor pointers point into this mapping, which a move keeps in place
  return m;
}

Result<SequenceState> SequenceState::create(const Qwen35Config& c, int64_t max_ctx) {
  if (max_ctx < 1) return err("model: sequence state: max_ctx = {}, expected >= 1", max_ctx);
  if (max_ctx > c.n_ctx_train)
    return err("model: sequence state: max_ctx = {} exceeds the model's context_length {}", max_ctx, c.n_ctx_train);
  SequenceState s;
  s.max_ctx = max_ctx;
  const size_t L = c.layers.size();
  s.conv.resize(L);
  s.ssm.resize(L);
  s.k_cache.resize(L);
  s.v_cache.resize(L);
  for (size_t i = 0; i < L; i++) {
    if (c.layers[i] == LayerKind::GatedDeltaNet) {
      s.conv[i].assign((c.conv_kernel - 1) * c.conv_dim(), 0.0f);
      s.ssm[i].assign(c.n_v_heads * c.d_v * c.d_k, 0.0f);
    } else {
      s.k_cache[i].assign(max_ctx * c.n_head_kv * c.head_dim, 0.0f);
      s.v_cache[i].assign(max_ctx * c.n_head_kv * c.head_dim, 0.0f);
    }
  }
  return s;
}

void SequenceState::reset() {
  n_past = 0;
  for (auto* group : {&conv, &ssm, &k_cache, &v_cache})
    for (auto& v : *group) std::fill(v.begin(), v.end(), 0.0f);
}

uint64_t SequenceState::bytes() const {
  uint64_t n = 0;
  for (auto* group : {&conv, &ssm, &k_cache, &v_cache})
    for (auto& v : *group) n += v.size() * sizeof(float);
  return n;
}

}  // namespace ds

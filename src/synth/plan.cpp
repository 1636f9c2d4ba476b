// Size presets and the tensor plan of a synthetic qwen35 model (qwen35-spec.md §2, §7; Q4_K_M mix of
// llama-quant.cpp as summarised in spec §7.1 and formats.md §8; order of llama.cpp's weight_name_comparer).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "synth/synth.h"

namespace ds::synth {
namespace {

std::string upper(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = (char)std::toupper((unsigned char)c);
  return r;
}

// Layer number of "blk.<n>.…", -1 for global tensors (llama.cpp sorts those first).
int64_t layer_of(const std::string& name) {
  int n = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &n) == 1) return n;
  return -1;
}

}  // namespace

Result<Mix> parse_mix(std::string_view name) {
  std::string u = upper(name);
  if (u == "Q4_K_M") return Mix::Q4_K_M;
  if (u == "Q3_K_M") return Mix::Q3_K_M;
  if (u == "Q5_K_M") return Mix::Q5_K_M;
  if (u == "Q8_0") return Mix::Q8_0;
  if (u == "BF16") return Mix::BF16;
  return err("synth: type '{}' is not supported; expected Q4_K_M, Q3_K_M, Q5_K_M, Q8_0 or BF16", name);
}

std::string_view mix_name(Mix m) {
  switch (m) {
    case Mix::Q4_K_M: return "Q4_K_M";
    case Mix::Q3_K_M: return "Q3_K_M";
    case Mix::Q5_K_M: return "Q5_K_M";
    case Mix::Q8_0: return "Q8_0";
    case Mix::BF16: return "BF16";
  }
  return "?";
}

uint32_t mix_file_type(Mix m) {
  switch (m) {
    case Mix::Q4_K_M: return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case Mix::Q3_K_M: return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case Mix::Q5_K_M: return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case Mix::Q8_0: return 7;     // LLAMA_FTYPE_MOSTLY_Q8_0
    case Mix::BF16: return 32;    // LLAMA_FTYPE_MOSTLY_BF16
  }
  return 0;
}

std::vector<std::string> preset_names() { return {"0.8B", "2B", "4B", "9B", "27B", "tiny"}; }

Result<Shape> preset(std::string_view size) {
  // Values: qwen35-spec.md §7 (hidden, layers, ffn, heads, GDN heads; head_dim 256, dk = dv = 128,
  // n_rot 64, M-RoPE sections [11, 11, 10, 0], rope base 1e7, eps 1e-6, 262144 positions, vocab 248320).
  auto real = [](std::string name, int64_t H, int64_t L, int64_t I, int64_t nh, int64_t nkv, int64_t nv, bool tied) {
    Shape s;
    s.size = std::move(name);
    s.n_embd = H, s.n_layer = L, s.n_ff = I, s.n_head = nh, s.n_head_kv = nkv;
    s.head_dim = 256, s.n_k_heads = 16, s.n_v_heads = nv, s.d_state = 128, s.n_rot = 64;
    s.rope_sections = {11, 11, 10, 0};
    s.tied = tied;
    return s;
  };
  std::string u = upper(size);
  if (u == "0.8B") return real("0.8B", 1024, 24, 3584, 8, 2, 16, true);
  if (u == "2B") return real("2B", 2048, 24, 6144, 8, 2, 16, true);
  if (u == "4B") return real("4B", 2560, 32, 9216, 16, 4, 32, true);
  if (u == "9B") return real("9B", 4096, 32, 12288, 16, 4, 32, false);
  if (u == "27B") return real("27B", 5120, 64, 17408, 24, 4, 48, false);
  if (u == "TINY") {
    // The shape of fixtures/models/tiny-sym (H 256, 4 layers L L L A, hd 64, GDN 4/4 heads of 64).
    Shape s;
    s.size = "tiny";
    s.n_embd = 256, s.n_layer = 4, s.n_ff = 512, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 64;
    s.n_k_heads = 4, s.n_v_heads = 4, s.d_state = 64, s.n_rot = 16;
    s.rope_sections = {3, 3, 2, 0};
    s.n_ctx_train = 4096;
    s.tied = true;
    s.n_vocab = 0;  // the vocabulary's own size: no padding
    s.real_weights = true;
    return s;
  }
  return err("synth: size '{}' is not known; expected one of 0.8B, 2B, 4B, 9B, 27B, tiny", size);
}

uint64_t PlannedTensor::n_elements() const {
  uint64_t n = 1;
  for (int64_t d : ne) n *= (uint64_t)d;
  return n;
}

uint64_t PlannedTensor::n_bytes() const {
  auto info = ggml_type_info(type);
  DS_CHECK(info.has_value(), "unknown type");
  return n_elements() / info->block_size * info->type_size;
}

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

std::vector<PlannedTensor> plan_tensors(const Shape& s, Mix mix, bool mtp, int64_t n_vocab) {
  const int64_t H = s.n_embd, I = s.n_ff, hd = s.head_dim;
  const int64_t n_block = s.n_layer + (mtp ? 1 : 0);
  const bool q3 = mix == Mix::Q3_K_M;
  // Q5_K_M: llama-quant.cpp's Q4_K_M rules with Q5_K for Q4_K (use_more_bits tensors and the output Q6_K).
  const bool kq = mix == Mix::Q4_K_M || mix == Mix::Q5_K_M;
  const GgmlType base = mix == Mix::Q4_K_M   ? GgmlType::Q4_K
                        : mix == Mix::Q5_K_M ? GgmlType::Q5_K
                        : q3                 ? GgmlType::Q3_K
                        : mix == Mix::Q8_0   ? GgmlType::Q8_0
                                             : GgmlType::BF16;
  const GgmlType more = kq || q3 ? GgmlType::Q6_K : base;  // output (+ Q4_K_M / Q5_K_M use_more_bits)
  std::vector<PlannedTensor> p;
  auto mat = [&](std::string name, int64_t ne0, int64_t ne1, GgmlType t) {
    // llama-quantize's fallback for rows that are not a whole number of 256-blocks (tensor_type_fallback).
    if (ne0 % 256 != 0 && t == GgmlType::Q4_K) t = GgmlType::Q5_0;
    if (ne0 % 256 != 0 && t == GgmlType::Q6_K) t = GgmlType::Q8_0;
    if (ne0 % 256 != 0 && t == GgmlType::Q3_K) t = GgmlType::IQ4_NL;
    if (ne0 % 256 != 0 && t == GgmlType::Q5_K) t = GgmlType::Q5_1;
    p.push_back({std::move(name), t, {ne0, ne1}, Init::Matrix});
  };
  auto vec = [&](std::string name, int64_t n, Init init) { p.push_back({std::move(name), GgmlType::F32, {n}, init}); };
  // Q3_K_M (llama-quant.cpp's rules for LLAMA_FTYPE_MOSTLY_Q3_K_M, not checked against a llama-quantize file):
  // attn_v / attn_qkv Q5_K in the first two layers that have one, else Q4_K; ffn_down Q5_K in the first n/16
  // layers, else Q4_K; attn_output Q4_K; everything else Q3_K.
  int64_t n_v_seen = 0;
  auto v_type = [&](int64_t i, int64_t n) {
    if (q3) return n_v_seen++ < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    return use_more_bits(i, n) ? more : base;
  };
  auto down_type = [&](int64_t i, int64_t n) {
    if (q3) return i < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    return use_more_bits(i, n) ? more : base;
  };
  const GgmlType out_proj = q3 ? GgmlType::Q4_K : base;  // attn_output

  // Global tensors. The output matrix (token_embd when tied) gets Q6_K in Q4_K_M, Q5_K_M and Q3_K_M.
  mat("token_embd.weight", H, n_vocab, s.tied ? more : base);
  if (!s.tied) mat("output.weight", H, n_vocab, more);
  vec("output_norm.weight", H, Init::Norm);

  for (int64_t i = 0; i < n_block; i++) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool is_mtp = i >= s.n_layer;
    const GgmlType vlike = v_type(i, n_block);  // attn_v / attn_qkv
    vec(b + "attn_norm.weight", H, Init::Norm);
    vec(b + "post_attention_norm.weight", H, Init::Norm);
    mat(b + "ffn_gate.weight", H, I, base);
    mat(b + "ffn_up.weight", H, I, base);
    mat(b + "ffn_down.weight", I, H, down_type(i, n_block));
    if (is_mtp || s.is_full_attention(i)) {
      mat(b + "attn_q.weight", H, 2 * s.n_head * hd, base);
      mat(b + "attn_k.weight", H, s.n_head_kv * hd, base);
      mat(b + "attn_v.weight", H, s.n_head_kv * hd, vlike);
      mat(b + "attn_output.weight", s.n_head * hd, H, out_proj);
      vec(b + "attn_q_norm.weight", hd, Init::Norm);
      vec(b + "attn_k_norm.weight", hd, Init::Norm);
    } else {
      mat(b + "attn_qkv.weight", H, s.conv_dim(), vlike);
      mat(b + "attn_gate.weight", H, s.value_dim(), base);
      mat(b + "ssm_beta.weight", H, s.n_v_heads, base);
      mat(b + "ssm_alpha.weight", H, s.n_v_heads, base);
      p.push_back({b + "ssm_conv1d.weight", GgmlType::F32, {s.conv_kernel, s.conv_dim()}, Init::Conv});
      vec(b + "ssm_dt.bias", s.n_v_heads, Init::DtBias);
      vec(b + "ssm_a", s.n_v_heads, Init::SsmA);
      vec(b + "ssm_norm.weight", s.d_state, Init::Norm);
      mat(b + "ssm_out.weight", s.value_dim(), H, base);
    }
    if (is_mtp) {
      mat(b + "nextn.eh_proj.weight", 2 * H, H, base);
      vec(b + "nextn.enorm.weight", H, Init::Norm);
      vec(b + "nextn.hnorm.weight", H, Init::Norm);
      vec(b + "nextn.shared_head_norm.weight", H, Init::Norm);
    }
  }
  // llama.cpp's weight_name_comparer: by layer (global = -1 first), then by name.
  std::stable_sort(p.begin(), p.end(), [](const PlannedTensor& a, const PlannedTensor& b) {
    int64_t la = layer_of(a.name), lb = layer_of(b.name);
    if (la != lb) return la < lb;
    return a.name < b.name;
  });
  return p;
}

uint64_t count_params(const std::vector<PlannedTensor>& plan) {
  uint64_t n = 0;
  for (const auto& t : plan) n += t.n_elements();
  return n;
}

uint64_t count_bytes(const std::vector<PlannedTensor>& plan) {
  uint64_t n = 0;
  for (const auto& t : plan) n += t.n_bytes();
  return n;
}

std::string size_label(uint64_t n) {
  // gguf-py utility.model_weight_count_rounded_notation(min_digits=2).
  double v = (double)n;
  const char* suffix = "K";
  double scaled = v * 1e-3;
  if (v > 1e12) scaled = v * 1e-12, suffix = "T";
  else if (v > 1e9) scaled = v * 1e-9, suffix = "B";
  else if (v > 1e6) scaled = v * 1e-6, suffix = "M";
  const long r = std::lround(scaled);
  std::string digits = std::to_string(r);
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  int fix = std::max(2 - (int)digits.size(), 0);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", fix, scaled, suffix);
  return buf;
}

}  // namespace ds::synth

#include "engine/qwen35_batch.h"

#include <cmath>
#include <vector>

#include "cpu/cpu.h"
#include "quant/quant.h"

namespace ds::engine {

namespace {

using Buf = std::vector<float>;

// A parallel region only pays above ~1M multiply-adds: below that, waking the team (and, on a
// loaded machine, waiting for its threads to be scheduled) costs more than the work.
constexpr int64_t kParallelWork = int64_t(1) << 20;

// y[b, n] = W[n, :] · x[b, :] for B rows, parallel over weight rows; the B dot products of a row
// run while it is hot in cache. Element for element what cpu::matmul computes for one token.
void bmatmul(const QTensor& w, const float* x, int64_t B, float* y) {
  const auto info = ggml_type_info(w.type);
  const uint64_t row_bytes = ggml_row_bytes(*info, w.n_cols);
  const auto* wb = static_cast<const uint8_t*>(w.data);
  const int64_t N = w.n_rows, K = w.n_cols;
#pragma omp parallel for schedule(static) if (N * K * B >= kParallelWork)
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < B; b++) y[b * N + n] = quant::dot_row(w.type, wb + n * row_bytes, x + b * K, K);
}

void gdn_layer(const Qwen35Config& c, int64_t il, const Qwen35GdnWeights& W, std::span<SequenceState* const> st,
               const Buf& xn, Buf& out) {
  const int64_t B = static_cast<int64_t>(st.size()), nk = c.n_k_heads, nv = c.n_v_heads, dk = c.d_k, dv = c.d_v;
  const int64_t Kd = c.key_dim(), Vd = c.value_dim(), Cc = c.conv_dim();
  Buf qkv(B * Cc), z(B * Vd), a(B * nv), b(B * nv), g(B * nv), beta(B * nv), u(B * Cc), o(B * Vd);
  bmatmul(W.qkv, xn.data(), B, qkv.data());
  bmatmul(W.gate, xn.data(), B, z.data());
  bmatmul(W.beta, xn.data(), B, b.data());
  bmatmul(W.alpha, xn.data(), B, a.data());
  cpu::gdn_gates({B, nv}, a.data(), b.data(), W.ssm_a.data(), W.dt_bias.data(), g.data(), beta.data());
  const ops::GdnParams gp{1, 1, nk, nv, dk, dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)dk)};
  const int64_t work = B * (4 * nv * dv * dk + Cc * c.conv_kernel);
#pragma omp parallel for schedule(dynamic) if (B > 1 && work >= kParallelWork)
  for (int64_t i = 0; i < B; i++) {
    float* ui = u.data() + i * Cc;
    cpu::conv1d_silu({1, 1, Cc, c.conv_kernel}, qkv.data() + i * Cc, W.conv.data(), st[i]->conv[il].data(), nullptr,
                     nullptr, ui);
    cpu::l2_norm({1, 2 * nk, dk, Cc, dk, Cc, dk, ops::kL2NormEps}, ui, ui);
    cpu::gdn_recurrent(gp, ui, ui + Kd, ui + 2 * Kd, g.data() + i * nv, beta.data() + i * nv, st[i]->ssm[il].data(),
                       nullptr, nullptr, o.data() + i * Vd);
  }
  cpu::rms_norm_gated({B * nv, dv, (float)c.rms_eps}, o.data(), z.data(), W.norm.data(), o.data());
  bmatmul(W.out, o.data(), B, out.data());
}

void attn_layer(const Qwen35Config& c, int64_t il, const Qwen35AttnWeights& W, std::span<SequenceState* const> st,
                const Buf& xn, Buf& out) {
  const int64_t B = static_cast<int64_t>(st.size()), nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim;
  Buf qf(B * nh * 2 * hd), k(B * nkv * hd), v(B * nkv * hd), q(B * nh * hd), a(B * nh * hd);
  bmatmul(W.q, xn.data(), B, qf.data());
  bmatmul(W.k, xn.data(), B, k.data());
  bmatmul(W.v, xn.data(), B, v.data());
  const float eps = (float)c.rms_eps;
  cpu::rms_norm({B, nh, hd, nh * 2 * hd, 2 * hd, nh * hd, hd, eps}, qf.data(), W.q_norm.data(), q.data());
  cpu::rms_norm({B, nkv, hd, nkv * hd, hd, nkv * hd, hd, eps}, k.data(), W.k_norm.data(), k.data());
  int64_t work = 0;
  for (auto* s : st) work += 2 * nh * hd * (s->n_past + 1);
#pragma omp parallel for schedule(dynamic) if (B > 1 && work >= kParallelWork)
  for (int64_t i = 0; i < B; i++) {
    SequenceState& s = *st[i];
    const int32_t pos = static_cast<int32_t>(s.n_past);
    float* qi = q.data() + i * nh * hd;
    float* ki = k.data() + i * nkv * hd;
    cpu::rope_neox({1, nh, hd, c.n_rot, nh * hd, hd, (float)c.rope_base}, qi, &pos);
    cpu::rope_neox({1, nkv, hd, c.n_rot, nkv * hd, hd, (float)c.rope_base}, ki, &pos);
    const ops::AttentionParams ap{1, 1, nh, nkv, hd, s.max_ctx, 1.0f / std::sqrt((float)hd)};
    cpu::attention(ap, qi, ki, v.data() + i * nkv * hd, s.k_cache[il].data(), s.v_cache[il].data(), &pos, nullptr,
                   nullptr, a.data() + i * nh * hd);
  }
  cpu::output_gate({B, nh, hd, nh * 2 * hd, 2 * hd}, a.data(), qf.data() + hd);
  bmatmul(W.o, a.data(), B, out.data());
}

}  // namespace

Status qwen35_decode_batch(const Qwen35Model& model, std::span<SequenceState* const> st,
                           std::span<const int32_t> tokens, float* logits_out) {
  const Qwen35Config& c = model.cfg;
  const int64_t B = static_cast<int64_t>(st.size()), H = c.n_embd, V = c.n_vocab, I = c.n_ff;
  if (B == 0) return {};
  if (static_cast<int64_t>(tokens.size()) != B) return err("engine: decode batch: {} states, {} tokens", B, tokens.size());
  for (int64_t i = 0; i < B; i++) {
    if (tokens[i] < 0 || tokens[i] >= V)
      return err("engine: decode batch: token {} outside the vocabulary [0, {})", tokens[i], V);
    if (st[i]->n_past + 1 > st[i]->max_ctx) return err("engine: decode batch: sequence {} is full", i);
    if (st[i]->conv.size() != c.layers.size()) return err("engine: decode batch: state {} has the wrong layer count", i);
  }
  Buf h(B * H), xn(B * H), mix(B * H), gate(B * I), up(B * I);
  cpu::get_rows({model.token_embd.type, V, H, B}, model.token_embd.data, tokens.data(), h.data());
  for (int64_t il = 0; il < c.n_layer; il++) {
    const Qwen35Layer& Ly = model.layers[il];
    cpu::rms_norm(ops::RmsNormParams::packed(B, H, (float)c.rms_eps), h.data(), Ly.attn_norm.data(), xn.data());
    if (Ly.kind == LayerKind::GatedDeltaNet)
      gdn_layer(c, il, Ly.gdn, st, xn, mix);
    else
      attn_layer(c, il, Ly.attn, st, xn, mix);
    cpu::add({B * H}, h.data(), mix.data(), h.data());
    cpu::rms_norm(ops::RmsNormParams::packed(B, H, (float)c.rms_eps), h.data(), Ly.post_norm.data(), xn.data());
    bmatmul(Ly.ffn_gate, xn.data(), B, gate.data());
    bmatmul(Ly.ffn_up, xn.data(), B, up.data());
    cpu::swiglu({B, I}, gate.data(), up.data(), gate.data());
    bmatmul(Ly.ffn_down, gate.data(), B, mix.data());
    cpu::add({B * H}, h.data(), mix.data(), h.data());
  }
  cpu::rms_norm(ops::RmsNormParams::packed(B, H, (float)c.rms_eps), h.data(), model.output_norm.data(), xn.data());
  bmatmul(model.output, xn.data(), B, logits_out);
  for (auto* s : st) s->n_past++;
  return {};
}

}  // namespace ds::engine

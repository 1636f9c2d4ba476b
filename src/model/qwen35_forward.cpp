// The fp32 forward pass of Qwen3.5 (qwen35-spec.md §1.2, §4, §5, §6, §11), one sequence, as a flat list of
// op calls (src/cpu): the reference ops (CpuPath::kReference) or their fast twins (kFast, the default).
// Every intermediate has a dump name "L<layer>.<name>" for CPU-vs-CUDA diffs.
#include <cmath>
#include <initializer_list>
#include <memory>
#include <vector>

#include "core/check.h"
#include "cpu/cpu.h"
#include "cpu/fast.h"
#include "model/qwen35.h"

namespace ds {
namespace {

// The activation buffers of a forward call, taken from a per-thread stack of slabs that keeps its memory
// between calls. Fresh zero-filled vectors cost a 512-token prefill of the 0.8B model about a fifth of
// its time (perf: memset plus page faults, as glibc hands large blocks back to the OS on free). Buffers
// are locals, so they are released in reverse order of creation (a stack). Contents start undefined:
// every op writes its whole output. Slabs over kKeepFloats are freed on release, so one very long prompt
// does not pin its activations for the life of the thread.
class Buf {
 public:
  explicit Buf(int64_t n) : n_((size_t)n) {
    Stack& s = stack();
    if (s.top == s.slabs.size()) s.slabs.emplace_back();
    Slab& sl = s.slabs[s.top++];
    if (sl.cap < n_) {
      sl.p.reset();
      sl.p.reset(new float[n_]);  // default-initialized: no fill
      sl.cap = n_;
    }
    p_ = sl.p.get();
  }
  ~Buf() {
    Stack& s = stack();
    Slab& sl = s.slabs[--s.top];
    if (sl.cap > kKeepFloats) {
      sl.p.reset();
      sl.cap = 0;
    }
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  float* data() const { return p_; }
  float& operator[](size_t i) const { return p_[i]; }
  size_t size() const { return n_; }

 private:
  static constexpr size_t kKeepFloats = size_t(64) << 20 >> 2;  // 64 MiB
  struct Slab {
    std::unique_ptr<float[]> p;
    size_t cap = 0;
  };
  struct Stack {
    std::vector<Slab> slabs;
    size_t top = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  float* p_;
  size_t n_;
};

struct Ctx {
  const Qwen35Config& c;
  const DumpFn& dump;
  int64_t T;
  CpuPath path;
  void emit(const std::string& name, const Buf& b, std::initializer_list<int64_t> shape) const {
    if (dump) dump(name, b.data(), std::span<const int64_t>(shape.begin(), shape.size()));
  }
  static constexpr size_t kMaxJobs = 8;
  // y_i [T, w_i.n_rows] = x [T, K] w_iᵀ for products that share the input x.
  void matmul(std::initializer_list<std::pair<const QTensor*, float*>> ws, const float* x) const {
    if (path == CpuPath::kReference) {
      for (const auto& [w, y] : ws) cpu::matmul({w->type, w->n_rows, w->n_cols, T}, w->data, x, y);
      return;
    }
    cpu::MatmulJob jobs[kMaxJobs];
    DS_CHECK(ws.size() <= kMaxJobs, "forward: {} products in one group (at most {})", ws.size(), kMaxJobs);
    size_t n = 0;
    for (const auto& [w, y] : ws) jobs[n++] = {{w->type, w->n_rows, w->n_cols, T}, w->data, y};
    cpu::matmul_fast(std::span<const cpu::MatmulJob>(jobs, n), x);
  }
  void matmul(const QTensor& w, const float* x, float* y) const { matmul({{&w, y}}, x); }
};

// Gated DeltaNet mixer (§4): xn [T, H] -> out [T, H]; updates the conv window and the delta-rule state.
void gdn_layer(const Ctx& x, int64_t il, const Qwen35GdnWeights& W, const Buf& xn, float* conv_state,
               float* ssm_state, Buf& out) {
  const Qwen35Config& c = x.c;
  const int64_t T = x.T, nk = c.n_k_heads, nv = c.n_v_heads, dk = c.d_k, dv = c.d_v;
  const int64_t Kd = c.key_dim(), Vd = c.value_dim(), Cc = c.conv_dim();
  const std::string L = "L" + std::to_string(il) + ".gdn.";
  Buf qkv(T * Cc), z(T * Vd), a(T * nv), b(T * nv);
  x.matmul({{&W.qkv, qkv.data()}, {&W.gate, z.data()}, {&W.beta, b.data()}, {&W.alpha, a.data()}}, xn.data());
  x.emit(L + "qkv", qkv, {T, Cc});
  x.emit(L + "z", z, {T, Vd});
  Buf g(T * nv), beta(T * nv);
  cpu::gdn_gates({T, nv}, a.data(), b.data(), W.ssm_a.data(), W.dt_bias.data(), g.data(), beta.data());
  x.emit(L + "g", g, {T, nv});
  x.emit(L + "beta", beta, {T, nv});
  Buf u(T * Cc);
  auto conv = x.path == CpuPath::kReference ? cpu::conv1d_silu : cpu::conv1d_silu_fast;
  conv({T, 1, Cc, c.conv_kernel}, qkv.data(), W.conv.data(), conv_state, nullptr, nullptr, u.data());
  x.emit(L + "conv_out", u, {T, Cc});
  // L2-normalize the q and k heads in place (2*nk rows of dk per token); v stays as is.
  cpu::l2_norm({T, 2 * nk, dk, Cc, dk, Cc, dk, ops::kL2NormEps}, u.data(), u.data());
  x.emit(L + "qk_l2", u, {T, Cc});
  Buf o(T * Vd);
  const ops::GdnParams gp{T, 1, nk, nv, dk, dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)dk)};
  const bool ref = x.path == CpuPath::kReference;  // prefill: chunked (§4.6); decode: recurrent
  auto rule = T > 1 ? (ref ? cpu::gdn_chunked : cpu::gdn_chunked_fast) : (ref ? cpu::gdn_recurrent : cpu::gdn_recurrent_fast);
  rule(gp, u.data(), u.data() + Kd, u.data() + 2 * Kd, g.data(), beta.data(), ssm_state, nullptr, nullptr, o.data());
  x.emit(L + "core_out", o, {T, nv, dv});
  cpu::rms_norm_gated({T * nv, dv, (float)c.rms_eps}, o.data(), z.data(), W.norm.data(), o.data());
  x.emit(L + "norm_out", o, {T, Vd});
  x.matmul(W.out, o.data(), out.data());
  x.emit(L + "out", out, {T, c.n_embd});
}

// Gated full attention (§5): xn [T, H] -> out [T, H]; writes K/V rows at positions pos0 .. pos0+T-1.
void attn_layer(const Ctx& x, int64_t il, const Qwen35AttnWeights& W, const Buf& xn, int64_t pos0, int64_t max_ctx,
                float* k_cache, float* v_cache, Buf& out) {
  const Qwen35Config& c = x.c;
  const int64_t T = x.T, nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim;
  const std::string L = "L" + std::to_string(il) + ".attn.";
  Buf qf(T * nh * 2 * hd), k(T * nkv * hd), v(T * nkv * hd);
  x.matmul({{&W.q, qf.data()}, {&W.k, k.data()}, {&W.v, v.data()}}, xn.data());
  x.emit(L + "q_full", qf, {T, nh, 2 * hd});
  x.emit(L + "k_proj", k, {T, nkv, hd});
  x.emit(L + "v", v, {T, nkv, hd});
  // q_norm reads the q half of each [q | gate] head and writes a packed q; k_norm in place (§5, before RoPE).
  Buf q(T * nh * hd);
  const float eps = (float)c.rms_eps;
  cpu::rms_norm({T, nh, hd, nh * 2 * hd, 2 * hd, nh * hd, hd, eps}, qf.data(), W.q_norm.data(), q.data());
  cpu::rms_norm({T, nkv, hd, nkv * hd, hd, nkv * hd, hd, eps}, k.data(), W.k_norm.data(), k.data());
  x.emit(L + "q_norm", q, {T, nh, hd});
  x.emit(L + "k_norm", k, {T, nkv, hd});
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(pos0 + t);
  cpu::rope_neox({T, nh, hd, c.n_rot, nh * hd, hd, (float)c.rope_base}, q.data(), pos.data());
  cpu::rope_neox({T, nkv, hd, c.n_rot, nkv * hd, hd, (float)c.rope_base}, k.data(), pos.data());
  x.emit(L + "q_rope", q, {T, nh, hd});
  x.emit(L + "k_rope", k, {T, nkv, hd});
  Buf a(T * nh * hd);
  const ops::AttentionParams ap{T, 1, nh, nkv, hd, max_ctx, 1.0f / std::sqrt((float)hd)};
  auto attend = x.path == CpuPath::kReference ? cpu::attention : cpu::attention_fast;
  attend(ap, q.data(), k.data(), v.data(), k_cache, v_cache, pos.data(), nullptr, nullptr, a.data());
  x.emit(L + "core_out", a, {T, nh * hd});
  cpu::output_gate({T, nh, hd, nh * 2 * hd, 2 * hd}, a.data(), qf.data() + hd);
  x.emit(L + "gated", a, {T, nh * hd});
  x.matmul(W.o, a.data(), out.data());
  x.emit(L + "out", out, {T, c.n_embd});
}

}  // namespace

Status forward(const Qwen35Model& model, SequenceState& st, std::span<const int32_t> tokens, float* logits_out,
               bool all_logits, const DumpFn& dump, CpuPath path) {
  const Qwen35Config& c = model.cfg;
  const int64_t T = (int64_t)tokens.size(), H = c.n_embd, V = c.n_vocab, I = c.n_ff;
  if (T == 0) return err("model: forward: no tokens");
  for (int64_t t = 0; t < T; t++)
    if (tokens[t] < 0 || tokens[t] >= V)
      return err("model: forward: token {} at index {} is outside the vocabulary [0, {})", tokens[t], t, V);
  if (st.n_past + T > st.max_ctx)
    return err("model: forward: {} tokens after {} would pass the sequence's max context {}", T, st.n_past,
               st.max_ctx);
  if (st.conv.size() != c.layers.size())
    return err("model: forward: sequence state has {} layers, the model {}", st.conv.size(), c.layers.size());
  const Ctx x{c, dump, T, path};

  Buf h(T * H), xn(T * H), mix(T * H);
  cpu::get_rows({model.token_embd.type, V, H, T}, model.token_embd.data, tokens.data(), h.data());
  x.emit("embd", h, {T, H});
  for (int64_t il = 0; il < c.n_layer; il++) {
    const Qwen35Layer& Ly = model.layers[il];
    const std::string L = "L" + std::to_string(il) + ".";
    cpu::rms_norm(ops::RmsNormParams::packed(T, H, (float)c.rms_eps), h.data(), Ly.attn_norm.data(), xn.data());
    x.emit(L + "attn_norm", xn, {T, H});
    if (Ly.kind == LayerKind::GatedDeltaNet)
      gdn_layer(x, il, Ly.gdn, xn, st.conv[il].data(), st.ssm[il].data(), mix);
    else
      attn_layer(x, il, Ly.attn, xn, st.n_past, st.max_ctx, st.k_cache[il].data(), st.v_cache[il].data(), mix);
    cpu::add({T * H}, h.data(), mix.data(), h.data());
    x.emit(L + "ffn_inp", h, {T, H});
    // Dense SwiGLU MLP (§6).
    cpu::rms_norm(ops::RmsNormParams::packed(T, H, (float)c.rms_eps), h.data(), Ly.post_norm.data(), xn.data());
    x.emit(L + "ffn_norm", xn, {T, H});
    Buf gate(T * I), up(T * I);
    x.matmul({{&Ly.ffn_gate, gate.data()}, {&Ly.ffn_up, up.data()}}, xn.data());
    x.emit(L + "ffn_gate", gate, {T, I});
    x.emit(L + "ffn_up", up, {T, I});
    (x.path == CpuPath::kReference ? cpu::swiglu : cpu::swiglu_fast)({T, I}, gate.data(), up.data(), gate.data());
    x.emit(L + "ffn_act", gate, {T, I});
    x.matmul(Ly.ffn_down, gate.data(), mix.data());
    x.emit(L + "ffn_out", mix, {T, H});
    cpu::add({T * H}, h.data(), mix.data(), h.data());
    x.emit(L + "out", h, {T, H});
  }
  // Final norm and head over the rows asked for.
  const int64_t n_out = all_logits ? T : 1;
  const float* last = h.data() + (T - n_out) * H;
  Buf y(n_out * H);
  cpu::rms_norm(ops::RmsNormParams::packed(n_out, H, (float)c.rms_eps), last, model.output_norm.data(), y.data());
  x.emit("final_norm", y, {n_out, H});
  const Ctx xo{c, dump, n_out, path};
  xo.matmul(model.output, y.data(), logits_out);
  if (dump) {
    const int64_t shape[2] = {n_out, V};
    dump("logits", logits_out, shape);
  }
  st.n_past += T;
  return {};
}

}  // namespace ds

// The CUDA forward step (qwen35_cuda.cuh): a flat list of op launches per layer, mirroring
// src/model/qwen35_forward.cpp and emitting the same dump names. Residual adds are fused into the output
// projections (y += W x) except when dumping, where the projection output is materialised for its name.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <utility>

#include "cuda/matvec.h"
#include "cuda/model/model_impl.cuh"
#include "ops/l2_norm.h"

namespace ds::cuda {
namespace {

struct View {
  float* p;
  int64_t ld;
};

struct Step {
  CudaModel::Impl& I;
  const Qwen35Config& c;
  int T = 0, S = 0;
  int64_t max_ctx = 0;
  size_t rec_bytes = 0;
  int n_out = 0;                       // logits rows (0: none)
  bool download = true;                // copy the logits to the pinned host buffer
  bool last_rows = false;              // rows = the last token of each sequence (else tokens 0 .. n_out-1)
  bool head_hi = false;                // cg38: the output head's hi-only bound form (certified selection follows)
  const int32_t* n_per_seq = nullptr;  // host, S entries
  const DumpFn* dump = nullptr;
  std::vector<KernelTiming>* prof = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> ev;
  size_t ev_used = 0;
  const mk::StepIO* io = nullptr;  // device
  cudaStream_t st = nullptr;
  // Batch-1 fused path: the products in launch order, so that each names the next one's weights
  // (set_matvec_next: L2 prefetch by the streamed kernels, decode8); mv_i counts the launches.
  std::vector<const DevMat*> order;
  size_t mv_i = 0;

  bool dumping() const { return dump && *dump; }
  float* f(DeviceBuffer& b) const { return b.as<float>(); }
};

Status next_event(Step& s, cudaEvent_t& e) {
  if (s.ev_used == s.I.events.size()) {
    cudaEvent_t n;
    CUDA_TRY(cudaEventCreate(&n));
    s.I.events.push_back(n);
  }
  e = s.I.events[s.ev_used++];
  return {};
}

// Launches one product of `order` (f), with the next product's weights as the prefetch hint.
template <class F>
Status mv(Step& s, F&& f) {
  if (s.order.empty()) return f();
  const size_t i = s.mv_i++;
  const DevMat* n = i + 1 < s.order.size() ? s.order[i + 1] : nullptr;
  set_matvec_next(n ? n->w : nullptr, n ? n->bytes : 0);
  Status r = f();
  set_matvec_next(nullptr, 0);
  return r;
}

// Runs f (which enqueues one op); when profiling, brackets it with events.
// flops: 2·T·rows·cols for a matrix product (the breakdown's effective TFLOP/s), 0 for other ops.
template <class F>
Status op(Step& s, const std::string& name, const std::string& kind, double bytes, F&& f, double flops = 0) {
  if (!s.prof) return f();
  cudaEvent_t a, b;
  DS_TRY(next_event(s, a));
  DS_TRY(next_event(s, b));
  CUDA_TRY(cudaEventRecord(a, s.st));
  DS_TRY(f());
  CUDA_TRY(cudaEventRecord(b, s.st));
  s.prof->push_back({name, kind, 0.0, bytes, flops});
  s.ev.push_back({a, b});
  return {};
}

// Downloads rows x cols floats (row stride ld) and hands them to the dump hook under `name`.
Status emit(Step& s, const std::string& name, const float* p, int64_t ld, int64_t rows, int64_t cols,
            std::initializer_list<int64_t> shape) {
  if (!s.dumping()) return {};
  CUDA_TRY(cudaStreamSynchronize(s.st));
  std::vector<float> host((size_t)(rows * cols));
  CUDA_TRY(cudaMemcpy2D(host.data(), cols * sizeof(float), p, ld * sizeof(float), cols * sizeof(float), rows,
                        cudaMemcpyDeviceToHost));
  const std::vector<int64_t> sh(shape);
  (*s.dump)(name, host.data(), std::span<const int64_t>(sh));
  return {};
}

std::string mv_kind(const DevMat& m) { return std::string("matvec ") + type_cstr(m.type); }
double mv_bytes(const Step& s, const DevMat& m) {
  return (double)m.bytes + 4.0 * s.T * (double)(m.rows + m.cols);
}
double mv_flops(int64_t n, const DevMat& m) { return 2.0 * (double)n * (double)m.rows * (double)m.cols; }

View view(Step& s, const Proj& p, int i) {
  const Proj::View& v = p.views[i];
  return {s.f(s.I.proj) + p.out_off[v.group] + v.row_off, p.groups[v.group].rows};
}

// Batch 1 without dumps: the RMSNorm in front of a projection and the SwiGLU in front of ffn_down run in
// the matvec's prologue (matvec_fused), so xn / act are not materialised (the dump path keeps the named
// intermediates, and T > 1 the separate kernels).
// DS_DECODE_FUSE=0 turns it off (A/B measurements).
bool fused(const Step& s) {
  static const bool on = [] {
    const char* e = std::getenv("DS_DECODE_FUSE");
    return !(e && e[0] == '0');
  }();
  return on && s.T == 1 && !s.dumping();
}

// fold17: T > 1 without dumps: the RMSNorm in front of a projection runs inside the x preparation of its Q4_K group's
// product (matvec_batched_in: no rms_norm kernel; the same bits as that kernel followed by matvec_batched). Default on:
// H200, 9B step at B = 64, interleaved pairs (fold17 call 2): 7.834 / 7.857 / 7.843 vs 7.893 / 7.859 / 7.849 ms short,
// 8.439 / 8.434 vs 8.470 / 8.479 at 512+ positions, B = 32 6.646 vs 6.669. (The SwiGLU in front of ffn_down folded the
// same way lost: fold17's NOTES section.) A projection's other groups (a Q6_K attn_qkv / attn_v) read xn, which that
// preparation writes; the folded group runs first. fold29: also 2 <= B <= 6, in the staging of the Q4_K multi-sequence
// stream kernels (matvec_batched_folds says where; H100, 9B step: B = 2 -6.7%, 3 -3.1%, 4 -2.1%). DS_STEP_FOLD=0: the
// separate kernels (A/B measurements).
bool folded(const Step& s) {
  static const bool on = [] {
    const char* e = std::getenv("DS_STEP_FOLD");
    return !(e && e[0] == '0');
  }();
  return on && s.T > 1 && !s.dumping();
}

// The folded RMSNorm's input description for projection p (xn written only where another group reads it).
MatvecBatchedInput norm_input(Step& s, const Proj& p, const float* norm_w) {
  MatvecBatchedInput bi;
  bi.x = s.f(s.I.h);
  bi.ldx = s.c.n_embd;
  bi.norm_w = norm_w;
  bi.eps = (float)s.c.rms_eps;
  bi.xn = p.groups.size() > 1 ? s.f(s.I.xn) : nullptr;
  return bi;
}

// The group of p whose product takes the RMSNorm into its x preparation, or -1 (then the rms_norm kernel writes xn).
int fold_group(Step& s, const Proj& p, const float* norm_w) {
  if (!folded(s)) return -1;
  const MatvecBatchedInput bi = norm_input(s, p, norm_w);
  for (size_t g = 0; g < p.groups.size(); g++) {
    const DevMat& m = p.groups[g];
    if (matvec_batched_folds(m.type, m.rows, m.cols, s.T, bi)) return (int)g;
  }
  return -1;
}

// A projection's input: x itself, or the RMSNorm of x with weights norm_w, fused (batch 1) or folded (fold17).
struct In {
  const float* x;
  const float* norm_w = nullptr;
  bool fold = false;
};

Status proj(Step& s, const std::string& name, const Proj& p, In in) {
  const int fg = in.fold ? fold_group(s, p, in.norm_w) : -1;
  for (size_t k = 0; k < p.groups.size(); k++) {
    const int g = fg < 0 ? (int)k : k == 0 ? fg : (int)k <= fg ? (int)k - 1 : (int)k;  // the folded group first
    const DevMat& m = p.groups[g];
    float* y = s.f(s.I.proj) + p.out_off[g];
    DS_TRY(op(s, name + "[" + m.name + "]", mv_kind(m), mv_bytes(s, m), [&] {
      return mv(s, [&] {
        if (g == fg) return matvec_batched_in(m.type, m.w, m.rows, m.cols, norm_input(s, p, in.norm_w), y, s.T, s.st);
        if (in.fold) return matvec_batched(m.type, m.w, m.rows, m.cols, s.f(s.I.xn), y, s.T, s.st);
        if (!in.norm_w) return matvec_batched(m.type, m.w, m.rows, m.cols, in.x, y, s.T, s.st);
        const MatvecInput mi{in.x, in.norm_w, (float)s.c.rms_eps};
        return matvec_fused(m.type, m.w, m.rows, m.cols, mi, y, s.f(s.I.xn), s.st);
      });
    }, mv_flops(s.T, m)));
  }
  return {};
}

// The input of the projection p after the layer's norm: the normalised xn, or h with the norm fused or folded.
In normed(Step& s, const Proj& p, const float* norm_w) {
  if (fused(s)) return In{s.f(s.I.h), norm_w};
  if (fold_group(s, p, norm_w) >= 0) return In{s.f(s.I.h), norm_w, true};
  return In{s.f(s.I.xn)};
}

// h += W x; when dumping, W x is materialised first and emitted under `name`.
Status residual(Step& s, const std::string& name, const DevMat& m, const float* x) {
  const int64_t H = s.c.n_embd, T = s.T;
  float* h = s.f(s.I.h);
  if (s.dumping()) {
    float* mix = s.f(s.I.mix);
    DS_TRY(matvec_batched(m.type, m.w, m.rows, m.cols, x, mix, s.T, s.st));
    DS_TRY(emit(s, name, mix, H, T, H, {T, H}));
    return mk::add(h, mix, T * H, s.st);
  }
  return op(s, name + "[" + m.name + "]", mv_kind(m), mv_bytes(s, m),
            [&] { return mv(s, [&] { return matvec_batched(m.type, m.w, m.rows, m.cols, x, h, s.T, s.st, true); }); },
            mv_flops(s.T, m));
}

Status rms(Step& s, const std::string& name, const float* x, const float* w, float* y, int rows) {
  const int64_t H = s.c.n_embd;
  return op(s, name, "rms_norm", 8.0 * rows * H + 4.0 * H,
            [&] { return mk::rms_norm(x, H, w, y, H, rows, H, (float)s.c.rms_eps, s.st); });
}

Status gdn_layer(Step& s, int il, const DevLayer& D) {
  const Qwen35Config& c = s.c;
  CudaModel::Impl& I = s.I;
  const int64_t T = s.T, Cc = c.conv_dim(), Vd = c.value_dim(), Kd = c.key_dim(), nv = c.n_v_heads;
  const std::string L = "L" + std::to_string(il) + ".gdn.";
  const bool dbg = s.dumping();
  DS_TRY(proj(s, L + "in_proj", D.in, normed(s, D.in, D.attn_norm)));
  const View qkv = view(s, D.in, 0), z = view(s, D.in, 1), beta = view(s, D.in, 2), alpha = view(s, D.in, 3);
  DS_TRY(emit(s, L + "qkv", qkv.p, qkv.ld, T, Cc, {T, Cc}));
  DS_TRY(emit(s, L + "z", z.p, z.ld, T, Vd, {T, Vd}));

  mk::ConvArgs ca;
  ca.x = qkv.p;
  ca.ldx = qkv.ld;
  ca.w = D.conv_w;
  ca.state_off = D.conv_off;
  ca.u = s.f(I.u);
  ca.ldu = Cc;
  ca.dbg_pre = dbg ? s.f(I.dbg_conv) : nullptr;
  ca.n_channels = Cc;
  ca.n_norm_channels = 2 * Kd;
  ca.head_dim = (int)c.d_k;
  ca.kernel = (int)c.conv_kernel;
  ca.eps = ops::kL2NormEps;
  const double conv_state = 4.0 * (c.conv_kernel - 1) * Cc;
  const double conv_bytes = 2 * conv_state * s.S + 8.0 * T * Cc + 4.0 * Cc * c.conv_kernel;

  mk::GdnArgs ga;
  ga.u = s.f(I.u);
  ga.ldu = Cc;
  ga.a = alpha.p;
  ga.lda = alpha.ld;
  ga.b = beta.p;
  ga.ldb = beta.ld;
  ga.z = z.p;
  ga.ldz = z.ld;
  ga.ssm_a = D.ssm_a;
  ga.dt_bias = D.dt_bias;
  ga.norm_w = D.ssm_norm;
  ga.state_off = D.ssm_off;
  ga.state_half = I.state_half;
  ga.lazy = I.gdn_lazy;
  ga.hist_off = D.hist_off;
  ga.n_k_heads = (int)c.n_k_heads;
  ga.n_v_heads = (int)nv;
  ga.d_k = (int)c.d_k;
  ga.scale = 1.0f / std::sqrt((float)c.d_k);
  ga.eps = (float)c.rms_eps;
  ga.out = s.f(I.o);
  ga.ldo = Vd;
  ga.dbg_core = dbg ? s.f(I.dbg_core) : nullptr;
  ga.dbg_g = dbg ? s.f(I.dbg_g) : nullptr;
  ga.dbg_beta = dbg ? s.f(I.dbg_beta) : nullptr;
  const double ssm_state = (I.state_half ? 2.0 : 4.0) * nv * c.d_v * c.d_k;
  // lz23: the lazy rule reads the state every step and writes it every I.gdn_lazy-th (bytes as averaged over steps)
  const double rule_bytes = (I.gdn_lazy ? 1.0 + 1.0 / I.gdn_lazy : 2.0) * ssm_state * s.S + 4.0 * T * (2 * Kd + 3 * Vd);
  if (mk::gdn_conv_fused(ca, ga, (int)s.S)) {  // cg18: one kernel (default; DS_GDN_CONV_FUSE=0 off; never when dumping)
    DS_TRY(op(s, L + "conv_delta_rule", "gdn conv+rule", conv_bytes + rule_bytes,
              [&] { return mk::gdn_conv_step(ca, ga, s.io, s.S, s.st); }));
  } else {
    DS_TRY(op(s, L + "conv", "conv+silu+l2", conv_bytes, [&] { return mk::conv_silu_l2(ca, s.io, s.S, s.st); }));
    DS_TRY(op(s, L + "delta_rule", "gdn rule+norm", rule_bytes, [&] { return mk::gdn_step(ga, s.io, s.S, s.st); }));
  }
  if (dbg) {
    DS_TRY(emit(s, L + "g", s.f(I.dbg_g), nv, T, nv, {T, nv}));
    DS_TRY(emit(s, L + "beta", s.f(I.dbg_beta), nv, T, nv, {T, nv}));
    DS_TRY(emit(s, L + "conv_out", s.f(I.dbg_conv), Cc, T, Cc, {T, Cc}));
    DS_TRY(emit(s, L + "qk_l2", s.f(I.u), Cc, T, Cc, {T, Cc}));
    DS_TRY(emit(s, L + "core_out", s.f(I.dbg_core), Vd, T, Vd, {T, nv, c.d_v}));
    DS_TRY(emit(s, L + "norm_out", s.f(I.o), Vd, T, Vd, {T, Vd}));
  }
  return residual(s, L + "out", D.out, s.f(I.o));
}

// Position splits of the decode attention: one per 32 positions of the context (at most kMaxAttnSplits), so a
// warp walks at most 8 cached rows of a split whatever the context (was one per 256: a batch-1 step at 128
// positions ran one split, 32 dependent rows per warp). A function of max_ctx only: a sequence's bits do not
// depend on the batch it runs in.
// DS_ATTN_SPLIT_POS: positions per split (default 32; 256 = the old rule, for A/B measurements).
int attn_splits(int64_t max_ctx) {
  static const int64_t per = [] {
    const char* e = std::getenv("DS_ATTN_SPLIT_POS");
    const int64_t v = e ? std::atoll(e) : 0;
    return v > 0 ? v : 32;
  }();
  return (int)std::clamp<int64_t>((max_ctx + per - 1) / per, 1, mk::kMaxAttnSplits);
}

// The dumps of the q/k norm + RoPE (from qk_norm_rope_store or attention_qk).
Status emit_qk(Step& s, const std::string& L) {
  CudaModel::Impl& I = s.I;
  const int64_t T = s.T, nh = s.c.n_head, nkv = s.c.n_head_kv, hd = s.c.head_dim;
  DS_TRY(emit(s, L + "q_norm", s.f(I.dbg_qn), nh * hd, T, nh * hd, {T, nh, hd}));
  DS_TRY(emit(s, L + "k_norm", s.f(I.dbg_kn), nkv * hd, T, nkv * hd, {T, nkv, hd}));
  DS_TRY(emit(s, L + "q_rope", s.f(I.qr), nh * hd, T, nh * hd, {T, nh, hd}));
  return emit(s, L + "k_rope", s.f(I.dbg_kr), nkv * hd, T, nkv * hd, {T, nkv, hd});
}

Status attn_layer(Step& s, int il, const DevLayer& D) {
  const Qwen35Config& c = s.c;
  CudaModel::Impl& I = s.I;
  const int64_t T = s.T, nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim;
  const std::string L = "L" + std::to_string(il) + ".attn.";
  const bool dbg = s.dumping();
  DS_TRY(proj(s, L + "in_proj", D.in, normed(s, D.in, D.attn_norm)));
  const View q = view(s, D.in, 0), k = view(s, D.in, 1), v = view(s, D.in, 2);
  DS_TRY(emit(s, L + "q_full", q.p, q.ld, T, nh * 2 * hd, {T, nh, 2 * hd}));
  DS_TRY(emit(s, L + "k_proj", k.p, k.ld, T, nkv * hd, {T, nkv, hd}));
  DS_TRY(emit(s, L + "v", v.p, v.ld, T, nkv * hd, {T, nkv, hd}));

  const int64_t k_off = I.k_off(D.attn_index, s.max_ctx, s.rec_bytes);
  const int64_t v_off = I.v_off(D.attn_index, s.max_ctx, s.rec_bytes);
  mk::QkArgs qa;
  qa.q = q.p;
  qa.ldq = q.ld;
  qa.k = k.p;
  qa.ldk = k.ld;
  qa.v = v.p;
  qa.ldv = v.ld;
  qa.q_norm = D.q_norm;
  qa.k_norm = D.k_norm;
  qa.inv_freq = I.inv_freq;
  qa.k_off = k_off;
  qa.v_off = v_off;
  qa.kv_half = I.kv_half;
  qa.n_head = (int)nh;
  qa.n_head_kv = (int)nkv;
  qa.head_dim = (int)hd;
  qa.n_rot = (int)c.n_rot;
  qa.eps = (float)c.rms_eps;
  qa.q_out = s.f(I.qr);
  qa.dbg_qn = dbg ? s.f(I.dbg_qn) : nullptr;
  qa.dbg_kn = dbg ? s.f(I.dbg_kn) : nullptr;
  qa.dbg_kr = dbg ? s.f(I.dbg_kr) : nullptr;
  // DS_ATTN_FUSED=2 (attn9): q/k norm + RoPE + the cache store run inside the attention kernel (one launch;
  // q_rope is written only for the dump).
  const bool qk_in_attn = mk::attn_fused() >= 2;
  if (!qk_in_attn) {
    DS_TRY(op(s, L + "qk_norm_rope", "qk norm+rope+kv store", 4.0 * T * (nh + 2 * nkv) * hd * 2,
              [&] { return mk::qk_norm_rope_store(qa, s.io, s.T, s.st); }));
    DS_TRY(emit_qk(s, L));
  }

  mk::AttnArgs aa;
  aa.q = s.f(I.qr);
  aa.gate = q.p + hd;
  aa.ld_gate = q.ld;
  aa.k_off = k_off;
  aa.v_off = v_off;
  aa.kv_half = I.kv_half;
  aa.n_head = (int)nh;
  aa.n_head_kv = (int)nkv;
  aa.head_dim = (int)hd;
  aa.n_splits = attn_splits(s.max_ctx);
  aa.scale = 1.0f / std::sqrt((float)hd);
  aa.part = s.f(I.part);
  aa.out = s.f(I.o);
  aa.dbg_core = dbg ? s.f(I.dbg_core) : nullptr;
  aa.counters = I.attn_cnt.as<unsigned>();
  double kv_bytes = 0;
  for (int t = 0; t < s.T; t++) kv_bytes += 2.0 * (I.io_host->pos[t] + 1) * I.kv_row_bytes;
  if (qk_in_attn) {
    qa.q_out = dbg ? s.f(I.qr) : nullptr;
    DS_TRY(op(s, L + "attention", "qk+attention", kv_bytes + 4.0 * T * nh * hd * 3 + 4.0 * T * (nh + 2 * nkv) * hd,
              [&] { return mk::attention_qk(qa, aa, s.io, s.T, s.st); }));
    DS_TRY(emit_qk(s, L));
  } else {
    DS_TRY(op(s, L + "attention", "attention", kv_bytes + 4.0 * T * nh * hd * 3,
              [&] { return mk::attention(aa, s.io, s.T, s.st); }));
  }
  DS_TRY(emit(s, L + "core_out", s.f(I.dbg_core), nh * hd, T, nh * hd, {T, nh * hd}));
  DS_TRY(emit(s, L + "gated", s.f(I.o), nh * hd, T, nh * hd, {T, nh * hd}));
  return residual(s, L + "out", D.out, s.f(I.o));
}

Status ffn(Step& s, int il, const DevLayer& D) {
  const Qwen35Config& c = s.c;
  CudaModel::Impl& I = s.I;
  const int64_t T = s.T, H = c.n_embd, Iff = c.n_ff;
  const std::string L = "L" + std::to_string(il) + ".";
  DS_TRY(emit(s, L + "ffn_inp", s.f(I.h), H, T, H, {T, H}));
  if (!fused(s) && fold_group(s, D.ffn, D.post_norm) < 0)
    DS_TRY(rms(s, L + "ffn_norm", s.f(I.h), D.post_norm, s.f(I.xn), s.T));
  DS_TRY(emit(s, L + "ffn_norm", s.f(I.xn), H, T, H, {T, H}));
  DS_TRY(proj(s, L + "ffn_gate_up", D.ffn, normed(s, D.ffn, D.post_norm)));
  const View g = view(s, D.ffn, 0), u = view(s, D.ffn, 1);
  DS_TRY(emit(s, L + "ffn_gate", g.p, g.ld, T, Iff, {T, Iff}));
  DS_TRY(emit(s, L + "ffn_up", u.p, u.ld, T, Iff, {T, Iff}));
  if (fused(s)) {  // h += W_down (silu(g) * u)
    const DevMat& m = D.down;
    return op(s, L + "ffn_out[" + m.name + "]", mv_kind(m), mv_bytes(s, m), [&] {
      MatvecInput mi{u.p};
      mi.gate = g.p;
      return mv(s, [&] { return matvec_fused(m.type, m.w, m.rows, m.cols, mi, s.f(I.h), s.f(I.act), s.st, true); });
    }, mv_flops(T, m));
  }
  DS_TRY(op(s, L + "ffn_act", "swiglu", 12.0 * T * Iff,
            [&] { return mk::swiglu(g.p, g.ld, u.p, u.ld, s.f(I.act), s.T, Iff, s.st); }));
  DS_TRY(emit(s, L + "ffn_act", s.f(I.act), Iff, T, Iff, {T, Iff}));
  DS_TRY(residual(s, L + "ffn_out", D.down, s.f(I.act)));
  return emit(s, L + "out", s.f(I.h), H, T, H, {T, H});
}

// logits = W_out rms_norm(h) for the n_out rows that want logits (batch 1 without dumps: the norm in the
// product's prologue).
Status output_head(Step& s) {
  CudaModel::Impl& I = s.I;
  const Qwen35Config& c = s.c;
  const int64_t H = c.n_embd, V = c.n_vocab, n_out = s.n_out;
  const DevMat& o = I.output;
  if (fused(s) && n_out == 1 && matvec_fuses(o.type, o.rows, o.cols)) {
    return op(s, "output[" + o.name + "]", mv_kind(o), (double)o.bytes + 4.0 * (H + V), [&] {
      const MatvecInput mi{s.f(I.h), I.output_norm, (float)c.rms_eps};
      return mv(s, [&] { return matvec_fused(o.type, o.w, o.rows, o.cols, mi, s.f(I.logits), s.f(I.y), s.st); });
    }, mv_flops(1, o));
  }
  if (!s.last_rows) {
    DS_TRY(rms(s, "final_norm", s.f(I.h), I.output_norm, s.f(I.y), s.n_out));
  } else {
    int64_t row = -1;
    for (int q = 0; q < s.S; q++) {
      row += s.n_per_seq[q];
      DS_TRY(rms(s, "final_norm", s.f(I.h) + row * H, I.output_norm, s.f(I.y) + q * H, 1));
    }
  }
  DS_TRY(emit(s, "final_norm", s.f(I.y), H, n_out, H, {n_out, H}));
  DS_TRY(op(s, "output[" + o.name + "]", mv_kind(o), (double)o.bytes + 4.0 * n_out * (H + V), [&] {
    if (s.head_hi) return matvec_batched_hi(o.type, o.w, o.rows, o.cols, s.f(I.y), s.f(I.logits), s.n_out, s.st);
    return matvec_batched(o.type, o.w, o.rows, o.cols, s.f(I.y), s.f(I.logits), s.n_out, s.st);
  }, mv_flops(n_out, o)));
  return emit(s, "logits", s.f(I.logits), V, n_out, V, {n_out, V});
}

Status enqueue_step(Step& s) {
  CudaModel::Impl& I = s.I;
  const Qwen35Config& c = s.c;
  const int64_t T = s.T, H = c.n_embd, V = c.n_vocab;
  CUDA_TRY(cudaMemcpyAsync(I.io_dev.data(), I.io_host, sizeof(mk::StepIO), cudaMemcpyHostToDevice, s.st));
  if (fused(s)) {  // the order of the products below (gdn_layer / attn_layer, ffn, output)
    for (int il = 0; il < (int)c.n_layer; il++) {
      const DevLayer& D = I.layers[il];
      for (const DevMat& m : D.in.groups) s.order.push_back(&m);
      s.order.push_back(&D.out);
      for (const DevMat& m : D.ffn.groups) s.order.push_back(&m);
      s.order.push_back(&D.down);
    }
    if (s.n_out == 1 && matvec_fuses(I.output.type, I.output.rows, I.output.cols)) s.order.push_back(&I.output);
  }
  DS_TRY(op(s, "embd", "embed", 8.0 * T * H, [&] {
    return mk::embed(I.embd.type, I.embd.w, H, s.io, s.T, s.f(I.h), s.st);
  }));
  DS_TRY(emit(s, "embd", s.f(I.h), H, T, H, {T, H}));
  for (int il = 0; il < (int)c.n_layer; il++) {
    const DevLayer& D = I.layers[il];
    const std::string L = "L" + std::to_string(il) + ".";
    if (!fused(s) && fold_group(s, D.in, D.attn_norm) < 0)
      DS_TRY(rms(s, L + "attn_norm", s.f(I.h), D.attn_norm, s.f(I.xn), s.T));
    DS_TRY(emit(s, L + "attn_norm", s.f(I.xn), H, T, H, {T, H}));
    if (D.kind == LayerKind::GatedDeltaNet) {
      DS_TRY(gdn_layer(s, il, D));
    } else {
      DS_TRY(attn_layer(s, il, D));
    }
    DS_TRY(ffn(s, il, D));
  }
  if (s.n_out == 0) return {};
  DS_TRY(output_head(s));
  if (s.download)
    CUDA_TRY(cudaMemcpyAsync(I.logits_host, I.logits.data(), (size_t)(s.n_out * V) * sizeof(float),
                             cudaMemcpyDeviceToHost, s.st));
  return {};
}

Status ensure_dbg(CudaModel::Impl& I, const Qwen35Config& c) {
  if (!I.dbg_core.empty()) return {};
  const int64_t Tm = I.max_tokens;
  auto alloc = [](int64_t n) { return DeviceBuffer::alloc((size_t)std::max<int64_t>(n, 1) * sizeof(float)); };
  DS_ASSIGN(I.dbg_conv, alloc(Tm * c.conv_dim()));
  DS_ASSIGN(I.dbg_core, alloc(Tm * I.o_floats));
  DS_ASSIGN(I.dbg_g, alloc(Tm * c.n_v_heads));
  DS_ASSIGN(I.dbg_beta, alloc(Tm * c.n_v_heads));
  DS_ASSIGN(I.dbg_qn, alloc(Tm * c.n_head * c.head_dim));
  DS_ASSIGN(I.dbg_kn, alloc(Tm * c.n_head_kv * c.head_dim));
  DS_ASSIGN(I.dbg_kr, alloc(Tm * c.n_head_kv * c.head_dim));
  return {};
}

}  // namespace

Status CudaModel::check_step(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens,
                             std::span<const int32_t> n_per_seq) const {
  const int64_t S = (int64_t)seqs.size(), T = (int64_t)tokens.size();
  if (S < 1 || T < 1) return cu_err("cuda: forward: no sequences or no tokens");
  if (T > opt_.max_tokens) return cu_err("cuda: forward: {} tokens in one step, at most {}", T, opt_.max_tokens);
  int64_t sum = 0;
  for (int64_t i = 0; i < S; i++) {
    const CudaSeqState* q = seqs[i];
    if (!q || q->owner_ != this) return cu_err("cuda: forward: sequence {} is null or of another model", i);
    if (q->max_ctx_ != seqs[0]->max_ctx_)
      return cu_err("cuda: forward: sequences of one step must share max_ctx ({} vs {})", q->max_ctx_,
                    seqs[0]->max_ctx_);
    for (int64_t j = 0; j < i; j++)
      if (seqs[j] == q) return cu_err("cuda: forward: sequence state {} appears twice in one step", i);
    if (n_per_seq[i] < 1) return cu_err("cuda: forward: sequence {} has no tokens", i);
    if (q->n_past_ + n_per_seq[i] > q->max_ctx_)
      return cu_err("cuda: forward: {} tokens after {} would pass the sequence's max context {}", n_per_seq[i],
                    q->n_past_, q->max_ctx_);
    sum += n_per_seq[i];
  }
  if (sum != T) return cu_err("cuda: forward: {} tokens for sequences of {} in total", T, sum);
  for (int64_t t = 0; t < T; t++)
    if (tokens[t] < 0 || tokens[t] >= cfg_.n_vocab)
      return cu_err("cuda: forward: token {} at index {} is outside the vocabulary [0, {})", tokens[t], t,
                    cfg_.n_vocab);
  return {};
}

Status CudaModel::run_step(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens,
                           std::span<const int32_t> n_per_seq, bool all_logits, float* logits_out,
                           const DumpFn& dump, std::vector<KernelTiming>* prof, bool graph, const AfterStep* after,
                           bool wait, bool head_hi) {
  Impl& I = *impl_;
  CUDA_TRY(cudaSetDevice(opt_.device));  // the current device is per host thread (the engine has its own)
  const int S = (int)seqs.size(), T = (int)tokens.size();
  mk::StepIO& io = *I.io_host;
  int t = 0;
  for (int q = 0; q < S; q++) {
    io.start[q] = t;
    io.base[q] = (unsigned long long)(uintptr_t)seqs[q]->buf_.data();
    for (int i = 0; i < n_per_seq[q]; i++, t++) {
      io.tok[t] = tokens[t];
      io.pos[t] = (int32_t)(seqs[q]->n_past_ + i);
      io.seq[t] = q;
    }
  }
  io.start[S] = T;
  if (dump) DS_TRY(ensure_dbg(I, cfg_));

  Step s{I, cfg_};
  s.T = T;
  s.S = S;
  s.max_ctx = seqs[0]->max_ctx_;
  s.rec_bytes = rec_bytes_;
  s.n_out = (logits_out || graph || after) ? (all_logits ? T : S) : 0;
  s.download = !after;
  s.last_rows = s.n_out > 0 && !all_logits && T != S;
  s.head_hi = head_hi && s.n_out == S && !s.last_rows && !dump;
  s.n_per_seq = n_per_seq.data();
  s.dump = dump ? &dump : nullptr;
  s.prof = prof;
  s.io = static_cast<const mk::StepIO*>(I.io_dev.data());
  s.st = I.stream;
  const size_t prof0 = prof ? prof->size() : 0;

  if (graph) {
    const auto key = std::make_tuple(s.download ? T : -T, s.max_ctx, s.head_hi);  // a step without the download: -T
    auto it = I.graphs.find(key);
    if (it == I.graphs.end()) {
      CUDA_TRY(cudaStreamBeginCapture(I.stream, cudaStreamCaptureModeThreadLocal));
      const Status e = enqueue_step(s);
      cudaGraph_t g = nullptr;
      const cudaError_t ce = cudaStreamEndCapture(I.stream, &g);
      if (!e.ok()) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return e;
      }
      CUDA_TRY(ce);
      cudaGraphExec_t ex = nullptr;
      const cudaError_t ie = cudaGraphInstantiate(&ex, g, 0);
      cudaGraphDestroy(g);
      CUDA_TRY(ie);
      it = I.graphs.emplace(key, ex).first;
    }
    CUDA_TRY(cudaGraphLaunch(it->second, I.stream));
  } else {
    DS_TRY(enqueue_step(s));
  }
  if (after) DS_TRY((*after)(I.stream));
  if (!wait) {  // the caller synchronises (decode_select_end); the positions advance now, as the step will
    for (int q = 0; q < S; q++) seqs[q]->n_past_ += n_per_seq[q];
    return {};
  }
  CUDA_TRY(cudaStreamSynchronize(I.stream));  // the one host synchronisation of a step
  if (prof) {
    for (size_t i = 0; i < s.ev.size(); i++) {
      float ms = 0;
      CUDA_TRY(cudaEventElapsedTime(&ms, s.ev[i].first, s.ev[i].second));
      (*prof)[prof0 + i].ms = ms;
    }
  }
  if (logits_out && s.n_out > 0 && s.download)
    std::memcpy(logits_out, I.logits_host, (size_t)s.n_out * cfg_.n_vocab * sizeof(float));
  for (int q = 0; q < S; q++) seqs[q]->n_past_ += n_per_seq[q];
  return {};
}

const float* CudaModel::last_logits() const { return impl_->logits_host; }

Status CudaModel::prefill(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out, bool all_logits,
                          const DumpFn& dump) {
  const int64_t T = (int64_t)tokens.size(), V = cfg_.n_vocab;
  if (T == 0) return cu_err("cuda: prefill: no tokens");
  if (s.owner_ != this) return cu_err("cuda: prefill: the sequence state belongs to another model");
  if (s.n_past_ + T > s.max_ctx_)
    return cu_err("cuda: prefill: {} tokens after {} would pass the sequence's max context {}", T, s.n_past_,
                  s.max_ctx_);
  for (int64_t t = 0; t < T; t++)
    if (tokens[t] < 0 || tokens[t] >= V)
      return cu_err("cuda: prefill: token {} at index {} is outside the vocabulary [0, {})", tokens[t], t, V);
  if (!dump && T >= opt_.prefill_min_tokens && piece_prefill_supported())
    return prefill_pieces(s, tokens, logits_out, all_logits);
  CudaSeqState* sp = &s;
  for (int64_t off = 0; off < T; off += opt_.max_tokens) {
    const int32_t n = (int32_t)std::min<int64_t>(opt_.max_tokens, T - off);
    const bool last = off + n == T;
    float* out = !logits_out ? nullptr : all_logits ? logits_out + off * V : last ? logits_out : nullptr;
    DS_TRY(run_step({&sp, 1}, tokens.subspan(off, n), {&n, 1}, all_logits, out, dump, nullptr, false));
  }
  return {};
}

Status CudaModel::decode(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, float* logits_out,
                         const DumpFn& dump) {
  if (seqs.size() != tokens.size())
    return cu_err("cuda: decode: {} sequences but {} tokens", seqs.size(), tokens.size());
  const std::vector<int32_t> ones(seqs.size(), 1);
  DS_TRY(check_step(seqs, tokens, ones));
  return run_step(seqs, tokens, ones, true, logits_out, dump, nullptr, opt_.use_graphs && !dump);
}

Result<std::vector<KernelTiming>> CudaModel::profile_decode(std::span<CudaSeqState* const> seqs,
                                                            std::span<const int32_t> tokens, float* logits_out) {
  if (seqs.size() != tokens.size())
    return cu_err("cuda: profile: {} sequences but {} tokens", seqs.size(), tokens.size());
  const std::vector<int32_t> ones(seqs.size(), 1);
  DS_TRY(check_step(seqs, tokens, ones));
  // The output head is part of every served step: without a caller's buffer the logits go to a scratch one, so the
  // profiled step still runs (and times) the final norm and the vocabulary product (sessions <= 31 left them out).
  std::vector<float> scratch;
  if (!logits_out) {
    scratch.resize(seqs.size() * (size_t)cfg_.n_vocab);
    logits_out = scratch.data();
  }
  std::vector<KernelTiming> prof;
  DS_TRY(run_step(seqs, tokens, ones, true, logits_out, {}, &prof, false));
  return prof;
}

}  // namespace ds::cuda

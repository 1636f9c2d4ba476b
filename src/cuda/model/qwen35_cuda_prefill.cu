// The piece prefill of CudaModel (qwen35_cuda.cuh, issue 6): T tokens of one sequence through every layer
// at once, following src/cuda/prefill/prefill.cuh's recipe. Per piece of up to `piece` tokens:
//   embed (get_rows) ; per layer: rms_norm ; GDN: GEMMs qkv|z|beta|alpha, conv+SiLU+L2 (parallel over tokens),
//   gates, chunked delta rule (state in/out), gated norm, GEMM ssm_out += into the residual ; attention: GEMMs
//   q|k|v, q/k RMSNorm + RoPE, flash causal attention (stores K/V in the cache), output gate, GEMM attn_output
//   += ; FFN: rms_norm, GEMMs gate|up, SwiGLU, GEMM down += ; then the output norm and the (matvec) LM head for
//   the rows whose logits are wanted. One host synchronisation per piece (its end).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "cuda/matvec.h"
#include "cuda/model/model_impl.cuh"
#include "cuda/ops.h"
#include "ops/l2_norm.h"

namespace ds::cuda {
namespace {

using prefill::GemmInputs;

// DS_PREFILL_CHECK=1 (debug, session 26): after every op of the piece prefill, its output is scanned on the device
// (count of non-finite values, largest |x|) and logged; the first op with a non-finite value fails the prefill with
// its name. It synchronises after every op (slow; for finding where an overflow starts, e.g. an activation past
// f16's 65,504 in the fast mode's GEMM inputs). The largest |x| per op, in --precise mode too, shows how close
// each activation comes to f16's range.
__global__ void scan_kernel(const float* __restrict__ x, int64_t n, unsigned* __restrict__ out) {
  unsigned bad = 0;
  float m = 0.f;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    if (!isfinite(v)) bad++;
    else m = fmaxf(m, fabsf(v));
  }
  if (bad) atomicAdd(out, bad);
  atomicMax(out + 1, __float_as_uint(m));  // non-negative floats order as their bits
}

bool check_on() {
  static const bool on = [] {
    const char* e = std::getenv("DS_PREFILL_CHECK");
    return e && e[0] == '1' && !e[1];
  }();
  return on;
}

Status check_op(const char* what, int il, const float* x, int64_t n, cudaStream_t st) {
  if (!check_on()) return {};
  static unsigned* d = nullptr;
  if (!d) CUDA_TRY(cudaMalloc(&d, 2 * sizeof(unsigned)));
  unsigned h[2];
  CUDA_TRY(cudaMemsetAsync(d, 0, 2 * sizeof(unsigned), st));
  scan_kernel<<<264, 256, 0, st>>>(x, n, d);
  CUDA_TRY_LAUNCH("prefill check", st);
  CUDA_TRY(cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, st));
  CUDA_TRY(cudaStreamSynchronize(st));
  float m;
  std::memcpy(&m, &h[1], sizeof(m));
  std::fprintf(stderr, "prefill check L%d.%s: %lld floats, max |x| %.4g, %u non-finite\n", il, what, (long long)n, m,
               h[0]);
  if (h[0]) return cu_err("prefill check (DS_PREFILL_CHECK=1): {} non-finite values in L{}.{} (first such op)", h[0], il, what);
  return {};
}

prefill::Mode mode_of(const CudaModelOptions& o) {
  return o.precision == Precision::kPrecise ? prefill::Mode::kPrecise : prefill::Mode::kFast;
}

// The GEMM inputs of one product. `exact_x`: a product whose activations' rounding the logits feel most (the
// GDN qkv projection, whose q and k are L2-normalized and drive the delta rule): the fast mode splits its X
// into two f16 terms (measured: that alone takes the fixtures' worst fast-mode error from 0.038 to 0.013).
GemmInputs inputs_of(const CudaModelOptions& o, GgmlType t, bool exact_x = false) {
  if (o.precision == Precision::kPrecise) return GemmInputs::kF32;
  if (o.fast_gemm_inputs >= 0) return static_cast<GemmInputs>(o.fast_gemm_inputs);
  const GemmInputs in = prefill::default_gemm_inputs(prefill::Mode::kFast, t);
  return exact_x && in == GemmInputs::kF16 ? GemmInputs::kF16Split : in;
}

Result<DeviceBuffer> floats(int64_t n) { return DeviceBuffer::alloc((size_t)std::max<int64_t>(n, 1) * sizeof(float)); }

ops::GdnParams gdn_params(const Qwen35Config& c, int64_t n_tokens) {
  ops::GdnParams p;
  p.n_tokens = n_tokens;
  p.n_seqs = 1;
  p.n_k_heads = c.n_k_heads;
  p.n_v_heads = c.n_v_heads;
  p.d_k = c.d_k;
  p.d_v = c.d_v;
  p.q_stride = p.k_stride = p.v_stride = c.conv_dim();
  p.scale = 1.0f / std::sqrt((float)c.d_k);
  return p;
}

ops::AttentionParams attn_params(const Qwen35Config& c, int64_t n_tokens, int64_t max_ctx) {
  ops::AttentionParams p;
  p.n_tokens = n_tokens;
  p.n_seqs = 1;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.head_dim = c.head_dim;
  p.max_ctx = max_ctx;
  p.scale = 1.0f / std::sqrt((float)c.head_dim);
  return p;
}

// Y_i (+)= X · W_iᵀ for each (matrix, output) pair; consecutive pairs with the same GEMM inputs share one
// conversion of X.
struct Out {
  const DevMat* m;
  float* y;
  bool accumulate;
  bool exact_x = false;
};
Status gemm(prefill::PrefillGemm& g, const CudaModelOptions& o, std::initializer_list<Out> outs, const float* x,
            int64_t n_tokens, cudaStream_t st) {
  std::vector<prefill::GemmOut> batch;
  GemmInputs in = GemmInputs::kF32;
  int64_t cols = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return {};
    DS_TRY(g.matmul_many(batch, x, cols, n_tokens, cols, in, st));
    batch.clear();
    return {};
  };
  for (const Out& e : outs) {
    const GemmInputs ei = inputs_of(o, e.m->type, e.exact_x);
    if (!batch.empty() && (ei != in || e.m->cols != cols)) DS_TRY(flush());
    in = ei;
    cols = e.m->cols;
    batch.push_back({e.m->type, e.m->w, e.m->rows, e.y, 0, e.accumulate});
  }
  return flush();
}

bool piece_supported(const Qwen35Config& c) {
  bool gdn = false, attn = false;
  for (LayerKind k : c.layers) (k == LayerKind::GatedDeltaNet ? gdn : attn) = true;
  if (gdn && (c.d_k != c.d_v || (c.d_k != 64 && c.d_k != 128))) return false;
  if (attn && ((c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256) || c.n_head % c.n_head_kv != 0 ||
               c.n_head / c.n_head_kv > 16))
    return false;
  return true;
}

}  // namespace

// The scratch, once: every buffer sized for a full piece of the largest shapes of this config.
static Status ensure_prefill_scratch(CudaModel::Impl& I, const Qwen35Config& c, const CudaModelOptions& o) {
  if (I.pf) return {};
  auto pf = std::make_unique<PrefillScratch>();
  const int64_t P = std::max<int64_t>(1, std::min<int64_t>(o.prefill_piece, c.n_ctx_train));
  pf->piece = P;
  int64_t a = 1, b = 1, cc = 1, d = 1, max_w = 1, max_k = c.n_embd;
  bool any4 = false, any2 = false;
  bool any_split = false;
  auto note = [&](const DevMat& m, bool exact_x) {
    max_w = std::max(max_w, m.rows * m.cols);
    max_k = std::max(max_k, m.cols);
    const GemmInputs in = inputs_of(o, m.type, exact_x);
    (in == GemmInputs::kF32 || in == GemmInputs::kTf32 ? any4 : any2) = true;
    any_split = any_split || in == GemmInputs::kF16Split;
  };
  for (const DevLayer& D : I.layers) {
    for (const Proj* p : {&D.in, &D.ffn}) {
      for (size_t i = 0; i < p->mats.size(); i++) {
        int64_t& w = i == 0 ? a : i == 1 ? b : i == 2 ? cc : d;
        w = std::max(w, p->mats[i].rows);
        note(p->mats[i], p == &D.in && i == 0 && D.kind == LayerKind::GatedDeltaNet);
      }
    }
    note(D.out, false);
    note(D.down, false);
  }
  const int64_t H = c.n_embd;
  DS_ASSIGN(pf->h, floats(P * H));
  DS_ASSIGN(pf->xn, floats(P * H));
  DS_ASSIGN(pf->pa, floats(P * a));
  DS_ASSIGN(pf->pb, floats(P * b));
  DS_ASSIGN(pf->pc, floats(P * cc));
  DS_ASSIGN(pf->pd, floats(P * d));
  DS_ASSIGN(pf->u, floats(P * std::max(c.conv_dim(), c.n_head * c.head_dim)));
  DS_ASSIGN(pf->core, floats(P * std::max(c.value_dim(), c.n_head * c.head_dim)));
  const size_t ws = std::max(prefill::gdn_chunked_workspace_bytes(gdn_params(c, P)),
                             prefill::attention_prefill_workspace_bytes(attn_params(c, P, c.n_ctx_train)));
  DS_ASSIGN(pf->ws, DeviceBuffer::alloc(std::max<size_t>(ws, 256)));
  pf->ws_bytes = pf->ws.size();
  DS_ASSIGN(pf->io, DeviceBuffer::alloc((size_t)(2 * P + 2) * sizeof(int32_t)));
  if (I.state_half) {
    DS_ASSIGN(pf->state32, floats(c.n_v_heads * c.d_v * c.d_k));
  }
  CUDA_TRY(cudaMallocHost(&pf->io_host, (size_t)(2 * P + 2) * sizeof(int32_t)));
  DS_ASSIGN(pf->gemm, prefill::PrefillGemm::create());
  if (any4) DS_TRY(pf->gemm->reserve(max_w, P * max_k, GemmInputs::kF32));
  if (any2) DS_TRY(pf->gemm->reserve(max_w, P * max_k, any_split ? GemmInputs::kF16Split : GemmInputs::kF16));
  I.pf = std::move(pf);
  return {};
}

Status CudaModel::prefill_pieces(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out,
                                 bool all_logits) {
  CUDA_TRY(cudaSetDevice(opt_.device));
  DS_TRY(ensure_prefill_scratch(*impl_, cfg_, opt_));
  const int64_t T = (int64_t)tokens.size(), P = impl_->pf->piece, V = cfg_.n_vocab;
  for (int64_t off = 0; off < T; off += P) {
    const int64_t n = std::min(P, T - off);
    const bool last = off + n == T;
    float* out = !logits_out ? nullptr : all_logits ? logits_out + off * V : last ? logits_out : nullptr;
    DS_TRY(prefill_piece(s, tokens.subspan(off, n), out, all_logits, last && logits_out && !all_logits));
  }
  return {};
}

Status CudaModel::prefill_piece(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out,
                                bool all_logits, bool want_last) {
  Impl& I = *impl_;
  PrefillScratch& pf = *I.pf;
  const Qwen35Config& c = cfg_;
  const cudaStream_t st = I.stream;
  const prefill::Mode mode = mode_of(opt_);
  const int64_t n = (int64_t)tokens.size(), P = pf.piece, n0 = s.n_past_;
  const int64_t H = c.n_embd, V = c.n_vocab, Cc = c.conv_dim(), Kd = c.key_dim(), nv = c.n_v_heads;
  const int64_t nh = c.n_head, nkv = c.n_head_kv, hd = c.head_dim, Iff = c.n_ff;
  const float eps = (float)c.rms_eps;
  auto F = [](DeviceBuffer& b) { return b.as<float>(); };
  uint8_t* base = s.buf_.as<uint8_t>();

  // Token ids, positions and the one-sequence table, uploaded together.
  int32_t* ih = pf.io_host;
  for (int64_t t = 0; t < n; t++) {
    ih[t] = tokens[t];
    ih[P + t] = (int32_t)(n0 + t);
  }
  ih[2 * P] = 0;
  ih[2 * P + 1] = (int32_t)n;
  CUDA_TRY(cudaMemcpyAsync(pf.io.data(), ih, (size_t)(2 * P + 2) * sizeof(int32_t), cudaMemcpyHostToDevice, st));
  const int32_t* ids = pf.io.as<int32_t>();
  const int32_t* pos = ids + P;
  const int32_t* seq = ids + 2 * P;

  float *h = F(pf.h), *xn = F(pf.xn), *pa = F(pf.pa), *pb = F(pf.pb), *pc = F(pf.pc), *pd = F(pf.pd);
  float *u = F(pf.u), *core = F(pf.core);
  prefill::PrefillGemm& G = *pf.gemm;

  ops::GetRowsParams er;
  er.type = I.embd.type;
  er.n_rows = I.embd.rows;
  er.n_cols = H;
  er.n_ids = n;
  DS_TRY(get_rows(er, I.embd.w, ids, h, st));
  DS_TRY(check_op("embd", -1, h, n * H, st));

  for (int il = 0; il < (int)c.n_layer; il++) {
    const DevLayer& D = I.layers[il];
    DS_TRY(mk::rms_norm(h, H, D.attn_norm, xn, H, (int)n, H, eps, st));
    DS_TRY(check_op("attn_norm", il, xn, n * H, st));
    if (D.kind == LayerKind::GatedDeltaNet) {
      // pa = qkv [n][Cc], pb = z [n][Vd], pc = beta logits [n][nv], pd = alpha [n][nv]
      DS_TRY(gemm(G, opt_, {{&D.in.mats[0], pa, false, true}, {&D.in.mats[1], pb, false}, {&D.in.mats[2], pc, false},
                            {&D.in.mats[3], pd, false}},
                  xn, n, st));
      DS_TRY(check_op("gdn.qkv", il, pa, n * Cc, st));
      DS_TRY(check_op("gdn.z", il, pb, n * c.value_dim(), st));
      mk::ConvArgs ca;
      ca.x = pa;
      ca.ldx = Cc;
      ca.w = D.conv_w;
      ca.u = u;
      ca.ldu = Cc;
      ca.n_channels = Cc;
      ca.n_norm_channels = 2 * Kd;
      ca.head_dim = (int)c.d_k;
      ca.kernel = (int)c.conv_kernel;
      ca.eps = ops::kL2NormEps;
      DS_TRY(I.flush_lazy(c, D, base));  // lz23: the state as the chunked rule expects it
      float* win = reinterpret_cast<float*>(base + D.conv_off);
      DS_TRY(mk::conv_silu_l2_piece(ca, win, (int)n, st));
      DS_TRY(check_op("gdn.conv", il, u, n * Cc, st));
      DS_TRY(mk::conv_window_advance(ca, win, (int)n, st));
      ops::GdnGatesParams gg;
      gg.n_tokens = n;
      gg.n_v_heads = nv;
      DS_TRY(gdn_gates(gg, pd, pc, D.ssm_a, D.dt_bias, pd, pc, st));  // g in place of alpha, beta of its logits
      // st20: f16 states are widened into pf.state32 for the chunked rule and rounded back after it.
      const int64_t n_state = nv * c.d_v * c.d_k;
      float* state = I.state_half ? F(pf.state32) : reinterpret_cast<float*>(base + D.ssm_off);
      if (I.state_half) DS_TRY(mk::state_widen(base + D.ssm_off, state, n_state, st));
      DS_TRY(prefill::gdn_chunked(gdn_params(c, n), u, u + Kd, u + 2 * Kd, pd, pc, state, seq, nullptr, core,
                                  pf.ws.data(), pf.ws_bytes, st, mode));
      DS_TRY(check_op("gdn.core", il, core, n * c.value_dim(), st));
      if (I.state_half) DS_TRY(mk::state_narrow(state, base + D.ssm_off, n_state, st));
      ops::RmsNormGatedParams rg;
      rg.n_rows = n * nv;
      rg.n_cols = c.d_v;
      rg.eps = eps;
      DS_TRY(rms_norm_gated(rg, core, pb, D.ssm_norm, core, st));
      DS_TRY(check_op("gdn.gated_norm", il, core, n * c.value_dim(), st));
      DS_TRY(gemm(G, opt_, {{&D.out, h, true}}, core, n, st));
    } else {
      DS_TRY(check_op("gdn.out (residual)", il, h, n * H, st));
      // pa = [q | gate] per head [n][nh][2hd], pb = k [n][nkv][hd], pc = v [n][nkv][hd]
      DS_TRY(gemm(G, opt_, {{&D.in.mats[0], pa, false}, {&D.in.mats[1], pb, false}, {&D.in.mats[2], pc, false}},
                  xn, n, st));
      ops::RmsNormParams qn{n, nh, hd, nh * 2 * hd, 2 * hd, nh * hd, hd, eps};
      DS_TRY(rms_norm(qn, pa, D.q_norm, u, st));  // q normalized, packed [n][nh][hd]
      ops::RmsNormParams kn{n, nkv, hd, nkv * hd, hd, nkv * hd, hd, eps};
      DS_TRY(rms_norm(kn, pb, D.k_norm, pb, st));
      ops::RopeParams rq{n, nh, hd, c.n_rot, nh * hd, hd, (float)c.rope_base};
      DS_TRY(rope_neox(rq, u, pos, st));
      ops::RopeParams rk{n, nkv, hd, c.n_rot, nkv * hd, hd, (float)c.rope_base};
      DS_TRY(rope_neox(rk, pb, pos, st));
      void* kc = base + I.k_off(D.attn_index, s.max_ctx_, rec_bytes_);
      void* vc = base + I.v_off(D.attn_index, s.max_ctx_, rec_bytes_);
      DS_TRY(prefill::attention_prefill(attn_params(c, n, s.max_ctx_), u, pb, pc, kc, vc, pos, seq, nullptr, core,
                                        pf.ws.data(), pf.ws_bytes, st, mode, I.kv_half));
      DS_TRY(check_op("attn.v", il, pc, n * nkv * hd, st));
      DS_TRY(check_op("attn.core", il, core, n * nh * hd, st));
      ops::OutputGateParams og{n, nh, hd, nh * 2 * hd, 2 * hd};
      DS_TRY(output_gate(og, core, pa + hd, st));
      DS_TRY(check_op("attn.gated", il, core, n * nh * hd, st));
      DS_TRY(gemm(G, opt_, {{&D.out, h, true}}, core, n, st));
    }
    // FFN: pa = gate (then the activation), pb = up.
    DS_TRY(mk::rms_norm(h, H, D.post_norm, xn, H, (int)n, H, eps, st));
    DS_TRY(gemm(G, opt_, {{&D.ffn.mats[0], pa, false}, {&D.ffn.mats[1], pb, false}}, xn, n, st));
    DS_TRY(check_op("ffn_norm", il, xn, n * H, st));
    DS_TRY(check_op("ffn.gate", il, pa, n * Iff, st));
    DS_TRY(check_op("ffn.up", il, pb, n * Iff, st));
    ops::SwigluParams sw{n, Iff};
    DS_TRY(swiglu(sw, pa, pb, pa, st));
    DS_TRY(check_op("ffn.act", il, pa, n * Iff, st));
    DS_TRY(gemm(G, opt_, {{&D.down, h, true}}, pa, n, st));
    DS_TRY(check_op("ffn.down (residual)", il, h, n * H, st));
  }

  // Logits: every row in steps of the step scratch (max_tokens rows), or the last row only.
  const DevMat& o = I.output;
  float* y = I.y.as<float>();
  float* lg = I.logits.as<float>();
  if (logits_out && all_logits) {
    for (int64_t r = 0; r < n; r += I.max_tokens) {
      const int m = (int)std::min<int64_t>(I.max_tokens, n - r);
      DS_TRY(mk::rms_norm(h + r * H, H, I.output_norm, y, H, m, H, eps, st));
      DS_TRY(matvec_batched(o.type, o.w, o.rows, o.cols, y, lg, m, st));
      CUDA_TRY(cudaMemcpyAsync(I.logits_host, lg, (size_t)(m * V) * sizeof(float), cudaMemcpyDeviceToHost, st));
      CUDA_TRY(cudaStreamSynchronize(st));
      std::memcpy(logits_out + r * V, I.logits_host, (size_t)(m * V) * sizeof(float));
    }
  } else if (want_last) {
    DS_TRY(mk::rms_norm(h + (n - 1) * H, H, I.output_norm, y, H, 1, H, eps, st));
    DS_TRY(matvec_batched(o.type, o.w, o.rows, o.cols, y, lg, 1, st));
    CUDA_TRY(cudaMemcpyAsync(I.logits_host, lg, (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, st));
  }
  CUDA_TRY(cudaStreamSynchronize(st));  // the piece's one synchronisation (io_host is reused by the next)
  if (want_last && logits_out) std::memcpy(logits_out, I.logits_host, (size_t)V * sizeof(float));
  s.n_past_ += n;
  return {};
}

bool CudaModel::piece_prefill_supported() const { return piece_supported(cfg_); }

}  // namespace ds::cuda

// CudaModel: load (checks, one weight arena, scratch), per-sequence states and snapshots (qwen35_cuda.cuh).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "cuda/dequant.h"
#include "cuda/model/model_impl.cuh"

namespace ds::cuda {
namespace {

// Elements per block as the matvec kernels see a row (quant_traits.cuh: float types use 8-element blocks).
int64_t kernel_block_elems(GgmlType t) {
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) return 8;
  return ggml_type_info(t)->block_size;
}

Status check_matrix(const QTensor& q) {
  DS_TRY(check_weight_type(q.type, q.name));
  if (q.n_cols % kernel_block_elems(q.type) != 0 || q.n_cols % 4 != 0)
    return cu_err("cuda: tensor '{}' ({}) has rows of {} elements; the CUDA kernels need a multiple of {} and of 4",
                  q.name, type_cstr(q.type), q.n_cols, kernel_block_elems(q.type));
  return {};
}

// Everything the kernels cannot run, found before the GPU is touched.
Status check_model(const Qwen35Model& m) {
  const Qwen35Config& c = m.cfg;
  // Counted here rather than with Qwen35Config::n_gdn(): ds_cuda uses the model headers only, no ds_model code.
  int64_t n_gdn = 0, n_attn = 0;
  for (LayerKind k : c.layers) (k == LayerKind::GatedDeltaNet ? n_gdn : n_attn)++;
  DS_TRY(check_matrix(m.token_embd));
  DS_TRY(check_matrix(m.output));
  for (const Qwen35Layer& L : m.layers) {
    for (const QTensor* q : {&L.ffn_gate, &L.ffn_up, &L.ffn_down}) DS_TRY(check_matrix(*q));
    if (L.kind == LayerKind::GatedDeltaNet) {
      for (const QTensor* q : {&L.gdn.qkv, &L.gdn.gate, &L.gdn.beta, &L.gdn.alpha, &L.gdn.out}) DS_TRY(check_matrix(*q));
    } else {
      for (const QTensor* q : {&L.attn.q, &L.attn.k, &L.attn.v, &L.attn.o}) DS_TRY(check_matrix(*q));
    }
  }
  if (n_gdn > 0) {
    if (!mk::gdn_supports((int)c.d_k) || c.d_v != c.d_k)
      return cu_err("cuda: GDN head dims dk {} / dv {} are not supported by the CUDA kernels (dk = dv = 64 or 128)",
                    c.d_k, c.d_v);
    if (c.conv_kernel > mk::kMaxConvKernel)
      return cu_err("cuda: ssm.conv_kernel {} is larger than the CUDA kernel's limit {}", c.conv_kernel,
                    mk::kMaxConvKernel);
  }
  if (n_attn > 0 && !mk::attention_supports((int)c.head_dim, (int)(c.n_head / c.n_head_kv)))
    return cu_err("cuda: attention head dim {} with {} q heads per kv head is not supported by the CUDA kernels "
                  "(head dim 32/64/128/256, at most {} q heads per kv head)",
                  c.head_dim, c.n_head / c.n_head_kv, mk::kMaxAttnGroup);
  if (c.n_embd % 4 != 0 || c.n_ff % 4 != 0)
    return cu_err("cuda: hidden size {} and feed-forward size {} must be multiples of 4", c.n_embd, c.n_ff);
  return {};
}

// The weight arena: pieces placed at 256-byte aligned offsets, uploaded once.
class ArenaPlan {
 public:
  // Places `parts` back to back (a concatenation); returns the offset of the first byte.
  size_t add(std::vector<std::pair<const void*, size_t>> parts) {
    const size_t off = (size_ + 255) / 256 * 256;
    size_t at = off;
    for (auto& [p, n] : parts) {
      pieces_.push_back({p, n, at});
      at += n;
    }
    size_ = at;
    return off;
  }
  size_t add_floats(const std::vector<float>& v) { return add({{v.data(), v.size() * sizeof(float)}}); }
  size_t size() const { return size_; }
  Status upload(DeviceBuffer& buf) const {
    for (const auto& p : pieces_)
      if (p.n) CUDA_TRY(cudaMemcpy(buf.as<uint8_t>() + p.off, p.src, p.n, cudaMemcpyHostToDevice));
    return {};
  }

 private:
  struct Piece {
    const void* src;
    size_t n;
    size_t off;
  };
  std::vector<Piece> pieces_;
  size_t size_ = 0;
};

// A DevMat whose pointer is an arena offset until the arena exists (fixed up by `resolve`).
DevMat plan_matrix(ArenaPlan& plan, const std::vector<const QTensor*>& parts) {
  DevMat d;
  d.type = parts[0]->type;
  d.cols = parts[0]->n_cols;
  std::vector<std::pair<const void*, size_t>> pieces;
  for (const QTensor* q : parts) {
    d.name += (d.name.empty() ? "" : "+") + q->name;
    d.rows += q->n_rows;
    d.bytes += q->n_bytes;
    pieces.push_back({q->data, q->n_bytes});
  }
  d.w = reinterpret_cast<const uint8_t*>(plan.add(pieces));
  return d;
}

Proj plan_proj(ArenaPlan& plan, const std::vector<const QTensor*>& mats) {
  Proj p;
  size_t i = 0;
  while (i < mats.size()) {
    size_t j = i + 1;
    while (j < mats.size() && mats[j]->type == mats[i]->type && mats[j]->n_cols == mats[i]->n_cols) j++;
    int64_t row_off = 0;
    for (size_t k = i; k < j; k++) {
      p.views.push_back({(int)p.groups.size(), row_off});
      row_off += mats[k]->n_rows;
    }
    p.groups.push_back(plan_matrix(plan, std::vector<const QTensor*>(mats.begin() + i, mats.begin() + j)));
    i = j;
  }
  return p;
}

template <class T>
void resolve(T*& p, uint8_t* base) {
  p = reinterpret_cast<T*>(base + reinterpret_cast<uintptr_t>(p));
}
void resolve(DevMat& d, uint8_t* base) { resolve(d.w, base); }

Result<DeviceBuffer> alloc_floats(int64_t n) { return DeviceBuffer::alloc((size_t)std::max<int64_t>(n, 0) * sizeof(float)); }

}  // namespace

const char* precision_name(Precision p) { return p == Precision::kPrecise ? "precise" : "fast"; }

CudaModel::Impl::~Impl() {
  pf.reset();  // its cuBLAS handle is bound to the stream destroyed below
  for (auto& [k, g] : graphs) cudaGraphExecDestroy(g);
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  if (io_host) cudaFreeHost(io_host);
  if (logits_host) cudaFreeHost(logits_host);
  if (stream) cudaStreamDestroy(stream);
}

CudaModel::~CudaModel() {
  if (impl_ && impl_->stream) cudaStreamSynchronize(impl_->stream);
}

namespace {

// lz23: the lazy delta rule's length, from the options or else DS_GDN_LAZY; 0 (and 1: a history of no tokens) is
// the plain rule. Checked with the other options, before any device call.
Result<int> gdn_lazy_length(const CudaModelOptions& o) {
  int n = o.gdn_lazy;
  if (const char* e = std::getenv("DS_GDN_LAZY"); e && e[0] && !n) {
    const char* end = e + std::strlen(e);
    if (auto [p, ec] = std::from_chars(e, end, n); ec != std::errc() || p != end)
      return cu_err("cuda: DS_GDN_LAZY='{}' is not a whole number (0 or 1: off, 2 .. {}: the lazy rule's length)", e,
                    mk::kMaxGdnLazy);
  }
  if (n < 0 || n > mk::kMaxGdnLazy)
    return cu_err("cuda: lazy delta rule length {} (CudaModelOptions::gdn_lazy or DS_GDN_LAZY) outside 0 .. {}", n,
                  mk::kMaxGdnLazy);
  return n == 1 ? 0 : n;
}

}  // namespace

Result<std::unique_ptr<CudaModel>> CudaModel::load(const Qwen35Model& m, const CudaModelOptions& o) {
  DS_TRY(check_model(m));
  if (o.max_tokens < 1 || o.max_tokens > kMaxStepTokens)
    return cu_err("cuda: max_tokens {} outside [1, {}]", o.max_tokens, kMaxStepTokens);
  if (o.prefill_piece < 1) return cu_err("cuda: prefill_piece {} must be >= 1", o.prefill_piece);
  if (o.fast_gemm_inputs < -1 || o.fast_gemm_inputs > 4)
    return cu_err("cuda: fast_gemm_inputs {} outside [-1, 4]", o.fast_gemm_inputs);
  DS_ASSIGN(const int lazy, gdn_lazy_length(o));
  if (device_count() == 0) return cu_err("cuda: no CUDA device found (no GPU, or no driver)");
  CUDA_TRY(cudaSetDevice(o.device));

  std::unique_ptr<CudaModel> cm(new CudaModel());
  cm->cfg_ = m.cfg;
  cm->opt_ = o;
  cm->impl_ = std::make_unique<Impl>();
  Impl& I = *cm->impl_;
  const Qwen35Config& c = cm->cfg_;
  I.max_tokens = o.max_tokens;
  CUDA_TRY(cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking));

  // Plan the arena: matrices in their GGUF types, same-input projections concatenated, then f32 vectors.
  ArenaPlan plan;
  I.embd = plan_matrix(plan, {&m.token_embd});
  const bool tied = m.output.data == m.token_embd.data;
  if (tied) {
    I.output = I.embd;
    I.output.name = m.output.name;
  } else {
    I.output = plan_matrix(plan, {&m.output});
  }
  I.output_norm = reinterpret_cast<const float*>(plan.add_floats(m.output_norm));
  std::vector<float> inv_freq(c.n_rot / 2);
  for (int64_t i = 0; i < c.n_rot / 2; i++)  // as cpu::rope_neox computes it
    inv_freq[i] = 1.0f / std::pow((float)c.rope_base, (float)(2 * i) / (float)c.n_rot);
  I.inv_freq = reinterpret_cast<const float*>(plan.add_floats(inv_freq));

  I.layers.resize(c.n_layer);
  size_t rec = 0;
  int n_attn = 0;
  I.state_half = o.state_f16 || mk::env_on("DS_STATE_F16", false);
  const size_t st_elem = I.state_half ? 2 : sizeof(float);
  I.gdn_lazy = lazy;
  auto fl = [&](const std::vector<float>& v) { return reinterpret_cast<const float*>(plan.add_floats(v)); };
  for (int64_t il = 0; il < c.n_layer; il++) {
    const Qwen35Layer& L = m.layers[il];
    DevLayer& D = I.layers[il];
    D.kind = L.kind;
    D.attn_norm = fl(L.attn_norm);
    D.post_norm = fl(L.post_norm);
    D.ffn = plan_proj(plan, {&L.ffn_gate, &L.ffn_up});
    D.down = plan_matrix(plan, {&L.ffn_down});
    if (L.kind == LayerKind::GatedDeltaNet) {
      D.in = plan_proj(plan, {&L.gdn.qkv, &L.gdn.gate, &L.gdn.beta, &L.gdn.alpha});
      D.out = plan_matrix(plan, {&L.gdn.out});
      D.conv_w = fl(L.gdn.conv);
      D.dt_bias = fl(L.gdn.dt_bias);
      D.ssm_a = fl(L.gdn.ssm_a);
      D.ssm_norm = fl(L.gdn.norm);
      D.conv_off = (int64_t)rec;
      rec += ((c.conv_kernel - 1) * c.conv_dim() * sizeof(float) + 255) / 256 * 256;
      D.ssm_off = (int64_t)rec;
      rec += (c.n_v_heads * c.d_v * c.d_k * st_elem + 255) / 256 * 256;
      if (I.gdn_lazy) {
        D.hist_off = (int64_t)rec;
        rec += (c.n_v_heads * mk::gdn_hist_floats((int)c.d_k, I.gdn_lazy) * sizeof(float) + 255) / 256 * 256;
      }
    } else {
      D.in = plan_proj(plan, {&L.attn.q, &L.attn.k, &L.attn.v});
      D.out = plan_matrix(plan, {&L.attn.o});
      D.q_norm = fl(L.attn.q_norm);
      D.k_norm = fl(L.attn.k_norm);
      D.attn_index = n_attn++;
    }
  }
  cm->rec_bytes_ = rec;
  I.kv_half = o.kv_f16 || mk::env_on("DS_KV_F16", false);
  I.certify = o.certify_head && mk::env_on("DS_HEAD_CERTIFY", true);
  I.kv_row_bytes = c.n_head_kv * c.head_dim * (int64_t)(I.kv_half ? 2 : sizeof(float));
  cm->kv_bytes_per_pos_ = (size_t)(2 * n_attn) * I.kv_row_bytes;

  DS_ASSIGN(I.arena, DeviceBuffer::alloc(plan.size()));
  DS_TRY(plan.upload(I.arena));
  cm->weight_bytes_ = plan.size();
  uint8_t* base = I.arena.as<uint8_t>();
  resolve(I.embd, base);
  resolve(I.output, base);
  resolve(I.output_norm, base);
  resolve(I.inv_freq, base);
  for (DevLayer& D : I.layers) {
    for (Proj* p : {&D.in, &D.ffn})
      for (DevMat& g : p->groups) resolve(g, base);
    resolve(D.out, base);
    resolve(D.down, base);
    for (const float** f : {&D.attn_norm, &D.post_norm, &D.conv_w, &D.dt_bias, &D.ssm_a, &D.ssm_norm, &D.q_norm,
                            &D.k_norm})
      if (*f) resolve(*f, base);
  }

  // Each projection matrix alone, for the prefill GEMMs: a row range of its group (rows start on block bounds).
  for (DevLayer& D : I.layers) {
    for (Proj* p : {&D.in, &D.ffn}) {
      p->mats.clear();
      for (size_t i = 0; i < p->views.size(); i++) {
        const Proj::View& v = p->views[i];
        const DevMat& g = p->groups[v.group];
        const bool last = i + 1 == p->views.size() || p->views[i + 1].group != v.group;
        const int64_t end = last ? g.rows : p->views[i + 1].row_off;
        const size_t row_bytes = ggml_row_bytes(*ggml_type_info(g.type), (uint64_t)g.cols);
        DevMat m = g;
        m.rows = end - v.row_off;
        m.w = g.w + (size_t)v.row_off * row_bytes;
        m.bytes = (size_t)m.rows * row_bytes;
        p->mats.push_back(m);
      }
    }
  }

  // Scratch: the projection buffer holds the larger of a layer's input projections and its ffn gate+up.
  int64_t proj_rows = 0;
  for (DevLayer& D : I.layers) {
    for (Proj* p : {&D.in, &D.ffn}) {
      int64_t off = 0;
      p->out_off.clear();
      for (const DevMat& g : p->groups) {
        p->out_off.push_back(off);
        off += (int64_t)I.max_tokens * g.rows;
      }
      proj_rows = std::max(proj_rows, p->total_rows());
    }
  }
  const int64_t Tm = I.max_tokens, H = c.n_embd;
  I.proj_floats = proj_rows;
  I.o_floats = std::max(c.value_dim(), c.n_head * c.head_dim);
  DS_ASSIGN(I.h, alloc_floats(Tm * H));
  DS_ASSIGN(I.xn, alloc_floats(Tm * H));
  DS_ASSIGN(I.mix, alloc_floats(Tm * H));
  DS_ASSIGN(I.y, alloc_floats(Tm * H));
  DS_ASSIGN(I.proj, alloc_floats(Tm * proj_rows));
  DS_ASSIGN(I.u, alloc_floats(Tm * c.conv_dim()));
  DS_ASSIGN(I.o, alloc_floats(Tm * I.o_floats));
  DS_ASSIGN(I.qr, alloc_floats(Tm * c.n_head * c.head_dim));
  DS_ASSIGN(I.act, alloc_floats(Tm * c.n_ff));
  DS_ASSIGN(I.logits, alloc_floats(Tm * c.n_vocab));
  DS_ASSIGN(I.part, alloc_floats(Tm * c.n_head * mk::kMaxAttnSplits * (c.head_dim + 2)));
  DS_ASSIGN(I.attn_cnt, DeviceBuffer::alloc((size_t)std::max<int64_t>(Tm * c.n_head_kv, 1) * sizeof(unsigned)));
  DS_TRY(I.attn_cnt.fill_zero(I.stream));  // on the step stream: ordered before every step
  DS_ASSIGN(I.io_dev, DeviceBuffer::alloc(sizeof(mk::StepIO)));
  CUDA_TRY(cudaMallocHost(&I.io_host, sizeof(mk::StepIO)));
  std::memset(I.io_host, 0, sizeof(mk::StepIO));
  CUDA_TRY(cudaMallocHost(&I.logits_host, (size_t)(Tm * c.n_vocab) * sizeof(float)));
  if (cm->certify_takes((int)Tm)) {  // cg38: the certified head's row norms and scratch, with the other step buffers
    DS_ASSIGN(I.head_l1, alloc_floats(c.n_vocab));
    DS_ASSIGN(cm->sel_.cert_scratch, DeviceBuffer::alloc(certify_scratch_bytes((int)Tm, c.n_vocab)));
    DS_TRY(row_l1_norms(I.output.type, I.output.w, c.n_vocab, H, I.head_l1.as<float>(), I.stream));
  }
  return std::move(cm);  // nvcc does not apply the implicit move into Result
}

bool CudaModel::kv_f16() const { return impl_->kv_half; }
bool CudaModel::state_f16() const { return impl_->state_half; }

size_t CudaModel::state_bytes(int64_t max_ctx) const { return rec_bytes_ + (size_t)max_ctx * kv_bytes_per_pos_; }

Result<std::unique_ptr<CudaSeqState>> CudaModel::create_state(int64_t max_ctx) const {
  if (max_ctx < 1) return cu_err("cuda: sequence state: max_ctx = {}, expected >= 1", max_ctx);
  if (max_ctx > cfg_.n_ctx_train)
    return cu_err("cuda: sequence state: max_ctx = {} exceeds the model's context_length {}", max_ctx,
                  cfg_.n_ctx_train);
  CUDA_TRY(cudaSetDevice(opt_.device));
  std::unique_ptr<CudaSeqState> s(new CudaSeqState());
  s->owner_ = this;
  s->stream_ = impl_->stream;
  s->max_ctx_ = max_ctx;
  s->rec_bytes_ = rec_bytes_;
  DS_ASSIGN(s->buf_, DeviceBuffer::alloc(state_bytes(max_ctx)));
  CUDA_TRY(cudaMemsetAsync(s->buf_.data(), 0, s->buf_.size(), impl_->stream));
  CUDA_TRY(cudaStreamSynchronize(impl_->stream));
  return std::move(s);
}

Status CudaSeqState::reset() {
  // Only the recurrent part needs zeros: KV rows at or past n_past are never read.
  if (rec_bytes_) CUDA_TRY(cudaMemsetAsync(buf_.data(), 0, rec_bytes_, stream_));
  CUDA_TRY(cudaStreamSynchronize(stream_));
  n_past_ = 0;
  return {};
}

Result<std::unique_ptr<CudaSnapshot>> CudaModel::save(const CudaSeqState& s) const { return save(s, nullptr, 0); }

Result<std::unique_ptr<CudaSnapshot>> CudaModel::save(const CudaSeqState& s, std::unique_ptr<CudaSnapshot> reuse,
                                                      int64_t capacity_tokens) const {
  if (s.owner_ != this) return cu_err("cuda: save: the sequence state belongs to another model");
  const int64_t n = s.n_past_, kvr = impl_->kv_row_bytes;
  const size_t need = state_bytes(n);
  std::unique_ptr<CudaSnapshot> snap;
  if (reuse && reuse->owner_ == this && reuse->buf_.size() >= need) snap = std::move(reuse);
  else snap = std::make_unique<CudaSnapshot>();
  snap->owner_ = this;
  snap->n_tokens_ = s.n_past_;
  snap->max_ctx_ = s.max_ctx_;
  if (snap->buf_.size() < need) {
    DS_ASSIGN(snap->buf_, DeviceBuffer::alloc(state_bytes(std::max(n, capacity_tokens))));
  }
  cudaStream_t st = impl_->stream;
  uint8_t* dst = snap->buf_.as<uint8_t>();
  const uint8_t* src = s.buf_.as<uint8_t>();
  if (rec_bytes_) CUDA_TRY(cudaMemcpyAsync(dst, src, rec_bytes_, cudaMemcpyDeviceToDevice, st));
  for (const DevLayer& D : impl_->layers) {
    if (D.attn_index < 0 || n == 0) continue;
    const int64_t a = D.attn_index;
    uint8_t* kd = dst + rec_bytes_ + 2 * a * n * kvr;
    CUDA_TRY(cudaMemcpyAsync(kd, src + impl_->k_off(D.attn_index, s.max_ctx_, rec_bytes_), n * kvr,
                             cudaMemcpyDeviceToDevice, st));
    CUDA_TRY(cudaMemcpyAsync(kd + n * kvr, src + impl_->v_off(D.attn_index, s.max_ctx_, rec_bytes_), n * kvr,
                             cudaMemcpyDeviceToDevice, st));
  }
  return std::move(snap);  // no synchronisation: the copies are ordered before the stream's later work
}

Result<std::vector<float>> CudaModel::download(const CudaSeqState& s) const {
  // lz23: the lazy rule's histories applied first (the state they stand for, written), then left out as zeros: the
  // download is the state, whatever the lazy rule had pending.
  for (const DevLayer& D : impl_->layers) DS_TRY(impl_->flush_lazy(cfg_, D, const_cast<uint8_t*>(s.buf_.as<uint8_t>())));
  DS_ASSIGN(auto snap, save(s));
  CUDA_TRY(cudaStreamSynchronize(impl_->stream));  // save() does not wait for its copies
  std::vector<float> out(snap->buf_.size() / sizeof(float));
  if (!out.empty()) CUDA_TRY(cudaMemcpy(out.data(), snap->buf_.data(), out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (impl_->gdn_lazy)
    for (const DevLayer& D : impl_->layers)
      if (D.kind == LayerKind::GatedDeltaNet) {
        const int64_t n = cfg_.n_v_heads * mk::gdn_hist_floats((int)cfg_.d_k, impl_->gdn_lazy);
        std::fill_n(out.begin() + D.hist_off / (int64_t)sizeof(float), n, 0.f);
      }
  return out;
}

Status CudaModel::restore(CudaSeqState& s, const CudaSnapshot& snap) const {
  if (s.owner_ != this || snap.owner_ != this) return cu_err("cuda: restore: state or snapshot of another model");
  const int64_t n = snap.n_tokens_, kvr = impl_->kv_row_bytes;
  if (n > s.max_ctx_)
    return cu_err("cuda: restore: snapshot of {} tokens does not fit a state of {} positions", n, s.max_ctx_);
  cudaStream_t st = impl_->stream;
  const uint8_t* src = snap.buf_.as<uint8_t>();
  uint8_t* dst = s.buf_.as<uint8_t>();
  if (rec_bytes_) CUDA_TRY(cudaMemcpyAsync(dst, src, rec_bytes_, cudaMemcpyDeviceToDevice, st));
  for (const DevLayer& D : impl_->layers) {
    if (D.attn_index < 0 || n == 0) continue;
    const uint8_t* ks = src + rec_bytes_ + 2 * (int64_t)D.attn_index * n * kvr;
    CUDA_TRY(cudaMemcpyAsync(dst + impl_->k_off(D.attn_index, s.max_ctx_, rec_bytes_), ks, n * kvr,
                             cudaMemcpyDeviceToDevice, st));
    CUDA_TRY(cudaMemcpyAsync(dst + impl_->v_off(D.attn_index, s.max_ctx_, rec_bytes_), ks + n * kvr, n * kvr,
                             cudaMemcpyDeviceToDevice, st));
  }
  CUDA_TRY(cudaStreamSynchronize(st));
  s.n_past_ = n;
  return {};
}

}  // namespace ds::cuda

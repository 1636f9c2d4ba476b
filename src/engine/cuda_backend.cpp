#include "engine/cuda_backend.h"

#if DS_HAVE_CUDA
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/log.h"

#include "cuda/model/qwen35_cuda.cuh"
#include "model/qwen35.h"

namespace ds::engine {
namespace {

// Device buffers of dropped snapshots, kept for the next save (serve11): the engine saves two snapshots per request
// (prompt end, reply end) and its prefix cache drops old ones as it goes, so without reuse every save was a
// cudaMalloc and every drop a cudaFree (which waits for the device) of ~90 MB (9B at 512-640 positions), on the
// engine thread between two decode steps. Snapshots get room for a multiple of kRoundTokens positions, so that
// the buffers of the two kinds of snapshot fit each other's needs. At most kKeep buffers wait here.
// DS_SNAPSHOT_POOL=0: no reuse (every save allocates exactly, every drop frees; for A/B runs).
class SnapshotPool {
 public:
  static constexpr int64_t kRoundTokens = 256;
  static constexpr size_t kKeep = 2;

  static bool enabled() {
    static const bool on = [] {
      const char* e = std::getenv("DS_SNAPSHOT_POOL");
      return !(e && e[0] == '0');
    }();
    return on;
  }
  // The smallest kept buffer of at least `bytes`, or null.
  std::unique_ptr<cuda::CudaSnapshot> take(size_t bytes) {
    std::lock_guard lk(m_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); i++)
      if (free_[i]->bytes() >= bytes && (best == free_.size() || free_[i]->bytes() < free_[best]->bytes())) best = i;
    if (best == free_.size()) return nullptr;
    auto out = std::move(free_[best]);
    free_.erase(free_.begin() + (std::ptrdiff_t)best);
    return out;
  }
  void give(std::unique_ptr<cuda::CudaSnapshot> s) {
    std::unique_ptr<cuda::CudaSnapshot> drop;  // freed outside the lock
    std::lock_guard lk(m_);
    free_.push_back(std::move(s));
    if (free_.size() > kKeep) {  // the smallest goes: larger buffers fit more needs
      auto it = std::min_element(free_.begin(), free_.end(), [](auto& a, auto& b) { return a->bytes() < b->bytes(); });
      drop = std::move(*it);
      free_.erase(it);
    }
  }
  void clear() {
    std::lock_guard lk(m_);
    free_.clear();
    rows_.clear();
  }
  // The [V]-float device buffers of reply-end snapshots' logits (save_with_row), kept the same way.
  cuda::DeviceBuffer take_row(size_t bytes) {
    std::lock_guard lk(m_);
    for (size_t i = 0; i < rows_.size(); i++)
      if (rows_[i].size() == bytes) {
        cuda::DeviceBuffer b = std::move(rows_[i]);
        rows_.erase(rows_.begin() + (std::ptrdiff_t)i);
        return b;
      }
    return {};
  }
  void give_row(cuda::DeviceBuffer b) {
    cuda::DeviceBuffer drop;  // freed outside the lock
    std::lock_guard lk(m_);
    if (rows_.size() < kKeepRows) rows_.push_back(std::move(b));
    else drop = std::move(b);
  }

 private:
  static constexpr size_t kKeepRows = 8;
  std::mutex m_;
  std::vector<std::unique_ptr<cuda::CudaSnapshot>> free_;
  std::vector<cuda::DeviceBuffer> rows_;
};

// DS_SNAPSHOT_LOGITS=0: reply-end snapshots download their logits row to the host (the path before host13).
bool snapshot_logits_on_device() {
  static const bool on = [] {
    const char* e = std::getenv("DS_SNAPSHOT_LOGITS");
    return !(e && e[0] == '0');
  }();
  return on;
}

class CudaSnapshotBox : public Snapshot {
 public:
  CudaSnapshotBox(std::unique_ptr<cuda::CudaSnapshot> s, std::shared_ptr<SnapshotPool> pool)
      : s_(std::move(s)), pool_(std::move(pool)) {}
  ~CudaSnapshotBox() override {
    if (pool_) {
      pool_->give(std::move(s_));
      if (!logits_.empty()) pool_->give_row(std::move(logits_));
    }
  }
  size_t bytes() const override { return s_->bytes() + logits_.size(); }
  int32_t n_tokens() const override { return (int32_t)s_->n_tokens(); }
  const cuda::CudaSnapshot& get() const { return *s_; }
  // The logits after the last token, on the device (save_with_row; written by a copy ordered on the model's stream).
  void keep_logits(cuda::DeviceBuffer b) { logits_ = std::move(b); }
  bool has_logits() const override { return !logits_.empty(); }
  Status logits(std::span<float> out) const override {
    if (logits_.empty() || out.size() * sizeof(float) < logits_.size())
      return err("cuda backend: snapshot logits: none kept, or a buffer of {} floats", out.size());
    // The row was written by a copy on the model's stream (save_with_row); the box does not hold the model (it may
    // outlive a step), so it waits for the device. This runs only when a whole prompt is served from the cache.
    if (cudaDeviceSynchronize() != cudaSuccess) return err("cuda backend: snapshot logits: the device failed");
    return logits_.download(out.data(), logits_.size());
  }

 private:
  std::unique_ptr<cuda::CudaSnapshot> s_;
  cuda::DeviceBuffer logits_;  // [V] floats, or empty
  std::shared_ptr<SnapshotPool> pool_;  // null: freed with the box
};

class CudaBackend : public Backend {
 public:
  CudaBackend(std::unique_ptr<cuda::CudaModel> m, std::vector<std::unique_ptr<cuda::CudaSeqState>> slots,
              int32_t n_ctx)
      : m_(std::move(m)), slots_(std::move(slots)), n_ctx_(n_ctx) {
    if (SnapshotPool::enabled()) pool_ = std::make_shared<SnapshotPool>();
  }
  ~CudaBackend() override {
    if (pool_) pool_->clear();  // snapshots that outlive the backend free their own buffers
    slots_.clear();             // the states before the model that owns their stream
  }

  std::string name() const override { return "cuda"; }
  int32_t n_vocab() const override { return (int32_t)m_->cfg().n_vocab; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_slots() const override { return (int32_t)slots_.size(); }
  MemoryInfo memory() const override { return {m_->recurrent_state_bytes(), m_->kv_bytes_per_token()}; }

  Status reset(int32_t slot) override {
    DS_TRY(check_idle("reset"));
    DS_TRY(check_slot(slot));
    return slots_[slot]->reset();
  }

  Status prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) override {
    DS_TRY(check_idle("prefill"));
    DS_TRY(check_slot(slot));
    if (!logits_out.empty() && logits_out.size() < (size_t)n_vocab())
      return err("cuda backend: prefill: logits buffer of {} floats, need {}", logits_out.size(), n_vocab());
    return m_->prefill(*slots_[slot], tokens, logits_out.empty() ? nullptr : logits_out.data(), false);
  }

  Status decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                std::span<float> logits_out) override {
    DS_TRY(check_idle("decode"));
    const size_t B = slots.size(), V = (size_t)n_vocab();
    if (B == 0 || tokens.size() != B)
      return err("cuda backend: decode: {} slots and {} tokens (expected the same, >= 1)", B, tokens.size());
    if (!logits_out.empty() && logits_out.size() < B * V)
      return err("cuda backend: decode: logits buffer of {} floats, need {}", logits_out.size(), B * V);
    std::vector<cuda::CudaSeqState*> states(B);
    for (size_t i = 0; i < B; i++) {
      DS_TRY(check_slot(slots[i]));
      states[i] = slots_[slots[i]].get();
    }
    const size_t step = (size_t)m_->options().max_tokens;
    for (size_t i = 0; i < B; i += step) {
      const size_t n = std::min(step, B - i);
      float* out = logits_out.empty() ? nullptr : logits_out.data() + i * V;
      DS_TRY(m_->decode(std::span<cuda::CudaSeqState* const>(states).subspan(i, n), tokens.subspan(i, n), out));
    }
    return {};
  }

  // On the device when the batch is one step and the vocabulary fits the selection kernels; else the host default.
  bool device_select(size_t B, const SelectSpec& spec) const {
    return B > 0 && B <= (size_t)m_->options().max_tokens && cuda::select_supported((int64_t)n_vocab()) &&
           spec.k <= cuda::kMaxSelect;
  }
  Status decode_select(std::span<const int32_t> slots, std::span<const int32_t> tokens, const SelectSpec& spec,
                       Selection& out) override {
    DS_TRY(check_idle("decode_select"));
    if (!device_select(slots.size(), spec)) {
      device_rows_ = false;
      return Backend::decode_select(slots, tokens, spec, out);
    }
    DS_TRY(decode_select_begin(slots, tokens, spec));
    return decode_select_end(out);
  }

  // The step is launched (a graph replay plus the selection and its downloads) and this returns at once.
  Status decode_select_begin(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                             const SelectSpec& spec) override {
    DS_TRY(check_idle("decode_select_begin"));
    const size_t B = slots.size();
    device_rows_ = false;
    if (!device_select(B, spec)) {  // the host default runs the step here, end hands it over
      DS_TRY(Backend::decode_select_begin(slots, tokens, spec));
      in_flight_ = host_step_ = true;
      return {};
    }
    DS_TRY(check_spec(spec, B));
    if (tokens.size() != B) return err("cuda backend: decode: {} slots and {} tokens", B, tokens.size());
    std::vector<cuda::CudaSeqState*> states(B);
    for (size_t i = 0; i < B; i++) {
      DS_TRY(check_slot(slots[i]));
      states[i] = slots_[slots[i]].get();
    }
    DS_TRY(m_->decode_select_begin(states, tokens, spec.k, spec.lse, spec.full_rows));
    in_flight_ = true;
    host_step_ = false;
    fl_rows_ = B;
    fl_k_ = spec.k;
    fl_lse_ = spec.lse;
    fl_full_ = spec.full_rows.size();
    return {};
  }

  Status decode_select_end(Selection& out) override {
    if (!in_flight_) return err("cuda backend: decode_select_end: no step in flight");
    in_flight_ = false;
    if (host_step_) return Backend::decode_select_end(out);
    const size_t B = fl_rows_, V = (size_t)n_vocab();
    out.full.resize(fl_full_ * V);
    cuda::SelectResultDev r;
    DS_TRY(m_->decode_select_end(out.full.data(), r));
    out.rows.resize(B);
    for (size_t i = 0; i < B; i++) {
      sampler::RowSummary& row = out.rows[i];
      row.argmax = r.argmax[i];
      row.max = r.max[i];
      row.lse = fl_lse_ ? r.lse[i] : 0;
      row.nonfinite = r.nonfinite[i];
      row.top.clear();
      for (int j = 0; j < fl_k_; j++) {
        const int32_t id = r.top_id[i * cuda::kMaxSelect + j];
        if (id < 0) break;  // a row shorter than k
        row.top.push_back({id, r.top_logit[i * cuda::kMaxSelect + j]});
      }
    }
    device_rows_ = true;
    return {};
  }

  Status last_row(int32_t row, std::span<float> out) override {
    DS_TRY(check_idle("last_row"));
    if (!device_rows_) return Backend::last_row(row, out);
    if (out.size() < (size_t)n_vocab()) return err("cuda backend: last_row: buffer of {} floats", out.size());
    return m_->last_row(row, out.data());
  }

  // Reply-end snapshots keep the logits row on the device: a D2D copy ordered on the stream, no download and no
  // host synchronisation (host13; it was a 1 MB download through pageable memory with a sync, in the sample
  // phase). The row reaches the host only on a prefix hit that covers the whole prompt (Snapshot::logits).
  Result<std::unique_ptr<Snapshot>> save_with_row(int32_t slot, int32_t row, std::vector<float>& host_logits) override {
    DS_TRY(check_idle("save_with_row"));
    if (!device_rows_ || !snapshot_logits_on_device()) return Backend::save_with_row(slot, row, host_logits);
    if (row < 0 || (size_t)row >= fl_rows_) return err("cuda backend: save_with_row: row {} of a step of {}", row, fl_rows_);
    const size_t bytes = (size_t)n_vocab() * sizeof(float);
    cuda::DeviceBuffer buf = pool_ ? pool_->take_row(bytes) : cuda::DeviceBuffer{};
    if (buf.empty()) {
      DS_ASSIGN(buf, cuda::DeviceBuffer::alloc(bytes));
    }
    DS_TRY(m_->copy_last_row(row, buf.as<float>()));  // before the save: both ordered before the next step
    DS_ASSIGN(std::unique_ptr<Snapshot> snap, save(slot));
    static_cast<CudaSnapshotBox*>(snap.get())->keep_logits(std::move(buf));
    return snap;
  }

  Result<std::unique_ptr<Snapshot>> save(int32_t slot) override {
    DS_TRY(check_idle("save"));
    DS_TRY(check_slot(slot));
    const cuda::CudaSeqState& st = *slots_[slot];
    if (!pool_) {
      DS_ASSIGN(std::unique_ptr<cuda::CudaSnapshot> s, m_->save(st));
      return std::unique_ptr<Snapshot>(std::make_unique<CudaSnapshotBox>(std::move(s), nullptr));
    }
    const int64_t n = st.n_past();
    const int64_t room = std::min<int64_t>(n_ctx_, (n + SnapshotPool::kRoundTokens - 1) / SnapshotPool::kRoundTokens *
                                                       SnapshotPool::kRoundTokens);
    auto reuse = pool_->take(m_->state_bytes(n));
    DS_ASSIGN(std::unique_ptr<cuda::CudaSnapshot> s, m_->save(st, std::move(reuse), room));
    return std::unique_ptr<Snapshot>(std::make_unique<CudaSnapshotBox>(std::move(s), pool_));
  }

  // Captures the decode graph of every batch size the engine can form (1 .. min(slots, one step)): a served
  // step never pays for a capture (~ms each at 9B, one per new batch size, while every other sequence waits).
  // DS_GRAPH_WARMUP=0 skips it (A/B runs).
  Status warm_up() override {
    DS_TRY(check_idle("warm_up"));
    const char* e = std::getenv("DS_GRAPH_WARMUP");
    if ((e && e[0] == '0') || !m_->options().use_graphs) return {};
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t n = std::min<int32_t>(n_slots(), m_->options().max_tokens);
    std::vector<int32_t> slots, toks;
    SelectSpec spec;
    Selection sel;
    for (int32_t b = 1; b <= n; b++) {
      slots.push_back(b - 1);
      toks.push_back(0);
      for (int32_t s : slots)
        if (slots_[s]->n_past() + 1 > n_ctx_) {
          DS_TRY(reset(s));
        }
      DS_TRY(decode_select(slots, toks, spec, sel));
    }
    for (int32_t s = 0; s < n; s++) DS_TRY(reset(s));
    spdlog::info("cuda backend: decode steps of 1 .. {} sequences captured in {:.2f} s", n,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return {};
  }

  Status restore(int32_t slot, const Snapshot& snap) override {
    DS_TRY(check_idle("restore"));
    DS_TRY(check_slot(slot));
    const auto* box = dynamic_cast<const CudaSnapshotBox*>(&snap);
    if (!box) return err("cuda backend: restore: the snapshot was not made by a CUDA backend");
    return m_->restore(*slots_[slot], box->get());
  }

 private:
  Status check_slot(int32_t slot) const {
    if (slot < 0 || slot >= n_slots()) return err("cuda backend: slot {} outside [0, {})", slot, n_slots());
    return {};
  }
  // Between decode_select_begin and decode_select_end the step's host staging is in use: nothing else may run.
  Status check_idle(const char* what) const {
    if (in_flight_) return err("cuda backend: {} while a decode step is in flight", what);
    return {};
  }

  std::unique_ptr<cuda::CudaModel> m_;
  std::vector<std::unique_ptr<cuda::CudaSeqState>> slots_;
  int32_t n_ctx_;
  std::shared_ptr<SnapshotPool> pool_;  // null with DS_SNAPSHOT_POOL=0
  bool device_rows_ = false;  // the last decode_select ran on the device (its rows are there)
  bool in_flight_ = false;    // decode_select_begin ran, decode_select_end not yet
  bool host_step_ = false;    // the step in flight is the host default's
  size_t fl_rows_ = 0, fl_full_ = 0;  // rows and full rows of the step begun last
  int fl_k_ = 0;
  bool fl_lse_ = false;
};

}  // namespace

bool cuda_backend_available() { return cuda::device_count() > 0; }

Result<std::unique_ptr<Backend>> make_cuda_backend(const Qwen35Model& model, const CudaBackendOptions& o) {
  if (o.n_slots < 1) return err("cuda backend: n_slots = {}, expected >= 1", o.n_slots);
  if (o.n_ctx < 1) return err("cuda backend: n_ctx = {}, expected >= 1", o.n_ctx);
  cuda::CudaModelOptions mo;
  mo.device = o.device;
  mo.use_graphs = o.use_graphs;
  mo.precision = o.precise ? cuda::Precision::kPrecise : cuda::Precision::kFast;
  mo.kv_f16 = o.kv_f16;
  mo.state_f16 = o.state_f16;
  DS_ASSIGN(std::unique_ptr<cuda::CudaModel> m, cuda::CudaModel::load(model, mo));
  std::vector<std::unique_ptr<cuda::CudaSeqState>> slots;
  for (int32_t i = 0; i < o.n_slots; i++) {
    DS_ASSIGN(std::unique_ptr<cuda::CudaSeqState> s, m->create_state(o.n_ctx));
    slots.push_back(std::move(s));
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(std::move(m), std::move(slots), o.n_ctx));
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const std::string& model_path, const CudaBackendOptions& o) {
  DS_ASSIGN(Qwen35Model model, Qwen35Model::load_file(model_path));
  return make_cuda_backend(model, o);
}

}  // namespace ds::engine

#else  // built without CUDA

namespace ds::engine {

bool cuda_backend_available() { return false; }

static Error no_cuda() {
  return err("cuda backend: this deltaserve was built without CUDA; rebuild with nvcc available (DS_CUDA=ON)");
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const Qwen35Model&, const CudaBackendOptions&) { return no_cuda(); }

Result<std::unique_ptr<Backend>> make_cuda_backend(const std::string&, const CudaBackendOptions&) { return no_cuda(); }

}  // namespace ds::engine

#endif

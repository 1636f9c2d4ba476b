#include "engine/qwen35_backend.h"

#include <algorithm>

#include "engine/qwen35_batch.h"

namespace ds::engine {

namespace {

// A slot's state with the KV rows cut to the positions in use.
class StateSnapshot : public Snapshot {
 public:
  SequenceState st;
  size_t bytes() const override { return bytes_; }
  int32_t n_tokens() const override { return static_cast<int32_t>(st.n_past); }
  size_t bytes_ = 0;
};

size_t floats_bytes(const std::vector<std::vector<float>>& v) {
  size_t n = 0;
  for (auto& x : v) n += x.size() * sizeof(float);
  return n;
}

}  // namespace

Result<std::unique_ptr<Qwen35Backend>> Qwen35Backend::create(const Qwen35Model& model, int32_t n_slots, int32_t n_ctx) {
  if (n_slots < 1) return err("cpu backend: need at least one slot, got {}", n_slots);
  if (n_ctx < 2) return err("cpu backend: context must be at least 2 tokens, got {}", n_ctx);
  std::unique_ptr<Qwen35Backend> b(new Qwen35Backend(model, n_ctx));
  for (int32_t i = 0; i < n_slots; i++) {
    DS_ASSIGN(SequenceState st, SequenceState::create(model.cfg, n_ctx));
    b->slots_.push_back(std::move(st));
  }
  const auto& c = model.cfg;
  const SequenceState& s0 = b->slots_[0];
  b->mem_.fixed_bytes_per_slot = floats_bytes(s0.conv) + floats_bytes(s0.ssm);
  b->mem_.kv_bytes_per_token = static_cast<size_t>(2 * c.n_full_attn() * c.n_head_kv * c.head_dim) * sizeof(float);
  return b;
}

Status Qwen35Backend::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= n_slots()) return err("cpu backend: slot {} out of range [0, {})", slot, n_slots());
  return {};
}

Status Qwen35Backend::reset(int32_t slot) {
  DS_TRY(check_slot(slot));
  slots_[slot].reset();
  return {};
}

Status Qwen35Backend::prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) {
  DS_TRY(check_slot(slot));
  const size_t V = static_cast<size_t>(n_vocab());
  float* out = logits_out.data();
  if (logits_out.empty()) {
    scratch_.resize(V);
    out = scratch_.data();
  } else if (logits_out.size() < V) {
    return err("cpu backend: logits buffer holds {} floats, need {}", logits_out.size(), V);
  }
  return forward(model_, slots_[slot], tokens, out, false);
}

Status Qwen35Backend::decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                             std::span<float> logits_out) {
  const size_t V = static_cast<size_t>(n_vocab()), B = slots.size();
  if (tokens.size() != B) return err("cpu backend: {} slots but {} tokens", B, tokens.size());
  if (logits_out.size() < B * V) return err("cpu backend: logits buffer too small for {} rows", B);
  for (size_t i = 0; i < B; i++) {
    DS_TRY(check_slot(slots[i]));
    for (size_t j = 0; j < i; j++)
      if (slots[j] == slots[i]) return err("cpu backend: slot {} twice in one batch", slots[i]);
  }
  std::vector<SequenceState*> states(B);
  for (size_t i = 0; i < B; i++) states[i] = &slots_[slots[i]];
  return qwen35_decode_batch(model_, states, tokens, logits_out.data());
}

Result<std::unique_ptr<Snapshot>> Qwen35Backend::save(int32_t slot) {
  DS_TRY(check_slot(slot));
  const SequenceState& s = slots_[slot];
  auto snap = std::make_unique<StateSnapshot>();
  snap->st.max_ctx = s.max_ctx;
  snap->st.n_past = s.n_past;
  snap->st.conv = s.conv;
  snap->st.ssm = s.ssm;
  const size_t row = mem_.kv_bytes_per_token / sizeof(float) / 2 / std::max<int64_t>(1, model_.cfg.n_full_attn());
  snap->st.k_cache.resize(s.k_cache.size());
  snap->st.v_cache.resize(s.v_cache.size());
  for (size_t l = 0; l < s.k_cache.size(); l++) {
    if (s.k_cache[l].empty()) continue;
    const size_t n = static_cast<size_t>(s.n_past) * row;
    snap->st.k_cache[l].assign(s.k_cache[l].begin(), s.k_cache[l].begin() + n);
    snap->st.v_cache[l].assign(s.v_cache[l].begin(), s.v_cache[l].begin() + n);
  }
  snap->bytes_ = floats_bytes(snap->st.conv) + floats_bytes(snap->st.ssm) + floats_bytes(snap->st.k_cache) +
                 floats_bytes(snap->st.v_cache);
  return std::unique_ptr<Snapshot>(std::move(snap));
}

Status Qwen35Backend::restore(int32_t slot, const Snapshot& snap) {
  DS_TRY(check_slot(slot));
  auto* s = dynamic_cast<const StateSnapshot*>(&snap);
  if (!s) return err("cpu backend: snapshot of another backend");
  SequenceState& d = slots_[slot];
  if (s->st.n_past > d.max_ctx || s->st.conv.size() != d.conv.size())
    return err("cpu backend: snapshot of {} tokens does not fit slot {}", s->st.n_past, slot);
  for (size_t l = 0; l < d.conv.size(); l++) {
    std::copy(s->st.conv[l].begin(), s->st.conv[l].end(), d.conv[l].begin());
    std::copy(s->st.ssm[l].begin(), s->st.ssm[l].end(), d.ssm[l].begin());
    std::copy(s->st.k_cache[l].begin(), s->st.k_cache[l].end(), d.k_cache[l].begin());
    std::copy(s->st.v_cache[l].begin(), s->st.v_cache[l].end(), d.v_cache[l].begin());
  }
  d.n_past = s->st.n_past;
  return {};
}

}  // namespace ds::engine

#include "engine/fake_backend.h"

#include <algorithm>
#include <thread>

namespace ds::engine {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class FakeSnapshot : public Snapshot {
 public:
  FakeSnapshot(std::vector<int32_t> h, size_t bytes) : hist(std::move(h)), bytes_(bytes) {}
  size_t bytes() const override { return bytes_; }
  int32_t n_tokens() const override { return static_cast<int32_t>(hist.size()); }
  std::vector<int32_t> hist;

 private:
  size_t bytes_;
};

}  // namespace

FakeBackend::FakeBackend(FakeBackendOptions o) : o_(std::move(o)), hist_(o_.n_slots) {}

Status FakeBackend::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= o_.n_slots) return err("fake backend: slot {} out of range [0, {})", slot, o_.n_slots);
  return {};
}

void FakeBackend::logits_for(std::span<const int32_t> history, std::span<float> out) const {
  uint64_t h = 0x1234;
  for (int32_t t : history) h = mix(h ^ static_cast<uint64_t>(t));
  for (int32_t v = 0; v < o_.n_vocab; v++) {
    uint64_t r = mix(h + static_cast<uint64_t>(v) * 0x632be59bd9b4e019ull);
    out[v] = static_cast<float>(static_cast<double>(r >> 11) * 0x1p-53 * 8.0 - 4.0);
  }
  for (int32_t s : o_.suppressed)
    if (s >= 0 && s < o_.n_vocab) out[s] -= 30;
  if (o_.oracle) {
    int32_t t = o_.oracle(history);
    if (t >= 0 && t < o_.n_vocab) out[t] = 50;  // above every hash logit, suppressed or not
  }
}

Status FakeBackend::reset(int32_t slot) {
  DS_TRY(check_slot(slot));
  hist_[slot].clear();
  return {};
}

Status FakeBackend::prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) {
  DS_TRY(check_slot(slot));
  auto& h = hist_[slot];
  if (h.size() + tokens.size() > static_cast<size_t>(o_.n_ctx))
    return err("fake backend: slot {}: {} + {} tokens exceed n_ctx {}", slot, h.size(), tokens.size(), o_.n_ctx);
  for (int32_t t : tokens)
    if (t < 0 || t >= o_.n_vocab) return err("fake backend: token {} out of vocab", t);
  h.insert(h.end(), tokens.begin(), tokens.end());
  n_prefill_tokens += static_cast<int64_t>(tokens.size());
  if (o_.prefill_delay_per_token.count() > 0)
    std::this_thread::sleep_for(o_.prefill_delay_per_token * static_cast<int64_t>(tokens.size()));
  if (!logits_out.empty()) {
    if (logits_out.size() < static_cast<size_t>(o_.n_vocab)) return err("fake backend: logits buffer too small");
    logits_for(h, logits_out);
  }
  return {};
}

Status FakeBackend::decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           std::span<float> logits_out) {
  if (slots.size() != tokens.size()) return err("fake backend: {} slots but {} tokens", slots.size(), tokens.size());
  if (logits_out.size() < slots.size() * static_cast<size_t>(o_.n_vocab))
    return err("fake backend: logits buffer too small");
  for (size_t i = 0; i < slots.size(); i++) {
    DS_TRY(check_slot(slots[i]));
    for (size_t j = 0; j < i; j++)
      if (slots[j] == slots[i]) return err("fake backend: slot {} twice in one batch", slots[i]);
    if (hist_[slots[i]].size() + 1 > static_cast<size_t>(o_.n_ctx))
      return err("fake backend: slot {} full", slots[i]);
  }
  n_decode_calls++;
  int32_t b = static_cast<int32_t>(slots.size());
  {
    std::lock_guard lk(log_m_);
    batches_.push_back(b);
    prefill_before_.push_back(n_prefill_tokens.load());
  }
  int32_t cur = max_batch.load();
  while (b > cur && !max_batch.compare_exchange_weak(cur, b)) {
  }
  if (o_.decode_delay.count() > 0) std::this_thread::sleep_for(o_.decode_delay);
  for (size_t i = 0; i < slots.size(); i++) {
    auto& h = hist_[slots[i]];
    h.push_back(tokens[i]);
    logits_for(h, logits_out.subspan(i * o_.n_vocab, o_.n_vocab));
  }
  return {};
}

Result<std::unique_ptr<Snapshot>> FakeBackend::save(int32_t slot) {
  DS_TRY(check_slot(slot));
  size_t bytes = o_.memory.fixed_bytes_per_slot + o_.memory.kv_bytes_per_token * hist_[slot].size();
  return std::unique_ptr<Snapshot>(std::make_unique<FakeSnapshot>(hist_[slot], bytes));
}

Status FakeBackend::restore(int32_t slot, const Snapshot& snap) {
  DS_TRY(check_slot(slot));
  auto* s = dynamic_cast<const FakeSnapshot*>(&snap);
  if (!s) return err("fake backend: snapshot of another backend");
  hist_[slot] = s->hist;
  return {};
}

Status FakeBackend::warm_up() {
  n_warm_ups++;
  return {};
}

std::vector<int32_t> FakeBackend::batches() const {
  std::lock_guard lk(log_m_);
  return batches_;
}

std::vector<int64_t> FakeBackend::prefill_before_batches() const {
  std::lock_guard lk(log_m_);
  return prefill_before_;
}

}  // namespace ds::engine

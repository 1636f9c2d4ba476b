#include "engine/fake_backend.h"

#include <algorithm>
#include <limits>
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
  size_t bytes() const override { return bytes_ + row.size() * sizeof(float); }
  int32_t n_tokens() const override { return static_cast<int32_t>(hist.size()); }
  bool has_logits() const override { return !row.empty(); }
  Status logits(std::span<float> out) const override {
    if (row.empty() || out.size() < row.size()) return err("fake backend: snapshot without logits");
    std::copy(row.begin(), row.end(), out.begin());
    return {};
  }
  std::vector<int32_t> hist;
  std::vector<float> row;  // save_with_row

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
  if (o_.nan_token >= 0 && std::find(history.begin(), history.end(), o_.nan_token) != history.end())
    std::fill(out.begin(), out.begin() + o_.n_vocab, std::numeric_limits<float>::quiet_NaN());
}

Status FakeBackend::check_idle(const char* what) const {
  if (in_flight_) return err("fake backend: {} while a decode step is in flight", what);
  return {};
}

Status FakeBackend::reset(int32_t slot) {
  DS_TRY(check_idle("reset"));
  DS_TRY(check_slot(slot));
  hist_[slot].clear();
  return {};
}

Status FakeBackend::prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) {
  DS_TRY(check_idle("prefill"));
  DS_TRY(check_slot(slot));
  if (o_.on_prefill) o_.on_prefill(n_prefill_calls.load());
  n_prefill_calls++;
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
  DS_TRY(check_idle("decode"));
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
  last_rows_.assign(logits_out.begin(), logits_out.begin() + static_cast<std::ptrdiff_t>(slots.size() * o_.n_vocab));
  return {};
}

Status FakeBackend::decode_select_begin(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                                        const SelectSpec& spec) {
  DS_TRY(check_idle("decode_select_begin"));
  if (o_.on_launch) o_.on_launch(n_launches.load());
  n_launches++;
  fl_slots_.assign(slots.begin(), slots.end());
  fl_tokens_.assign(tokens.begin(), tokens.end());
  fl_spec_ = spec;
  in_flight_ = true;
  return {};
}

Status FakeBackend::decode_select_end(Selection& out) {
  if (!in_flight_) return err("fake backend: decode_select_end without a step in flight");
  in_flight_ = false;
  return decode_select(fl_slots_, fl_tokens_, fl_spec_, out);
}

Result<std::unique_ptr<Snapshot>> FakeBackend::save_with_row(int32_t slot, int32_t row, std::vector<float>& host_logits) {
  if (!o_.snapshot_logits) return Backend::save_with_row(slot, row, host_logits);
  const size_t V = static_cast<size_t>(o_.n_vocab);
  if (row < 0 || (static_cast<size_t>(row) + 1) * V > last_rows_.size())
    return err("fake backend: save_with_row: row {} of the last step", row);
  DS_ASSIGN(std::unique_ptr<Snapshot> snap, save(slot));
  auto* f = static_cast<FakeSnapshot*>(snap.get());
  f->row.assign(last_rows_.begin() + static_cast<std::ptrdiff_t>(row * V),
                last_rows_.begin() + static_cast<std::ptrdiff_t>((row + 1) * V));
  n_row_snapshots++;
  return snap;
}

Result<std::unique_ptr<Snapshot>> FakeBackend::save(int32_t slot) {
  DS_TRY(check_idle("save"));
  DS_TRY(check_slot(slot));
  size_t bytes = o_.memory.fixed_bytes_per_slot + o_.memory.kv_bytes_per_token * hist_[slot].size();
  return std::unique_ptr<Snapshot>(std::make_unique<FakeSnapshot>(hist_[slot], bytes));
}

Status FakeBackend::restore(int32_t slot, const Snapshot& snap) {
  DS_TRY(check_idle("restore"));
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

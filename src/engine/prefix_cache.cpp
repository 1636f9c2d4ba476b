#include "engine/prefix_cache.h"

#include <algorithm>

namespace ds::engine {

namespace {
// Logits on the host, or kept with the snapshot (Backend::save_with_row).
bool has_logits(const PrefixCache::Entry& e) { return !e.logits.empty() || (e.snap && e.snap->has_logits()); }
}  // namespace

const PrefixCache::Entry* PrefixCache::lookup(std::span<const int32_t> prompt) {
  Entry* best = nullptr;
  for (auto& e : entries_) {
    if (e->tokens.size() > prompt.size() || (e->tokens.size() == prompt.size() && !has_logits(*e))) continue;
    if (best && e->tokens.size() <= best->tokens.size()) continue;
    if (std::equal(e->tokens.begin(), e->tokens.end(), prompt.begin())) best = e.get();
  }
  if (best) best->last_use = ++clock_;
  return best;
}

bool PrefixCache::touch(std::span<const int32_t> tokens, bool with_logits) {
  for (auto& e : entries_) {
    if (e->tokens.size() == tokens.size() && std::equal(e->tokens.begin(), e->tokens.end(), tokens.begin()) &&
        (!with_logits || has_logits(*e))) {
      e->last_use = ++clock_;
      return true;
    }
  }
  return false;
}

void PrefixCache::insert(std::vector<int32_t> tokens, std::unique_ptr<Snapshot> snap, std::vector<float> logits) {
  if (!enabled() || !snap) return;
  size_t bytes = snap->bytes() + logits.size() * sizeof(float) + tokens.size() * sizeof(int32_t) + sizeof(Entry);
  // Same tokens: the new entry replaces the old one.
  std::erase_if(entries_, [&](const std::unique_ptr<Entry>& e) {
    if (e->tokens != tokens) return false;
    bytes_ -= e->bytes;
    return true;
  });
  if (bytes > max_bytes_) return;
  while (!entries_.empty() && (bytes_ + bytes > max_bytes_ || entries_.size() + 1 > max_entries_)) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](auto& a, auto& b) { return a->last_use < b->last_use; });
    bytes_ -= (*lru)->bytes;
    entries_.erase(lru);
  }
  auto e = std::make_unique<Entry>();
  e->tokens = std::move(tokens);
  e->snap = std::move(snap);
  e->logits = std::move(logits);
  e->last_use = ++clock_;
  e->bytes = bytes;
  bytes_ += bytes;
  entries_.push_back(std::move(e));
}

void PrefixCache::clear() {
  entries_.clear();
  bytes_ = 0;
}

}  // namespace ds::engine

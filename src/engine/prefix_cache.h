// Prefix reuse across requests: snapshots of a slot's state (recurrent state + KV rows) keyed by the
// exact token sequence that produced them, plus the logits after the last of those tokens.
// A recurrent state cannot be rolled back, so a snapshot is usable only for a prompt that starts
// with ALL of its tokens. The engine stores two snapshots per request: at the end of the prompt,
// and at the end of the reply (prompt + generated tokens fed to the model). The first serves a
// next turn whose template re-renders the previous reply differently (Qwen3.5 drops earlier
// turns' reasoning), the second a next turn that extends the conversation verbatim.
// Partial match policy: when a prompt diverges inside a snapshot's tokens, that snapshot is not
// used; the longest snapshot that is wholly a prefix of the prompt is, else the prompt is
// processed from the start. Bounded by bytes and entry count; least recently used goes first.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"

namespace ds::engine {

class PrefixCache {
 public:
  struct Entry {
    std::vector<int32_t> tokens;
    std::unique_ptr<Snapshot> snap;
    // [V] after tokens.back(); empty for mid-prompt snapshots and when the snapshot keeps them (has_logits(),
    // e.g. on the device: the engine's reply-end snapshots on the CUDA backend, fetched only on a full hit).
    std::vector<float> logits;
    uint64_t last_use = 0;
    size_t bytes = 0;
  };

  PrefixCache(size_t max_bytes, size_t max_entries) : max_bytes_(max_bytes), max_entries_(max_entries) {}

  // The longest entry whose tokens are a prefix of `prompt`: shorter, or equal if the entry holds
  // logits (then the prompt needs no processing at all); nullptr if none.
  // The pointer stays valid until the next insert/clear.
  const Entry* lookup(std::span<const int32_t> prompt);
  // True if an entry with exactly these tokens (and logits, if `with_logits`) exists; it is then
  // marked as used. False means an insert would add something.
  bool touch(std::span<const int32_t> tokens, bool with_logits);
  // Adds an entry (replacing one with the same tokens), evicting least recently used ones to fit.
  // An entry larger than the whole budget is dropped.
  void insert(std::vector<int32_t> tokens, std::unique_ptr<Snapshot> snap, std::vector<float> logits);
  void clear();

  size_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }
  bool enabled() const { return max_bytes_ > 0 && max_entries_ > 0; }

 private:
  std::vector<std::unique_ptr<Entry>> entries_;
  size_t max_bytes_, max_entries_, bytes_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace ds::engine

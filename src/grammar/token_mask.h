// Which tokens may come next under a grammar: a trie over the vocabulary's token byte strings, walked
// depth-first from the matcher's state (a branch is cut at the first byte the matcher refuses), and a
// per-grammar cache of the masks by matcher state (JSON generation revisits the same states: inside a
// string, between members).
// Special tokens (added / control: <think>, <tool_call>, <|im_start|>, ...) are never allowed; the
// end-of-generation tokens only when the document is complete. A complete document that takes no
// more bytes (an object closed at the top level) thus leaves only the end-of-generation tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace ds::grammar {

using Mask = std::vector<uint64_t>;  // bit t: token t is allowed

inline bool allowed(const Mask& m, int32_t t) { return m[static_cast<size_t>(t) >> 6] >> (t & 63) & 1; }

// -inf for every token of `logits` that `m` does not allow (tokens past the mask's vocabulary too); false when it
// allows none of them.
bool apply_mask(const Mask& m, int32_t n_vocab, std::span<float> logits);

class TokenTrie {
 public:
  // token_bytes[t]: the bytes of token t; excluded[t]: never allowed (special tokens); eog: the tokens that
  // end generation (allowed when the document is complete, whatever their bytes).
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& excluded, std::vector<int32_t> eog);
  int32_t n_vocab() const { return n_vocab_; }
  // The mask after `m` (sized for n_vocab), by walking the trie. Thread-safe (per-thread scratch).
  void mask(const Matcher& m, Mask& out) const;
  size_t n_nodes() const { return nodes_.size(); }
  // Unique per trie built in this process (a cache key: an address could be reused by a later trie).
  uint64_t id() const { return id_; }

 private:
  struct TrieNode {
    uint32_t child_begin = 0, child_end = 0;  // children: nodes_[child_begin, child_end)
    uint32_t tok_begin = 0, tok_end = 0;      // tokens ending here: ids_[tok_begin, tok_end)
    uint8_t byte = 0;                         // the edge from the parent
  };
  void build(uint32_t node, const std::vector<std::pair<std::string, int32_t>>& toks, size_t lo, size_t hi, size_t depth);
  // From `node` with the matcher state lv[level] and `pending` plain string characters not yet applied to it
  // (levels grow only where a byte does more than that; see Matcher::plain_char), `more` continuation bytes of
  // the last one still to come (the next in [lo, hi], the rest in 80..BF).
  void walk(uint32_t node, size_t level, uint32_t pending, std::vector<Matcher>& lv, Mask& out, uint8_t more = 0,
            uint8_t lo = 0, uint8_t hi = 0) const;

  int32_t n_vocab_ = 0;
  uint64_t id_ = 0;
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> eog_;
  size_t max_len_ = 0;
};

// A compiled grammar with its mask cache: what a constrained request carries (shared; the cache is the only
// mutable part, behind a lock).
class Constraint {
 public:
  explicit Constraint(Grammar g) : g_(std::move(g)) {}
  ~Constraint();
  Constraint(const Constraint&) = delete;
  Constraint& operator=(const Constraint&) = delete;
  const Grammar& grammar() const { return g_; }
  // trie.mask(m), from the cache when this state was seen before (with this trie). Shared: never changes.
  std::shared_ptr<const Mask> mask(const TokenTrie& trie, const Matcher& m) const;
  size_t cache_size() const;

  static constexpr size_t kMaxCached = 2048;  // masks (19 KB each for a 151k vocabulary); then the cache restarts
  // Every constraint's cache together (masks and their state keys, which grow with nesting and alternatives: up
  // to 64 KB), so that many schemas at once (the server keeps 64) stay bounded: a cache that would pass it starts
  // again, and while the others hold it all a mask is computed without being kept.
  static constexpr size_t kMaxCachedBytes = size_t(256) << 20;
  static size_t cached_bytes();                  // all constraints' caches now
  static void set_max_cached_bytes(size_t max);  // tests: a smaller bound

 private:
  Grammar g_;
  mutable std::mutex m_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Mask>> cache_;
  mutable size_t bytes_ = 0;  // of cache_, counted in cached_bytes()
};

}  // namespace ds::grammar

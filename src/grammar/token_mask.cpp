#include "grammar/token_mask.h"

#include <algorithm>
#include <atomic>
#include <limits>

namespace ds::grammar {

bool apply_mask(const Mask& m, int32_t n_vocab, std::span<float> logits) {
  const size_t V = logits.size(), nv = std::min<size_t>(V, static_cast<size_t>(n_vocab));
  constexpr float kOut = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (size_t w = 0; w * 64 < nv; w++) {  // word by word: inside a string nearly every word is all ones
    const uint64_t bits = m[w];
    if (bits != 0) any = true;
    if (bits == ~uint64_t(0) && (w + 1) * 64 <= nv) continue;
    const size_t end = std::min(nv, (w + 1) * 64);
    for (size_t t = w * 64; t < end; t++)
      if (!(bits >> (t & 63) & 1)) logits[t] = kOut;
  }
  for (size_t t = nv; t < V; t++) logits[t] = kOut;
  return any;
}

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& excluded,
                     std::vector<int32_t> eog)
    : n_vocab_(static_cast<int32_t>(token_bytes.size())), eog_(std::move(eog)) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id++;
  std::vector<std::pair<std::string, int32_t>> toks;
  for (size_t t = 0; t < token_bytes.size(); t++) {
    const bool is_eog = std::find(eog_.begin(), eog_.end(), static_cast<int32_t>(t)) != eog_.end();
    if (token_bytes[t].empty() || is_eog || (t < excluded.size() && excluded[t])) continue;
    toks.emplace_back(token_bytes[t], static_cast<int32_t>(t));
    max_len_ = std::max(max_len_, token_bytes[t].size());
  }
  std::sort(toks.begin(), toks.end());
  nodes_.emplace_back();
  build(0, toks, 0, toks.size(), 0);
}

// toks[lo, hi) share their first `depth` bytes (the path to `node`), sorted.
void TokenTrie::build(uint32_t node, const std::vector<std::pair<std::string, int32_t>>& toks, size_t lo, size_t hi,
                      size_t depth) {
  nodes_[node].tok_begin = static_cast<uint32_t>(ids_.size());
  while (lo < hi && toks[lo].first.size() == depth) ids_.push_back(toks[lo++].second);
  nodes_[node].tok_end = static_cast<uint32_t>(ids_.size());
  // One child per distinct next byte, allocated side by side, then filled one by one.
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = lo; i < hi;) {
    size_t j = i;
    while (j < hi && toks[j].first[depth] == toks[i].first[depth]) j++;
    groups.emplace_back(i, j);
    i = j;
  }
  const uint32_t first = static_cast<uint32_t>(nodes_.size());
  nodes_[node].child_begin = first;
  nodes_[node].child_end = first + static_cast<uint32_t>(groups.size());
  nodes_.resize(nodes_.size() + groups.size());
  for (size_t g = 0; g < groups.size(); g++) {
    nodes_[first + g].byte = static_cast<uint8_t>(toks[groups[g].first].first[depth]);
    build(first + static_cast<uint32_t>(g), toks, groups[g].first, groups[g].second, depth + 1);
  }
}

void TokenTrie::walk(uint32_t node, size_t level, uint32_t pending, std::vector<Matcher>& lv, Mask& out, uint8_t more,
                     uint8_t lo, uint8_t hi) const {
  const TrieNode& n = nodes_[node];
  auto take = [&](const TrieNode& ch) {
    for (uint32_t i = ch.tok_begin; i < ch.tok_end; i++) out[ids_[i] >> 6] |= uint64_t(1) << (ids_[i] & 63);
  };
  for (uint32_t c = n.child_begin; c < n.child_end; c++) {
    const TrieNode& ch = nodes_[c];
    if (more > 0) {  // inside a shared UTF-8 character: only its continuation bytes
      if (ch.byte < lo || ch.byte > hi) continue;
      take(ch);
      if (ch.child_begin < ch.child_end) walk(c, level, pending, lv, out, more - 1, 0x80, 0xBF);
      continue;
    }
    const Matcher::Plain p = lv[level].plain_char(ch.byte, pending);
    if (p == Matcher::Plain::Full) continue;
    if (p != Matcher::Plain::No) {  // one more plain character: the child walks from this level, nothing copied
      take(ch);
      uint8_t m = 0, l = 0, h = 0;
      if (ch.byte >= 0x80) utf8_lead(ch.byte, m, l, h);
      if (ch.child_begin < ch.child_end) walk(c, level, pending + (p == Matcher::Plain::Count), lv, out, m, l, h);
      continue;
    }
    lv[level + 1] = lv[level];
    if (pending > 0) lv[level + 1].add_chars(pending);
    if (!lv[level + 1].advance(ch.byte)) continue;
    take(ch);
    if (ch.child_begin < ch.child_end) walk(c, level + 1, 0, lv, out);
  }
}

void TokenTrie::mask(const Matcher& m, Mask& out) const {
  out.assign((static_cast<size_t>(n_vocab_) + 63) / 64, 0);
  thread_local std::vector<Matcher> lv;
  if (lv.size() < max_len_ + 1) lv.resize(max_len_ + 1, m);
  lv[0] = m;
  walk(0, 0, 0, lv, out);
  if (m.complete())
    for (int32_t t : eog_) out[t >> 6] |= uint64_t(1) << (t & 63);
}

namespace {
std::atomic<size_t> g_bytes{0};  // every Constraint's cache_
std::atomic<size_t> g_max_bytes{Constraint::kMaxCachedBytes};
}  // namespace

std::shared_ptr<const Mask> Constraint::mask(const TokenTrie& trie, const Matcher& m) const {
  const uint64_t tid = trie.id();
  std::string key(reinterpret_cast<const char*>(&tid), sizeof tid);
  key += m.key();
  {
    std::lock_guard lk(m_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  auto out = std::make_shared<Mask>();
  trie.mask(m, *out);
  const size_t n = key.size() + out->size() * sizeof(uint64_t) + 64;  // + the map's node, roughly
  std::lock_guard lk(m_);
  if (cache_.size() >= kMaxCached || g_bytes + n > g_max_bytes) {
    g_bytes -= bytes_;
    bytes_ = 0;
    cache_.clear();
  }
  if (g_bytes + n > g_max_bytes) return out;  // the other caches hold it all
  if (cache_.emplace(std::move(key), out).second) bytes_ += n, g_bytes += n;
  return out;
}

Constraint::~Constraint() { g_bytes -= bytes_; }

size_t Constraint::cached_bytes() { return g_bytes; }

void Constraint::set_max_cached_bytes(size_t max) { g_max_bytes = max; }

size_t Constraint::cache_size() const {
  std::lock_guard lk(m_);
  return cache_.size();
}

}  // namespace ds::grammar

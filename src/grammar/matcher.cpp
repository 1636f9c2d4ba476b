#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>

#include "grammar/matcher_step.h"

namespace ds::grammar {

using namespace detail;

namespace {

// Scratch shared by every matcher of this thread.
struct Scratch {
  Stack work;
  std::vector<Frame> frames;
  std::vector<uint32_t> ends;
};
thread_local Scratch tls;

}  // namespace
Matcher::Matcher(const Grammar& g) : g_(&g) {
  frames_.push_back(frame(-1, DocBefore));
  ends_.push_back(1);
}

bool Matcher::advance(uint8_t b) {
  Scratch& x = tls;
  x.frames.clear();
  x.ends.clear();
  Step st{*g_, x.frames, x.ends};
  uint32_t begin = 0;
  for (uint32_t e : ends_) {
    x.work.assign(frames_.begin() + begin, frames_.begin() + e);
    st.feed(x.work, b);
    begin = e;
  }
  if (x.ends.empty()) return false;
  if (x.ends.size() > 1) {  // merge identical stacks, keep at most kMaxStacks
    // Compared by hash first: with 32 stacks the pairwise comparisons were most of a mask's walk.
    std::vector<Frame> f;
    std::vector<uint32_t> e;
    std::vector<size_t> hashes;
    uint32_t b0 = 0;
    for (uint32_t end : x.ends) {
      const size_t h = std::hash<std::string_view>()(
          std::string_view(reinterpret_cast<const char*>(&x.frames[b0]), (end - b0) * sizeof(Frame)));
      bool dup = false;
      uint32_t c0 = 0;
      for (size_t i = 0; i < e.size() && !dup; i++) {
        dup = hashes[i] == h && e[i] - c0 == end - b0 &&
              std::memcmp(&f[c0], &x.frames[b0], (end - b0) * sizeof(Frame)) == 0;
        c0 = e[i];
      }
      if (!dup && e.size() < static_cast<size_t>(kMaxStacks)) {
        f.insert(f.end(), x.frames.begin() + b0, x.frames.begin() + end);
        e.push_back(static_cast<uint32_t>(f.size()));
        hashes.push_back(h);
      }
      b0 = end;
    }
    x.frames.swap(f);
    x.ends.swap(e);
  }
  frames_.swap(x.frames);
  ends_.swap(x.ends);
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  for (char c : bytes)
    if (!advance(static_cast<uint8_t>(c))) return false;
  return true;
}

bool Matcher::complete() const {
  uint32_t begin = 0;
  for (uint32_t e : ends_) {
    const Frame& top = frames_[e - 1];
    if (e - begin == 1 && top.phase == DocAfter) return true;
    if (e - begin == 2) {
      const uint8_t p = top.phase;
      if (p == NumZero || p == NumInt || p == NumFrac || p == NumExp) return true;
      if (p == Lit && top.count > 0 && g_->nodes[top.node].literals[top.lo].size() == top.count) return true;
    }
    begin = e;
  }
  return false;
}

// A UTF-8 lead byte counts as the character it starts (its continuation bytes are the walk's: utf8_lead).
// Every stack must be inside a string (alternatives followed side by side are: anyOf branches that differ in
// maxLength, say); the character is taken if one of them has room. Without this a walk with several stacks
// advanced them all at every trie node: 2.2 s a mask with 32 of them (Qwen3's vocabulary), at every step.
Matcher::Plain Matcher::plain_char(uint8_t b, uint32_t pending) const {
  if (b < 0x20 || (b >= 0x80 && (b < 0xC2 || b > 0xF4)) || b == '"' || b == '\\') return Plain::No;
  bool counted = false, room = false;
  for (uint32_t e : ends_) {
    const Frame& top = frames_[e - 1];
    if (top.phase != StrBody) return Plain::No;
    const Node& n = g_->nodes[top.node];
    if (n.min_items == 0 && n.max_items == UINT32_MAX) {
      room = true;
    } else {
      counted = true;
      room = room || top.count + pending < n.max_items;
    }
  }
  if (!room) return Plain::Full;
  return counted ? Plain::Count : Plain::Same;
}

// Stacks whose string the characters take past its maxLength end (plain_char took them for another stack).
void Matcher::add_chars(uint32_t n) {
  uint32_t begin = 0, to = 0;
  size_t kept = 0;
  for (size_t i = 0; i < ends_.size(); i++) {
    const uint32_t end = ends_[i];
    Frame& top = frames_[end - 1];
    const Node& nd = g_->nodes[top.node];
    const bool counted = nd.min_items > 0 || nd.max_items != UINT32_MAX;  // as string_step counts
    if (counted) top.count += n;
    if (!counted || top.count <= nd.max_items) {
      if (to != begin) std::copy(frames_.begin() + begin, frames_.begin() + end, frames_.begin() + to);
      to += end - begin;
      ends_[kept++] = to;
    }
    begin = end;
  }
  frames_.resize(to);
  ends_.resize(kept);
}

bool utf8_lead(uint8_t b, uint8_t& more, uint8_t& lo, uint8_t& hi) {
  lo = 0x80, hi = 0xBF;  // as string_step: no overlong forms, no surrogates, nothing past U+10FFFF
  if (b >= 0xC2 && b <= 0xDF) more = 1;
  else if (b >= 0xE0 && b <= 0xEF) more = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) more = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else return false;
  return true;
}

std::string Matcher::key() const {
  std::string k(reinterpret_cast<const char*>(frames_.data()), frames_.size() * sizeof(Frame));
  k.append(reinterpret_cast<const char*>(ends_.data()), ends_.size() * sizeof(uint32_t));
  return k;
}

}  // namespace ds::grammar

#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

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
    std::vector<Frame> f;
    std::vector<uint32_t> e;
    uint32_t b0 = 0;
    for (uint32_t end : x.ends) {
      bool dup = false;
      uint32_t c0 = 0;
      for (uint32_t ce : e) {
        if (ce - c0 == end - b0 && std::memcmp(&f[c0], &x.frames[b0], (end - b0) * sizeof(Frame)) == 0) dup = true;
        c0 = ce;
      }
      if (!dup && e.size() < static_cast<size_t>(kMaxStacks)) {
        f.insert(f.end(), x.frames.begin() + b0, x.frames.begin() + end);
        e.push_back(static_cast<uint32_t>(f.size()));
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

Matcher::Plain Matcher::plain_char(uint8_t b, uint32_t pending) const {
  if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\' || ends_.size() != 1) return Plain::No;
  const Frame& top = frames_.back();
  if (top.phase != StrBody) return Plain::No;
  const Node& n = g_->nodes[top.node];
  if (n.min_items == 0 && n.max_items == UINT32_MAX) return Plain::Same;
  return top.count + pending < n.max_items ? Plain::Count : Plain::Full;
}

void Matcher::add_chars(uint32_t n) { frames_.back().count += n; }

std::string Matcher::key() const {
  std::string k(reinterpret_cast<const char*>(frames_.data()), frames_.size() * sizeof(Frame));
  k.append(reinterpret_cast<const char*>(ends_.data()), ends_.size() * sizeof(uint32_t));
  return k;
}

}  // namespace ds::grammar

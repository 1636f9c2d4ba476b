#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace ds::grammar {

namespace {

enum Phase : uint8_t {
  DocBefore, DocAfter,
  ObjOpen, ObjKey, ObjFreeKey, ObjAfterKey, ObjColon, ObjInValue, ObjAfterValue, ObjComma,
  ArrOpen, ArrInValue, ArrAfterValue, ArrComma,
  StrBody, StrEsc, StrHex, StrLowBs, StrLowU, StrLowHex, StrUtf8,
  NumMinus, NumZero, NumInt, NumDot, NumFrac, NumE, NumESign, NumExp,
  Lit,
};

using Stack = std::vector<Frame>;

bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

int hex_value(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

void set_phase(Frame& f, uint8_t p) {
  f.phase = p;
  f.ws = 0;
  f.nl = 0;
}

// Whitespace in a gap between tokens, within the bounds. Before the document two line breaks (a model writes
// "</think>\n\n" and then the content), elsewhere one.
bool gap(Frame& f, uint8_t b) {
  const bool space = b == ' ' || b == '\t', brk = b == '\n' || b == '\r';
  if (!space && !brk) return false;
  if (f.ws >= Matcher::kMaxGap || (brk && f.nl >= (f.phase == DocBefore ? 2 : 1))) return false;
  f.ws++;
  if (brk) f.nl++;
  return true;
}

Frame frame(int32_t node, uint8_t phase) {
  Frame f;
  f.node = node;
  f.phase = phase;
  return f;
}

// Feeds one byte to one stack; every stack that results is appended to the output.
struct Step {
  const Grammar& g;
  std::vector<Frame>& out;
  std::vector<uint32_t>& out_ends;

  void emit(const Stack& s) {
    out.insert(out.end(), s.begin(), s.end());
    out_ends.push_back(static_cast<uint32_t>(out.size()));
  }

  const Node& node(const Frame& f) const { return g.nodes[f.node]; }
  bool free_keys(const Node& n) const { return n.props.empty() && n.additional >= 0; }

  // The parent's part once its child value (or key string) ended.
  void child_done(Frame& p) {
    if (p.phase == DocAfter) return;
    const Node& n = node(p);
    if (p.phase == ObjInValue) {
      if (!n.props.empty()) p.count++;
      set_phase(p, ObjAfterValue);
    } else if (p.phase == ObjFreeKey) {
      set_phase(p, ObjAfterKey);
    } else if (p.phase == ArrInValue) {
      // Only comparisons with min and max matter: an unbounded array stops counting at min (fewer states).
      if (n.max_items != UINT32_MAX || p.count < n.min_items) p.count++;
      set_phase(p, ArrAfterValue);
    }
  }

  void close(Stack& s) {
    s.pop_back();
    child_done(s.back());
    emit(s);
  }

  bool none_required(const Node& n, uint32_t from) const {
    for (size_t i = from; i < n.props.size(); i++)
      if (n.props[i].required) return false;
    return true;
  }

  // After the opening quote of a declared key: the candidates are the next properties up to and including the
  // first required one.
  bool begin_key(Frame& f) {
    const Node& n = node(f);
    uint64_t m = 0;
    for (uint32_t j = 0; j < 64 && f.count + j < n.props.size(); j++) {
      m |= uint64_t(1) << j;
      if (n.props[f.count + j].required) break;
    }
    if (m == 0) return false;
    set_phase(f, ObjKey);
    f.keys = m;
    f.lo = 1;
    return true;
  }

  void open_key(Stack& s) {
    Frame& f = s.back();
    if (free_keys(node(f))) {
      set_phase(f, ObjFreeKey);
      s.push_back(frame(Grammar::kString, StrBody));
      emit(s);
    } else if (begin_key(f)) {
      emit(s);
    }
  }

  void start_value(Stack& s, int32_t id, uint8_t b, int alt_depth = 0) {
    const bool room = static_cast<int>(s.size()) <= Matcher::kMaxDepth;  // the document frame + the containers
    const Node& n = g.nodes[id];
    switch (n.kind) {
      case Kind::Any: {
        int32_t pick = -1;
        if (b == '{') pick = Grammar::kAnyObject;
        else if (b == '[') pick = Grammar::kAnyArray;
        else if (b == '"') pick = Grammar::kString;
        else if (b == '-' || is_digit(b)) pick = Grammar::kNumber;
        else if (b == 't' || b == 'f' || b == 'n') pick = Grammar::kTrueFalseNull;
        if (pick >= 0) start_value(s, pick, b, alt_depth);
        return;
      }
      case Kind::AnyOf:
        if (alt_depth > 16) return;  // the compiler refuses cycles of alternatives and flattens them; a backstop
        for (int32_t a : n.alts) {
          if (out_ends.size() >= static_cast<size_t>(Matcher::kMaxStacks)) return;
          Stack c = s;
          start_value(c, a, b, alt_depth + 1);
        }
        return;
      case Kind::Object:
        if (b == '{' && room) s.push_back(frame(id, ObjOpen)), emit(s);
        return;
      case Kind::Array:
        if (b == '[' && room) s.push_back(frame(id, ArrOpen)), emit(s);
        return;
      case Kind::String:
        if (b == '"') s.push_back(frame(id, StrBody)), emit(s);
        return;
      case Kind::Number:
      case Kind::Integer:
        if (b == '-') s.push_back(frame(id, NumMinus)), emit(s);
        else if (b == '0') s.push_back(frame(id, NumZero)), emit(s);
        else if (is_digit(b)) s.push_back(frame(id, NumInt)), emit(s);
        return;
      case Kind::Literal: {
        s.push_back(frame(id, Lit));
        if (literal_step(s, b) == 1) emit(s);
        return;
      }
    }
  }

  // Literal: 1 taken (the stack is ready to emit), 0 refused, -1 the literal ended before b (popped: feed b on).
  int literal_step(Stack& s, uint8_t b) {
    Frame& f = s.back();
    const auto& lits = node(f).literals;
    const uint32_t k = f.count;
    uint32_t lo = f.count == 0 ? 0 : f.lo, hi = f.count == 0 ? static_cast<uint32_t>(lits.size()) : f.hi;
    // [lo, hi) share their first k bytes and are sorted (as unsigned bytes): the one of length k, if any, comes
    // first, then the rest by byte k. Binary search, so a large enum costs little.
    uint32_t first = lo < hi && lits[lo].size() == k ? lo + 1 : lo;
    auto first_where = [&](uint32_t a, uint32_t z, auto pred) {  // the first i in [a, z) with pred(byte k of i)
      while (a < z) {
        const uint32_t mid = a + (z - a) / 2;
        if (pred(static_cast<uint8_t>(lits[mid][k]))) z = mid;
        else a = mid + 1;
      }
      return a;
    };
    uint32_t nlo = first_where(first, hi, [&](uint8_t x) { return x >= b; });
    uint32_t nhi = first_where(nlo, hi, [&](uint8_t x) { return x > b; });
    if (nlo == nhi) nlo = nhi = hi;
    if (nlo == hi) {
      if (k > 0 && lits[lo].size() == k) {  // a whole literal: b belongs to the parent
        s.pop_back();
        child_done(s.back());
        return -1;
      }
      return 0;
    }
    f.lo = nlo;
    f.hi = nhi;
    f.count = k + 1;
    if (nhi - nlo == 1 && lits[nlo].size() == k + 1) {  // nothing longer can follow: done now
      s.pop_back();
      child_done(s.back());
    }
    return 1;
  }

  void string_step(Stack& s, uint8_t b) {
    Frame& f = s.back();
    switch (f.phase) {
      case StrBody: {
        const Node& n = node(f);
        const bool counted = n.min_items > 0 || n.max_items != UINT32_MAX;  // else count stays 0 (fewer states)
        if (b == '"') {
          if (counted && f.count < n.min_items) return;
          return close(s);
        }
        if (counted && ((b >= 0x20 && b < 0x80) || (b >= 0xC2 && b <= 0xF4))) {  // a character starts
          if (f.count >= n.max_items) return;
          f.count++;
        }
        if (b == '\\') f.phase = StrEsc;
        else if (b < 0x20) return;
        else if (b < 0x80) {
        } else if (b >= 0xC2 && b <= 0xDF) f.phase = StrUtf8, f.sub = 1, f.cp = 0x80 | 0xBF << 8;
        else if (b == 0xE0) f.phase = StrUtf8, f.sub = 2, f.cp = 0xA0 | 0xBF << 8;  // no overlong 3-byte forms
        else if (b == 0xED) f.phase = StrUtf8, f.sub = 2, f.cp = 0x80 | 0x9F << 8;  // no surrogates
        else if (b >= 0xE1 && b <= 0xEF) f.phase = StrUtf8, f.sub = 2, f.cp = 0x80 | 0xBF << 8;
        else if (b == 0xF0) f.phase = StrUtf8, f.sub = 3, f.cp = 0x90 | 0xBF << 8;  // no overlong 4-byte forms
        else if (b >= 0xF1 && b <= 0xF3) f.phase = StrUtf8, f.sub = 3, f.cp = 0x80 | 0xBF << 8;
        else if (b == 0xF4) f.phase = StrUtf8, f.sub = 3, f.cp = 0x80 | 0x8F << 8;  // nothing past U+10FFFF
        else return;
        return emit(s);
      }
      case StrUtf8:
        if (b < (f.cp & 0xFF) || b > (f.cp >> 8)) return;
        f.cp = 0x80 | 0xBF << 8;
        if (--f.sub == 0) f.phase = StrBody, f.cp = 0;
        return emit(s);
      case StrEsc:
        if (b == 'u') f.phase = StrHex, f.sub = 4, f.cp = 0;
        else if (std::strchr("\"\\/bfnrt", b) && b) f.phase = StrBody;
        else return;
        return emit(s);
      case StrHex: {
        const int v = hex_value(b);
        if (v < 0) return;
        f.cp = f.cp * 16 + v;
        if (--f.sub == 2 && f.cp >= 0xDC && f.cp <= 0xDF) return;  // a low surrogate with no high one before it
        if (f.sub == 0) f.phase = f.cp >= 0xD800 && f.cp <= 0xDBFF ? StrLowBs : StrBody, f.cp = 0;
        return emit(s);
      }
      case StrLowBs:
        if (b == '\\') f.phase = StrLowU, emit(s);
        return;
      case StrLowU:
        if (b == 'u') f.phase = StrLowHex, f.sub = 4, f.cp = 0, emit(s);
        return;
      case StrLowHex: {
        const int v = hex_value(b);
        if (v < 0) return;
        f.cp = f.cp * 16 + v;
        if (f.sub == 4 && v != 0xD) return;  // the low surrogate must be DC00..DFFF
        if (f.sub == 3 && v < 0xC) return;
        if (--f.sub == 0) f.phase = StrBody, f.cp = 0;
        return emit(s);
      }
    }
  }

  // Number: true when b was taken or refused; false when the number ended before b (popped: feed b on).
  bool number_step(Stack& s, uint8_t b) {
    Frame& f = s.back();
    const bool integer = node(f).kind == Kind::Integer;
    const bool frac_ok = !integer && (b == '.'), exp_ok = !integer && (b == 'e' || b == 'E');
    uint8_t next = 255;
    bool may_end = false;
    switch (f.phase) {
      case NumMinus: next = b == '0' ? NumZero : is_digit(b) ? NumInt : 255; break;
      case NumZero: next = frac_ok ? NumDot : exp_ok ? NumE : 255, may_end = true; break;
      case NumInt: next = is_digit(b) ? NumInt : frac_ok ? NumDot : exp_ok ? NumE : 255, may_end = true; break;
      case NumDot: next = is_digit(b) ? NumFrac : 255; break;
      case NumFrac: next = is_digit(b) ? NumFrac : exp_ok ? NumE : 255, may_end = true; break;
      case NumE: next = b == '+' || b == '-' ? NumESign : is_digit(b) ? NumExp : 255; break;
      case NumESign: next = is_digit(b) ? NumExp : 255; break;
      case NumExp: next = is_digit(b) ? NumExp : 255, may_end = true; break;
    }
    if (next != 255) {
      f.phase = next;
      emit(s);
      return true;
    }
    if (!may_end) return true;
    s.pop_back();
    child_done(s.back());
    return false;
  }

  void feed(Stack& s, uint8_t b) {
    while (true) {
      Frame& f = s.back();
      const uint8_t ph = f.phase;
      if (ph >= StrBody && ph <= StrUtf8) return string_step(s, b);
      if (ph >= NumMinus && ph <= NumExp) {
        if (number_step(s, b)) return;
        continue;
      }
      if (ph == Lit) {
        const int r = literal_step(s, b);
        if (r == 1) emit(s);
        if (r >= 0) return;
        continue;
      }
      if (ph == DocAfter) return;  // nothing after the document, not even whitespace
      if (ph != ObjKey && gap(f, b)) return emit(s);  // inside a declared key whitespace is the key's
      if (ph == DocBefore) {
        set_phase(f, DocAfter);
        return start_value(s, g.root, b);
      }
      const Node& n = node(f);
      switch (ph) {
        case ObjOpen:
          if (b == '}' && (free_keys(n) || none_required(n, 0))) return close(s);
          if (b == '"') return open_key(s);
          return;
        case ObjKey: {
          uint64_t m = 0;
          int done = -1;
          for (uint32_t j = 0; j < 64; j++) {
            if (!(f.keys >> j & 1)) continue;
            const std::string& key = n.props[f.count + j].key;
            if (key.size() > f.lo && static_cast<uint8_t>(key[f.lo]) == b) {
              m |= uint64_t(1) << j;
              if (key.size() == f.lo + 1) done = static_cast<int>(j);
            }
          }
          if (m == 0) return;
          f.keys = m;
          f.lo++;
          if (done >= 0) {
            f.count += done;
            f.keys = 0;
            f.lo = 0;
            set_phase(f, ObjAfterKey);
          }
          return emit(s);
        }
        case ObjAfterKey:
          if (b == ':') set_phase(f, ObjColon), emit(s);
          return;
        case ObjColon: {
          const int32_t child = free_keys(n) ? n.additional : n.props[f.count].node;
          set_phase(f, ObjInValue);
          return start_value(s, child, b);
        }
        case ObjAfterValue:
          if (b == ',' && (free_keys(n) || f.count < n.props.size())) return set_phase(f, ObjComma), emit(s);
          if (b == '}' && (free_keys(n) || none_required(n, f.count))) return close(s);
          return;
        case ObjComma:
          if (b == '"') open_key(s);
          return;
        case ArrOpen:
          if (b == ']') {
            if (n.min_items == 0) close(s);
            return;
          }
          if (n.max_items == 0) return;
          set_phase(f, ArrInValue);
          return start_value(s, n.items, b);
        case ArrAfterValue:
          if (b == ',' && f.count < n.max_items) return set_phase(f, ArrComma), emit(s);
          if (b == ']' && f.count >= n.min_items) return close(s);
          return;
        case ArrComma:
          set_phase(f, ArrInValue);
          return start_value(s, n.items, b);
        default: return;  // ObjFreeKey, ObjInValue, ArrInValue: a child is on top
      }
    }
  }
};

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

bool Matcher::keeps_state(uint8_t b) const {
  if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\' || ends_.size() != 1) return false;
  const Frame& top = frames_.back();
  if (top.phase != StrBody) return false;
  const Node& n = g_->nodes[top.node];
  return n.min_items == 0 && n.max_items == UINT32_MAX;
}

std::string Matcher::key() const {
  std::string k(reinterpret_cast<const char*>(frames_.data()), frames_.size() * sizeof(Frame));
  k.append(reinterpret_cast<const char*>(ends_.data()), ends_.size() * sizeof(uint32_t));
  return k;
}

}  // namespace ds::grammar

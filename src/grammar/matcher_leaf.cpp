#include <cstring>

#include "grammar/matcher_step.h"

namespace ds::grammar::detail {

namespace {

int hex_value(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

}  // namespace

int Step::literal_step(Stack& s, uint8_t b) {
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

void Step::string_step(Stack& s, uint8_t b) {
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

bool Step::number_step(Stack& s, uint8_t b) {
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
}  // namespace ds::grammar::detail

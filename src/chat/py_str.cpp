#include "chat/py_str.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ds::chat::py {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = n > 0 && i + n <= s.size();
    for (int k = 1; ok && k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong forms, surrogates and out-of-range values, as a strict decoder does.
    if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
               cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
      ok = false;
    if (!ok) {
      out.push_back(0xdc00 + c);  // surrogateescape: keeps the byte, round-trips in encode()
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c >= 0xdc80 && c <= 0xdcff) {
    out.push_back(static_cast<char>(c - 0xdc00));
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  bool ascii = true;
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  return ascii ? s.size() : decode(s).size();
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

static utf8proc_category_t cat(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c >= 0xdc80 && c <= 0xdcff) return false;
  switch (cat(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

char32_t to_upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
static char32_t to_title(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
bool is_cased_upper(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_LU || cat(c) == UTF8PROC_CATEGORY_LT; }
bool is_cased_lower(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_LL; }
static bool is_cased(char32_t c) { return is_cased_upper(c) || is_cased_lower(c) || to_upper(c) != to_lower(c); }
bool is_alpha(char32_t c) {
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
bool is_digit(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_ND; }
bool is_alnum(char32_t c) {
  auto k = cat(c);
  return is_alpha(c) || k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string u = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto drop = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && drop(u[b])) ++b;
  if (right)
    while (e > b && drop(u[e - 1])) --e;
  return encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = decode(s);
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && is_space(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.push_back(encode(std::u32string_view(u).substr(i)));  // the rest, trailing spaces kept
      break;
    }
    size_t j = i;
    while (j < n && !is_space(u[j])) ++j;
    out.push_back(encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    std::u32string u = decode(s);
    size_t j = u.size();
    while (true) {
      while (j > 0 && is_space(u[j - 1])) --j;
      if (j == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(encode(std::u32string_view(u).substr(0, j)));  // the rest, leading spaces kept
        break;
      }
      size_t i = j;
      while (i > 0 && !is_space(u[i - 1])) --i;
      out.push_back(encode(std::u32string_view(u).substr(i, j - i)));
      j = i;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
           c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (!is_break(u[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    i += (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    out.push_back(encode(std::u32string_view(u).substr(start, (keepends ? i : eol) - start)));
    start = i;
  }
  if (start < u.size()) out.push_back(encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old_s, std::string_view new_s, int64_t count) {
  std::string out;
  if (old_s.empty()) {
    std::u32string u = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(new_s);
        ++done;
      }
      if (i < u.size()) append_utf8(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old_s, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(new_s);
    pos = f + old_s.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

static std::string map_chars(std::string_view s, char32_t (*f)(char32_t)) {
  std::u32string u = decode(s);
  for (auto& c : u) {
    if (c == 0xdf && f == to_upper) continue;  // handled below (full mapping: ß -> SS)
    c = f(c);
  }
  std::string out;
  for (char32_t c : u) {
    if (c == 0xdf && f == to_upper)
      out += "SS";
    else
      append_utf8(out, c);
  }
  return out;
}

std::string upper(std::string_view s) { return map_chars(s, to_upper); }
std::string lower(std::string_view s) { return map_chars(s, to_lower); }
std::string swapcase(std::string_view s) {
  std::u32string u = decode(s);
  for (auto& c : u) c = is_cased_upper(c) ? to_lower(c) : is_cased_lower(c) ? to_upper(c) : c;
  return encode(u);
}

std::string title(std::string_view s) {
  std::u32string u = decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    bool cased = is_cased(c);
    if (cased) c = prev_cased ? to_lower(c) : to_title(c);
    prev_cased = cased;
  }
  return encode(u);
}

std::string capitalize(std::string_view s) {
  std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_title(u[i]) : to_lower(u[i]);
  return encode(u);
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return static_cast<int64_t>(length(s.substr(0, f)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string repr(std::string_view s) {
  std::u32string u = decode(s);
  bool has_single = u.find(U'\'') != std::u32string::npos;
  bool has_double = u.find(U'"') != std::u32string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : u) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !is_printable(c))) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(q);
  return out;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX": shortest digits that round-trip
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp10 = std::atoi(sci.c_str() + e + 1);
  int decpt = exp10 + 1;  // digits D represent 0.D * 10^decpt
  int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (nd > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= nd) {
    out += digits + std::string(decpt - nd, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string int_str(int64_t v) { return std::to_string(v); }

static std::string_view trim_ascii_ws(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::strchr(" \t\n\r\v\f", s[b])) ++b;
  while (e > b && std::strchr(" \t\n\r\v\f", s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::optional<int64_t> parse_int(std::string_view s, int base) {
  s = trim_ascii_ws(s);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0') {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) s.remove_prefix(2);
  }
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_') continue;
    digits.push_back(s[i]);
  }
  if (digits.empty()) return std::nullopt;
  int64_t v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  s = trim_ascii_ws(s);
  std::string t;
  for (char c : s)
    if (c != '_') t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (t.empty() || t.find('x') != std::string::npos) return std::nullopt;
  std::string body = (t[0] == '+' || t[0] == '-') ? t.substr(1) : t;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    return t[0] == '-' ? -v : v;
  }
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

}  // namespace ds::chat::py

#include "core/escape.h"

#include <cstdio>

namespace ds {

namespace {

void append_u_escape(std::string& out, unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", v);
  out += buf;
}

// One strict UTF-8 sequence at s[i]: its code point and length, or length 0 when the byte does not
// start a valid sequence.
char32_t decode_one(std::string_view s, size_t i, int& len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  len = 0;
  if (n == 0 || i + n > s.size()) return 0;
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  len = n;
  return cp;
}

}  // namespace

void append_quoted(std::string& out, std::string_view s, QuoteStyle style) {
  const bool json = style != QuoteStyle::Display;
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b':
        if (json) { out += "\\b"; ++i; continue; }
        break;
      case '\f':
        if (json) { out += "\\f"; ++i; continue; }
        break;
      default: break;
    }
    if (c < 0x20 || (c == 0x7f && style != QuoteStyle::Json)) {
      if (json) {
        append_u_escape(out, c);
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
      ++i;
    } else if (c < 0x80 || style != QuoteStyle::JsonAscii) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      int len = 0;
      const char32_t cp = decode_one(s, i, len);
      if (len == 0) {
        append_u_escape(out, 0xdc00 + c);  // surrogateescape
        ++i;
      } else if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        append_u_escape(out, 0xd800 + (v >> 10));
        append_u_escape(out, 0xdc00 + (v & 0x3ff));
        i += len;
      } else {
        append_u_escape(out, cp);
        i += len;
      }
    }
  }
  out.push_back('"');
}

std::string quoted(std::string_view s, QuoteStyle style) {
  std::string out;
  out.reserve(s.size() + 2);
  append_quoted(out, s, style);
  return out;
}

}  // namespace ds

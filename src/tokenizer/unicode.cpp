#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

namespace ds::tokenizer {
namespace {

// One step of UTF-8 decoding at s[i] following Unicode Table 3-7 (well-formed byte sequences).
struct Step {
  size_t len;      // bytes of a valid sequence, or of the maximal ill-formed subpart (>= 1)
  bool valid;      // a well-formed sequence
  bool truncated;  // ill-formed only because the string ends: a valid prefix of a sequence
};

Step step(std::string_view s, size_t i) {
  const auto b0 = (uint8_t)s[i];
  if (b0 < 0x80) return {1, true, false};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;   // no overlongs
    if (b0 == 0xED) hi = 0x9F;   // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;   // no overlongs
    if (b0 == 0xF4) hi = 0x8F;   // nothing above U+10FFFF
  } else {
    return {1, false, false};    // 0x80-0xC1, 0xF5-0xFF never start a sequence
  }
  size_t k = 1;
  for (; k < need; k++) {
    if (i + k >= s.size()) return {k, false, true};
    const auto b = (uint8_t)s[i + k];
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {k, false, false};
  }
  return {need, true, false};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t utf8_seq_len(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  Step st = step(s, i);
  return st.valid ? st.len : 0;
}

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if ((uint8_t)s[i] < 0x80) {
      i++;
      continue;
    }
    Step st = step(s, i);
    if (!st.valid) return i;
    i += st.len;
  }
  return std::nullopt;
}

Status validate_utf8(std::string_view s, std::string_view what) {
  if (auto bad = find_invalid_utf8(s)) {
    return err("{}: invalid UTF-8 at byte {} ({:#04x})", what, *bad, (unsigned)(uint8_t)s[*bad]);
  }
  return {};
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    Step st = step(s, i);
    if (st.valid) {
      out.append(s.substr(i, st.len));
    } else {
      out.append(kReplacement);
    }
    i += st.len;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Only the last <= 3 bytes can be an unfinished sequence: find the last lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; back++) {
    const auto b = (uint8_t)s[n - back];
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    Step st = step(s, n - back);
    return (!st.valid && st.truncated && st.len == back) ? back : 0;
  }
  return 0;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back((char)cp);
  } else if (cp < 0x800) {
    out.push_back((char)(0xC0 | (cp >> 6)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back((char)(0xE0 | (cp >> 12)));
    out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  } else {
    out.push_back((char)(0xF0 | (cp >> 18)));
    out.push_back((char)(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back((char)(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Code points that start an NFC-independent chunk: canonical combining class 0, NFC_Quick_Check =
// Yes, and never the second half of a canonical composition. Text splits before each of them into
// chunks that normalise independently (UAX #15 §9), so runs of them are copied without utf8proc.
// Deliberately incomplete (only whole blocks known to qualify); anything else goes to utf8proc.
bool nfc_inert(uint32_t cp) {
  if (cp < 0x300) return true;                          // ASCII, Latin-1, Latin Extended A/B, IPA
  if (cp >= 0x400 && cp <= 0x482) return true;          // Cyrillic letters (not the combining marks)
  if (cp >= 0x48A && cp <= 0x4FF) return true;
  if (cp >= 0x3000 && cp <= 0x3029) return true;        // CJK symbols (not 302A-302F, combining)
  if (cp >= 0x3041 && cp <= 0x3096) return true;        // Hiragana (not 3099/309A, combining)
  if (cp >= 0x309B && cp <= 0x30FF) return true;        // Katakana
  if (cp >= 0x3400 && cp <= 0x4DBF) return true;        // CJK Extension A
  if (cp >= 0x4E00 && cp <= 0x9FFF) return true;        // CJK Unified Ideographs
  if (cp >= 0xAC00 && cp <= 0xD7A3) return true;        // Hangul syllables (a following T jamo is not inert)
  if (cp >= 0xFF00 && cp <= 0xFFEF) return true;        // half/fullwidth forms (compatibility only)
  if (cp >= 0x1F300 && cp <= 0x1FAFF) return true;      // emoji and pictographs
  return false;
}

// Decodes the code point at s[i] of valid UTF-8; sets len.
uint32_t decode_cp(std::string_view s, size_t i, size_t& len) {
  const auto b0 = (uint8_t)s[i];
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    len = 2;
    return ((b0 & 0x1Fu) << 6) | ((uint8_t)s[i + 1] & 0x3Fu);
  }
  if (b0 < 0xF0) {
    len = 3;
    return ((b0 & 0x0Fu) << 12) | (((uint8_t)s[i + 1] & 0x3Fu) << 6) | ((uint8_t)s[i + 2] & 0x3Fu);
  }
  len = 4;
  return ((b0 & 0x07u) << 18) | (((uint8_t)s[i + 1] & 0x3Fu) << 12) | (((uint8_t)s[i + 2] & 0x3Fu) << 6) |
         ((uint8_t)s[i + 3] & 0x3Fu);
}

void nfc_chunk(std::string_view s, std::string& out) {
  utf8proc_uint8_t* res = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    (utf8proc_ssize_t)s.size(), &res,
                                    (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(res, &std::free);
  if (n < 0) {
    // Only reachable for invalid UTF-8 or out of memory; callers pass sanitized text, so keep the
    // text unnormalised rather than lose it.
    out.append(s);
    return;
  }
  out.append(reinterpret_cast<const char*>(res), (size_t)n);
}

}  // namespace

void nfc_append(std::string_view s, std::string& out) {
  const size_t n = s.size();
  size_t i = 0, copied = 0, last_inert = 0;
  while (i < n) {
    if ((uint8_t)s[i] < 0x80) {
      last_inert = i++;
      continue;
    }
    size_t len;
    uint32_t cp = decode_cp(s, i, len);
    if (nfc_inert(cp)) {
      last_inert = i;
      i += len;
      continue;
    }
    // A chunk needing utf8proc: from the last inert character (it may be the starter this one
    // composes with) up to the next inert character.
    const size_t start = last_inert >= copied ? last_inert : copied;
    out.append(s.substr(copied, start - copied));
    size_t j = i + len;
    while (j < n) {
      size_t l2;
      if (nfc_inert(decode_cp(s, j, l2))) break;
      j += l2;
    }
    nfc_chunk(s.substr(start, j - start), out);
    copied = last_inert = i = j;
  }
  out.append(s.substr(copied));
}

std::string nfc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  nfc_append(s, out);
  return out;
}

const ByteMap& ByteMap::get() {
  static const ByteMap m = [] {
    ByteMap bm;
    bm.cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? (uint32_t)b : next++;
      bm.byte_to_cp[b] = cp;
      append_utf8(cp, bm.byte_to_utf8[b]);
      bm.cp_to_byte[cp] = (int16_t)b;
    }
    return bm;
  }();
  return m;
}

std::optional<std::string> byte_level_decode(std::string_view piece) {
  const ByteMap& bm = ByteMap::get();
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    const auto b0 = (uint8_t)piece[i];
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < piece.size()) {
      cp = ((b0 & 0x1Fu) << 6) | ((uint8_t)piece[i + 1] & 0x3Fu);
      if (cp < 0x80) return std::nullopt;  // overlong: not a character of the map
      i += 2;
    } else {
      return std::nullopt;  // 3- and 4-byte characters are never in the map
    }
    if (cp >= bm.cp_to_byte.size() || bm.cp_to_byte[cp] < 0) return std::nullopt;
    out.push_back((char)bm.cp_to_byte[cp]);
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  const ByteMap& bm = ByteMap::get();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out.append(bm.byte_to_utf8[(uint8_t)c]);
  return out;
}

}  // namespace ds::tokenizer

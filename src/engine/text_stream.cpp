#include "engine/text_stream.h"

#include <algorithm>

namespace ds::engine {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the UTF-8 sequence starting at s[i] if it is complete and valid; 0 if invalid;
// -1 if it is a valid start that runs past the end of s.
int utf8_seq(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  int n;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;               // no overlong
  else if (c == 0xED) n = 3, hi = 0x9F;               // no surrogates
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c == 0xF4) n = 4, hi = 0x8F;               // <= U+10FFFF
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else return 0;
  for (int k = 1; k < n; k++) {
    if (i + k >= s.size()) return -1;
    unsigned char x = b(i + k);
    if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return 0;
  }
  return n;
}

}  // namespace

std::string utf8_take_valid(std::string_view bytes, std::string* tail) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    int n = utf8_seq(bytes, i);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else if (n < 0) {
      if (tail) {
        *tail = std::string(bytes.substr(i));
        return out;
      }
      out.append(kReplacement);
      break;
    } else {
      out.append(kReplacement);
      i++;
    }
  }
  if (tail) tail->clear();
  return out;
}

std::string utf8_sanitize(std::string_view bytes) { return utf8_take_valid(bytes, nullptr); }

TextStream::TextStream(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string TextStream::push(std::string_view bytes) {
  if (stopped_) return {};
  pending_.append(bytes);
  std::string tail;
  held_ += utf8_take_valid(pending_, &tail);
  pending_ = std::move(tail);
  return release();
}

std::string TextStream::release() {
  // Earliest complete stop string: everything before it is the rest of the reply.
  size_t first = std::string::npos;
  for (auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    pending_.clear();
    return out;
  }
  // Longest suffix of held_ that is a proper prefix of some stop string stays held.
  size_t keep = 0;
  for (auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; k--) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return {};
  std::string out = held_ + utf8_sanitize(pending_);
  held_.clear();
  pending_.clear();
  return out;
}

}  // namespace ds::engine

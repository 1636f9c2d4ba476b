// A pushdown automaton over bytes for one compiled Grammar: advance() takes the next byte of the
// document or refuses it (then nothing changes), complete() says whether the document may end here.
// JSON per RFC 8259: strings with escapes and \uXXXX (a high surrogate must be followed by a low one,
// a lone low one is refused), UTF-8 validated (no overlong forms, no surrogates, nothing past
// U+10FFFF), numbers by the exact grammar, true/false/null, nesting.
// Bounds, so that a model cannot loop forever on what the grammar allows: between two tokens of the
// document at most kMaxGap whitespace bytes, of which at most one line break (\n or \r; two before the
// document); nothing after the top-level value; at most kMaxDepth nested containers.
// Alternatives (anyOf) that the first bytes cannot tell apart are followed side by side (one stack
// each, at most kMaxStacks, identical ones merged). The state is two flat vectors: cheap to copy,
// which the vocabulary walk (token_mask.h) does at every trie node.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace ds::grammar {

// One level of a stack: a container, string, number or literal being matched. No padding: the
// bytes of the state are its cache key.
struct Frame {
  int32_t node = 0;
  uint32_t count = 0;  // Array: items so far; Object: the current / next property; Literal: bytes matched
  uint32_t lo = 0;     // Literal: candidate range [lo, hi); Object: key bytes matched
  uint32_t hi = 0;
  uint64_t keys = 0;   // Object: the keys still matching, bit j = property count + j
  uint32_t cp = 0;     // String: the \u value so far, or the next UTF-8 byte's range (lo | hi << 8)
  uint8_t phase = 0;
  uint8_t ws = 0;      // whitespace bytes in the current gap
  uint8_t nl = 0;      // line breaks in the current gap
  uint8_t sub = 0;     // String: hex digits / UTF-8 continuation bytes still to come
};
static_assert(sizeof(Frame) == 32, "Frame must have no padding");

class Matcher {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxGap = 32;
  static constexpr int kMaxStacks = 32;

  // `g` must outlive the matcher.
  explicit Matcher(const Grammar& g);

  // Takes byte `b` if it can continue the document; false (state unchanged) otherwise.
  bool advance(uint8_t b);
  // Every byte in turn; false at the first refused one (the bytes before it are taken).
  bool advance(std::string_view bytes);
  // The bytes so far are a whole document (it may still continue: a number can take more digits).
  bool complete() const;
  // For the vocabulary walk, which then shares the state instead of copying it: whether b is a plain character
  // (printable ASCII but " and \, or a UTF-8 lead byte: see utf8_lead) inside a string (on every stack), and what advance(b) would do
  // with it after `pending` such characters not yet applied (add_chars): Same (strings without a length bound:
  // nothing changes), Count (a character count grows by one), Full (maxLength reached on every stack: refused),
  // or No (not that case: advance to know).
  enum class Plain : uint8_t { No, Same, Count, Full };
  Plain plain_char(uint8_t b, uint32_t pending) const;
  // Applies `n` plain characters that plain_char counted (Count); stacks they take past maxLength end.
  void add_chars(uint32_t n);
  // The state as bytes: equal keys, equal futures (for caching masks per state).
  std::string key() const;

 private:
  const Grammar* g_;
  std::vector<Frame> frames_;     // every stack, one after another
  std::vector<uint32_t> ends_;    // stack i is frames_[ends_[i-1] .. ends_[i])
};

// A valid UTF-8 lead byte inside a string: how many continuation bytes follow, and the first one's range
// (the rest are 80..BF). What the matcher checks; the vocabulary walk checks them itself while it shares a state.
bool utf8_lead(uint8_t b, uint8_t& more, uint8_t& lo, uint8_t& hi);

}  // namespace ds::grammar

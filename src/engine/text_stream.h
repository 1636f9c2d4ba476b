// Output text built token by token: bytes are held back until they form whole UTF-8 characters
// (invalid bytes become U+FFFD, so output is always valid UTF-8), and text that could be the start
// of a stop string is held back until it is known not to be. When a stop string completes, the
// text before it is released and everything from it on is dropped (OpenAI's `stop`).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ds::engine {

// Splits `bytes` into valid UTF-8 (invalid sequences replaced by U+FFFD) and an incomplete but so
// far valid trailing sequence (at most 3 bytes), which is returned in `tail`.
std::string utf8_take_valid(std::string_view bytes, std::string* tail);
// `bytes` as valid UTF-8, every invalid or incomplete sequence replaced by U+FFFD.
std::string utf8_sanitize(std::string_view bytes);

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops = {});
  // Adds the bytes of one token; returns the text that can now be shown (maybe empty).
  std::string push(std::string_view bytes);
  // End of the reply: the held-back text (an incomplete character becomes U+FFFD); empty after a stop.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string release();
  std::vector<std::string> stops_;
  std::string pending_;  // incomplete UTF-8 bytes
  std::string held_;     // valid text that may begin a stop string
  bool stopped_ = false;
};

}  // namespace ds::engine

// Quoting strings with escapes, the one implementation behind the chat templates' JSON writer
// (tojson, src/chat/jinja_value.cpp) and the GGUF metadata printer (src/gguf/value.cpp).
#pragma once
#include <string>
#include <string_view>

namespace ds {

enum class QuoteStyle {
  // JSON as Python's json.dumps(ensure_ascii=False) writes it: \" \\ \n \r \t \b \f, other control
  // characters as \u00XX, everything else (UTF-8, and invalid bytes) copied unchanged.
  Json,
  // json.dumps(ensure_ascii=True): as Json, and every code point from U+007F up as \uXXXX (a
  // surrogate pair above U+FFFF). A byte that is not part of valid UTF-8 becomes \udcXX (Python's
  // surrogateescape: overlong forms, encoded surrogates and values above U+10FFFF are invalid).
  JsonAscii,
  // For people (logs, `deltaserve inspect`): \" \\ \n \r \t, other control characters and DEL as
  // \xXX, everything else copied unchanged.
  Display,
};

// Appends `s` to `out` in double quotes, escaped in `style`.
void append_quoted(std::string& out, std::string_view s, QuoteStyle style);
std::string quoted(std::string_view s, QuoteStyle style);

}  // namespace ds

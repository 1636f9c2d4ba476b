// JSON that tokenize, detokenize and chat-template read from stdin. Their parsed values are dumped (into
// error messages) and walked recursively (by the chat template), so text the server would refuse (too deep,
// or an object too wide to parse in reasonable time) is refused here too, before it is parsed: 200,000 '['
// on stdin overflowed the stack (SIGSEGV) in detokenize and chat-template.
#pragma once
#include <string_view>

#include "core/error.h"
#include "server/json_text.h"

namespace ds::app {

// An Error naming `where` when the server would refuse `text` before parsing it (ds::server::json_shape_error:
// nesting deeper than kMaxJsonDepth, an object wider than kMaxJsonMembers).
inline Status check_json_depth(std::string_view text, std::string_view where) {
  if (auto why = server::json_shape_error(text)) return err("{}: the JSON {}", where, *why);
  return {};
}

}  // namespace ds::app

// JSON that tokenize, detokenize and chat-template read from stdin. Their parsed values are dumped (into
// error messages) and walked recursively (by the chat template), so text that nests arrays / objects deeper
// than the server's bound is refused before it is parsed, as the server refuses such a body: 200,000 '[' on
// stdin overflowed the stack (SIGSEGV) in detokenize and chat-template.
#pragma once
#include <string_view>

#include "core/error.h"
#include "server/json_text.h"

namespace ds::app {

// An Error naming `where` when `text` nests deeper than ds::server::kMaxJsonDepth.
inline Status check_json_depth(std::string_view text, std::string_view where) {
  if (server::nests_deeper_than(text, server::kMaxJsonDepth))
    return err("{}: JSON nests deeper than {} levels of arrays / objects", where, server::kMaxJsonDepth);
  return {};
}

}  // namespace ds::app

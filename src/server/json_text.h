// JSON text the server parses: the request body and the JSON inside its strings (a tool call's
// "arguments"), and the JSON the model writes in its tool calls. Parsed values are later copied, dumped
// and walked recursively (request checks, the chat template, the reply), so text that nests arrays /
// objects deeper than kMaxJsonDepth is refused before it is parsed: a 400 KB string of '[' must not
// overflow a stack.
#pragma once
#include <nlohmann/json.hpp>

#include <string_view>

namespace ds::server {

inline constexpr int kMaxJsonDepth = 256;

// True when arrays/objects in `text` nest deeper than `max_depth` (brackets inside strings do not count).
bool nests_deeper_than(std::string_view text, int max_depth);

// json::parse without exceptions: a discarded value (is_discarded()) when `text` is not JSON or nests
// deeper than kMaxJsonDepth.
nlohmann::ordered_json parse_json_text(std::string_view text);

}  // namespace ds::server

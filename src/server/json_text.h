// JSON text the server parses: the request body and the JSON inside its strings (a tool call's
// "arguments"), and the JSON the model writes in its tool calls. Such text is refused before it is
// parsed when its shape would make the parse or later work blow up:
// - arrays/objects nested deeper than kMaxJsonDepth: parsed values are later copied, dumped and walked
//   recursively (request checks, the chat template, the reply); a 400 KB string of '[' must not
//   overflow a stack;
// - an object with more than kMaxJsonMembers members: nlohmann's ordered_json finds a key by a linear
//   search, so parsing an object of n members costs n²/2 key comparisons (80,000 members, 1 MB, took 8 s;
//   a 5 MB body with one 300,000-member object held a core for 162 s).
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace ds::server {

inline constexpr int kMaxJsonDepth = 256;
inline constexpr int kMaxJsonMembers = 1024;  // as many as 'logit_bias' may hold

// True when arrays/objects in `text` nest deeper than `max_depth` (brackets inside strings do not count).
bool nests_deeper_than(std::string_view text, int max_depth);

// Why `text` is refused before it is parsed ("nests arrays/objects more than 256 levels deep", "has an
// object with more than 1024 members (at byte 5012)"), or nullopt.
std::optional<std::string> json_shape_error(std::string_view text);

// json::parse without exceptions: a discarded value (is_discarded()) when `text` is not JSON or
// json_shape_error refuses it.
nlohmann::ordered_json parse_json_text(std::string_view text);

}  // namespace ds::server

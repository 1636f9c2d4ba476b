#include "server/json_text.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

namespace ds::server {

namespace {

struct Shape {
  bool too_deep = false, too_wide = false;
  size_t at = 0;  // byte offset of the bracket or comma that went past the bound
};

// One pass over `text`, brackets and commas inside strings not counted; stops at the first container
// nested deeper than `max_depth` or object with more than `max_members` members.
Shape scan(std::string_view text, int max_depth, int max_members) {
  std::vector<std::pair<bool, int>> open;  // per open container: is an object, its members so far
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); i++) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(open.size()) >= max_depth) return {true, false, i};
      open.emplace_back(c == '{', 1);
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',' && !open.empty() && open.back().first && ++open.back().second > max_members) {
      return {false, true, i};
    }
  }
  return {};
}

}  // namespace

bool nests_deeper_than(std::string_view text, int max_depth) {
  return scan(text, max_depth, std::numeric_limits<int>::max()).too_deep;
}

std::optional<std::string> json_shape_error(std::string_view text) {
  const Shape s = scan(text, kMaxJsonDepth, kMaxJsonMembers);
  if (s.too_deep) return fmt::format("nests arrays/objects more than {} levels deep", kMaxJsonDepth);
  if (s.too_wide) return fmt::format("has an object with more than {} members (at byte {})", kMaxJsonMembers, s.at);
  return std::nullopt;
}

nlohmann::ordered_json parse_json_text(std::string_view text) {
  if (json_shape_error(text)) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(text, nullptr, false);
}

}  // namespace ds::server

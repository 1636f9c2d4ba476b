#include "server/responses_items.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

namespace ds::server {

using json = nlohmann::ordered_json;

json input_item(const json& n, const std::string& id) {
  const std::string& type = n["type"].get_ref<const std::string&>();
  if (type == "message") {
    const bool assistant = n["role"] == "assistant";
    json part = assistant ? json{{"type", "output_text"}, {"annotations", json::array()}, {"logprobs", json::array()},
                                 {"text", n["content"]}}
                          : json{{"type", "input_text"}, {"text", n["content"]}};
    return {{"id", id}, {"type", "message"}, {"role", n["role"]}, {"status", "completed"},
            {"content", json::array({std::move(part)})}};
  }
  if (type == "function_call")
    return {{"id", id},          {"type", "function_call"}, {"status", "completed"},
            {"arguments", n["arguments"]}, {"call_id", n["call_id"]},   {"name", n["name"]}};
  if (type == "function_call_output")
    return {{"id", id}, {"type", "function_call_output"}, {"status", "completed"}, {"call_id", n["call_id"]},
            {"output", n["output"]}};
  return {{"id", id},
          {"type", "reasoning"},
          {"status", "completed"},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", n["text"]}}})}};
}

namespace {

const std::string* param(const QueryParams& q, const char* key) {
  auto it = q.find(key);
  return it == q.end() ? nullptr : &it->second;
}

std::string item_id(const std::string& type, const std::string& response_id, size_t i) {
  const char* prefix = type == "message"                ? "msg"
                       : type == "function_call"        ? "fc"
                       : type == "function_call_output" ? "fco"
                                                        : "rs";
  return fmt::format("{}_{}_in{}", prefix, response_id.substr(response_id.find('_') + 1), i);
}

}  // namespace

std::variant<json, ApiError> input_item_list(const std::string& response_id, const json& input, const QueryParams& q) {
  int limit = 20;
  if (const std::string* v = param(q, "limit")) {
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), limit);
    if (ec != std::errc() || end != v->data() + v->size() || limit < 1 || limit > 100)
      return bad_request(fmt::format("'limit' must be an integer between 1 and 100, got '{}'", *v), "limit");
  }
  bool asc = false;
  if (const std::string* v = param(q, "order")) {
    if (*v != "asc" && *v != "desc")
      return bad_request(fmt::format("'order' must be \"asc\" or \"desc\", got '{}'", *v), "order");
    asc = *v == "asc";
  }
  std::vector<json> items;  // in the chosen order
  for (size_t i = 0; i < input.size(); i++) items.push_back(input_item(input[i], item_id(input[i]["type"], response_id, i)));
  if (!asc) std::reverse(items.begin(), items.end());
  size_t from = 0;
  if (const std::string* v = param(q, "after")) {
    auto it = std::find_if(items.begin(), items.end(), [&](const json& item) { return item["id"] == *v; });
    if (it == items.end())
      return bad_request(fmt::format("'after': no input item of response '{}' has the id '{}'", response_id, *v),
                         "after");
    from = static_cast<size_t>(it - items.begin()) + 1;
  }
  const size_t to = std::min(items.size(), from + static_cast<size_t>(limit));
  json data = json::array();
  for (size_t i = from; i < to; i++) data.push_back(std::move(items[i]));
  return json{{"object", "list"},
              {"data", data},
              {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
              {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
              {"has_more", to < items.size()}};
}

}  // namespace ds::server

// libFuzzer target for the chat reply parser (server/reply_parser.h): the model's output is arbitrary bytes.
// Input: byte 0 = flags (bit 0: the prompt ended inside <think>; bit 1: parse tool calls), byte 1 = the chunk size
// of the streamed run (1 + byte % 16), the rest = the reply. Properties (__builtin_trap when broken; ASan / UBSan
// catch the rest):
//  * streaming does not change the result: the reasoning, content and tool calls (name, arguments) gathered from
//    the chunked pushes equal those of one push of the whole reply;
//  * every tool call's arguments are the text of a JSON object.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/reply_parser.h"

using ds::server::ReplyDelta;
using ds::server::ReplyParser;
using json = nlohmann::ordered_json;

namespace {

const json& tools() {
  static const json t = json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
      "city":{"type":"string"},"days":{"type":"integer"},"zip":{"type":["string","null"]},
      "tags":{"type":"array","items":{"type":"string"}},"opt":{"anyOf":[{"type":"object"},{"type":"null"}]}}}}},
    {"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])");
  return t;
}

ReplyDelta run(bool in_reasoning, bool parse_tools, std::string_view reply, size_t step) {
  ReplyParser p(in_reasoning, parse_tools, parse_tools ? tools() : json::array());
  ReplyDelta all;
  auto add = [&](ReplyDelta d) {
    all.reasoning += d.reasoning;
    all.content += d.content;
    for (auto& c : d.tool_calls) all.tool_calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < reply.size(); i += step) add(p.push(reply.substr(i, step)));
  add(p.finish());
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool in_reasoning = data[0] & 1, parse_tools = data[0] & 2;
  const size_t step = 1 + data[1] % 16;
  const std::string_view reply(reinterpret_cast<const char*>(data + 2), size - 2);
  const ReplyDelta whole = run(in_reasoning, parse_tools, reply, reply.size() + 1);
  const ReplyDelta chunked = run(in_reasoning, parse_tools, reply, step);
  if (whole.reasoning != chunked.reasoning || whole.content != chunked.content) __builtin_trap();
  if (whole.tool_calls.size() != chunked.tool_calls.size()) __builtin_trap();
  for (size_t i = 0; i < whole.tool_calls.size(); i++) {
    const auto &a = whole.tool_calls[i], &b = chunked.tool_calls[i];
    if (a.name != b.name || a.arguments != b.arguments) __builtin_trap();
    const json args = json::parse(a.arguments, nullptr, false);
    if (args.is_discarded() || !args.is_object()) __builtin_trap();
  }
  return 0;
}

// libFuzzer target for the Jinja chat templates (chat/chat_template.h): a GGUF file's template is arbitrary text.
// Input: the template source. It must parse or fail with a message; one that parses must render a small
// conversation (with tools) or fail with a message, within the limits set here (output, call depth, steps), so a
// template can neither crash the process nor run away. ASan / UBSan catch memory and arithmetic errors.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/chat_template.h"

using json = nlohmann::ordered_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = ds::chat::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) {
    if (t.error().message.empty()) __builtin_trap();
    return 0;
  }
  ds::chat::ChatTemplate::Limits lim;
  lim.max_output_bytes = 1 << 20;
  lim.max_call_depth = 50;
  lim.max_steps = 200'000;
  t->set_limits(lim);
  t->set_special_tokens(json{{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  static const json messages = json::parse(R"([
    {"role":"system","content":"Be brief."},
    {"role":"user","content":"Weather in Paris? ünïcode \u00e9"},
    {"role":"assistant","content":"","reasoning_content":"think","tool_calls":[{"type":"function","function":
      {"name":"get_weather","arguments":{"city":"Paris","days":3}}}]},
    {"role":"tool","content":"{\"temp\": 21}"},
    {"role":"user","content":[{"type":"text","text":"and tomorrow?"}]}])");
  static const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather",
    "description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  (void)t->render(messages, tools, true, json{{"enable_thinking", false}});  // raise_exception('') may say nothing
  return 0;
}

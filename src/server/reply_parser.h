// Splits a chat reply, as it streams, into reasoning (inside <think>...</think>), content, and tool
// calls (<tool_call>...</tool_call>), so each can go to its OpenAI field: reasoning_content,
// content, tool_calls. Two tool-call bodies are understood:
//   Qwen3.5 (XML):  <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//   Qwen3 (JSON):   <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
// Text that might be the start of a tag is held back until it is known; whitespace at the end of
// content is held until more content follows (so the blank line before a tool call or after
// </think> is not sent). A body that parses as neither is passed on as content, verbatim.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ds::server {

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits
  std::string name;
  std::string arguments;  // JSON object text
};

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// One tool call body (the text between <tool_call> and </tool_call>); false if it is neither form.
// `tools` (the request's tool list) gives parameter types: an XML value whose schema allows a
// string stays a string (None / null is null where the schema allows null); otherwise it is read as
// JSON when it parses, else kept as a string.
bool parse_tool_call_body(std::string_view body, const nlohmann::ordered_json& tools, ToolCall& out);

class ReplyParser {
 public:
  // in_reasoning: the prompt ended inside <think> (Qwen3.5's generation prompt with thinking on).
  ReplyParser(bool in_reasoning, bool parse_tools, nlohmann::ordered_json tools);
  ReplyDelta push(std::string_view text);
  ReplyDelta finish();  // end of reply: flushes everything held back
  bool in_reasoning() const { return mode_ == Mode::Reasoning; }

 private:
  enum class Mode { Reasoning, Content, ToolCall };
  void run(ReplyDelta& d, bool final);
  void emit_content(ReplyDelta& d, std::string_view s, bool final);
  Mode mode_;
  bool parse_tools_;
  nlohmann::ordered_json tools_;
  std::string buf_;          // not yet classified
  std::string ws_;           // content whitespace held back
  std::string ws_before_call_;  // whitespace dropped before the current <tool_call>
  bool content_started_ = false;  // non-whitespace content seen (no <think> may open after that)
  bool seen_think_ = false;
  bool after_think_ = false;  // drop whitespace right after </think>
  int n_calls_ = 0;
};

}  // namespace ds::server

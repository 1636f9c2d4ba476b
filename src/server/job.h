// One accepted generation request on the HTTP side: turns the engine's events into OpenAI JSON,
// either as server-sent events (chat.completion.chunk / text_completion chunks, then
// "data: [DONE]") or, when not streaming, as one response at the end. HTTP-agnostic so the
// framing can be tested without sockets.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/text_codec.h"
#include "server/reply_parser.h"

namespace ds::server {

enum class Endpoint { Chat, Completion };

struct JobOptions {
  Endpoint kind = Endpoint::Chat;
  std::string id;                // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created = 0;           // unix seconds
  bool stream = false;
  bool include_usage = false;    // streaming: a last chunk with usage
  int32_t top_logprobs = -1;     // -1: no logprobs
  int64_t prompt_chars = 0;      // completions: characters of the prompt (logprobs text_offset starts there)
  bool in_reasoning = false;     // chat: the prompt opened <think>
  bool parse_tools = false;      // chat: tool_choice is not "none" (calls are parsed only if `tools` is non-empty)
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  // chat: the reply's opening that the prompt already holds (a forced tool call's, see forced_call_opening):
  // parsed as if the model had written it, so the call it opens comes out as tool_calls.
  std::string reply_prefix;
  bool first_call_only = false;  // chat: parallel_tool_calls false (calls after the first are dropped)
  // chat: tool_choice named a function. OpenAI then answers finish_reason "stop", not "tool_calls" (for "auto" and
  // "required" it says "tool_calls"), streaming or not; clients written against it test for that.
  bool named_tool_choice = false;
};

// A chat reply's delta from one engine event: the event's text through the parser (flushed at the final
// event). Its tokens count into `n_reasoning` when the thinking block is open before them (</think>) or
// after them (<think>).
ReplyDelta parse_event(ReplyParser& parser, const engine::Event& ev, int32_t& n_reasoning);
// parallel_tool_calls false: the reply's first call only (`n_calls` came before this delta).
void keep_first_call(ReplyDelta& d, size_t n_calls);

// Unicode characters (code points) in UTF-8 text: what OpenAI's text_offset counts.
int64_t utf8_chars(std::string_view s);

class Job {
 public:
  Job(JobOptions o, const engine::TextCodec& codec);

  // Streaming: the first SSE text (chat: the assistant role chunk).
  std::string sse_start();
  // Consumes events. Streaming: returns the SSE text to send (after the final event it ends
  // with "data: [DONE]\n\n"). Non-streaming: accumulates and returns "".
  std::string on_events(std::vector<engine::Event>& evs);
  bool done() const { return done_; }
  // Non-streaming, once done(): HTTP status and body (call once: it moves the logprobs out).
  std::pair<int, nlohmann::ordered_json> result();
  const JobOptions& options() const { return o_; }
  int32_t n_generated() const { return last_.n_generated; }

 private:
  nlohmann::ordered_json chunk(nlohmann::ordered_json choice) const;
  nlohmann::ordered_json usage() const;
  nlohmann::ordered_json chat_logprob(const engine::TokenOut& t) const;
  nlohmann::ordered_json take_logprobs();  // pending per-token entries in this endpoint's shape, or null
  std::string finish_reason() const;
  void add_delta(ReplyDelta d, std::string& sse);

  JobOptions o_;
  const engine::TextCodec& codec_;
  std::unique_ptr<ReplyParser> parser_;
  bool done_ = false;
  engine::Event last_;         // the final event (usage, finish reason)
  std::string reasoning_, content_, text_;
  std::vector<ToolCall> calls_;
  std::vector<engine::TokenOut> pending_lp_, all_lp_;
  int32_t n_reasoning_ = 0;    // chat: tokens sampled inside the thinking block
  int64_t text_offset_ = 0;    // completions logprobs: characters before the next token (prompt included)
};

}  // namespace ds::server

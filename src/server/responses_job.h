// One accepted POST /v1/responses request: turns the engine's events, split by the chat path's
// ReplyParser, into OpenAI's Response object (non-streaming) or its server-sent events (streaming):
//   response.created, response.in_progress, then per output item: response.output_item.added,
//   (reasoning) response.content_part.added, response.reasoning_text.delta..., response.reasoning_text.done,
//   response.content_part.done; (message) response.content_part.added, response.output_text.delta...,
//   response.output_text.done, response.content_part.done; (function_call)
//   response.function_call_arguments.delta, response.function_call_arguments.done; response.output_item.done;
//   and last response.completed, response.incomplete (max_output_tokens reached) or response.failed,
//   each with the whole Response. Every event is "event: TYPE\ndata: JSON\n\n" with `type` and an increasing
//   `sequence_number` (from 0); no "[DONE]" follows (OpenAI sends none). The items come in the reply's order:
//   the reasoning item, then message and function_call items as the text and calls come. A completed reply
//   with neither text nor calls gets an empty message, so output[0] of a thinking-free reply is its message.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/reply_parser.h"

namespace ds::server {

struct ResponsesJobOptions {
  std::string id;  // "resp_" + hex
  std::string model;
  int64_t created = 0;
  bool stream = false;
  bool in_reasoning = false;  // the prompt opened <think>
  bool parse_tools = false;   // tool_choice is not "none" (calls are parsed only if `tools` is non-empty)
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // chat form: the parser's argument types
  std::string reply_prefix;   // a forced tool call's opening, already in the prompt (see JobOptions)
  bool first_call_only = false;
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();  // ResponsesRequest::echo
  // Called once with the final Response when it is completed or incomplete (not when it failed).
  std::function<void(const nlohmann::ordered_json& response)> on_finished;
};

class ResponsesJob {
 public:
  explicit ResponsesJob(ResponsesJobOptions o);
  // Streaming: response.created and response.in_progress.
  std::string sse_start();
  // Consumes events. Streaming: returns the SSE text to send. Non-streaming: accumulates and returns "".
  std::string on_events(std::vector<engine::Event>& evs);
  bool done() const { return done_; }
  // Non-streaming, once done(): HTTP status and body (the Response, or a 500 error).
  std::pair<int, nlohmann::ordered_json> result();

 private:
  nlohmann::ordered_json response(const char* status) const;
  nlohmann::ordered_json usage() const;
  void event(nlohmann::ordered_json e, std::string& out);
  std::string item_id(const char* prefix) const;
  void open(nlohmann::ordered_json item, std::string& out);
  void close_open(const char* status, std::string& out);
  void open_text_item(const char* kind, std::string& out);
  void add_text(const char* kind, const std::string& text, std::string& out);
  void add_call(const ToolCall& c, std::string& out);
  void finish(const engine::Event& ev, std::string& out);

  ResponsesJobOptions o_;
  std::unique_ptr<ReplyParser> parser_;
  bool done_ = false;
  engine::Event last_;
  int64_t seq_ = 0;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();
  int open_ = -1;           // index in output_ of the reasoning or message item still open, or -1
  std::string open_text_;   // its text so far
  size_t n_calls_ = 0;
  int32_t n_reasoning_ = 0;
  nlohmann::ordered_json final_;  // the final Response
};

}  // namespace ds::server

// Parsing and validation of OpenAI request bodies (/v1/chat/completions, /v1/completions) into the
// server's own structs. Every rejection is an ApiError naming the field (param) and what was
// expected. Unknown fields are ignored, as OpenAI-compatible servers generally do, so clients that
// send newer fields keep working; known fields with values we cannot honour (n > 1, images, schema
// keywords that constrained generation does not enforce) are refused rather than silently ignored.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "grammar/token_mask.h"
#include "sampler/sampler.h"
#include "server/api_error.h"

namespace ds::server {

// Fields both endpoints share.
struct CommonParams {
  std::string model;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::optional<int64_t> max_tokens;   // max_tokens / max_completion_tokens
  sampler::SamplingParams sampling;    // seed filled by the caller when absent
  bool has_seed = false;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int32_t top_logprobs = -1;           // -1: logprobs off
  // response_format json_object / json_schema: the reply's content is a document of this grammar. With tools
  // offered (tool_choice auto) the content is still constrained, so no tool call can be made; a forced tool call
  // together with it is refused.
  std::shared_ptr<const grammar::Constraint> constraint;
};

struct ChatRequest {
  CommonParams common;
  nlohmann::ordered_json messages;  // normalised: content is a string, tool arguments are objects
  nlohmann::ordered_json tools;     // array (maybe empty)
  bool parse_tool_calls = true;  // false with tool_choice "none"
  // tool_choice "required" (a call to any of `tools`) or a named function ({"type": "function", "function":
  // {"name": NAME}}, which must be in `tools`): the reply is made to open with a tool call (the server puts the
  // call's opening text, up to and including NAME when named, at the end of the prompt). The prompt is rendered
  // with enable_thinking false, as the call must come first: an explicit enable_thinking true is refused.
  bool force_tool_call = false;
  std::string forced_function;      // the named function; empty with "required"
  bool parallel_tool_calls = true;  // false: only the reply's first tool call is returned
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

struct CompletionRequest {
  CommonParams common;
  std::variant<std::string, std::vector<int32_t>> prompt;
};

// Both return nullopt on success. `n_vocab` bounds token ids and logit_bias keys.
std::optional<ApiError> parse_chat_request(const nlohmann::ordered_json& body, int32_t n_vocab, ChatRequest& out);
std::optional<ApiError> parse_completion_request(const nlohmann::ordered_json& body, int32_t n_vocab, CompletionRequest& out);

}  // namespace ds::server

// POST /tokenize and POST /detokenize (the shapes vLLM's server uses, so token-counting clients work):
//   /tokenize   {"prompt": TEXT} or a chat request's {"messages": [...], "tools": ..., ...}
//               -> {"count": N, "max_model_len": CTX, "tokens": [ids]} (+ "token_strs" with
//               "return_token_strs": true). A prompt is tokenized as /v1/completions does (special-token text
//               stays text); messages give exactly the prompt a /v1/chat/completions request with that body
//               would run (template, tools, thinking switch, a forced tool call's opening).
//   /detokenize {"tokens": [ids]} -> {"prompt": TEXT} (bytes that are not valid UTF-8 become U+FFFD).
// Errors are OpenAI's shape with `param` naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "engine/text_codec.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace ds::server {

// The prompt tokens of a parsed chat request (the server's own prompt building), or its error.
using ChatTokensFn = std::function<std::variant<std::vector<int32_t>, ApiError>(const ChatRequest&)>;

std::variant<nlohmann::ordered_json, ApiError> tokenize_reply(const nlohmann::ordered_json& body,
                                                              const engine::TextCodec& codec, int64_t n_ctx,
                                                              const ChatTokensFn& chat_tokens);
std::variant<nlohmann::ordered_json, ApiError> detokenize_reply(const nlohmann::ordered_json& body,
                                                                const engine::TextCodec& codec);

}  // namespace ds::server

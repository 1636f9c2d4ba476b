// POST /v1/responses (OpenAI's Responses API) request bodies -> the chat path's ChatRequest, so a
// response is generated with the same prompt building, sampling, tool-call parsing, tool_choice
// enforcement and limits as a chat completion. `input` (a string or a list of items) and the items of a
// continued response (previous_response_id) become chat messages:
//   message {role, content: string | [input_text | output_text parts]}  -> that message (developer: system)
//   function_call {call_id, name, arguments}                            -> an assistant tool call (calls in a
//                                                                          row are one assistant turn)
//   function_call_output {call_id, output}                              -> a tool message
//   reasoning {content: [reasoning_text]}                               -> reasoning_content of the assistant
//                                                                          turn after it (the template decides
//                                                                          whether to show it); its summary and
//                                                                          encrypted_content are ignored
// `instructions` is a system message before them. Function tools ({type: "function", name, description,
// parameters, strict}: strict is echoed, not enforced) become chat tools; tool_choice "none" / "auto" /
// "required" / {type: "function", name} as in chat. reasoning.effort "none" / "minimal" turns thinking off,
// the other efforts on; absent, the template's default. max_output_tokens is max_completion_tokens.
// Refused with a 400 naming the field: other item / content / tool / tool_choice types (images, files,
// hosted tools), text.format other than "text", truncation "auto", background true, conversation, prompt.
// Unknown fields are ignored, as in chat; of the chat path's extensions, seed, top_k, min_p,
// presence_penalty, frequency_penalty, repetition_penalty and stop are honoured.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace ds::server {

struct ResponsesRequest {
  ChatRequest chat;
  // The conversation as normalised items ({type: message, role, content: TEXT}, {type: reasoning, text},
  // {type: function_call, call_id, name, arguments}, {type: function_call_output, call_id, output}): the
  // continued response's, then this request's input. What the store keeps, with the response's output.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  bool store = true;
  // The request's settings that every Response object repeats (instructions, max_output_tokens,
  // parallel_tool_calls, previous_response_id, reasoning, store, temperature, text, tool_choice, tools,
  // top_p, truncation, user, metadata), in the Response's shapes.
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
};

// A stored response's conversation (normalised items), or nullopt when the id is unknown.
using ConversationLookup = std::function<std::optional<nlohmann::ordered_json>(const std::string& id)>;

// Items (input items, or a Response's output items) -> normalised items, appended to `out`; `param`
// names the list in errors ("input").
std::optional<ApiError> normalise_items(const nlohmann::ordered_json& items, const std::string& param,
                                        nlohmann::ordered_json& out);

// nullopt on success. An unknown previous_response_id is a 400 (code previous_response_not_found).
std::optional<ApiError> parse_responses_request(const nlohmann::ordered_json& body, int32_t n_vocab,
                                                const ConversationLookup& lookup, ResponsesRequest& out);

}  // namespace ds::server

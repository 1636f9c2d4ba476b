// Chat messages -> prompt tokens: render with the model's chat template, then tokenize with
// special-token parsing on, so the template's own control tokens (<|im_start|>, <|im_end|>)
// become their ids. User-supplied text must not be able to forge them: before rendering, every
// control-token text inside a message, tool definition or template argument is prefixed with a private-use sentinel
// (U+E000.., one not present in the request); after rendering, the text is split at the sentinels
// and each protected control text is tokenized as plain text, the rest with special parsing.
// If a sentinel does not come back (the template dropped its text, e.g. an earlier turn's reasoning, or changed it),
// the request is rendered again with every client control text taken out; it is accepted only if the template then
// writes the same prompt outside the protected spans, otherwise refused rather than risk a forged token.
// User-defined added tokens such as <think> or <tool_call> are recognised in any text, exactly
// as the tokenizer itself does; they are not control tokens.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "engine/text_codec.h"
#include "server/api_error.h"

namespace ds::server {

// The chat template: (messages, tools, add_generation_prompt, extra kwargs) -> text, or the
// template's own error (e.g. raise_exception) as an Error.
using ChatRenderFn = std::function<Result<std::string>(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                                       bool add_generation_prompt, const nlohmann::ordered_json& kwargs)>;

struct ChatPrompt {
  std::string text;             // the rendered prompt (sentinels removed)
  std::vector<int32_t> tokens;
  bool in_reasoning = false;    // the prompt ends inside an open <think> block
  // Tokens of the conversation without the generation prompt, when they are a prefix of `tokens`
  // (0 otherwise): a good snapshot point, since the next turn shares it even when the template
  // re-renders this turn's reply differently (e.g. without its reasoning).
  int32_t conversation_tokens = 0;
};

// On a template error, ApiError 400 with the template's message. Message content null (beside
// tool_calls) reaches the template as "".
std::variant<ChatPrompt, ApiError> build_chat_prompt(const ChatRenderFn& render, const engine::TextCodec& codec,
                                                     const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                                     const nlohmann::ordered_json& kwargs);

// The text a reply opens with when it must call a tool (tool_choice "required", or the named
// `function`): the template's own rendering of a call, from <tool_call> up to where the function's name
// starts ("required": the model picks the function) or ends (named), found by rendering an assistant turn
// that calls `function` (a probe name for "required"). Qwen3.5 gives "<tool_call>\n<function=" + name,
// Qwen3 "<tool_call>\n{\"name\": \"" + name. A template that renders no such call (render_chatml) gets
// Qwen3.5's form. `function` must be plain text (no markup): it is written into the prompt.
std::string forced_call_opening(const ChatRenderFn& render, const std::string& function);

// A ChatML renderer (Qwen-style, no tools, thinking per kwargs.enable_thinking): for tests and for
// models without a template.
Result<std::string> render_chatml(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                  const nlohmann::ordered_json& kwargs);

}  // namespace ds::server

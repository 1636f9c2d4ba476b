// Chat templates: renders a conversation into the prompt text a model was trained on, by interpreting
// the Jinja template the model file carries (GGUF key `tokenizer.chat_template`) exactly as Hugging
// Face's apply_chat_template renders it (Jinja2 3.1, ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loop controls, tojson = json.dumps(ensure_ascii=False), raise_exception,
// strftime_now). The variables a render sees are HF's: messages, tools (none when absent),
// documents (none), add_generation_prompt, the tokenizer's special tokens (bos_token, eos_token)
// and any extra keyword arguments (e.g. enable_thinking).
// Errors: a template's raise_exception(msg) gives an Error whose message is exactly msg (what the
// template wants the user to see); any other problem gives "chat template: line N: ...".
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "core/error.h"

namespace ds::gguf {
class File;
}

namespace ds::chat {

class ChatTemplate {
 public:
  // Every render finishes: these bound its output, macro recursion, total work and the stack its recursion uses.
  struct Limits {
    size_t max_output_bytes = size_t{64} << 20;
    int max_call_depth = 200;
    uint64_t max_steps = 50'000'000;
    size_t max_stack_bytes = size_t{6} << 20;  // less where the thread's stack has less room
  };

  // Lexes and parses `source`; a syntax error, unknown tag, filter or test names the line.
  static Result<ChatTemplate> parse(std::string source);

  // apply_chat_template(messages, tools=tools, add_generation_prompt=..., **extra_kwargs).
  // `messages` is a JSON array of message objects; `tools` a JSON array or null; `extra_kwargs` an
  // object (or null) whose members become template variables.
  Result<std::string> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt,
                             const nlohmann::ordered_json& extra_kwargs = nlohmann::ordered_json()) const;

  // Renders with exactly the members of `vars` (an object) as variables, plus the globals.
  Result<std::string> render_vars(const nlohmann::ordered_json& vars) const;

  // Special tokens passed to every render(), e.g. {"bos_token": "<s>", "eos_token": "</s>"}.
  void set_special_tokens(nlohmann::ordered_json tokens) { special_tokens_ = std::move(tokens); }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }
  void set_limits(const Limits& l) { limits_ = l; }
  const std::string& source() const;

 private:
  ChatTemplate() = default;
  struct Impl;
  std::shared_ptr<const Impl> impl_;  // the parsed template; shared, immutable, thread-safe to render
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
  Limits limits_;
};

// The template in a GGUF file (`tokenizer.chat_template`), with the special-token variables HF takes
// from its special_tokens_map: bos_token / eos_token / unk_token / pad_token, from
// `tokenizer.ggml.{bos,eos,unknown,padding}_token_id` when the file names them (as llama.cpp does).
Result<ChatTemplate> chat_template_from_gguf(const gguf::File& file);
// Just those special-token variables (an empty object when the file has no vocabulary).
Result<nlohmann::ordered_json> special_tokens_from_gguf(const gguf::File& file);

}  // namespace ds::chat

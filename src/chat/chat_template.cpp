#include "chat/chat_template.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "gguf/gguf.h"

namespace ds::chat {

struct ChatTemplate::Impl {
  std::string source;
  jinja::Body body;
};

namespace {

Error to_error(const jinja::TemplateError& e, int fallback_line, const char* phase) {
  if (e.raised) return Error{e.message};
  int line = e.line ? e.line : fallback_line;
  if (line > 0) return err("chat template: {}line {}: {}", phase, line, e.message);
  return err("chat template: {}{}", phase, e.message);
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  auto impl = std::make_shared<Impl>();
  try {
    impl->body = jinja::parse(jinja::tokenize(source));
  } catch (const jinja::TemplateError& e) {
    return to_error(e, 0, "syntax error on ");
  } catch (const std::exception& e) {  // e.g. bad_alloc: still an Error, never an escape
    return err("chat template: cannot parse: {}", e.what());
  }
  impl->source = std::move(source);
  ChatTemplate t;
  t.impl_ = std::move(impl);
  return t;
}

const std::string& ChatTemplate::source() const { return impl_->source; }

Result<std::string> ChatTemplate::render_vars(const nlohmann::ordered_json& vars) const {
  if (!vars.is_object()) return err("chat template: variables must be a JSON object, got {}", vars.type_name());
  jinja::Interp in(
      jinja::Limits{limits_.max_output_bytes, limits_.max_call_depth, limits_.max_steps, limits_.max_stack_bytes});
  try {
    auto globals = std::make_shared<jinja::Frame>();
    globals->vars = jinja::make_globals();
    for (auto& [k, v] : vars.items()) globals->set(k, jinja::from_json(v));
    return in.render(impl_->body, globals);
  } catch (const jinja::TemplateError& e) {
    return to_error(e, in.line(), "");
  } catch (const std::exception& e) {
    return err("chat template: line {}: {}", in.line(), e.what());
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_kwargs) const {
  if (!messages.is_array()) return err("chat template: messages must be a JSON array, got {}", messages.type_name());
  if (!tools.is_null() && !tools.is_array())
    return err("chat template: tools must be a JSON array or null, got {}", tools.type_name());
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object())
    return err("chat template: extra template arguments must be a JSON object, got {}", extra_kwargs.type_name());
  // The order HF builds them in: render(messages=, tools=, documents=, add_generation_prompt=,
  // **special_tokens_map, **kwargs).
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = messages;
  vars["tools"] = tools;
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (auto& [k, v] : special_tokens_.items()) vars[k] = v;
  if (extra_kwargs.is_object())
    for (auto& [k, v] : extra_kwargs.items()) vars[k] = v;
  return render_vars(vars);
}

Result<nlohmann::ordered_json> special_tokens_from_gguf(const gguf::File& file) {
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  if (!file.has("tokenizer.ggml.tokens")) return special;
  DS_ASSIGN(std::vector<std::string> tokens, file.get_string_array("tokenizer.ggml.tokens"));
  for (auto [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                           std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
                           std::pair{"tokenizer.ggml.unknown_token_id", "unk_token"},
                           std::pair{"tokenizer.ggml.padding_token_id", "pad_token"}}) {
    if (!file.has(key)) continue;
    DS_ASSIGN(uint64_t id, file.get_uint(key));
    if (id >= tokens.size())
      return err("chat: {}: {} = {} is outside the vocabulary ({} tokens)", file.path(), key, id, tokens.size());
    special[name] = tokens[id];
  }
  return special;
}

Result<ChatTemplate> chat_template_from_gguf(const gguf::File& file) {
  if (!file.has("tokenizer.chat_template"))
    return err("chat: {}: no chat template in the model (key tokenizer.chat_template is missing); pass one with --template",
               file.path());
  DS_ASSIGN(std::string src, file.get_string("tokenizer.chat_template"));
  auto t = ChatTemplate::parse(std::move(src));
  if (!t) return err("{} (template from {})", t.error().message, file.path());
  DS_ASSIGN(nlohmann::ordered_json special, special_tokens_from_gguf(file));
  t->set_special_tokens(std::move(special));
  return t;
}

}  // namespace ds::chat

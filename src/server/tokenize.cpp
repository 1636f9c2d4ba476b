#include "server/tokenize.h"

#include <fmt/format.h>

#include "server/request_fields.h"

namespace ds::server {

using json = nlohmann::ordered_json;

namespace {

// The text of `key` (vLLM's "prompt", or llama.cpp's "content"), if the body has it.
std::variant<std::string, ApiError, std::monostate> text_field(const json& body) {
  for (const char* key : {"prompt", "content"}) {
    const json* v = field(body, key);
    if (!v) continue;
    if (!v->is_string()) return wrong_type(key, "a string", *v);
    return v->get<std::string>();
  }
  return std::monostate{};
}

}  // namespace

std::variant<json, ApiError> tokenize_reply(const json& body, const engine::TextCodec& codec, int64_t n_ctx,
                                            const ChatTokensFn& chat_tokens) {
  if (!body.is_object()) return wrong_type("body", "an object", body);
  bool want_strs = false;
  if (auto e = get_bool(body, "return_token_strs", want_strs)) return *e;
  std::vector<int32_t> tokens;
  auto text = text_field(body);
  if (auto* e = std::get_if<ApiError>(&text)) return *e;
  if (auto* s = std::get_if<std::string>(&text)) {
    if (field(body, "messages")) return bad_request("send either 'prompt' or 'messages', not both", "messages");
    tokens = codec.encode(*s, false);  // as /v1/completions: special-token text stays text
  } else if (field(body, "messages")) {
    ChatRequest cr;
    if (auto e = parse_chat_request(body, codec.n_vocab(), cr)) return *e;
    auto t = chat_tokens(cr);
    if (auto* e = std::get_if<ApiError>(&t)) return *e;
    tokens = std::move(std::get<std::vector<int32_t>>(t));
  } else {
    return bad_request("the body needs 'prompt' (a string) or 'messages' (a chat conversation)", "prompt");
  }
  json r = {{"count", tokens.size()}, {"max_model_len", n_ctx}, {"tokens", tokens}};
  if (want_strs) {
    json strs = json::array();
    for (int32_t t : tokens) strs.push_back(codec.token_bytes(t));  // invalid UTF-8 is replaced when sent
    r["token_strs"] = std::move(strs);
  }
  return r;
}

std::variant<json, ApiError> detokenize_reply(const json& body, const engine::TextCodec& codec) {
  if (!body.is_object()) return wrong_type("body", "an object", body);
  const json* toks = field(body, "tokens");
  if (!toks) return bad_request("the body needs 'tokens' (an array of token ids)", "tokens");
  if (!toks->is_array()) return wrong_type("tokens", "an array of token ids", *toks);
  std::string text;
  for (size_t i = 0; i < toks->size(); i++) {
    const json& t = (*toks)[i];
    const std::string param = fmt::format("tokens[{}]", i);
    if (!t.is_number_integer()) return wrong_type(param, "a token id (an integer)", t);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= codec.n_vocab())
      return bad_request(fmt::format("token id {} is not in [0, {})", id, codec.n_vocab()), param);
    text += codec.token_bytes(static_cast<int32_t>(id));
  }
  // vLLM answers "prompt", llama.cpp's server "content": both, so either kind of client reads it.
  return json{{"prompt", text}, {"content", text}};
}

}  // namespace ds::server

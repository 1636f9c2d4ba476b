#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <fmt/format.h>

#include "grammar/schema.h"
#include "server/json_text.h"
#include "server/request_fields.h"

namespace ds::server {

using json = nlohmann::ordered_json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "value";
  }
}

ApiError wrong_type(const std::string& param, const char* expected, const json& v) {
  return bad_request(fmt::format("'{}' must be {}, got {}", param, expected, type_name(v)), param);
}

// Present and not null.
const json* field(const json& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> get_bool(const json& b, const char* key, bool& out, const char* param) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(param ? param : key, "a boolean", *v);
  out = v->get<bool>();
  return std::nullopt;
}

namespace {

std::optional<ApiError> get_number(const json& b, const char* key, double lo, double hi, std::optional<double>& out) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(key, "a number", *v);
  double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    return bad_request(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x), key);
  out = x;
  return std::nullopt;
}

std::optional<ApiError> get_int(const json& b, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  int64_t x;
  if (v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());
  } else if (v->is_number()) {
    return bad_request(fmt::format("'{}' must be an integer between {} and {}", key, lo, hi), key);
  } else {
    return wrong_type(key, "an integer", *v);
  }
  if (x < lo || x > hi) return bad_request(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, x), key);
  out = x;
  return std::nullopt;
}

#define TRY_API(expr)                  \
  do {                                 \
    if (auto _e = (expr)) return _e;   \
  } while (0)

// Compiled schemas by their text, shared by the requests that send the same one: a grammar's mask cache
// (grammar::Constraint) then serves them all. The text is looked up before anything is compiled, so a repeated
// schema costs a lookup (up to tens of ms of compile work otherwise; a schema that fails to compile is not kept and
// fails again). Bounded: when full it starts again. Schemas of more than 64 KB of text are not kept (each request
// compiles its own, freed with it): 64 of up to 8 MB each, their text as the key and their grammars, could hold a GB.
using Compiled = std::variant<grammar::Grammar, grammar::SchemaError>;
std::variant<std::shared_ptr<const grammar::Constraint>, grammar::SchemaError> shared_constraint(
    const std::string& key, const std::function<Compiled()>& compile) {
  static std::mutex m;
  static std::unordered_map<std::string, std::shared_ptr<const grammar::Constraint>> cache;
  constexpr size_t kMaxSchemas = 64, kMaxKeptSchemaBytes = 64 << 10;
  const bool keep = key.size() <= kMaxKeptSchemaBytes;
  if (keep) {
    std::lock_guard lk(m);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  Compiled g = compile();
  if (auto* e = std::get_if<grammar::SchemaError>(&g)) return std::move(*e);
  auto c = std::make_shared<const grammar::Constraint>(std::get<grammar::Grammar>(std::move(g)));
  if (!keep) return c;
  std::lock_guard lk(m);
  if (cache.size() >= kMaxSchemas) cache.clear();
  return cache.emplace(key, c).first->second;  // another request may have put it first: then that one is shared
}

// response_format: text (nothing to do), json_object (any object) or json_schema (an instance of the schema); both
// JSON ones compile to a grammar the reply is constrained to (grammar/schema.h says which keywords are enforced).
std::optional<ApiError> parse_response_format(const json& rf, CommonParams& c) {
  if (!rf.is_object()) return wrong_type("response_format", "an object", rf);
  auto t = rf.find("type");
  if (t == rf.end()) return bad_request("'response_format.type' is required", "response_format.type");
  if (!t->is_string()) return wrong_type("response_format.type", "a string", *t);
  const std::string type = t->get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    c.constraint = std::get<0>(shared_constraint("json_object", [] { return Compiled(grammar::any_object()); }));
    return std::nullopt;
  }
  if (type != "json_schema")
    return bad_request(fmt::format("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got "
                                   "\"{}\"", type),
                       "response_format.type");
  auto js = rf.find("json_schema");
  if (js == rf.end()) return bad_request("'response_format.json_schema' is required", "response_format.json_schema");
  if (!js->is_object()) return wrong_type("response_format.json_schema", "an object", *js);
  if (auto n = js->find("name"); n != js->end() && !n->is_string())
    return wrong_type("response_format.json_schema.name", "a string", *n);
  if (auto st = js->find("strict"); st != js->end() && !st->is_boolean() && !st->is_null())
    return wrong_type("response_format.json_schema.strict", "a boolean", *st);
  auto sc = js->find("schema");
  if (sc == js->end())
    return bad_request("'response_format.json_schema.schema' is required", "response_format.json_schema.schema");
  auto r = shared_constraint("schema " + sc->dump(),
                             [&] { return grammar::compile_schema(*sc, "response_format.json_schema.schema"); });
  if (auto* e = std::get_if<grammar::SchemaError>(&r)) return bad_request(e->message, e->path);
  c.constraint = std::get<0>(std::move(r));
  return std::nullopt;
}

std::optional<ApiError> parse_common(const json& b, int32_t n_vocab, CommonParams& c) {
  if (const json* v = field(b, "model")) {
    if (!v->is_string()) return wrong_type("model", "a string", *v);
    c.model = v->get<std::string>();
  }
  TRY_API(get_bool(b, "stream", c.stream));
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    TRY_API(get_bool(*so, "include_usage", c.include_usage, "stream_options.include_usage"));
  }
  std::optional<int64_t> mt, mct;
  TRY_API(get_int(b, "max_tokens", 1, INT32_MAX, mt));
  TRY_API(get_int(b, "max_completion_tokens", 1, INT32_MAX, mct));
  c.max_tokens = mct ? mct : mt;

  std::optional<double> d;
  auto& s = c.sampling;
  TRY_API(get_number(b, "temperature", 0, 2, d));
  if (d) s.temperature = static_cast<float>(*d);
  d.reset();
  TRY_API(get_number(b, "top_p", 0, 1, d));
  if (d) s.top_p = static_cast<float>(*d);
  d.reset();
  TRY_API(get_number(b, "min_p", 0, 1, d));
  if (d) s.min_p = static_cast<float>(*d);
  d.reset();
  TRY_API(get_number(b, "presence_penalty", -2, 2, d));
  if (d) s.presence_penalty = static_cast<float>(*d);
  d.reset();
  TRY_API(get_number(b, "frequency_penalty", -2, 2, d));
  if (d) s.frequency_penalty = static_cast<float>(*d);
  d.reset();
  TRY_API(get_number(b, "repetition_penalty", 0.01, 10, d));
  if (d) s.repetition_penalty = static_cast<float>(*d);
  std::optional<int64_t> i;
  TRY_API(get_int(b, "top_k", -1, INT32_MAX, i));
  if (i) s.top_k = *i < 0 ? 0 : static_cast<int32_t>(*i);
  i.reset();
  TRY_API(get_int(b, "seed", INT64_MIN, INT64_MAX, i));
  if (i) {
    s.seed = static_cast<uint64_t>(*i);
    c.has_seed = true;
  }
  i.reset();
  TRY_API(get_int(b, "n", 1, 1, i));
  i.reset();
  TRY_API(get_int(b, "best_of", 1, 1, i));

  if (const json* st = field(b, "stop")) {
    if (st->is_string()) {
      c.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > 16) return bad_request("'stop' may hold at most 16 strings", "stop");
      for (auto& x : *st) {
        if (!x.is_string()) return wrong_type("stop", "a string or an array of strings", x);
        c.stop.push_back(x.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings", *st);
    }
    for (auto& x : c.stop)
      if (x.size() > 1024) return bad_request("a 'stop' string may be at most 1024 bytes long", "stop");
  }
  TRY_API(get_bool(b, "ignore_eos", c.ignore_eos));

  if (const json* lb = field(b, "logit_bias")) {
    if (!lb->is_object()) return wrong_type("logit_bias", "an object of token id -> bias", *lb);
    if (lb->size() > 1024) return bad_request("'logit_bias' may hold at most 1024 entries", "logit_bias");
    for (auto& [k, v] : lb->items()) {
      // Digits only: strtoll alone also takes " 5", "+5" and "-0".
      const bool digits = !k.empty() && k.size() <= 10 && k.find_first_not_of("0123456789") == std::string::npos;
      const long long id = digits ? std::strtoll(k.c_str(), nullptr, 10) : -1;
      if (id < 0 || id >= n_vocab)
        return bad_request(fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", k, n_vocab), "logit_bias");
      if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100)
        return bad_request("'logit_bias' values must be numbers between -100 and 100", "logit_bias");
      float bias = static_cast<float>(v.get<double>());
      s.logit_bias.emplace_back(static_cast<int32_t>(id), bias <= -100 ? -INFINITY : bias);
    }
  }
  if (const json* rf = field(b, "response_format")) TRY_API(parse_response_format(*rf, c));
  return std::nullopt;
}

// Message content as the template sees it: a string (text parts joined; "" for an assistant's null).
std::optional<ApiError> normalise_content(json& m, size_t idx, bool null_ok) {
  const std::string param = fmt::format("messages[{}].content", idx);
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    if (!null_ok) return bad_request(fmt::format("'{}' is required", param), param);
    // An assistant tool-call message comes back from OpenAI clients with content null. Templates such as
    // Qwen3's test `'</think>' in message.content`, which fails on null; Qwen3.5's renders null as "".
    m["content"] = "";
    return std::nullopt;
  }
  if (it->is_string()) return std::nullopt;
  if (!it->is_array()) return wrong_type(param, "a string or an array of content parts", *it);
  std::string text;
  for (auto& part : *it) {
    if (!part.is_object()) return wrong_type(param, "an array of content parts", part);
    auto t = part.find("type");
    if (t == part.end() || !t->is_string()) return bad_request(fmt::format("'{}': each part needs a 'type'", param), param);
    if (*t != "text")
      return bad_request(fmt::format("'{}': content parts of type '{}' are not supported (text only)", param,
                                     t->get<std::string>()),
                         param);
    auto tx = part.find("text");
    if (tx == part.end() || !tx->is_string()) return bad_request(fmt::format("'{}': a text part needs 'text'", param), param);
    text += tx->get<std::string>();
  }
  m["content"] = text;
  return std::nullopt;
}

std::optional<ApiError> normalise_tool_calls(json& m, size_t idx) {
  const std::string param = fmt::format("messages[{}].tool_calls", idx);
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) {
    m.erase("tool_calls");
    return std::nullopt;
  }
  if (!it->is_array()) return wrong_type(param, "an array", *it);
  for (auto& tc : *it) {
    if (!tc.is_object()) return wrong_type(param, "an array of objects", tc);
    auto f = tc.find("function");
    if (f == tc.end() || !f->is_object()) return bad_request(fmt::format("'{}': each call needs a 'function' object", param), param);
    auto name = f->find("name");
    if (name == f->end() || !name->is_string())
      return bad_request(fmt::format("'{}': function.name must be a string", param), param);
    auto args = f->find("arguments");
    if (args == f->end() || args->is_null()) {
      (*f)["arguments"] = json::object();
    } else if (args->is_string()) {
      // OpenAI sends arguments as JSON text; the chat templates iterate them as a mapping.
      const std::string& text = args->get_ref<const std::string&>();
      if (auto why = json_shape_error(text))
        return bad_request(fmt::format("'{}': function.arguments {}", param, *why), param);
      json parsed = json::parse(text, nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object())
        return bad_request(fmt::format("'{}': function.arguments must be a JSON object (as text)", param), param);
      *args = std::move(parsed);
    } else if (!args->is_object()) {
      return wrong_type(param + ".function.arguments", "a JSON object or its text", *args);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& b, json& out) {
  const json* ms = field(b, "messages");
  if (!ms) return bad_request("'messages' is required", "messages");
  if (!ms->is_array()) return wrong_type("messages", "an array", *ms);
  if (ms->empty()) return bad_request("'messages' must not be empty", "messages");
  out = json::array();
  for (size_t i = 0; i < ms->size(); i++) {
    json m = (*ms)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(p, "an object", m);
    auto r = m.find("role");
    if (r == m.end() || !r->is_string()) return bad_request(fmt::format("'{}.role' must be a string", p), p + ".role");
    std::string role = r->get<std::string>();
    if (role == "developer") m["role"] = role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      return bad_request(fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; got '{}'", p, role),
                         p + ".role");
    TRY_API(normalise_content(m, i, role == "assistant"));
    if (role == "assistant") {
      TRY_API(normalise_tool_calls(m, i));
      if (auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null() && !rc->is_string())
        return wrong_type(p + ".reasoning_content", "a string", *rc);
    } else {
      m.erase("tool_calls");
    }
    out.push_back(std::move(m));
  }
  return std::nullopt;
}

// A name the server writes into the prompt as the forced call's opening: OpenAI's own rule for function
// names (dots allowed too), so it cannot carry markup or control-token text.
bool plain_function_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 &&
         n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == std::string::npos;
}

// The function name of `obj` (a tool or a named tool_choice, at `p`): obj.function must be an object with a non-empty
// string name.
std::optional<ApiError> function_name(const json& obj, const std::string& p, std::string& name) {
  auto f = obj.find("function");
  if (f == obj.end() || !f->is_object()) return bad_request(fmt::format("'{}.function' must be an object", p), p + ".function");
  auto n = f->find("name");
  if (n == f->end() || !n->is_string() || n->get<std::string>().empty())
    return bad_request(fmt::format("'{}.function.name' must be a non-empty string", p), p + ".function.name");
  name = n->get<std::string>();
  return std::nullopt;
}

// tool_choice {"type": "function", "function": {"name": NAME}}: NAME must be one of `tools` (parsed before).
std::optional<ApiError> parse_named_tool_choice(const json& tc, ChatRequest& out) {
  auto ty = tc.find("type");
  if (ty == tc.end() || !ty->is_string() || *ty != "function")
    return bad_request("'tool_choice.type' must be \"function\"", "tool_choice.type");
  std::string name;
  TRY_API(function_name(tc, "tool_choice", name));
  const bool offered = std::any_of(out.tools.begin(), out.tools.end(),
                                   [&](const json& t) { return t["function"]["name"] == name; });
  if (!offered)
    return bad_request(fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", name),
                       "tool_choice.function.name");
  if (!plain_function_name(name))
    return bad_request(fmt::format("'tool_choice' cannot force the function '{}': a forced function's name must be "
                                   "1 to 64 letters, digits, '_', '.' or '-'",
                                   name),
                       "tool_choice.function.name");
  out.force_tool_call = true;
  out.forced_function = name;
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const json& b, ChatRequest& out) {
  out.tools = json::array();
  if (const json* t = field(b, "tools")) {
    if (!t->is_array()) return wrong_type("tools", "an array", *t);
    for (size_t i = 0; i < t->size(); i++) {
      const json& tool = (*t)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!tool.is_object()) return wrong_type(p, "an object", tool);
      auto ty = tool.find("type");
      if (ty != tool.end() && (!ty->is_string() || *ty != "function"))
        return bad_request(fmt::format("'{}.type' must be \"function\"", p), p + ".type");
      std::string name;
      TRY_API(function_name(tool, p, name));
      json norm = tool;
      norm["type"] = "function";
      out.tools.push_back(std::move(norm));
    }
  }
  if (const json* tc = field(b, "tool_choice")) {
    if (tc->is_string()) {
      std::string v = tc->get<std::string>();
      if (v != "none" && v != "auto" && v != "required")
        return bad_request("'tool_choice' must be none, auto, required or a function object", "tool_choice");
      if (v == "none") out.parse_tool_calls = false;
      if (v == "required") {
        if (out.tools.empty()) return bad_request("'tool_choice' \"required\" needs a non-empty 'tools'", "tool_choice");
        out.force_tool_call = true;
      }
    } else if (tc->is_object()) {
      TRY_API(parse_named_tool_choice(*tc, out));
    } else {
      return wrong_type("tool_choice", "a string or an object", *tc);
    }
  }
  TRY_API(get_bool(b, "parallel_tool_calls", out.parallel_tool_calls));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_request(const json& b, int32_t n_vocab, ChatRequest& out) {
  if (!b.is_object()) return bad_request("the request body must be a JSON object");
  TRY_API(parse_common(b, n_vocab, out.common));
  TRY_API(parse_messages(b, out.messages));
  TRY_API(parse_tools(b, out));
  bool logprobs = false;
  TRY_API(get_bool(b, "logprobs", logprobs));
  std::optional<int64_t> tl;
  TRY_API(get_int(b, "top_logprobs", 0, 20, tl));
  if (tl && !logprobs) return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  out.common.top_logprobs = logprobs ? static_cast<int32_t>(tl.value_or(0)) : -1;
  if (const json* k = field(b, "chat_template_kwargs")) {
    if (!k->is_object()) return wrong_type("chat_template_kwargs", "an object", *k);
    out.template_kwargs = *k;
    // The names the template gets from the request itself (Hugging Face's apply_chat_template refuses them too).
    for (const char* own : {"messages", "tools", "documents", "add_generation_prompt"})
      if (k->contains(own))
        return bad_request(fmt::format("'chat_template_kwargs.{}' is not allowed: the request's own fields set it", own),
                           std::string("chat_template_kwargs.") + own);
    if (auto et = k->find("enable_thinking"); et != k->end() && !et->is_boolean())
      return wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *et);
  }
  if (out.force_tool_call && out.common.constraint)
    return bad_request("'response_format' json_object / json_schema cannot be combined with a forced tool call "
                       "(tool_choice \"required\" or a named function): the reply is either the call or the document",
                       "response_format");
  if (out.force_tool_call) {
    // The forced call opens the reply, where the thinking block would be.
    if (out.template_kwargs.value("enable_thinking", false))
      return bad_request("'chat_template_kwargs.enable_thinking' true cannot be combined with a forced tool call "
                         "(tool_choice \"required\" or a named function): the reply opens with the call",
                         "chat_template_kwargs.enable_thinking");
    out.template_kwargs["enable_thinking"] = false;
  }
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const json& b, int32_t n_vocab, CompletionRequest& out) {
  if (!b.is_object()) return bad_request("the request body must be a JSON object");
  TRY_API(parse_common(b, n_vocab, out.common));
  const json* p = field(b, "prompt");
  if (!p) return bad_request("'prompt' is required", "prompt");
  const json* one = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) return bad_request("only one prompt per request is supported", "prompt");
    one = &p->front();
  }
  if (one->is_string()) {
    out.prompt = one->get<std::string>();
  } else if (one->is_array()) {
    std::vector<int32_t> ids;
    for (auto& x : *one) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_vocab)
        return bad_request(fmt::format("'prompt' token ids must be integers in [0, {})", n_vocab), "prompt");
      ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    out.prompt = std::move(ids);
  } else {
    return wrong_type("prompt", "a string, an array of token ids, or an array holding one of those", *one);
  }
  bool echo = false;
  TRY_API(get_bool(b, "echo", echo));
  if (echo) return bad_request("'echo' is not supported", "echo");
  if (const json* sfx = field(b, "suffix")) {
    if (!sfx->is_string() || !sfx->get<std::string>().empty()) return bad_request("'suffix' is not supported", "suffix");
  }
  std::optional<int64_t> lp;
  TRY_API(get_int(b, "logprobs", 0, 20, lp));
  out.common.top_logprobs = lp ? static_cast<int32_t>(*lp) : -1;
  return std::nullopt;
}

}  // namespace ds::server

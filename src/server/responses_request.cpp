#include "server/responses_request.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <set>

#include "server/json_text.h"
#include "server/request_fields.h"

namespace ds::server {

using json = nlohmann::ordered_json;

namespace {

#define TRY_API(expr)                  \
  do {                                 \
    if (auto _e = (expr)) return _e;   \
  } while (0)

// A string field of `o` that must be present and non-empty.
std::optional<ApiError> required_string(const json& o, const char* key, const std::string& p, std::string& out) {
  const json* v = field(o, key);
  if (!v) return bad_request(fmt::format("'{}.{}' is required", p, key), p + "." + key);
  if (!v->is_string()) return wrong_type(p + "." + key, "a string", *v);
  out = v->get<std::string>();
  if (out.empty()) return bad_request(fmt::format("'{}.{}' must not be empty", p, key), p + "." + key);
  return std::nullopt;
}

// Text of a content list: the parts of the given types joined (the text of each is under "text", or "refusal"
// for a refusal part).
std::optional<ApiError> join_text(const json& content, const std::string& p, const std::set<std::string>& types,
                                  std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return wrong_type(p, "a string or an array of content parts", content);
  for (size_t j = 0; j < content.size(); j++) {
    const json& part = content[j];
    const std::string pp = fmt::format("{}[{}]", p, j);
    if (!part.is_object()) return wrong_type(pp, "an object", part);
    const json* t = field(part, "type");
    if (!t || !t->is_string()) return bad_request(fmt::format("'{}.type' must be a string", pp), pp + ".type");
    const std::string type = t->get<std::string>();
    if (!types.count(type))
      return bad_request(fmt::format("'{}.type': content parts of type '{}' are not supported (text only)", pp, type),
                         pp + ".type");
    const char* key = type == "refusal" ? "refusal" : "text";
    const json* tx = field(part, key);
    if (!tx || !tx->is_string()) return bad_request(fmt::format("'{}.{}' must be a string", pp, key), pp + "." + key);
    out += tx->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> normalise_message(const json& it, const std::string& p, json& out) {
  const json* r = field(it, "role");
  if (!r || !r->is_string()) return bad_request(fmt::format("'{}.role' must be a string", p), p + ".role");
  const std::string role = r->get<std::string>();
  if (role != "user" && role != "system" && role != "developer" && role != "assistant")
    return bad_request(fmt::format("'{}.role' must be one of user, system, developer, assistant; got '{}'", p, role),
                       p + ".role");
  const json* c = field(it, "content");
  if (!c) return bad_request(fmt::format("'{}.content' is required", p), p + ".content");
  std::string text;
  TRY_API(join_text(*c, p + ".content", {"input_text", "output_text", "text", "refusal"}, text));
  out = {{"type", "message"}, {"role", role}, {"content", text}};
  return std::nullopt;
}

std::optional<ApiError> normalise_call(const json& it, const std::string& p, json& out) {
  std::string call_id, name, args;
  TRY_API(required_string(it, "call_id", p, call_id));
  TRY_API(required_string(it, "name", p, name));
  const json* a = field(it, "arguments");
  if (!a || !a->is_string()) return bad_request(fmt::format("'{}.arguments' must be a string (JSON text)", p), p + ".arguments");
  args = a->get<std::string>();
  if (auto why = json_shape_error(args)) return bad_request(fmt::format("'{}.arguments' {}", p, *why), p + ".arguments");
  json parsed = parse_json_text(args);
  if (parsed.is_discarded() || !parsed.is_object())
    return bad_request(fmt::format("'{}.arguments' must be a JSON object (as text)", p), p + ".arguments");
  out = {{"type", "function_call"}, {"call_id", call_id}, {"name", name}, {"arguments", args}};
  return std::nullopt;
}

std::optional<ApiError> normalise_call_output(const json& it, const std::string& p, json& out) {
  std::string call_id, text;
  TRY_API(required_string(it, "call_id", p, call_id));
  const json* o = field(it, "output");
  if (!o) return bad_request(fmt::format("'{}.output' is required", p), p + ".output");
  TRY_API(join_text(*o, p + ".output", {"input_text"}, text));
  out = {{"type", "function_call_output"}, {"call_id", call_id}, {"output", text}};
  return std::nullopt;
}

// A reasoning item's own text (content: reasoning_text parts); a summary is not the model's text.
std::optional<ApiError> normalise_reasoning(const json& it, const std::string& p, json& out) {
  std::string text;
  if (const json* c = field(it, "content")) {
    if (!c->is_array()) return wrong_type(p + ".content", "an array of reasoning_text parts", *c);
    TRY_API(join_text(*c, p + ".content", {"reasoning_text"}, text));
  }
  out = {{"type", "reasoning"}, {"text", text}};
  return std::nullopt;
}

std::optional<ApiError> normalise_item(const json& it, const std::string& p, json& out) {
  if (!it.is_object()) return wrong_type(p, "an object", it);
  std::string type = "message";  // EasyInputMessage: {role, content} without a type
  if (const json* t = field(it, "type")) {
    if (!t->is_string()) return wrong_type(p + ".type", "a string", *t);
    type = t->get<std::string>();
  }
  if (type == "message") return normalise_message(it, p, out);
  if (type == "function_call") return normalise_call(it, p, out);
  if (type == "function_call_output") return normalise_call_output(it, p, out);
  if (type == "reasoning") return normalise_reasoning(it, p, out);
  return bad_request(fmt::format("'{}.type': input items of type '{}' are not supported (message, function_call, "
                                 "function_call_output and reasoning are)",
                                 p, type),
                     p + ".type");
}

// Normalised items -> chat messages (see the header).
json to_messages(const json& items) {
  json msgs = json::array();
  std::string reasoning;
  bool pending_reasoning = false;
  auto assistant = [&](json m) {
    if (pending_reasoning) m["reasoning_content"] = reasoning;
    reasoning.clear();
    pending_reasoning = false;
    msgs.push_back(std::move(m));
  };
  for (const json& it : items) {
    const std::string& type = it["type"].get_ref<const std::string&>();
    if (type == "reasoning") {
      reasoning += it["text"].get<std::string>();
      pending_reasoning = true;
    } else if (type == "message") {
      json m = {{"role", it["role"]}, {"content", it["content"]}};
      if (it["role"] == "assistant") assistant(std::move(m));
      else msgs.push_back(std::move(m));
    } else if (type == "function_call") {
      json call = {{"id", it["call_id"]},
                   {"type", "function"},
                   {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}};
      // Calls in a row (parallel calls), or after the assistant's text, are one assistant turn.
      if (!pending_reasoning && !msgs.empty() && msgs.back()["role"] == "assistant") {
        msgs.back()["tool_calls"].push_back(std::move(call));
      } else {
        assistant({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({std::move(call)})}});
      }
    } else {  // function_call_output
      msgs.push_back({{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", it["output"]}});
    }
  }
  return msgs;
}

// tools (flat function form) -> the chat form in `chat`, and the Response's echo of them.
std::optional<ApiError> map_tools(const json& b, json& chat, json& echo) {
  chat = json::array();
  echo = json::array();
  const json* t = field(b, "tools");
  if (!t) return std::nullopt;
  if (!t->is_array()) return wrong_type("tools", "an array", *t);
  for (size_t i = 0; i < t->size(); i++) {
    const json& tool = (*t)[i];
    const std::string p = fmt::format("tools[{}]", i);
    if (!tool.is_object()) return wrong_type(p, "an object", tool);
    const json* ty = field(tool, "type");
    if (!ty || !ty->is_string()) return bad_request(fmt::format("'{}.type' must be a string", p), p + ".type");
    if (*ty != "function")
      return bad_request(fmt::format("'{}.type': tools of type '{}' are not supported (function tools only)", p,
                                     ty->get<std::string>()),
                         p + ".type");
    std::string name;
    TRY_API(required_string(tool, "name", p, name));
    json fn = {{"name", name}};
    json e = {{"type", "function"}, {"name", name}, {"description", nullptr}, {"parameters", nullptr}, {"strict", nullptr}};
    if (const json* d = field(tool, "description")) {
      if (!d->is_string()) return wrong_type(p + ".description", "a string", *d);
      fn["description"] = e["description"] = *d;
    }
    if (const json* ps = field(tool, "parameters")) {
      if (!ps->is_object()) return wrong_type(p + ".parameters", "an object (a JSON schema)", *ps);
      fn["parameters"] = e["parameters"] = *ps;
    }
    if (const json* s = field(tool, "strict")) {
      if (!s->is_boolean()) return wrong_type(p + ".strict", "a boolean", *s);
      e["strict"] = *s;
    }
    chat.push_back({{"type", "function"}, {"function", std::move(fn)}});
    echo.push_back(std::move(e));
  }
  return std::nullopt;
}

// tool_choice -> the chat form (checked there) and the echo; sets `forced` for "required" or a named function.
std::optional<ApiError> map_tool_choice(const json& b, json& chat, json& echo, bool& forced) {
  const json* tc = field(b, "tool_choice");
  echo = "auto";
  if (!tc) return std::nullopt;
  if (tc->is_string()) {
    chat = echo = *tc;
    forced = *tc == "required";
    return std::nullopt;
  }
  if (!tc->is_object()) return wrong_type("tool_choice", "a string or an object", *tc);
  const json* ty = field(*tc, "type");
  if (!ty || !ty->is_string() || *ty != "function")
    return bad_request("'tool_choice.type' must be \"function\" (hosted tools and allowed_tools are not supported)",
                       "tool_choice.type");
  std::string name;
  TRY_API(required_string(*tc, "name", "tool_choice", name));
  chat = {{"type", "function"}, {"function", {{"name", name}}}};
  echo = {{"type", "function"}, {"name", name}};
  forced = true;
  return std::nullopt;
}

// reasoning {effort, summary} -> enable_thinking (absent: the template's default) and the echo.
std::optional<ApiError> map_reasoning(const json& b, std::optional<bool>& thinking, json& echo) {
  echo = nullptr;
  const json* r = field(b, "reasoning");
  if (!r) return std::nullopt;
  if (!r->is_object()) return wrong_type("reasoning", "an object", *r);
  echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (const json* e = field(*r, "effort")) {
    static const std::set<std::string> efforts = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (!e->is_string() || !efforts.count(e->get<std::string>()))
      return bad_request("'reasoning.effort' must be one of none, minimal, low, medium, high, xhigh", "reasoning.effort");
    thinking = *e != "none" && *e != "minimal";
    echo["effort"] = *e;
  }
  if (const json* s = field(*r, "summary")) {
    if (!s->is_string()) return wrong_type("reasoning.summary", "a string", *s);
    echo["summary"] = *s;  // accepted; the reasoning item carries the text itself, not a summary
  }
  return std::nullopt;
}

// Fields whose values we cannot honour: refused rather than ignored.
std::optional<ApiError> refuse_unsupported(const json& b) {
  if (const json* t = field(b, "text")) {
    if (!t->is_object()) return wrong_type("text", "an object", *t);
    if (const json* f = field(*t, "format")) {
      const json* ty = f->is_object() ? field(*f, "type") : nullptr;
      if (!ty || !(*ty == "text" || *ty == "json_object" || *ty == "json_schema"))
        return bad_request("text.format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": "
                           "\"json_schema\", \"name\": ..., \"schema\": {...}}",
                           "text.format");
    }
  }
  if (const json* t = field(b, "truncation")) {
    if (!t->is_string() || *t != "disabled")
      return bad_request("only truncation \"disabled\" is supported (a prompt over the context is refused)", "truncation");
  }
  if (const json* t = field(b, "top_logprobs"); t && !(t->is_number_integer() && t->get<int64_t>() == 0))
    return bad_request("'top_logprobs' is not supported (0 or null only)", "top_logprobs");
  bool background = false;
  TRY_API(get_bool(b, "background", background));
  if (background) return bad_request("background responses are not supported", "background");
  if (field(b, "conversation")) return bad_request("'conversation' is not supported; use previous_response_id", "conversation");
  if (field(b, "prompt")) return bad_request("prompt templates ('prompt') are not supported", "prompt");
  return std::nullopt;
}

std::optional<ApiError> check_metadata(const json& b, json& echo) {
  echo = json::object();
  const json* m = field(b, "metadata");
  if (!m) return std::nullopt;
  if (!m->is_object()) return wrong_type("metadata", "an object of strings", *m);
  if (m->size() > 16) return bad_request("'metadata' may hold at most 16 pairs", "metadata");
  for (auto& [k, v] : m->items()) {
    if (k.size() > 64 || !v.is_string() || v.get<std::string>().size() > 512)
      return bad_request("'metadata' keys must be at most 64 characters and values strings of at most 512", "metadata");
  }
  echo = *m;
  return std::nullopt;
}

// The chat path names its own fields; a Responses client sent these.
void rename_param(ApiError& e) {
  static const std::pair<const char*, const char*> names[] = {
      {"max_completion_tokens", "max_output_tokens"}, {"tool_choice.function.name", "tool_choice.name"},
      {"response_format.json_schema", "text.format"}, {"response_format", "text.format"}};
  for (auto& [from, to] : names) {
    for (std::string* s : {&e.param, &e.message})
      for (size_t at; (at = s->find(from)) != std::string::npos;) s->replace(at, std::strlen(from), to);
  }
  if (e.param.starts_with("messages")) e.param = "input";
}

// The conversation: the continued response's items, then `instructions`-free input.
std::optional<ApiError> conversation(const json& b, const ConversationLookup& lookup, ResponsesRequest& out,
                                     std::string& previous) {
  if (const json* p = field(b, "previous_response_id")) {
    if (!p->is_string()) return wrong_type("previous_response_id", "a string", *p);
    previous = p->get<std::string>();
    auto items = lookup ? lookup(previous) : std::nullopt;
    if (!items)
      return bad_request(fmt::format("Previous response with id '{}' not found.", previous), "previous_response_id",
                         "previous_response_not_found");
    out.conversation = std::move(*items);
  }
  if (const json* in = field(b, "input")) {
    if (in->is_string()) {
      out.conversation.push_back({{"type", "message"}, {"role", "user"}, {"content", *in}});
    } else if (in->is_array()) {
      TRY_API(normalise_items(*in, "input", out.conversation));
    } else {
      return wrong_type("input", "a string or an array of input items", *in);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> normalise_items(const json& items, const std::string& param, json& out) {
  for (size_t i = 0; i < items.size(); i++) {
    json n;
    TRY_API(normalise_item(items[i], fmt::format("{}[{}]", param, i), n));
    out.push_back(std::move(n));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_responses_request(const json& b, int32_t n_vocab, const ConversationLookup& lookup,
                                                ResponsesRequest& out) {
  if (!b.is_object()) return bad_request("the request body must be a JSON object");
  TRY_API(refuse_unsupported(b));
  std::string previous;
  TRY_API(conversation(b, lookup, out, previous));
  json chat = json::object();
  json instructions = nullptr;
  if (const json* ins = field(b, "instructions")) {
    if (!ins->is_string()) return wrong_type("instructions", "a string", *ins);
    instructions = *ins;
  }
  chat["messages"] = json::array();
  // Templates such as Qwen3.5's take one system message, first: the instructions and the system / developer
  // messages the input opens with (Codex-style clients send both) become that one, in that order.
  json msgs = to_messages(out.conversation);
  std::optional<std::string> system;
  if (!instructions.is_null()) system = instructions.get<std::string>();
  size_t first = 0;
  for (; first < msgs.size() && (msgs[first]["role"] == "system" || msgs[first]["role"] == "developer"); first++)
    system = (system ? *system + "\n\n" : "") + msgs[first]["content"].get<std::string>();
  if (system) chat["messages"].push_back({{"role", "system"}, {"content", *system}});
  for (size_t i = first; i < msgs.size(); i++) chat["messages"].push_back(std::move(msgs[i]));
  if (out.conversation.empty()) return bad_request("'input' is required (a string or a non-empty list of items)", "input");

  json tools_echo, choice_echo, reasoning_echo, metadata_echo;
  TRY_API(map_tools(b, chat["tools"], tools_echo));
  bool forced = false;
  json choice;
  TRY_API(map_tool_choice(b, choice, choice_echo, forced));
  if (!choice.is_null()) chat["tool_choice"] = choice;
  std::optional<bool> thinking;
  TRY_API(map_reasoning(b, thinking, reasoning_echo));
  if (thinking && *thinking && forced)
    return bad_request(fmt::format("'reasoning.effort' \"{}\" cannot be combined with a forced tool call (tool_choice "
                                   "\"required\" or a named function): the reply opens with the call, not with thinking; "
                                   "use effort \"none\"",
                                   reasoning_echo["effort"].get<std::string>()),
                       "reasoning.effort");
  if (thinking) chat["chat_template_kwargs"] = {{"enable_thinking", *thinking}};
  TRY_API(check_metadata(b, metadata_echo));
  TRY_API(get_bool(b, "store", out.store));
  if (const json* u = field(b, "user"); u && !u->is_string()) return wrong_type("user", "a string", *u);

  // The rest is read by the chat path under the same names (max_output_tokens renamed).
  for (const char* k : {"model", "stream", "temperature", "top_p", "parallel_tool_calls", "seed", "top_k", "min_p",
                        "presence_penalty", "frequency_penalty", "repetition_penalty", "stop"})
    if (auto it = b.find(k); it != b.end()) chat[k] = *it;
  if (auto it = b.find("max_output_tokens"); it != b.end()) chat["max_completion_tokens"] = *it;
  // Structured outputs: text.format's flat json_schema form is chat's response_format.json_schema.
  json format = {{"type", "text"}};
  if (const json* t = field(b, "text"); t && field(*t, "format")) format = (*t)["format"];
  if (format["type"] == "json_object") chat["response_format"] = {{"type", "json_object"}};
  if (format["type"] == "json_schema") {
    json js = json::object();
    for (const char* k : {"name", "schema", "strict", "description"})
      if (auto it = format.find(k); it != format.end()) js[k] = *it;
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
  }
  if (auto e = parse_chat_request(chat, n_vocab, out.chat)) {
    rename_param(*e);
    return e;
  }

  const auto& s = out.chat.common.sampling;
  const json* mot = field(b, "max_output_tokens");
  out.echo = {{"instructions", instructions},
              {"max_output_tokens", mot ? *mot : json(nullptr)},
              {"parallel_tool_calls", out.chat.parallel_tool_calls},
              {"previous_response_id", previous.empty() ? json(nullptr) : json(previous)},
              {"reasoning", reasoning_echo},
              {"store", out.store},
              {"temperature", field(b, "temperature") ? b["temperature"] : json(s.temperature)},
              {"text", {{"format", format}}},
              {"tool_choice", choice_echo},
              {"tools", tools_echo},
              {"top_p", field(b, "top_p") ? b["top_p"] : json(s.top_p)},
              {"truncation", "disabled"},
              {"metadata", metadata_echo}};
  if (field(b, "user")) out.echo["user"] = b["user"];  // `user?: string`: absent, not null
  return std::nullopt;
}

}  // namespace ds::server

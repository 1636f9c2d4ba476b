#include "server/reply_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "server/api_error.h"
#include "server/json_text.h"

namespace ds::server {

using json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kThink = "<think>", kThinkEnd = "</think>", kCall = "<tool_call>",
                           kCallEnd = "</tool_call>";
constexpr const char* kWs = " \t\r\n";

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(kWs);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kWs);
  return s.substr(b, e - b + 1);
}

// Longest k < tag.size() with s ending in tag[0:k]: text that may become the tag.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; k--)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

std::string new_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

// The JSON-schema types a tool parameter allows: its "type" (a name or a list of names), or those of
// its anyOf / oneOf alternatives (Pydantic writes Optional[str] as anyOf [{string}, {null}]).
// Empty if unknown.
std::vector<std::string> param_types(const json& tools, const std::string& fn, const std::string& param) {
  std::vector<std::string> out;
  if (!tools.is_array()) return out;
  auto add = [&out](const json& schema) {
    auto ty = schema.find("type");
    if (ty == schema.end()) return;
    if (ty->is_string()) out.push_back(ty->get<std::string>());
    if (ty->is_array())
      for (auto& t : *ty)
        if (t.is_string()) out.push_back(t.get<std::string>());
  };
  for (auto& t : tools) {
    auto f = t.find("function");
    if (f == t.end() || !f->is_object() || f->value("name", "") != fn) continue;
    auto p = f->find("parameters");
    if (p == f->end() || !p->is_object()) return out;
    auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) return out;
    auto q = props->find(param);
    if (q == props->end() || !q->is_object()) return out;
    add(*q);
    for (const char* alt : {"anyOf", "oneOf"})
      if (auto a = q->find(alt); a != q->end() && a->is_array())
        for (auto& s : *a)
          if (s.is_object()) add(s);
    return out;
  }
  return out;
}

json xml_value(std::string_view v, const std::vector<std::string>& types) {
  auto allows = [&types](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  // Qwen3.5's template writes None with Python's str().
  if (allows("null") && (v == "None" || v == "null")) return nullptr;
  json j = parse_json_text(v);
  // The template writes objects and arrays as JSON, strings as they are: with both allowed, JSON
  // that is an allowed object or array is one.
  if (!j.is_discarded() && ((j.is_object() && allows("object")) || (j.is_array() && allows("array")))) return j;
  if (allows("string")) return std::string(v);
  if (!j.is_discarded()) return j;
  // Qwen3.5's template writes non-JSON scalars with Python's str(): True, False, None.
  if (v == "True") return true;
  if (v == "False") return false;
  if (v == "None") return nullptr;
  return std::string(v);
}

bool parse_xml(std::string_view s, const json& tools, ToolCall& out) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kPar = "<parameter=",
                             kParEnd = "</parameter>";
  if (!s.starts_with(kFn)) return false;
  size_t ne = s.find('>');
  if (ne == std::string_view::npos) return false;
  std::string name(trim(s.substr(kFn.size(), ne - kFn.size())));
  if (name.empty()) return false;
  std::string_view rest = s.substr(ne + 1);
  json args = json::object();
  while (true) {
    rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(kWs)));
    if (rest.empty()) break;  // a missing </function> is forgiven
    if (rest.starts_with(kFnEnd)) {
      rest = rest.substr(kFnEnd.size());
      break;
    }
    if (!rest.starts_with(kPar)) return false;
    size_t pe = rest.find('>');
    if (pe == std::string_view::npos) return false;
    std::string pname(trim(rest.substr(kPar.size(), pe - kPar.size())));
    size_t ve = rest.find(kParEnd, pe + 1);
    if (pname.empty() || ve == std::string_view::npos) return false;
    std::string_view v = rest.substr(pe + 1, ve - pe - 1);
    if (v.starts_with("\n")) v.remove_prefix(1);
    if (v.ends_with("\n")) v.remove_suffix(1);
    args[pname] = xml_value(v, param_types(tools, name, pname));
    rest = rest.substr(ve + kParEnd.size());
  }
  if (!trim(rest).empty()) return false;
  out.name = std::move(name);
  out.arguments = dump(args);
  return true;
}

bool parse_json_call(std::string_view s, ToolCall& out) {
  json j = parse_json_text(s);
  if (j.is_discarded() || !j.is_object()) return false;
  auto n = j.find("name");
  if (n == j.end() || !n->is_string() || n->get<std::string>().empty()) return false;
  auto a = j.find("arguments");
  if (a == j.end()) a = j.find("parameters");
  json args = json::object();
  if (a != j.end() && !a->is_null()) {
    if (a->is_string()) {
      args = parse_json_text(a->get<std::string>());
      if (args.is_discarded() || !args.is_object()) return false;
    } else if (a->is_object()) {
      args = *a;
    } else {
      return false;
    }
  }
  out.name = n->get<std::string>();
  out.arguments = dump(args);
  return true;
}

}  // namespace

bool parse_tool_call_body(std::string_view body, const json& tools, ToolCall& out) {
  std::string_view s = trim(body);
  bool ok = s.starts_with("<function=") ? parse_xml(s, tools, out) : s.starts_with("{") && parse_json_call(s, out);
  if (ok) out.id = new_call_id();
  return ok;
}

ReplyParser::ReplyParser(bool in_reasoning, bool parse_tools, json tools)
    : mode_(in_reasoning ? Mode::Reasoning : Mode::Content), parse_tools_(parse_tools), tools_(std::move(tools)) {
  seen_think_ = in_reasoning;
}

ReplyDelta ReplyParser::push(std::string_view text) {
  buf_.append(text);
  ReplyDelta d;
  run(d, false);
  return d;
}

ReplyDelta ReplyParser::finish() {
  ReplyDelta d;
  run(d, true);
  if (n_calls_ == 0 && content_started_) d.content += ws_;
  ws_.clear();
  return d;
}

void ReplyParser::emit_content(ReplyDelta& d, std::string_view s, bool /*final*/) {
  if (after_think_) {
    size_t b = s.find_first_not_of(kWs);
    if (b == std::string_view::npos) return;
    s.remove_prefix(b);
    after_think_ = false;
  }
  std::string text = ws_ + std::string(s);
  ws_.clear();
  size_t e = text.find_last_not_of(kWs);
  if (e == std::string::npos) {
    ws_ = std::move(text);
    return;
  }
  d.content.append(text, 0, e + 1);
  ws_ = text.substr(e + 1);
  content_started_ = true;
}

void ReplyParser::run(ReplyDelta& d, bool final) {
  while (true) {
    if (mode_ == Mode::Reasoning) {
      size_t pos = buf_.find(kThinkEnd);
      if (pos != std::string::npos) {
        d.reasoning.append(buf_, 0, pos);
        buf_.erase(0, pos + kThinkEnd.size());
        mode_ = Mode::Content;
        after_think_ = true;
        continue;
      }
      size_t keep = final ? 0 : partial_suffix(buf_, kThinkEnd);
      d.reasoning.append(buf_, 0, buf_.size() - keep);
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    if (mode_ == Mode::Content) {
      if (!content_started_ && !seen_think_ && n_calls_ == 0) {
        // A reply may open its own <think> block first (Qwen3 with thinking on).
        size_t i = buf_.find_first_not_of(kWs);
        if (i == std::string::npos && !final) return;
        if (i != std::string::npos) {
          std::string_view rest = std::string_view(buf_).substr(i);
          if (rest.starts_with(kThink)) {
            buf_.erase(0, i + kThink.size());
            mode_ = Mode::Reasoning;
            seen_think_ = true;
            continue;
          }
          if (!final && kThink.starts_with(rest)) return;
        }
      }
      if (parse_tools_) {
        size_t pos = buf_.find(kCall);
        if (pos != std::string::npos) {
          emit_content(d, std::string_view(buf_).substr(0, pos), false);
          ws_before_call_ = std::move(ws_);  // the blank line before a call is not content...
          ws_.clear();
          buf_.erase(0, pos + kCall.size());
          mode_ = Mode::ToolCall;
          continue;
        }
      }
      size_t keep = (final || !parse_tools_) ? 0 : partial_suffix(buf_, kCall);
      emit_content(d, std::string_view(buf_).substr(0, buf_.size() - keep), final);
      buf_.erase(0, buf_.size() - keep);
      return;
    }
    // Mode::ToolCall
    size_t pos = buf_.find(kCallEnd);
    if (pos == std::string::npos && !final) return;
    std::string_view body = std::string_view(buf_).substr(0, pos == std::string::npos ? buf_.size() : pos);
    ToolCall tc;
    if (parse_tool_call_body(body, tools_, tc)) {
      d.tool_calls.push_back(std::move(tc));
      n_calls_++;
    } else {
      // ...unless it turns out not to be a call.
      std::string raw = ws_before_call_ + std::string(kCall) + std::string(body) +
                        (pos == std::string::npos ? "" : std::string(kCallEnd));
      emit_content(d, raw, final);
    }
    buf_.erase(0, pos == std::string::npos ? buf_.size() : pos + kCallEnd.size());
    mode_ = Mode::Content;
    if (final) continue;
  }
}

}  // namespace ds::server

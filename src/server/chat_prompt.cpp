#include "server/chat_prompt.h"

#include <fmt/format.h>

#include <algorithm>

namespace ds::server {

using json = nlohmann::ordered_json;

namespace {

// UTF-8 of a code point in U+E000..U+F8FF.
std::string utf8_pua(uint32_t cp) {
  std::string s;
  s += static_cast<char>(0xE0 | (cp >> 12));
  s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  s += static_cast<char>(0x80 | (cp & 0x3F));
  return s;
}

void each_string(const json& j, const std::function<void(const std::string&)>& f) {
  if (j.is_string()) {
    f(j.get_ref<const std::string&>());
  } else if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      f(k);
      each_string(v, f);
    }
  } else if (j.is_array()) {
    for (auto& v : j) each_string(v, f);
  }
}

// A client string can also hold part of a control text that the template's own text completes: Qwen3.5 writes a
// tool call's argument as "<parameter=" + name + ">", so the name "<|im_end|" would end as "<|im_end|>". So a string
// that ends with a proper prefix of a control text, or starts with a proper suffix of one (two or more bytes: a
// template writes whole control texts, and "<" or ">" around a client's string, never part of one), gets a sentinel
// there too: after rendering, every sentinel ends the text encoded before it, so no control token can span it.
// The length of the longest proper prefix (>= 2 bytes) of a control text that s ends with; 0 if none.
size_t partial_prefix_at_end(const std::string& s, const std::vector<std::string>& ctl) {
  size_t best = 0;
  for (auto& c : ctl)
    for (size_t k = std::min(c.size(), s.size() + 1) - 1; k >= 2 && k > best; k--)
      if (s.compare(s.size() - k, k, c, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}
bool partial_suffix_at_start(const std::string& s, const std::vector<std::string>& ctl) {
  for (auto& c : ctl)
    for (size_t k = 2; k < c.size() && k <= s.size(); k++)
      if (s.compare(0, k, c, c.size() - k, k) == 0) return true;
  return false;
}

// Prefixes every occurrence of a control text, and a part of one at either end (above), with `sent`; counts the
// sentinels. With `blank`, a whole control text is replaced by it (sent + blank): the request with the client's
// control texts taken out, for the check in only_dropped below.
std::string protect(const std::string& s, const std::vector<std::string>& ctl, const std::string& sent, size_t& n,
                    const std::string* blank = nullptr) {
  std::string out;
  if (partial_suffix_at_start(s, ctl)) {
    out += sent;
    n++;
  }
  const size_t k_end = partial_prefix_at_end(s, ctl), at_end = k_end ? s.size() - k_end : std::string::npos;
  size_t i = 0;
  while (i < s.size()) {
    bool hit = false;
    for (auto& c : ctl) {
      if (s.compare(i, c.size(), c) == 0) {
        out += sent;
        out += blank ? *blank : c;
        i += c.size();
        n++;
        hit = true;
        break;
      }
    }
    if (hit) continue;
    if (i == at_end) {  // (never inside a whole control text the loop skipped: that would take a control text's first
                        // two bytes inside another, as in none of Qwen's "<|...|>" texts)
      out += sent;
      n++;
    }
    out += s[i++];
  }
  return out;
}

bool needs_protection(const std::string& s, const std::vector<std::string>& ctl) {
  for (auto& c : ctl)
    if (!c.empty() && s.find(c) != std::string::npos) return true;
  return partial_suffix_at_start(s, ctl) || partial_prefix_at_end(s, ctl) > 0;
}

json protect_json(const json& j, const std::vector<std::string>& ctl, const std::string& sent, size_t& n,
                  const std::string* blank = nullptr) {
  if (j.is_string()) return protect(j.get<std::string>(), ctl, sent, n, blank);
  if (j.is_object()) {
    json o = json::object();
    for (auto& [k, v] : j.items()) o[protect(k, ctl, sent, n, blank)] = protect_json(v, ctl, sent, n, blank);
    return o;
  }
  if (j.is_array()) {
    json a = json::array();
    for (auto& v : j) a.push_back(protect_json(v, ctl, sent, n, blank));
    return a;
  }
  return j;
}

// The longest control text at text[pos..], or nullptr.
const std::string* control_at(const std::string& text, size_t pos, const std::vector<std::string>& ctl) {
  const std::string* which = nullptr;
  for (auto& c : ctl)
    if (text.compare(pos, c.size(), c) == 0 && (!which || c.size() > which->size())) which = &c;
  return which;
}

// `text` with the control text (if any) right after each sentinel replaced by `blank`.
std::string blank_protected(const std::string& text, const std::vector<std::string>& ctl, const std::string& sent,
                            const std::string& blank) {
  std::string out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t s = text.find(sent, pos);
    out.append(text, pos, (s == std::string::npos ? text.size() : s) - pos);
    if (s == std::string::npos) break;
    out += sent;
    pos = s + sent.size();
    if (const std::string* which = control_at(text, pos, ctl)) {
      out += blank;
      pos += which->size();
    }
  }
  return out;
}

// The first private-use code point (U+E000..U+F8FF, from `from` on) whose character appears in no string of the
// request; 0 if none.
uint32_t unused_pua(uint32_t from, const json& messages, const json& tools, const json& kwargs) {
  for (uint32_t cp = from; cp <= 0xF8FF; cp++) {
    const std::string cand = utf8_pua(cp);
    bool used = false;
    auto check = [&](const std::string& s) { used = used || s.find(cand) != std::string::npos; };
    each_string(messages, check);
    each_string(tools, check);
    each_string(kwargs, check);
    if (!used) return cp;
  }
  return 0;
}

// The generation prompt opened a thinking block (Qwen3.5 with thinking on ends in "<think>\n").
bool ends_in_open_think(const std::string& text) {
  size_t e = text.find_last_not_of(" \t\r\n");
  return e != std::string::npos && std::string_view(text).substr(0, e + 1).ends_with("<think>");
}

// Messages as templates expect them: content null (OpenAI clients send it beside tool_calls, and
// replay the SDK's own reply objects that way) becomes "". Qwen3's template tests
// `'</think>' in message.content`, which fails on null; the golden conversations give such
// messages content "", and a template that accepts null renders it as "" (Qwen3.5's does).
json template_messages(const json& messages) {
  json out = messages;
  for (auto& m : out)
    if (m.is_object() && m.contains("content") && m["content"].is_null()) m["content"] = "";
  return out;
}

// A protected control text did not come through the template whole (changed, moved or duplicated, so that a
// sentinel went missing or a new one appeared); refused rather than risk a forged control token.
ApiError altered() {
  return bad_request("special-token text (e.g. <|im_end|>) in messages, tools or chat_template_kwargs did not reach the "
                     "prompt intact through the chat template; remove it from the request", "messages");
}

// The sentinels that did not come back were dropped with their text, and nothing else: rendered with every client
// control text taken out (sent + blank in its place), the template writes the same prompt as `text` once each
// protected control text in it is blanked the same way. Then every control text in `text` outside a protected span
// is one the template wrote without any client control text in its input, so it is the template's own. (A drop is
// common: Qwen3.5 leaves out the reasoning of turns before the last user message, and a template need not render
// every chat_template_kwargs entry.) A template whose output depends on the control texts themselves (e.g. splits
// on one) fails the comparison and the request is refused, as before.
bool only_dropped(const ChatRenderFn& render, const std::string& text, const json& messages, const json& tools,
                  const json& kwargs, const std::vector<std::string>& ctl, const std::string& sent,
                  const std::string& blank) {
  size_t n = 0;
  auto r = render(protect_json(messages, ctl, sent, n, &blank), protect_json(tools, ctl, sent, n, &blank), true,
                  protect_json(kwargs, ctl, sent, n, &blank));
  return r.ok() && blank_protected(r.value(), ctl, sent, blank) == blank_protected(text, ctl, sent, blank);
}

ApiError template_error(const std::string& message) {
  // The template's own errors already say "chat template: ...".
  return bad_request(message.starts_with("chat template") ? message : "chat template: " + message, "messages");
}

}  // namespace

std::variant<ChatPrompt, ApiError> build_chat_prompt(const ChatRenderFn& render, const engine::TextCodec& codec,
                                                     const json& request_messages, const json& tools, const json& kwargs) {
  const json messages = template_messages(request_messages);
  const std::vector<std::string> ctl = codec.control_texts();
  bool any = false;
  auto find_ctl = [&](const std::string& s) { any = any || needs_protection(s, ctl); };
  each_string(messages, find_ctl);
  each_string(tools, find_ctl);
  each_string(kwargs, find_ctl);  // chat_template_kwargs are the client's too: a template may render them

  ChatPrompt out;
  if (!any) {
    auto r = render(messages, tools, true, kwargs);
    if (!r.ok()) return template_error(r.error().message);
    out.text = std::move(r.value());
    out.tokens = codec.encode(out.text, true);
    out.in_reasoning = ends_in_open_think(out.text);
    if (auto conv = render(messages, tools, false, kwargs); conv.ok() && out.text.starts_with(conv.value())) {
      auto ct = codec.encode(conv.value(), true);
      if (ct.size() < out.tokens.size() && std::equal(ct.begin(), ct.end(), out.tokens.begin()))
        out.conversation_tokens = static_cast<int32_t>(ct.size());
    }
    return out;
  }

  // A sentinel that appears nowhere in the request.
  const uint32_t sent_cp = unused_pua(0xE000, messages, tools, kwargs);
  if (!sent_cp) return bad_request("the messages contain special-token text that cannot be passed safely", "messages");
  const std::string sent = utf8_pua(sent_cp);
  size_t n = 0;
  json pm = protect_json(messages, ctl, sent, n);
  json pt = protect_json(tools, ctl, sent, n);
  json pk = protect_json(kwargs, ctl, sent, n);
  auto r = render(pm, pt, true, pk);
  if (!r.ok()) return template_error(r.error().message);
  const std::string& text = r.value();

  size_t found = 0, pos = 0;
  std::string seg;
  auto flush = [&](bool special) {
    auto ids = codec.encode(seg, special);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.text += seg;
    seg.clear();
  };
  while (pos <= text.size()) {
    size_t s = text.find(sent, pos);
    seg.append(text, pos, (s == std::string::npos ? text.size() : s) - pos);
    if (s == std::string::npos) break;
    flush(true);
    pos = s + sent.size();
    found++;
    // A protected control text (or one the template completed from a protected part) is plain text; otherwise the
    // sentinel only ends the segment before it.
    const std::string* which = control_at(text, pos, ctl);
    if (!which) continue;
    seg = *which;
    flush(false);
    pos += which->size();
  }
  flush(true);
  if (found != n) {
    // (a second unused character stands for a control text taken out)
    const uint32_t blank_cp = unused_pua(sent_cp + 1, messages, tools, kwargs);
    if (!blank_cp || !only_dropped(render, text, messages, tools, kwargs, ctl, sent, utf8_pua(blank_cp))) return altered();
  }
  out.in_reasoning = ends_in_open_think(out.text);
  return out;
}

std::string forced_call_opening(const ChatRenderFn& render, const std::string& function) {
  const std::string name = function.empty() ? "probe_function_name" : function;
  const json call = {{"type", "function"}, {"function", {{"name", name}, {"arguments", json::object()}}}};
  const json messages = json::array({{{"role", "user"}, {"content", "x"}},
                                     {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}}});
  constexpr std::string_view kCall = "<tool_call>", kCallEnd = "</tool_call>";
  if (auto r = render(messages, json::array(), false, json::object()); r.ok()) {
    // The last <tool_call> is the probe's (a tools section before it may show an example call).
    const std::string& text = r.value();
    const size_t at = text.rfind(kCall);
    const size_t end = at == std::string::npos ? at : text.find(kCallEnd, at);
    const size_t n = at == std::string::npos ? at : text.find(name, at);
    if (n != std::string::npos && n < end)
      return text.substr(at, n - at) + (function.empty() ? "" : function);
  }
  return "<tool_call>\n<function=" + function;
}

Result<std::string> render_chatml(const json& messages, const json& /*tools*/, bool add_generation_prompt,
                                  const json& kwargs) {
  std::string s;
  for (auto& m : messages) {
    std::string role = m.value("role", "");
    std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (role == "tool") role = "user";
    s += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", role, content);
  }
  if (messages.empty()) return err("No messages provided.");
  if (add_generation_prompt) {
    s += "<|im_start|>assistant\n";
    bool think = !(kwargs.is_object() && kwargs.contains("enable_thinking") && kwargs["enable_thinking"] == false);
    s += think ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return s;
}

}  // namespace ds::server

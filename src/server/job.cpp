#include "server/job.h"

#include <fmt/format.h>

#include "engine/text_stream.h"
#include "server/api_error.h"

namespace ds::server {

using json = nlohmann::ordered_json;
using engine::FinishReason;

namespace {
std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// A completions logprobs token: its text, or, when its bytes are not whole UTF-8 characters (byte-level
// BPE splits CJK and emoji), OpenAI's "bytes:\xNN..." form, so distinct tokens stay distinct keys
// of top_logprobs (as U+FFFD they collided and all but one were lost).
std::string completion_token(const std::string& bytes) {
  if (engine::utf8_sanitize(bytes) == bytes) return bytes;
  std::string s = "bytes:";
  for (unsigned char c : bytes) s += fmt::format("\\x{:02x}", c);
  return s;
}
}  // namespace

ReplyDelta parse_event(ReplyParser& parser, const engine::Event& ev, int32_t& n_reasoning) {
  // An event carries the token(s) whose text it brings.
  const bool was_reasoning = parser.in_reasoning();
  ReplyDelta d = parser.push(ev.text);
  if (was_reasoning || parser.in_reasoning()) n_reasoning += static_cast<int32_t>(ev.tokens.size());
  if (ev.finish != FinishReason::None) {
    ReplyDelta f = parser.finish();
    d.reasoning += f.reasoning;
    d.content += f.content;
    d.tool_calls.insert(d.tool_calls.end(), f.tool_calls.begin(), f.tool_calls.end());
  }
  return d;
}

void keep_first_call(ReplyDelta& d, size_t n_calls) {
  if (!d.tool_calls.empty()) d.tool_calls.resize(n_calls == 0 ? 1 : 0);
}

int64_t utf8_chars(std::string_view s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // each character has one lead byte
  return n;
}

Job::Job(JobOptions o, const engine::TextCodec& codec) : o_(std::move(o)), codec_(codec), text_offset_(o_.prompt_chars) {
  // Tool calls only when the request offered tools: OpenAI never answers tool_calls otherwise, and a
  // client without tools would lose the text (e.g. a <tool_call> format example the model writes).
  const bool tools = o_.parse_tools && o_.tools.is_array() && !o_.tools.empty();
  if (o_.kind == Endpoint::Chat) {
    parser_ = std::make_unique<ReplyParser>(o_.in_reasoning, tools, o_.tools);
    // Nothing comes out of an opening tag yet; whatever it opens is parsed with the model's tokens.
    parser_->push(o_.reply_prefix);
  }
}

json Job::chunk(json choice) const {
  json c = {{"id", o_.id},
            {"object", o_.kind == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
            {"created", o_.created},
            {"model", o_.model},
            {"choices", json::array()}};
  if (!choice.is_null()) c["choices"].push_back(std::move(choice));
  // OpenAI: with include_usage, every chunk but the last (which sets it) has "usage": null.
  if (o_.stream && o_.include_usage) c["usage"] = nullptr;
  return c;
}

json Job::usage() const {
  json u = {{"prompt_tokens", last_.n_prompt},
            {"completion_tokens", last_.n_generated},
            {"total_tokens", last_.n_prompt + last_.n_generated},
            {"prompt_tokens_details", {{"cached_tokens", last_.n_cached}}}};
  if (o_.kind == Endpoint::Chat) u["completion_tokens_details"] = {{"reasoning_tokens", n_reasoning_}};
  return u;
}

json Job::chat_logprob(const engine::TokenOut& t) const {
  auto entry = [&](int32_t id, float lp) {
    std::string b = codec_.token_bytes(id);
    json bytes = json::array();
    for (unsigned char c : b) bytes.push_back(static_cast<int>(c));
    return json{{"token", engine::utf8_sanitize(b)}, {"logprob", lp}, {"bytes", bytes}};
  };
  json e = entry(t.id, t.logprob);
  e["top_logprobs"] = json::array();
  for (auto& alt : t.top) e["top_logprobs"].push_back(entry(alt.token, alt.logprob));
  return e;
}

json Job::take_logprobs() {
  if (o_.top_logprobs < 0) return nullptr;
  std::vector<engine::TokenOut> toks;
  toks.swap(o_.stream ? pending_lp_ : all_lp_);
  if (o_.kind == Endpoint::Chat) {
    if (o_.stream && toks.empty()) return nullptr;
    json c = json::array();
    for (auto& t : toks) c.push_back(chat_logprob(t));
    return json{{"content", c}, {"refusal", nullptr}};  // both fields are required (nullable)
  }
  json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
             {"text_offset", json::array()}};
  for (auto& t : toks) {
    lp["tokens"].push_back(completion_token(codec_.token_bytes(t.id)));
    lp["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (auto& alt : t.top) top[completion_token(codec_.token_bytes(alt.token))] = alt.logprob;
    lp["top_logprobs"].push_back(top);
    // OpenAI counts characters from the start of the prompt, echo or not; a token ending inside a
    // character counts the characters it begins.
    lp["text_offset"].push_back(text_offset_);
    text_offset_ += utf8_chars(codec_.token_bytes(t.id));
  }
  return lp;
}

std::string Job::finish_reason() const {
  if (last_.finish == FinishReason::Length) return "length";
  return calls_.empty() || o_.named_tool_choice ? "stop" : "tool_calls";
}

std::string Job::sse_start() {
  if (o_.kind != Endpoint::Chat) return {};
  return sse(chunk({{"index", 0},
                    {"delta", {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}},
                    {"logprobs", nullptr},
                    {"finish_reason", nullptr}}));
}

void Job::add_delta(ReplyDelta d, std::string& out) {
  if (o_.first_call_only) keep_first_call(d, calls_.size());
  if (!o_.stream) {
    reasoning_ += d.reasoning;
    content_ += d.content;
    calls_.insert(calls_.end(), d.tool_calls.begin(), d.tool_calls.end());
    return;
  }
  auto emit = [&](json delta) {
    out += sse(chunk({{"index", 0}, {"delta", std::move(delta)}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
  };
  if (!d.reasoning.empty()) emit({{"reasoning_content", d.reasoning}});
  if (!d.content.empty()) emit({{"content", d.content}});
  for (auto& c : d.tool_calls) {
    json call = {{"index", calls_.size()},
                 {"id", c.id},
                 {"type", "function"},
                 {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
    calls_.push_back(c);
    emit({{"tool_calls", json::array({call})}});
  }
}

std::string Job::on_events(std::vector<engine::Event>& evs) {
  std::string out;
  for (auto& ev : evs) {
    if (done_) break;
    if (o_.top_logprobs >= 0)
      for (auto& t : ev.tokens) (o_.stream ? pending_lp_ : all_lp_).push_back(t);
    const bool final = ev.finish != FinishReason::None;
    if (final) last_ = ev;
    if (ev.finish == FinishReason::Error || ev.finish == FinishReason::Cancelled) {
      done_ = true;
      if (o_.stream) {
        ApiError e{500, ev.error.empty() ? "the request was cancelled" : ev.error, "server_error", "", ""};
        out += sse(error_json(e)) + "data: [DONE]\n\n";
      }
      break;
    }
    if (o_.kind == Endpoint::Chat) {
      add_delta(parse_event(*parser_, ev, n_reasoning_), out);
    } else {
      text_ += ev.text;
      if (o_.stream && !ev.text.empty())
        out += sse(chunk({{"index", 0}, {"text", ev.text}, {"logprobs", take_logprobs()}, {"finish_reason", nullptr}}));
    }
    if (final) {
      done_ = true;
      if (o_.stream) {
        json ch = o_.kind == Endpoint::Chat
                      ? json{{"index", 0}, {"delta", json::object()}, {"logprobs", take_logprobs()}, {"finish_reason", finish_reason()}}
                      : json{{"index", 0}, {"text", ""}, {"logprobs", take_logprobs()}, {"finish_reason", finish_reason()}};
        out += sse(chunk(std::move(ch)));
        if (o_.include_usage) {
          json u = chunk(nullptr);
          u["usage"] = usage();
          out += sse(u);
        }
        out += "data: [DONE]\n\n";
      }
    }
  }
  return out;
}

std::pair<int, json> Job::result() {
  if (last_.finish == FinishReason::Error || last_.finish == FinishReason::Cancelled || !done_) {
    ApiError e{500, last_.error.empty() ? "the request did not complete" : last_.error, "server_error", "", ""};
    return {500, error_json(e)};
  }
  json choice = {{"index", 0}, {"logprobs", take_logprobs()}, {"finish_reason", finish_reason()}};
  json body = {{"id", o_.id}, {"created", o_.created}, {"model", o_.model}};
  if (o_.kind == Endpoint::Chat) {
    json msg = {{"role", "assistant"}};
    msg["content"] = content_.empty() && !calls_.empty() ? json(nullptr) : json(content_);
    msg["refusal"] = nullptr;  // `string | null` in OpenAI's message, not optional
    if (!reasoning_.empty()) msg["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
      msg["tool_calls"] = json::array();
      for (auto& c : calls_)
        msg["tool_calls"].push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    choice["message"] = std::move(msg);
    body["object"] = "chat.completion";
  } else {
    choice["text"] = text_;
    body["object"] = "text_completion";
  }
  body["choices"] = json::array({std::move(choice)});
  body["usage"] = usage();
  return {200, body};
}

}  // namespace ds::server

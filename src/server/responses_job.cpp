#include "server/responses_job.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/job.h"

namespace ds::server {

using json = nlohmann::ordered_json;
using engine::FinishReason;

ResponsesJob::ResponsesJob(ResponsesJobOptions o) : o_(std::move(o)) {
  // As in chat: tool calls only when the request offered tools.
  const bool tools = o_.parse_tools && o_.tools.is_array() && !o_.tools.empty();
  parser_ = std::make_unique<ReplyParser>(o_.in_reasoning, tools, o_.tools);
  parser_->push(o_.reply_prefix);
}

json ResponsesJob::usage() const {
  return {{"input_tokens", last_.n_prompt},
          {"input_tokens_details", {{"cached_tokens", last_.n_cached}}},
          {"output_tokens", last_.n_generated},
          {"output_tokens_details", {{"reasoning_tokens", n_reasoning_}}},
          {"total_tokens", last_.n_prompt + last_.n_generated}};
}

json ResponsesJob::response(const char* status) const {
  const bool final = std::string_view(status) != "in_progress";
  json r = {{"id", o_.id},
            {"object", "response"},
            {"created_at", o_.created},
            {"status", status},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", o_.model},
            {"output", final ? output_ : json::array()}};
  if (std::string_view(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  for (auto& [k, v] : o_.echo.items()) r[k] = v;
  r["usage"] = final ? usage() : json(nullptr);
  return r;
}

void ResponsesJob::event(json e, std::string& out) {
  e["sequence_number"] = seq_++;
  if (!o_.stream) return;
  const std::string type = e["type"];
  out += "event: " + type + "\ndata: " + dump(e) + "\n\n";
}

// Unique within the response and across responses (the response id is random).
std::string ResponsesJob::item_id(const char* prefix) const {
  return fmt::format("{}_{}{:02x}", prefix, o_.id.substr(o_.id.find('_') + 1), output_.size());
}

void ResponsesJob::open(json item, std::string& out) {
  output_.push_back(item);
  event({{"type", "response.output_item.added"}, {"output_index", output_.size() - 1}, {"item", std::move(item)}}, out);
}

// The content part of an open item: reasoning_text or output_text.
static json part(const json& item, const std::string& text) {
  if (item["type"] == "reasoning") return {{"type", "reasoning_text"}, {"text", text}};
  return {{"type", "output_text"}, {"annotations", json::array()}, {"logprobs", json::array()}, {"text", text}};
}

void ResponsesJob::close_open(const char* status, std::string& out) {
  if (open_ < 0) return;
  json& item = output_[open_];
  const json id = item["id"];
  const json p = part(item, open_text_);
  const bool reasoning = item["type"] == "reasoning";
  json done = {{"type", reasoning ? "response.reasoning_text.done" : "response.output_text.done"},
               {"item_id", id},
               {"output_index", open_},
               {"content_index", 0},
               {"text", open_text_}};
  if (!reasoning) done["logprobs"] = json::array();
  event(std::move(done), out);
  event({{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", open_}, {"content_index", 0}, {"part", p}},
        out);
  item["content"] = json::array({p});
  item["status"] = status;
  event({{"type", "response.output_item.done"}, {"output_index", open_}, {"item", item}}, out);
  open_ = -1;
  open_text_.clear();
}

// kind: "reasoning" or "message".
void ResponsesJob::open_text_item(const char* kind, std::string& out) {
  const bool reasoning = std::string_view(kind) == "reasoning";
  if (open_ < 0 || output_[open_]["type"] != kind) {
    close_open("completed", out);
    json item = reasoning ? json{{"id", item_id("rs")}, {"type", "reasoning"}, {"summary", json::array()},
                                 {"content", json::array()}, {"status", "in_progress"}}
                          : json{{"id", item_id("msg")}, {"type", "message"}, {"status", "in_progress"},
                                 {"role", "assistant"}, {"content", json::array()}};
    open(item, out);
    open_ = static_cast<int>(output_.size()) - 1;
    event({{"type", "response.content_part.added"}, {"item_id", item["id"]}, {"output_index", open_},
           {"content_index", 0}, {"part", part(item, "")}},
          out);
  }
}

void ResponsesJob::add_text(const char* kind, const std::string& text, std::string& out) {
  if (text.empty()) return;
  const bool reasoning = std::string_view(kind) == "reasoning";
  open_text_item(kind, out);
  open_text_ += text;
  json delta = {{"type", reasoning ? "response.reasoning_text.delta" : "response.output_text.delta"},
                {"item_id", output_[open_]["id"]},
                {"output_index", open_},
                {"content_index", 0},
                {"delta", text}};
  if (!reasoning) delta["logprobs"] = json::array();
  event(std::move(delta), out);
}

void ResponsesJob::add_call(const ToolCall& c, std::string& out) {
  close_open("completed", out);
  json item = {{"id", item_id("fc")}, {"type", "function_call"}, {"status", "in_progress"},
               {"arguments", ""},     {"call_id", c.id},          {"name", c.name}};
  const json id = item["id"];
  open(item, out);
  const size_t idx = output_.size() - 1;
  event({{"type", "response.function_call_arguments.delta"}, {"item_id", id}, {"output_index", idx}, {"delta", c.arguments}},
        out);
  event({{"type", "response.function_call_arguments.done"}, {"item_id", id}, {"output_index", idx}, {"name", c.name},
         {"arguments", c.arguments}},
        out);
  item["arguments"] = c.arguments;
  item["status"] = "completed";
  output_[idx] = item;
  event({{"type", "response.output_item.done"}, {"output_index", idx}, {"item", item}}, out);
  n_calls_++;
}

std::string ResponsesJob::sse_start() {
  std::string out;
  event({{"type", "response.created"}, {"response", response("in_progress")}}, out);
  event({{"type", "response.in_progress"}, {"response", response("in_progress")}}, out);
  return out;
}

void ResponsesJob::finish(const engine::Event& ev, std::string& out) {
  done_ = true;
  if (ev.finish == FinishReason::Error || ev.finish == FinishReason::Cancelled) {
    final_ = response("failed");
    final_["error"] = {{"code", "server_error"}, {"message", ev.error.empty() ? "the request was cancelled" : ev.error}};
    event({{"type", "response.failed"}, {"response", final_}}, out);
    return;
  }
  const bool cut = ev.finish == FinishReason::Length;
  close_open(cut ? "incomplete" : "completed", out);
  // A reply of neither text nor calls still answers with a message (empty).
  const bool answered = std::any_of(output_.begin(), output_.end(), [](const json& i) { return i["type"] != "reasoning"; });
  if (!cut && !answered) {
    open_text_item("message", out);
    close_open("completed", out);
  }
  final_ = response(cut ? "incomplete" : "completed");
  event({{"type", cut ? "response.incomplete" : "response.completed"}, {"response", final_}}, out);
  if (o_.on_finished) o_.on_finished(final_);
}

std::string ResponsesJob::on_events(std::vector<engine::Event>& evs) {
  std::string out;
  for (auto& ev : evs) {
    if (done_) break;
    const bool final = ev.finish != FinishReason::None;
    if (final) last_ = ev;
    if (ev.finish != FinishReason::Error && ev.finish != FinishReason::Cancelled) {
      ReplyDelta d = parse_event(*parser_, ev, n_reasoning_);
      if (o_.first_call_only) keep_first_call(d, n_calls_);
      add_text("reasoning", d.reasoning, out);
      add_text("message", d.content, out);
      for (auto& c : d.tool_calls) add_call(c, out);
    }
    if (final) finish(ev, out);
  }
  return out;
}

std::pair<int, json> ResponsesJob::result() {
  if (!done_) return {500, error_json(ApiError{500, "the request did not complete", "server_error", "", ""})};
  if (final_["status"] == "failed")
    return {500, error_json(ApiError{500, final_["error"]["message"].get<std::string>(), "server_error", "", ""})};
  return {200, final_};
}

}  // namespace ds::server

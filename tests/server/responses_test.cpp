// Unit tests of POST /v1/responses without sockets: the request's mapping onto the chat path (every input
// item kind, instructions, tools, tool_choice, reasoning effort, previous_response_id), its errors naming the
// field, the response store's bounds, and ResponsesJob's Response objects and server-sent events built from
// engine events (reasoning + text, tool calls, max_output_tokens, failure).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>

#include "server/responses_items.h"
#include "server/responses_job.h"
#include "server/responses_request.h"
#include "server/responses_store.h"

namespace ds::server {
namespace {

using json = nlohmann::ordered_json;

std::optional<ApiError> parse(const std::string& body, ResponsesRequest& out, const ConversationLookup& lookup = {}) {
  return parse_responses_request(json::parse(body), 1000, lookup, out);
}

TEST(ResponsesRequest, StringInputInstructionsAndSettings) {
  ResponsesRequest r;
  auto e = parse(R"({"model":"m","input":"hello","instructions":"be brief","max_output_tokens":33,"temperature":0.25,
      "top_p":0.5,"stream":true,"metadata":{"k":"v"},"user":"u1","store":false,"text":{"format":{"type":"text"}},
      "truncation":"disabled","unknown_field":{"x":1},"seed":7})",
                 r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0], json({{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(r.chat.messages[1], json({{"role", "user"}, {"content", "hello"}}));
  EXPECT_EQ(*r.chat.common.max_tokens, 33);
  EXPECT_FLOAT_EQ(r.chat.common.sampling.temperature, 0.25f);
  EXPECT_FLOAT_EQ(r.chat.common.sampling.top_p, 0.5f);
  EXPECT_TRUE(r.chat.common.stream);
  EXPECT_TRUE(r.chat.common.has_seed);
  EXPECT_FALSE(r.store);
  EXPECT_TRUE(r.chat.template_kwargs.empty());  // no reasoning: the template's default
  // The conversation keeps the input, not the instructions (a continuation does not inherit them).
  EXPECT_EQ(r.conversation, json::parse(R"([{"type":"message","role":"user","content":"hello"}])"));
  const json& o = r.echo;
  EXPECT_EQ(o["instructions"], "be brief");
  EXPECT_EQ(o["max_output_tokens"], 33);
  EXPECT_EQ(o["temperature"], 0.25);
  EXPECT_EQ(o["top_p"], 0.5);
  EXPECT_EQ(o["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(o["user"], "u1");
  EXPECT_EQ(o["store"], false);
  EXPECT_EQ(o["tool_choice"], "auto");
  EXPECT_EQ(o["tools"], json::array());
  EXPECT_EQ(o["parallel_tool_calls"], true);
  EXPECT_TRUE(o["previous_response_id"].is_null());
  EXPECT_TRUE(o["reasoning"].is_null());
  EXPECT_EQ(o["truncation"], "disabled");
  EXPECT_EQ(o["text"], json::parse(R"({"format":{"type":"text"}})"));

  ResponsesRequest d;  // defaults: effective sampling values, no user, empty metadata
  ASSERT_FALSE(parse(R"({"input":"x"})", d));
  EXPECT_EQ(d.echo["temperature"], 1.0);
  EXPECT_EQ(d.echo["top_p"], 1.0);
  EXPECT_TRUE(d.echo["max_output_tokens"].is_null());
  EXPECT_EQ(d.echo["metadata"], json::object());
  EXPECT_FALSE(d.echo.contains("user"));
  EXPECT_TRUE(d.store);
}

TEST(ResponsesRequest, EveryInputItemKindBecomesChatMessages) {
  ResponsesRequest r;
  auto e = parse(R"({"input":[
      {"role":"developer","content":"dev rules"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
      {"type":"message","role":"assistant","id":"msg_1","status":"completed",
       "content":[{"type":"output_text","text":"sure","annotations":[]}]},
      {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"ignored"}],
       "content":[{"type":"reasoning_text","text":"think "},{"type":"reasoning_text","text":"more"}]},
      {"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{\"x\": 1}","status":"completed"},
      {"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},
      {"type":"function_call_output","call_id":"c1","output":"one"},
      {"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"tw"},{"type":"input_text","text":"o"}]},
      {"role":"user","content":"thanks"}]})",
                 r);
  ASSERT_FALSE(e) << e->message;
  const json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 7u) << m.dump();
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "dev rules"}}));  // developer: system (the chat path)
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "ab"}}));
  EXPECT_EQ(m[2], json({{"role", "assistant"}, {"content", "sure"}}));
  // The reasoning goes with the assistant turn after it; the two calls in a row are that one turn.
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["content"], "");
  EXPECT_EQ(m[3]["reasoning_content"], "think more");
  ASSERT_EQ(m[3]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[3]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["arguments"], json({{"x", 1}}));  // an object, as templates iterate it
  EXPECT_EQ(m[3]["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(m[4], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "one"}}));
  EXPECT_EQ(m[5], json({{"role", "tool"}, {"tool_call_id", "c2"}, {"content", "two"}}));
  EXPECT_EQ(m[6], json({{"role", "user"}, {"content", "thanks"}}));
  ASSERT_EQ(r.conversation.size(), 9u);
  EXPECT_EQ(r.conversation[3], json::parse(R"({"type":"reasoning","text":"think more"})"));
  EXPECT_EQ(r.conversation[4], json::parse(R"({"type":"function_call","call_id":"c1","name":"f","arguments":"{\"x\": 1}"})"));
}

TEST(ResponsesRequest, InstructionsAndLeadingSystemMessagesAreOneSystemMessage) {
  // Qwen3.5's template refuses a system message that is not first; Codex-style clients send instructions and
  // developer messages.
  ResponsesRequest r;
  ASSERT_FALSE(parse(R"({"instructions":"ins","input":[{"role":"developer","content":"dev"},
      {"role":"system","content":"sys"},{"role":"user","content":"hi"},{"role":"developer","content":"later"}]})",
                     r));
  ASSERT_EQ(r.chat.messages.size(), 3u) << r.chat.messages.dump();
  EXPECT_EQ(r.chat.messages[0], json({{"role", "system"}, {"content", "ins\n\ndev\n\nsys"}}));
  EXPECT_EQ(r.chat.messages[1]["role"], "user");
  EXPECT_EQ(r.chat.messages[2], json({{"role", "system"}, {"content", "later"}}));  // left to the template
  EXPECT_EQ(r.conversation.size(), 4u);  // the conversation keeps the items as they were
}

TEST(ResponsesRequest, ToolsToolChoiceAndReasoningEffort) {
  const std::string tools = R"("tools":[{"type":"function","name":"get_weather","description":"Weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true},
      {"type":"function","name":"get_time"}])";
  ResponsesRequest r;
  ASSERT_FALSE(parse(R"({"input":"x",)" + tools + R"(,"parallel_tool_calls":false})", r));
  ASSERT_EQ(r.chat.tools.size(), 2u);
  EXPECT_EQ(r.chat.tools[0], json::parse(R"({"type":"function","function":{"name":"get_weather","description":"Weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}})"));
  EXPECT_EQ(r.chat.tools[1], json::parse(R"({"type":"function","function":{"name":"get_time"}})"));
  EXPECT_EQ(r.echo["tools"][0]["strict"], true);
  EXPECT_EQ(r.echo["tools"][1], json::parse(R"({"type":"function","name":"get_time","description":null,
      "parameters":null,"strict":null})"));
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.echo["parallel_tool_calls"], false);
  EXPECT_TRUE(r.chat.parse_tool_calls);
  EXPECT_FALSE(r.chat.force_tool_call);

  ResponsesRequest none, req, named;
  ASSERT_FALSE(parse(R"({"input":"x",)" + tools + R"(,"tool_choice":"none"})", none));
  EXPECT_FALSE(none.chat.parse_tool_calls);
  EXPECT_EQ(none.echo["tool_choice"], "none");
  ASSERT_FALSE(parse(R"({"input":"x",)" + tools + R"(,"tool_choice":"required"})", req));
  EXPECT_TRUE(req.chat.force_tool_call);
  EXPECT_EQ(req.chat.forced_function, "");
  EXPECT_EQ(req.chat.template_kwargs["enable_thinking"], false);  // the call opens the reply
  ASSERT_FALSE(parse(R"({"input":"x",)" + tools + R"(,"tool_choice":{"type":"function","name":"get_time"}})", named));
  EXPECT_TRUE(named.chat.force_tool_call);
  EXPECT_EQ(named.chat.forced_function, "get_time");
  EXPECT_EQ(named.echo["tool_choice"], json::parse(R"({"type":"function","name":"get_time"})"));

  for (auto [effort, thinking] : {std::pair{"none", false}, {"minimal", false}, {"low", true}, {"high", true}}) {
    ResponsesRequest t;
    ASSERT_FALSE(parse(fmt::format(R"({{"input":"x","reasoning":{{"effort":"{}","summary":"auto"}}}})", effort), t));
    EXPECT_EQ(t.chat.template_kwargs["enable_thinking"], thinking) << effort;
    EXPECT_EQ(t.echo["reasoning"], json({{"effort", effort}, {"summary", "auto"}}));
  }
}

TEST(ResponsesRequest, ErrorsNameTheField) {
  const std::string tool = R"("tools":[{"type":"function","name":"f"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model":"m"})", "input"},
      {R"({"input":[]})", "input"},
      {R"({"input":5})", "input"},
      {R"({"input":[7]})", "input[0]"},
      {R"({"input":[{"type":"input_image","image_url":"x"}]})", "input[0].type"},
      {R"({"input":[{"type":"item_reference","id":"x"}]})", "input[0].type"},
      {R"({"input":[{"role":"tool","content":"x"}]})", "input[0].role"},
      {R"({"input":[{"role":"user"}]})", "input[0].content"},
      {R"({"input":["a",{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})", "input[0]"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})", "input[0].content[0].type"},
      {R"({"input":[{"role":"user","content":[{"type":"input_text"}]}]})", "input[0].content[0].text"},
      {R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})", "input[0].call_id"},
      {R"({"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]})", "input[0].name"},
      {R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}]})", "input[0].arguments"},
      {R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}]})", "input[0].arguments"},
      {R"({"input":[{"type":"function_call_output","call_id":"c"}]})", "input[0].output"},
      {R"({"input":[{"type":"reasoning","content":"x"}]})", "input[0].content"},
      {R"({"input":"x","instructions":3})", "instructions"},
      {R"({"input":"x","tools":{}})", "tools"},
      {R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0].type"},
      {R"({"input":"x","tools":[{"type":"function","function":{"name":"f"}}]})", "tools[0].name"},
      {R"({"input":"x","tools":[{"type":"function","name":"f","parameters":"s"}]})", "tools[0].parameters"},
      {R"({"input":"x","tools":[{"type":"function","name":"f","strict":"yes"}]})", "tools[0].strict"},
      {R"({"input":"x",)" + tool + R"(,"tool_choice":"sometimes"})", "tool_choice"},
      {R"({"input":"x","tool_choice":"required"})", "tool_choice"},
      {R"({"input":"x",)" + tool + R"(,"tool_choice":{"type":"file_search"}})", "tool_choice.type"},
      {R"({"input":"x",)" + tool + R"(,"tool_choice":{"type":"function","name":"g"}})", "tool_choice.name"},
      {R"({"input":"x",)" + tool + R"(,"tool_choice":"required","reasoning":{"effort":"high"}})", "reasoning.effort"},
      {R"({"input":"x","reasoning":{"effort":"max"}})", "reasoning.effort"},
      {R"({"input":"x","reasoning":"high"})", "reasoning"},
      {R"({"input":"x","text":{"format":{"type":"xml"}}})", "text.format"},
      {R"({"input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"bool"}}}})",
       "text.format.schema.type"},
      {R"({"input":"x","text":{"format":{"type":"json_schema","name":"s"}}})", "text.format.schema"},
      {R"({"input":"x","truncation":"auto"})", "truncation"},
      {R"({"input":"x","background":true})", "background"},
      {R"({"input":"x","conversation":"conv_1"})", "conversation"},
      {R"({"input":"x","top_logprobs":3})", "top_logprobs"},
      {R"({"input":"x","max_output_tokens":0})", "max_output_tokens"},
      {R"({"input":"x","max_output_tokens":"many"})", "max_output_tokens"},
      {R"({"input":"x","temperature":3})", "temperature"},
      {R"({"input":"x","top_p":"1"})", "top_p"},
      {R"({"input":"x","stream":"yes"})", "stream"},
      {R"({"input":"x","parallel_tool_calls":1})", "parallel_tool_calls"},
      {R"({"input":"x","store":"no"})", "store"},
      {R"({"input":"x","metadata":{"k":1}})", "metadata"},
      {R"({"input":"x","user":5})", "user"},
      {R"({"input":"x","previous_response_id":5})", "previous_response_id"},
      {R"({"input":"x","previous_response_id":"resp_nope"})", "previous_response_id"},
  };
  for (auto& [body, param] : cases) {
    ResponsesRequest r;
    auto e = parse(body, r, [](const std::string&) { return std::nullopt; });
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 400) << body;
    EXPECT_EQ(e->param, param) << body << ": " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
  ResponsesRequest r;
  auto e = parse(R"({"input":"x","previous_response_id":"resp_nope"})", r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "previous_response_not_found");
  EXPECT_EQ(e->message, "Previous response with id 'resp_nope' not found.");
  e = parse(R"({"input":"x","max_output_tokens":-1})", r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'max_output_tokens'"), std::string::npos) << e->message;  // not the chat path's name
}

TEST(ResponsesRequest, PreviousResponseIdContinuesItsConversation) {
  const json history = json::parse(R"([{"type":"message","role":"user","content":"first"},
      {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}])");
  ConversationLookup lookup = [&](const std::string& id) -> std::optional<json> {
    if (id == "resp_a") return history;
    return std::nullopt;
  };
  ResponsesRequest r;
  auto e = parse(R"({"previous_response_id":"resp_a","instructions":"sys",
      "input":[{"type":"function_call_output","call_id":"c1","output":"42"}]})",
                 r, lookup);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0]["role"], "system");
  EXPECT_EQ(r.chat.messages[1]["content"], "first");
  EXPECT_EQ(r.chat.messages[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.chat.messages[3], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}));
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.echo["previous_response_id"], "resp_a");
  ResponsesRequest only;  // no new input: the stored conversation alone
  ASSERT_FALSE(parse(R"({"previous_response_id":"resp_a"})", only, lookup));
  EXPECT_EQ(only.chat.messages.size(), 2u);
}

TEST(ResponsesStore, BoundedByCountAndBytesOldestFirst) {
  const json items = json::parse(R"([{"type":"message","role":"user","content":"0123456789"}])");
  const json none = json::array(), response = {{"id", "r"}};
  const size_t one = dump(items).size() + dump(none).size() + dump(response).size() + std::string("resp_0").size();
  ResponseStore byCount(2, 1 << 20);
  for (int i = 0; i < 3; i++) byCount.put(fmt::format("resp_{}", i), items, none, response);
  EXPECT_EQ(byCount.size(), 2u);
  EXPECT_FALSE(byCount.get("resp_0"));
  EXPECT_EQ(*byCount.get("resp_2"), items);

  ResponseStore byBytes(100, 2 * one + 1);
  for (int i = 0; i < 3; i++) byBytes.put(fmt::format("resp_{}", i), items, none, response);
  EXPECT_EQ(byBytes.size(), 2u);
  EXPECT_EQ(byBytes.bytes(), 2 * one);
  EXPECT_FALSE(byBytes.get("resp_0"));
  EXPECT_TRUE(byBytes.get("resp_1"));

  ResponseStore small(10, one - 1);  // larger than the whole bound: not kept
  small.put("resp_0", items, none, response);
  EXPECT_EQ(small.size(), 0u);
}

// Each part back as it was put; the conversation is the input then the output. An erased response is gone at once
// (its bytes and its place in the eviction order too: the next oldest is the next evicted).
TEST(ResponsesStore, PartsAndErase) {
  const json input = json::parse(R"([{"type":"message","role":"user","content":"hi"}])");
  const json output = json::parse(R"([{"type":"message","role":"assistant","content":"hello"}])");
  const json response = {{"id", "resp_a"}, {"object", "response"}, {"output", json::array()}};
  ResponseStore store(2, 1 << 20);
  store.put("resp_a", input, output, response);
  EXPECT_EQ(*store.input("resp_a"), input);
  EXPECT_EQ(*store.response("resp_a"), response);
  EXPECT_EQ(*store.get("resp_a"), json::array({input[0], output[0]}));
  const size_t bytes = store.bytes();
  store.put("resp_b", input, output, response);
  EXPECT_TRUE(store.erase("resp_a"));
  EXPECT_FALSE(store.erase("resp_a"));
  EXPECT_FALSE(store.get("resp_a") || store.input("resp_a") || store.response("resp_a"));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), bytes);  // resp_b's: the same size
  store.put("resp_c", input, output, response);  // room for two: nothing evicted
  EXPECT_TRUE(store.get("resp_b") && store.get("resp_c"));
  store.put("resp_d", input, output, response);  // resp_b is the oldest now
  EXPECT_FALSE(store.get("resp_b"));
  EXPECT_TRUE(store.get("resp_c") && store.get("resp_d"));
}

// The byte bound is what the store holds: 200,000 small items (about 11 MB of JSON) take about that much of the heap
// once stored, not the parsed form's several times as much (before: the parsed items were kept, ~7x their text).
TEST(ResponsesStore, HoldsItsBytesNotAParsedCopy) {
  ResponseStore store(10, 64u << 20);
  const size_t before = mallinfo2().uordblks;
  {
    json items = json::array();
    for (int i = 0; i < 200000; i++) items.push_back({{"type", "message"}, {"role", "user"}, {"content", "hi"}});
    store.put("resp_big", items, json::array(), json::object());
  }
  const size_t held = mallinfo2().uordblks - before;
  ASSERT_EQ(store.size(), 1u);
  EXPECT_LT(held, store.bytes() * 3 / 2) << "held " << held << " bytes for " << store.bytes() << " of JSON";
  const auto back = store.get("resp_big");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->size(), 200000u);
  EXPECT_EQ((*back)[199999], json({{"type", "message"}, {"role", "user"}, {"content", "hi"}}));
}

// --- GET /v1/responses/{id}/input_items ---------------------------------------------------------------------

// Every normalised kind back in the Responses API's item shape, with ids from the response id and the place.
TEST(ResponsesInputItems, ShapesAndIds) {
  const json input = json::parse(R"([{"type":"message","role":"developer","content":"be brief"},
      {"type":"message","role":"user","content":"weather?"},{"type":"reasoning","text":"think"},
      {"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
      {"type":"function_call_output","call_id":"c1","output":"Sunny"},
      {"type":"message","role":"assistant","content":"It is sunny."}])");
  auto r = input_item_list("resp_abc", input, {{"order", "asc"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<ApiError>(r).message;
  const json& l = std::get<json>(r);
  EXPECT_EQ(l["object"], "list");
  EXPECT_EQ(l["has_more"], false);
  const json& d = l["data"];
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d[0], json::parse(R"({"id":"msg_abc_in0","type":"message","role":"developer","status":"completed",
      "content":[{"type":"input_text","text":"be brief"}]})"));
  EXPECT_EQ(d[2], json::parse(R"({"id":"rs_abc_in2","type":"reasoning","status":"completed","summary":[],
      "content":[{"type":"reasoning_text","text":"think"}]})"));
  EXPECT_EQ(d[3], json::parse(R"({"id":"fc_abc_in3","type":"function_call","status":"completed",
      "arguments":"{\"city\":\"Paris\"}","call_id":"c1","name":"get_weather"})"));
  EXPECT_EQ(d[4], json::parse(R"({"id":"fco_abc_in4","type":"function_call_output","status":"completed",
      "call_id":"c1","output":"Sunny"})"));
  EXPECT_EQ(d[5]["content"], json::parse(R"([{"type":"output_text","annotations":[],"logprobs":[],
      "text":"It is sunny."}])"));
  EXPECT_EQ(l["first_id"], "msg_abc_in0");
  EXPECT_EQ(l["last_id"], "msg_abc_in5");
}

// Newest first by default (OpenAI's order), 20 a page; `after` continues from a page's last id; bad values are
// 400s naming the parameter.
TEST(ResponsesInputItems, OrderPagesAndErrors) {
  json input = json::array();
  for (int i = 0; i < 25; i++) input.push_back({{"type", "message"}, {"role", "user"}, {"content", std::to_string(i)}});
  auto list = [&](const QueryParams& q) {
    auto r = input_item_list("resp_x", input, q);
    EXPECT_TRUE(std::holds_alternative<json>(r)) << std::get<ApiError>(r).message;
    return std::holds_alternative<json>(r) ? std::get<json>(r) : json();
  };
  json first = list({});
  ASSERT_EQ(first["data"].size(), 20u);
  EXPECT_EQ(first["data"][0]["content"][0]["text"], "24");
  EXPECT_EQ(first["has_more"], true);
  json rest = list({{"after", first["last_id"].get<std::string>()}});
  ASSERT_EQ(rest["data"].size(), 5u);
  EXPECT_EQ(rest["data"][0]["content"][0]["text"], "4");
  EXPECT_EQ(rest["data"][4]["content"][0]["text"], "0");
  EXPECT_EQ(rest["has_more"], false);
  json asc = list({{"order", "asc"}, {"limit", "2"}, {"after", "msg_x_in0"}});
  ASSERT_EQ(asc["data"].size(), 2u);
  EXPECT_EQ(asc["data"][0]["id"], "msg_x_in1");
  EXPECT_EQ(asc["has_more"], true);
  json empty = list({{"after", "msg_x_in0"}});  // the oldest: nothing after it newest-first
  EXPECT_EQ(empty["data"], json::array());
  EXPECT_TRUE(empty["first_id"].is_null());
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"limit", "0"}, {"limit", "101"}, {"limit", "2x"}, {"limit", ""}, {"order", "up"}, {"after", "msg_y_in0"}}) {
    auto r = input_item_list("resp_x", input, {{k, v}});
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << k << "=" << v;
    EXPECT_EQ(std::get<ApiError>(r).status, 400);
    EXPECT_EQ(std::get<ApiError>(r).param, k);
  }
}

// --- ResponsesJob ----------------------------------------------------------------------------------------

engine::Event ev(std::string text, int n_tokens, engine::FinishReason f = engine::FinishReason::None) {
  engine::Event e;
  e.text = std::move(text);
  e.tokens.resize(n_tokens);
  e.finish = f;
  if (f != engine::FinishReason::None) {
    e.n_prompt = 20;
    e.n_cached = 4;
  }
  return e;
}

struct Run {
  std::string sse;
  json result;
  int status = 0;
  std::vector<json> finished;  // on_finished calls
};

// The same events through a streaming and a non-streaming job (the events' n_generated set to their tokens).
std::pair<Run, Run> run_both(std::vector<engine::Event> evs, ResponsesJobOptions o) {
  int n = 0;
  for (auto& e : evs) n += static_cast<int>(e.tokens.size());
  evs.back().n_generated = n;
  std::pair<Run, Run> out;
  for (bool stream : {true, false}) {
    Run& r = stream ? out.first : out.second;
    ResponsesJobOptions jo = o;
    jo.stream = stream;
    jo.on_finished = [&r](const json& resp) { r.finished.push_back(resp); };
    ResponsesJob job(jo);
    r.sse = job.sse_start();
    for (auto& e : evs) {  // one event at a time, as the engine sends them
      std::vector<engine::Event> one = {e};
      r.sse += job.on_events(one);
    }
    EXPECT_TRUE(job.done());
    if (!stream) std::tie(r.status, r.result) = job.result();
  }
  return out;
}

ResponsesJobOptions base_options() {
  ResponsesJobOptions o;
  o.id = "resp_abc123";
  o.model = "fake-model";
  o.created = 1700000000;
  o.echo = {{"instructions", nullptr}, {"tool_choice", "auto"}, {"tools", json::array()}, {"temperature", 1.0}};
  return o;
}

// "event: T\ndata: {...}\n\n" -> the data objects; each event line must name the data's type.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_TRUE(block.starts_with("event: ")) << block;
    EXPECT_TRUE(block.substr(nl + 1).starts_with("data: ")) << block;
    json d = json::parse(block.substr(nl + 7));
    EXPECT_EQ(block.substr(7, nl - 7), d["type"].get<std::string>());
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> types(const std::vector<json>& evs) {
  std::vector<std::string> t;
  for (auto& e : evs) t.push_back(e["type"]);
  return t;
}

// A reply that thinks, then answers: "Thinking about it." then "The answer is 42.", in three events (the middle one
// holds </think>), after a prompt that opened <think>.
std::pair<Run, Run> run_thinking_reply() {
  ResponsesJobOptions o = base_options();
  o.in_reasoning = true;
  return run_both({ev("Thinking about", 2), ev(" it.</think>\n\nThe answer", 3),
                   ev(" is 42.", 2, engine::FinishReason::Stop)},
                  o);
}

TEST(ResponsesJob, ReasoningAndTextNonStreamingFieldByField) {
  auto [s, n] = run_thinking_reply();
  ASSERT_EQ(n.status, 200) << n.result.dump();
  const json& r = n.result;
  EXPECT_EQ(r["id"], "resp_abc123");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["created_at"], 1700000000);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["model"], "fake-model");
  EXPECT_EQ(r["tool_choice"], "auto");  // the echo
  EXPECT_EQ(r["temperature"], 1.0);
  ASSERT_EQ(r["output"].size(), 2u);
  const json& rs = r["output"][0];
  EXPECT_EQ(rs["type"], "reasoning");
  EXPECT_TRUE(rs["id"].get<std::string>().starts_with("rs_"));
  EXPECT_EQ(rs["summary"], json::array());
  EXPECT_EQ(rs["content"], json::parse(R"([{"type":"reasoning_text","text":"Thinking about it."}])"));
  EXPECT_EQ(rs["status"], "completed");
  const json& msg = r["output"][1];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_TRUE(msg["id"].get<std::string>().starts_with("msg_"));
  EXPECT_NE(msg["id"], rs["id"]);
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["status"], "completed");
  EXPECT_EQ(msg["content"], json::parse(R"([{"type":"output_text","annotations":[],"logprobs":[],"text":"The answer is 42."}])"));
  // The </think> token's event counts as reasoning, as in chat.
  EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens":20,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,
      "output_tokens_details":{"reasoning_tokens":5},"total_tokens":27})"));
  ASSERT_EQ(n.finished.size(), 1u);
  EXPECT_EQ(n.finished[0], r);
  EXPECT_TRUE(n.sse.empty());  // nothing is streamed without stream
}

TEST(ResponsesJob, StreamedEventsInOrderAndEqualToTheResponse) {
  auto [s, n] = run_thinking_reply();
  auto evs = events(s.sse);
  using V = std::vector<std::string>;
  EXPECT_EQ(types(evs), (V{"response.created", "response.in_progress",
                           "response.output_item.added", "response.content_part.added",
                           "response.reasoning_text.delta", "response.reasoning_text.delta",
                           "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                           "response.output_item.added", "response.content_part.added",
                           "response.output_text.delta", "response.output_text.delta",
                           "response.output_text.done", "response.content_part.done", "response.output_item.done",
                           "response.completed"}));
  for (size_t i = 0; i < evs.size(); i++) EXPECT_EQ(evs[i]["sequence_number"], i);
  // created / in_progress carry the Response so far: no output, no usage.
  EXPECT_EQ(evs[0]["response"]["status"], "in_progress");
  EXPECT_EQ(evs[0]["response"]["output"], json::array());
  EXPECT_TRUE(evs[0]["response"]["usage"].is_null());
  EXPECT_EQ(evs[0]["response"]["id"], "resp_abc123");
  std::string reasoning, text;
  for (auto& e : evs) {
    if (e["type"] == "response.reasoning_text.delta") reasoning += e["delta"].get<std::string>();
    if (e["type"] == "response.output_text.delta") {
      text += e["delta"].get<std::string>();
      EXPECT_EQ(e["output_index"], 1);
      EXPECT_EQ(e["content_index"], 0);
      EXPECT_EQ(e["item_id"], n.result["output"][1]["id"]);
      EXPECT_EQ(e["logprobs"], json::array());
    }
  }
  EXPECT_EQ(reasoning, evs[6]["text"]);
  EXPECT_EQ(text, evs[13]["text"]);
  EXPECT_EQ(text, "The answer is 42.");
  // Items open empty (the client appends the parts and deltas) and close whole.
  EXPECT_EQ(evs[9]["item"]["content"], json::array());
  EXPECT_EQ(evs[9]["item"]["status"], "in_progress");
  EXPECT_EQ(evs[10]["part"], json::parse(R"({"type":"output_text","annotations":[],"logprobs":[],"text":""})"));
  EXPECT_EQ(evs[3]["part"], json::parse(R"({"type":"reasoning_text","text":""})"));
  EXPECT_EQ(evs[15]["item"], n.result["output"][1]);
  EXPECT_EQ(evs[8]["item"], n.result["output"][0]);
  // The completed event's Response is the non-streaming one.
  EXPECT_EQ(evs.back()["response"], n.result);
  ASSERT_EQ(s.finished.size(), 1u);
  EXPECT_EQ(s.finished[0], n.result);
}

TEST(ResponsesJob, ToolCallReply) {
  ResponsesJobOptions o = base_options();
  o.in_reasoning = true;
  o.parse_tools = true;
  o.tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}}}])");
  auto [s, n] = run_both({ev("Need weather.</think>\n\n<tool_call>\n<function=get_weather>\n", 4),
                          ev("<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>", 5, engine::FinishReason::Stop)},
                         o);
  const json& out = n.result["output"];
  ASSERT_EQ(out.size(), 2u) << out.dump();  // no empty message beside a call
  EXPECT_EQ(out[0]["type"], "reasoning");
  const json& fc = out[1];
  EXPECT_EQ(fc["type"], "function_call");
  EXPECT_TRUE(fc["id"].get<std::string>().starts_with("fc_"));
  EXPECT_TRUE(fc["call_id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(fc["name"], "get_weather");
  EXPECT_EQ(json::parse(fc["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(fc["status"], "completed");
  EXPECT_EQ(n.result["status"], "completed");

  auto evs = events(s.sse);
  std::vector<std::string> t = types(evs);
  const std::vector<std::string> tail = {"response.output_item.added", "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done", "response.output_item.done",
                                         "response.completed"};
  ASSERT_GE(t.size(), tail.size());
  EXPECT_EQ(std::vector<std::string>(t.end() - 5, t.end()), tail);
  const json& added = evs[evs.size() - 5];
  EXPECT_EQ(added["item"]["arguments"], "");
  EXPECT_EQ(added["item"]["status"], "in_progress");
  EXPECT_EQ(added["output_index"], 1);
  EXPECT_EQ(evs[evs.size() - 4]["delta"], fc["arguments"]);
  EXPECT_EQ(evs[evs.size() - 3]["arguments"], fc["arguments"]);
  EXPECT_EQ(evs[evs.size() - 3]["name"], "get_weather");
  EXPECT_EQ(evs[evs.size() - 3]["item_id"], fc["id"]);
  // The call ids of the two runs differ (random); the rest is the same.
  json a = evs.back()["response"], b = n.result;
  a["output"][1].erase("call_id");
  b["output"][1].erase("call_id");
  EXPECT_EQ(a, b);
}

TEST(ResponsesJob, MaxOutputTokensMakesItIncomplete) {
  auto [s, n] = run_both({ev("one two", 3), ev(" thr", 1, engine::FinishReason::Length)}, base_options());
  const json& r = n.result;
  EXPECT_EQ(n.status, 200);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "one two thr");
  EXPECT_EQ(r["usage"]["output_tokens"], 4);
  auto evs = events(s.sse);
  EXPECT_EQ(evs.back()["type"], "response.incomplete");
  EXPECT_EQ(evs.back()["response"], r);
  EXPECT_EQ(s.finished.size(), 1u);  // kept for a continuation, as OpenAI keeps incomplete responses
}

TEST(ResponsesJob, EmptyReplyStillHasAMessage) {
  ResponsesJobOptions o = base_options();
  o.in_reasoning = true;
  auto [s, n] = run_both({ev("hmm</think>\n\n", 2, engine::FinishReason::Stop)}, o);
  const json& out = n.result["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["content"][0]["text"], "");
  auto t = types(events(s.sse));
  EXPECT_EQ(std::count(t.begin(), t.end(), "response.output_text.delta"), 0);
  EXPECT_EQ(std::count(t.begin(), t.end(), "response.output_item.done"), 2);
}

TEST(ResponsesJob, FailureIsResponseFailedOr500) {
  engine::Event err = ev("", 0, engine::FinishReason::Error);
  err.error = "backend exploded";
  auto [s, n] = run_both({ev("partial", 1), err}, base_options());
  EXPECT_EQ(n.status, 500);
  EXPECT_EQ(n.result["error"]["message"], "backend exploded");
  EXPECT_EQ(n.result["error"]["type"], "server_error");
  auto evs = events(s.sse);
  EXPECT_EQ(evs.back()["type"], "response.failed");
  EXPECT_EQ(evs.back()["response"]["status"], "failed");
  EXPECT_EQ(evs.back()["response"]["error"], json({{"code", "server_error"}, {"message", "backend exploded"}}));
  EXPECT_TRUE(s.finished.empty());  // a failed response is not stored
  EXPECT_TRUE(n.finished.empty());
}

}  // namespace
}  // namespace ds::server

// The HTTP server in-process on a loopback port, on the fake backend with a byte-level codec and a
// ChatML template: OpenAI response shapes, streaming, thinking and tool-call splitting, limits and
// abuse cases (each must get its status while the server keeps serving everyone else).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "engine/byte_codec.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"
#include "engine/text_stream.h"
#include "server/json_text.h"
#include "server/server.h"

namespace ds::server {
namespace {

using json = nlohmann::ordered_json;
using engine::ByteCodec;
using namespace std::chrono_literals;

// Scripted replies, chosen by the first character of the last user message; other prompts get
// hash-driven tokens (EOS suppressed) until max_tokens.
const std::map<char, std::string>& scripts() {
  static const std::map<char, std::string> s = {
      {'R', "Thinking about it.</think>\n\nThe answer is 42.<|im_end|>"},
      {'T', "Need weather.</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "</function>\n</tool_call><|im_end|>"},
      {'S', "one two three four<|im_end|>"},
  };
  return s;
}

// Replies that open with a tool call (the server forced it: tool_choice): the one whose start is what the
// reply holds so far goes on. The first calls two functions (parallel calls).
const std::vector<std::string>& call_scripts() {
  static const std::vector<std::string> s = {
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_time>\n</function>\n</tool_call><|im_end|>",
      "<tool_call>\n<function=get_time>\n</function>\n</tool_call><|im_end|>",
  };
  return s;
}

int32_t oracle(std::span<const int32_t> h) {
  static ByteCodec codec;
  auto last = [&](size_t before) -> long {
    for (long i = static_cast<long>(before) - 1; i >= 0; i--)
      if (h[i] == ByteCodec::kImStart) return i;
    return -1;
  };
  long i = last(h.size());
  if (i < 0) return -1;
  size_t j = i + 11;  // "<|im_start|>assistant\n"
  if (j >= h.size() || h[j] != ByteCodec::kThink) return -1;
  if (j + 3 < h.size() && h[j + 1] == '\n' && h[j + 2] == '\n' && h[j + 3] == ByteCodec::kThinkEnd) j += 6;
  else j += 2;
  if (j < h.size() && h[j] == ByteCodec::kToolCall) {
    const auto reply = h.subspan(j);
    for (auto& script : call_scripts()) {
      auto toks = codec.encode(script, true);
      if (toks.size() > reply.size() && std::equal(reply.begin(), reply.end(), toks.begin())) return toks[reply.size()];
    }
    return -1;
  }
  long u = last(i);
  if (u < 0 || static_cast<size_t>(u) + 6 >= h.size()) return -1;
  auto it = scripts().find(static_cast<char>(h[u + 6]));  // "<|im_start|>user\n" then the content
  if (it == scripts().end()) return -1;
  auto toks = codec.encode(it->second, true);
  size_t k = h.size() - j;
  return k < toks.size() ? toks[k] : -1;
}

struct Rig {
  explicit Rig(ServerConfig sc = {}, engine::FakeBackendOptions o = opts(), engine::EngineConfig ec = {},
               ChatRenderFn render = render_chatml)
      : fb(o), eng(fb, codec, ec), srv(cfg(sc), eng, codec, std::move(render)) {
    eng.start();
    Status st = srv.bind();
    EXPECT_TRUE(st.ok()) << st.error().message;
    th = std::thread([this] { srv.run(); });
    for (int i = 0; i < 200; i++) {  // wait until it answers
      httplib::Client c("127.0.0.1", srv.port());
      if (auto r = c.Get("/health"); r && r->status == 200) break;
      std::this_thread::sleep_for(5ms);
    }
  }
  ~Rig() {
    srv.stop();
    eng.stop();
    th.join();
  }
  static engine::FakeBackendOptions opts() {
    engine::FakeBackendOptions o;
    o.n_vocab = ByteCodec::kVocab;
    o.n_ctx = 512;
    o.n_slots = 4;
    o.suppressed = {ByteCodec::kImEnd, ByteCodec::kEndOfText};
    o.oracle = oracle;
    return o;
  }
  static ServerConfig cfg(ServerConfig c) {
    c.host = "127.0.0.1";
    c.port = 0;
    c.model_id = "fake-model";
    return c;
  }
  httplib::Client client(std::vector<std::pair<std::string, std::string>> hdr = {}) {
    httplib::Client c("127.0.0.1", srv.port());
    c.set_read_timeout(20, 0);
    httplib::Headers h;
    for (auto& [k, v] : hdr) h.emplace(k, v);
    c.set_default_headers(h);
    return c;
  }
  std::pair<int, std::string> post(const std::string& path, const std::string& body,
                                   std::vector<std::pair<std::string, std::string>> hdr = {}) {
    auto c = client(std::move(hdr));
    auto r = c.Post(path.c_str(), body, "application/json");
    if (!r) return {-1, httplib::to_string(r.error())};
    return {r->status, r->body};
  }
  // Greedy hash-driven reply of a raw completion prompt, as text.
  std::string reference_text(const std::string& prompt, int n) {
    std::vector<int32_t> h = codec.encode(prompt, false);
    std::vector<float> l(fb.n_vocab());
    engine::TextStream ts;
    std::string out;
    for (int i = 0; i < n; i++) {
      fb.logits_for(h, l);
      int32_t t = sampler::argmax(l);
      if (!codec.is_control(t)) out += ts.push(codec.token_bytes(t));
      h.push_back(t);
    }
    return out + ts.finish();
  }
  ByteCodec codec;
  engine::FakeBackend fb;
  engine::Engine eng;
  Server srv;
  std::thread th;
};

std::vector<json> sse(const std::string& body, bool* done = nullptr) {
  std::vector<json> out;
  bool d = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t e = body.find("\n\n", pos);
    if (e == std::string::npos) break;
    std::string ev = body.substr(pos, e - pos);
    pos = e + 2;
    if (ev.starts_with(":")) continue;
    EXPECT_TRUE(ev.starts_with("data: ")) << ev;
    if (ev == "data: [DONE]") d = true;
    else out.push_back(json::parse(ev.substr(6)));
  }
  if (done) *done = d;
  return out;
}

struct ChatOut {
  std::string reasoning, content, finish;
  json tool_calls = json::array();
  json usage;
};

ChatOut merge_stream(const std::string& body) {
  bool done;
  auto ev = sse(body, &done);
  EXPECT_TRUE(done);
  ChatOut o;
  for (auto& c : ev) {
    if (c.contains("usage") && !c["usage"].is_null()) o.usage = c["usage"];
    if (c["choices"].empty()) continue;
    auto& ch = c["choices"][0];
    auto& d = ch["delta"];
    if (d.contains("reasoning_content")) o.reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content") && d["content"].is_string()) o.content += d["content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (auto& t : d["tool_calls"]) o.tool_calls.push_back(t);
    if (!ch["finish_reason"].is_null()) o.finish = ch["finish_reason"];
  }
  return o;
}

std::string chat_body(const std::string& user, json extra = json::object()) {
  json b = {{"model", "fake-model"}, {"messages", json::array({{{"role", "user"}, {"content", user}}})}};
  b.update(extra);
  return b.dump();
}

void expect_error(const std::pair<int, std::string>& r, int status, const std::string& param = "",
                  const std::string& code = "") {
  EXPECT_EQ(r.first, status) << r.second;
  json j = json::parse(r.second, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.second;
  auto& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param") && e.contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.second;
  }
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r.second;
  }
}

// The /metrics text once it holds `line` (or after a second without it). httplib's logger, where requests are
// counted, runs after a response is written, so a request may not be counted yet when its client has the reply.
std::string metrics_showing(Rig& rig, const std::string& line) {
  auto c = rig.client();
  std::string body;
  for (int i = 0; i < 100; i++) {
    if (auto r = c.Get("/metrics")) body = r->body;
    if (body.find(line) != std::string::npos) break;
    std::this_thread::sleep_for(10ms);
  }
  return body;
}

TEST(Http, HealthModelsMetricsAndUnknownRoutes) {
  Rig rig;
  auto c = rig.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  auto mj = json::parse(m->body);
  EXPECT_EQ(mj["object"], "list");
  EXPECT_EQ(mj["data"][0]["id"], "fake-model");
  EXPECT_EQ(c.Get("/v1/models/fake-model")->status, 200);
  EXPECT_EQ(c.Get("/v1/models/other")->status, 404);
  auto nf = c.Get("/v1/nothing");
  expect_error({nf->status, nf->body}, 404, "", "unknown_url");
  auto na = c.Get("/v1/chat/completions");
  expect_error({na->status, na->body}, 405);
  const std::string counted = "ds_http_requests_total{route=\"/v1/models\",status=\"200\"}";
  const std::string mt = metrics_showing(rig, counted);
  EXPECT_NE(mt.find(counted), std::string::npos) << mt;
  EXPECT_NE(mt.find("ds_time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_NE(mt.find("ds_requests_waiting"), std::string::npos);
}

TEST(Http, ChatReasoningNonStreamAndStream) {
  Rig rig;
  auto r = rig.post("/v1/chat/completions", chat_body("R please"));
  ASSERT_EQ(r.first, 200) << r.second;
  auto j = json::parse(r.second);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(j["model"], "fake-model");
  auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], "Thinking about it.");
  EXPECT_EQ(msg["content"], "The answer is 42.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const std::string prompt = "<|im_start|>user\nR please<|im_end|>\n<|im_start|>assistant\n<think>\n";
  EXPECT_EQ(j["usage"]["prompt_tokens"], rig.codec.encode(prompt, true).size());
  EXPECT_EQ(j["usage"]["completion_tokens"], rig.codec.encode(scripts().at('R'), true).size());
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());

  auto s = rig.post("/v1/chat/completions", chat_body("R please", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(s.first, 200);
  auto o = merge_stream(s.second);
  EXPECT_EQ(o.reasoning, "Thinking about it.");
  EXPECT_EQ(o.content, "The answer is 42.");
  EXPECT_EQ(o.finish, "stop");
  EXPECT_EQ(o.usage["completion_tokens"], j["usage"]["completion_tokens"]);
  EXPECT_EQ(o.usage["prompt_tokens_details"]["cached_tokens"], j["usage"]["prompt_tokens"]);  // same prompt again
}

TEST(Http, ChatToolCallsNonStreamAndStream) {
  Rig rig;
  json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}}}])");
  auto r = rig.post("/v1/chat/completions", chat_body("T: weather in Paris?", {{"tools", tools}}));
  ASSERT_EQ(r.first, 200) << r.second;
  auto j = json::parse(r.second);
  auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(msg["reasoning_content"], "Need weather.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  auto s = rig.post("/v1/chat/completions", chat_body("T: weather in Paris?", {{"tools", tools}, {"stream", true}}));
  auto o = merge_stream(s.second);
  EXPECT_EQ(o.finish, "tool_calls");
  EXPECT_EQ(o.content, "");
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0]["index"], 0);
  EXPECT_EQ(o.tool_calls[0]["function"]["name"], "get_weather");
  // tool_choice none: the same text is content.
  auto n = rig.post("/v1/chat/completions", chat_body("T: weather in Paris?", {{"tools", tools}, {"tool_choice", "none"}}));
  auto nj = json::parse(n.second);
  EXPECT_EQ(nj["choices"][0]["finish_reason"], "stop");
  EXPECT_NE(nj["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>"), std::string::npos);
}

// tool_choice "required" / a named function make the reply open with a call (of that function), streaming
// or not; parallel_tool_calls false keeps the first call only. The scripted model ("S") answers in text
// unless its reply already opens with <tool_call>.
TEST(Http, ToolChoiceRequiredAndNamedAreEnforced) {
  Rig rig;
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"get_time"}}])");
  const json named_time = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  auto ask = [&](json extra) {
    extra["tools"] = tools;
    auto r = rig.post("/v1/chat/completions", chat_body("S: weather?", extra));
    EXPECT_EQ(r.first, 200) << r.second;
    return json::parse(r.second, nullptr, false);
  };
  auto names = [](const json& calls) {
    std::vector<std::string> n;
    for (auto& c : calls) n.push_back(c["function"]["name"]);
    return n;
  };
  using V = std::vector<std::string>;

  // auto, thinking off: the model's text.
  json j = ask({{"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one two three four");
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));

  // required (thinking on by default: the forced call comes first, no reasoning).
  j = ask({{"tool_choice", "required"}});
  auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_FALSE(msg.contains("reasoning_content"));
  EXPECT_EQ(names(msg["tool_calls"]), (V{"get_weather", "get_time"}));
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  j = ask({{"tool_choice", "required"}, {"parallel_tool_calls", false}});
  EXPECT_EQ(names(j["choices"][0]["message"]["tool_calls"]), V{"get_weather"});

  // A named function; explicit thinking off is fine. OpenAI's finish_reason for a named choice is "stop".
  j = ask({{"tool_choice", named_time}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(names(j["choices"][0]["message"]["tool_calls"]), V{"get_time"});
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{}");

  // Streaming: the same calls as deltas.
  for (json tc : {json("required"), named_time}) {
    SCOPED_TRACE(tc.dump());
    for (bool parallel : {true, false}) {
      json b = json::parse(chat_body("S: weather?", {{"tools", tools}, {"tool_choice", tc}, {"stream", true},
                                                     {"parallel_tool_calls", parallel}}));
      auto o = merge_stream(rig.post("/v1/chat/completions", b.dump()).second);
      EXPECT_EQ(o.finish, tc == "required" ? "tool_calls" : "stop");
      EXPECT_EQ(o.content, "");
      EXPECT_EQ(o.reasoning, "");
      const V want = tc == "required" ? (parallel ? V{"get_weather", "get_time"} : V{"get_weather"}) : V{"get_time"};
      EXPECT_EQ(names(o.tool_calls), want) << "parallel " << parallel;
      for (size_t k = 0; k < o.tool_calls.size(); k++) EXPECT_EQ(o.tool_calls[k]["index"], k);
    }
  }

  // What cannot be enforced is refused, naming it.
  const std::string cc = "/v1/chat/completions";
  auto missing = rig.post(cc, chat_body("S", {{"tools", tools}, {"tool_choice", {{"type", "function"},
                                                                                   {"function", {{"name", "nope"}}}}}}));
  expect_error(missing, 400, "tool_choice.function.name");
  EXPECT_NE(missing.second.find("'nope'"), std::string::npos) << missing.second;
  expect_error(rig.post(cc, chat_body("S", {{"tool_choice", "required"}})), 400, "tool_choice");
  expect_error(rig.post(cc, chat_body("S", {{"tool_choice", named_time}})), 400, "tool_choice.function.name");
  expect_error(rig.post(cc, chat_body("S", {{"tools", tools}, {"tool_choice", "required"},
                                            {"chat_template_kwargs", {{"enable_thinking", true}}}})),
               400, "chat_template_kwargs.enable_thinking");
  // The server still answers.
  EXPECT_EQ(ask({{"tool_choice", "required"}})["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Http, ThinkingOffStopStringsAndSampling) {
  Rig rig;
  json off = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto r = rig.post("/v1/chat/completions", chat_body("S", off));
  auto j = json::parse(r.second);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one two three four");
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  json stop = off;
  stop["stop"] = json::array({" three", "zzz"});
  j = json::parse(rig.post("/v1/chat/completions", chat_body("S", stop)).second);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one two");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // max_tokens cuts: finish_reason length.
  json len = off;
  len["max_tokens"] = 3;
  j = json::parse(rig.post("/v1/chat/completions", chat_body("S", len)).second);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  // Seeded sampling is reproducible through the API.
  json smp = {{"prompt", "abc"}, {"max_tokens", 20}, {"temperature", 1.0}, {"top_p", 0.95}, {"seed", 7}};
  auto a = json::parse(rig.post("/v1/completions", smp.dump()).second)["choices"][0]["text"];
  auto b = json::parse(rig.post("/v1/completions", smp.dump()).second)["choices"][0]["text"];
  EXPECT_EQ(a, b);
}

// response_format through the server: the reasoning stays free ('R' scripts "Thinking about it.</think>" and
// then text the mask refuses), the content is an instance of the schema, streamed or not; json_object cut by
// max_tokens finishes with "length"; completions take it too; bad formats are 400s naming the field.
TEST(Http, ResponseFormatJsonSchema) {
  Rig rig;
  const json schema = json::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"},
      "color": {"enum": ["red", "green"]}, "n": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 2}},
      "required": ["ok", "color", "n"], "additionalProperties": false})");
  auto check = [](const std::string& content) {
    json j = json::parse(content, nullptr, false);
    ASSERT_TRUE(j.is_object()) << content;
    EXPECT_EQ(j.size(), 3u) << content;
    EXPECT_TRUE(j["ok"].is_boolean()) << content;
    EXPECT_TRUE(j["color"] == "red" || j["color"] == "green") << content;
    ASSERT_TRUE(j["n"].is_array()) << content;
    EXPECT_LE(j["n"].size(), 2u) << content;
  };
  json rf = {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"strict", true},
                                                                            {"schema", schema}}}}},
             {"max_tokens", 400}, {"temperature", 0}};
  auto r = rig.post("/v1/chat/completions", chat_body("R", rf));
  ASSERT_EQ(r.first, 200) << r.second;
  json j = json::parse(r.second);
  const auto& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Thinking about it.");
  check(msg["content"].get<std::string>());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  json st = rf;
  st["stream"] = true;
  ChatOut o = merge_stream(rig.post("/v1/chat/completions", chat_body("R", st)).second);
  EXPECT_EQ(o.reasoning, "Thinking about it.");
  EXPECT_EQ(o.content, msg["content"].get<std::string>());  // greedy: the same document
  EXPECT_EQ(o.finish, "stop");
  // Thinking off: the document starts at once.
  json off = rf;
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  j = json::parse(rig.post("/v1/chat/completions", chat_body("S", off)).second);
  check(j["choices"][0]["message"]["content"].get<std::string>());
  // json_object cut by max_tokens.
  // Greedy: an unseeded sampled reply may spend its 3 tokens on leading white space (valid JSON, CI saw one).
  json cut = {{"response_format", {{"type", "json_object"}}}, {"max_tokens", 3}, {"temperature", 0},
              {"chat_template_kwargs", {{"enable_thinking", false}}}};
  j = json::parse(rig.post("/v1/chat/completions", chat_body("S", cut)).second);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const std::string c = j["choices"][0]["message"]["content"];
  const size_t c0 = c.find_first_not_of(" \t\r\n");
  ASSERT_NE(c0, std::string::npos) << "a json_object reply of 3 tokens, all white space: '" << c << "'";
  EXPECT_EQ(c[c0], '{') << c;
  // Completions.
  json comp = {{"prompt", "abc"}, {"max_tokens", 400}, {"response_format", rf["response_format"]}};
  j = json::parse(rig.post("/v1/completions", comp.dump()).second);
  check(j["choices"][0]["text"].get<std::string>());
  // Tools offered: the content is the document, even one whose string reads like a tool call.
  const std::string call = "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>";
  json tools = off;
  tools["response_format"]["json_schema"]["schema"] = {{"const", call}};
  tools["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
  j = json::parse(rig.post("/v1/chat/completions", chat_body("S", tools)).second);
  EXPECT_EQ(j["choices"][0]["message"]["content"], json(call).dump()) << j.dump();
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls") && !j["choices"][0]["message"]["tool_calls"].empty());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // Errors.
  expect_error(rig.post("/v1/chat/completions", chat_body("S", {{"response_format", "json"}})), 400, "response_format");
  expect_error(rig.post("/v1/chat/completions", chat_body("S", {{"response_format", {{"type", "xml"}}}})), 400,
               "response_format.type");
  json bad = rf;
  bad["response_format"]["json_schema"]["schema"]["properties"]["ok"]["type"] = "bool";
  expect_error(rig.post("/v1/chat/completions", chat_body("S", bad)), 400,
               "response_format.json_schema.schema.properties.ok.type");
  json unsup = rf;
  unsup["response_format"]["json_schema"]["schema"]["properties"]["color"]["pattern"] = "r.*";
  expect_error(rig.post("/v1/completions", json{{"prompt", "x"}, {"response_format", unsup["response_format"]}}.dump()),
               400, "response_format.json_schema.schema.properties.color.pattern");
}

TEST(Http, CompletionsMatchReferenceWithLogprobs) {
  Rig rig;
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}, {"logprobs", 2}};
  auto r = rig.post("/v1/completions", body.dump());
  ASSERT_EQ(r.first, 200) << r.second;
  auto j = json::parse(r.second);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], rig.reference_text("Once upon a time", 24));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  auto& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), 24u);
  EXPECT_EQ(lp["token_logprobs"].size(), 24u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  body["stream"] = true;
  auto s = rig.post("/v1/completions", body.dump());
  bool done;
  std::string text;
  for (auto& c : sse(s.second, &done))
    if (!c["choices"].empty()) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  EXPECT_EQ(text, j["choices"][0]["text"]);
  // Token-id prompts.
  json ids = {{"prompt", json::array({1, 2, 3})}, {"max_tokens", 2}};
  EXPECT_EQ(rig.post("/v1/completions", ids.dump()).first, 200);
}

TEST(Http, ConcurrentStreamsEqualTheirLoneRuns) {
  engine::EngineConfig ec;
  ec.prefix_cache_bytes = 0;
  auto o = Rig::opts();
  o.decode_delay = 300us;
  Rig rig({}, o, ec);
  const int n = 12;
  std::vector<std::string> got(n);
  std::vector<std::thread> ts;
  for (int i = 0; i < n; i++)
    ts.emplace_back([&, i] {
      json b = {{"prompt", "client " + std::to_string(i) + " says"}, {"max_tokens", 16 + i}, {"temperature", 0}, {"stream", true}};
      auto r = rig.post("/v1/completions", b.dump());
      for (auto& c : sse(r.second))
        if (!c["choices"].empty()) got[i] += c["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < n; i++) EXPECT_EQ(got[i], rig.reference_text("client " + std::to_string(i) + " says", 16 + i)) << i;
  EXPECT_EQ(rig.fb.max_batch.load(), 4);
}

TEST(Http, AbuseGetsRightStatus) {
  ServerConfig sc;
  sc.max_body_bytes = 64 * 1024;
  sc.max_tokens_limit = 100;
  Rig rig(sc);
  const std::string cc = "/v1/chat/completions";
  expect_error(rig.post(cc, "{\"messages\": ["), 400);
  expect_error(rig.post(cc, "[1, 2]"), 400);
  expect_error(rig.post(cc, ""), 400);
  expect_error(rig.post(cc, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"), 400);  // invalid UTF-8
  expect_error(rig.post(cc, R"({"messages":[{"role":"user","content":"\ud800"}]})"), 400);          // lone surrogate
  expect_error(rig.post(cc, chat_body("x", {{"temperature", "hot"}})), 400, "temperature");
  expect_error(rig.post(cc, chat_body("x", {{"messages", 5}})), 400, "messages");
  expect_error(rig.post(cc, chat_body("x", {{"max_tokens", 101}})), 400, "max_tokens");
  expect_error(rig.post(cc, chat_body("x", {{"max_tokens", -1}})), 400, "max_tokens");
  expect_error(rig.post(cc, chat_body(std::string(600, 'a'))), 400, "messages", "context_length_exceeded");
  expect_error(rig.post(cc, chat_body(std::string(450, 'a'), {{"max_tokens", 100}})), 400, "messages",
               "context_length_exceeded");
  expect_error(rig.post("/v1/completions", json{{"prompt", std::string(100 * 1024, 'a')}}.dump()), 413, "",
               "payload_too_large");
  // Deep nesting is refused before parsing (copies and template walks of the value recurse).
  expect_error(rig.post(cc, "{\"messages\":" + std::string(20000, '[') + std::string(20000, ']') + "}"), 400);
  expect_error(rig.post(cc, std::string(300, '[') + std::string(300, ']')), 400);
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}, {"deep", json::parse(std::string(100, '[') + std::string(100, ']'))},
                                         {"s", std::string(1000, '[')}})).first, 200);
  // So is deep nesting inside a string that the server parses as JSON (a tool call's arguments).
  json deep_args = json::parse(chat_body("S", {{"max_tokens", 2}}));
  deep_args["messages"].push_back({{"role", "assistant"},
                                   {"content", ""},
                                   {"tool_calls", {{{"id", "c1"},
                                                    {"type", "function"},
                                                    {"function", {{"name", "f"},
                                                                  {"arguments", "{\"a\":" + std::string(20000, '[') +
                                                                                    std::string(20000, ']') + "}"}}}}}}});
  expect_error(rig.post(cc, deep_args.dump()), 400, "messages[1].tool_calls");
  // Unknown fields are ignored.
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}, {"frobnicate", {{"x", 1}}}})).first, 200);
  // Malformed HTTP on a raw socket: the server answers 400 and keeps serving.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(rig.srv.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string junk = "BLAH\r\n\r\n";
  ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  EXPECT_GT(n, 0);
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}})).first, 200);
}

TEST(Http, ApiKey) {
  ServerConfig sc;
  sc.api_key = "sekret";
  Rig rig(sc);
  const std::string cc = "/v1/chat/completions";
  expect_error(rig.post(cc, chat_body("S")), 401, "", "invalid_api_key");
  expect_error(rig.post(cc, chat_body("S"), {{"Authorization", "Bearer wrong"}}), 401, "", "invalid_api_key");
  expect_error(rig.post(cc, chat_body("S"), {{"Authorization", "sekret"}}), 401);
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}}), {{"Authorization", "Bearer sekret"}}).first, 200);
  auto c = rig.client();
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 200);  // health and metrics are not under /v1
}

TEST(Http, QueueFullIs429) {
  auto o = Rig::opts();
  o.n_slots = 1;
  o.decode_delay = 2ms;
  engine::EngineConfig ec;
  ec.max_queue = 1;
  Rig rig({}, o, ec);
  json longreq = {{"prompt", "long"}, {"max_tokens", 150}};
  std::vector<std::thread> ts;
  std::vector<int> st(2);
  for (int i = 0; i < 2; i++) ts.emplace_back([&, i] { st[i] = rig.post("/v1/completions", longreq.dump()).first; });
  for (int i = 0; i < 100 && rig.eng.stats().waiting < 1; i++) std::this_thread::sleep_for(5ms);
  expect_error(rig.post("/v1/completions", longreq.dump()), 429, "", "rate_limit_exceeded");
  for (auto& t : ts) t.join();
  EXPECT_EQ(st[0], 200);
  EXPECT_EQ(st[1], 200);
}

int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string http_post_text(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A POST sent on a raw socket, whose client the test can drop at any moment: the socket, or -1 (a test failure).
int raw_post(int port, const std::string& path, const std::string& body) {
  int fd = raw_connect(port);
  if (fd < 0) {
    ADD_FAILURE() << "cannot connect to port " << port;
    return -1;
  }
  const std::string req = http_post_text(path, body);
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ADD_FAILURE() << "cannot send the request";
    close(fd);
    return -1;
  }
  return fd;
}

// A rig whose decode steps take 2 ms each: a long reply is still running when its client goes away.
engine::FakeBackendOptions slow_decode(int32_t n_ctx = 512) {
  auto o = Rig::opts();
  o.decode_delay = 2ms;
  o.n_ctx = n_ctx;
  return o;
}

// Closes the socket of a client whose request runs, then waits up to `limit` for the engine to drop the sequence:
// the milliseconds that took.
double close_and_time_release(Rig& rig, int fd, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  close(fd);
  while (rig.eng.stats().running > 0 && std::chrono::steady_clock::now() - t0 < limit) std::this_thread::sleep_for(1ms);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A streaming client that sends `body` to `path` and closes its socket after the first events: its slot is freed
// within a few tokens (the server notices at its next write), counted as cancelled, and the server answers after.
void expect_disconnect_frees_slot(const std::string& path, const std::string& body) {
  Rig rig({}, slow_decode());
  int fd = raw_post(rig.srv.port(), path, body);
  ASSERT_GE(fd, 0);
  char buf[512];
  ASSERT_GT(read(fd, buf, sizeof buf), 0);  // headers and the first events
  for (int i = 0; i < 100 && rig.eng.stats().running < 1; i++) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(rig.eng.stats().running, 1);
  const double ms = close_and_time_release(rig, fd, 2s);
  EXPECT_EQ(rig.eng.stats().running, 0);
  EXPECT_LT(ms, 200) << "the slot of a gone client must be freed within a few tokens";
  EXPECT_EQ(rig.eng.stats().requests_cancelled, 1u);
  EXPECT_LT(rig.eng.stats().generated_tokens, 300u);
  EXPECT_EQ(rig.post("/v1/completions", json{{"prompt", "ok"}, {"max_tokens", 3}}.dump()).first, 200);
}

TEST(Http, DisconnectMidStreamFreesSlotAtOnce) {
  expect_disconnect_frees_slot("/v1/completions", json{{"prompt", "go"}, {"max_tokens", 400}, {"stream", true}}.dump());
}

TEST(Http, DisconnectWithoutStreamFreesSlot) {
  Rig rig({}, slow_decode(4096));
  // A non-streaming client that gives up (its own timeout) while its reply is generated: the sequence
  // must not run on to max_tokens (6 s here) for no one.
  int fd = raw_post(rig.srv.port(), "/v1/completions", json{{"prompt", "go"}, {"max_tokens", 3000}}.dump());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 200 && rig.eng.stats().running < 1; i++) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(rig.eng.stats().running, 1);
  std::this_thread::sleep_for(300ms);  // past the first check: the lookup of its socket has been made
  const double ms = close_and_time_release(rig, fd, 3s);
  EXPECT_EQ(rig.eng.stats().running, 0);
  EXPECT_LT(ms, 1000) << "the slot of a gone client must be freed within a check interval";
  EXPECT_EQ(rig.eng.stats().requests_cancelled, 1u);
  // A client that stays gets its whole reply, however long it takes.
  auto r = rig.post("/v1/completions", json{{"prompt", "stay"}, {"max_tokens", 300}}.dump());
  EXPECT_EQ(r.first, 200);
  EXPECT_EQ(json::parse(r.second)["usage"]["completion_tokens"], 300);
  EXPECT_EQ(rig.eng.stats().requests_cancelled, 1u);
}

TEST(Http, IdleConnectionsDoNotStarveOthers) {
  ServerConfig sc;
  sc.http_threads = 2;
  sc.io_timeout_s = 3;
  Rig rig(sc);
  // Connections that send nothing hold a worker each until the keep-alive timeout: with a fixed pool of
  // 2 a request behind 4 of them waited 6 s.
  std::vector<int> idle;
  for (int i = 0; i < 4; i++) idle.push_back(raw_connect(rig.srv.port()));
  std::this_thread::sleep_for(100ms);  // all accepted and waiting for a request line
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rig.post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}}.dump()).first, 200);
  auto c = rig.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  for (int fd : idle) close(fd);
}

TEST(Http, StalledReaderIsDroppedAfterTheWriteTimeout) {
  ServerConfig sc;
  sc.io_timeout_s = 1;
  auto o = Rig::opts();
  o.n_ctx = 60000;
  Rig rig(sc, o);
  // A client that asks for a long stream and never reads: once the socket buffers are full the
  // server's write times out, the request is cancelled and its slot freed; others are served.
  // 20 top logprobs make each event ~1 KB, so the loopback send buffer (up to tcp_wmem's 4 MB) fills
  // in a few thousand tokens: with ~150-byte events it took ~28,000, more than a loaded 2-core CI
  // machine generated in the old 20 s wait (CI saw requests_cancelled still 0).
  int fd = raw_connect(rig.srv.port());
  ASSERT_GE(fd, 0);
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string req = http_post_text("/v1/completions", json{{"prompt", "flood"}, {"max_tokens", 50000}, {"stream", true}, {"logprobs", 20}}.dump());
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rig.post("/v1/completions", json{{"prompt", "other"}, {"max_tokens", 5}}.dump()).first, 200);
  while (rig.eng.stats().requests_cancelled == 0 && std::chrono::steady_clock::now() - t0 < 60s)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(rig.eng.stats().requests_cancelled, 1u);
  EXPECT_LT(rig.eng.stats().generated_tokens, 50000u);
  for (int i = 0; i < 100 && rig.eng.stats().running > 0; i++) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(rig.eng.stats().running, 0);
  close(fd);
  EXPECT_EQ(rig.post("/v1/completions", json{{"prompt", "after"}, {"max_tokens", 5}}.dump()).first, 200);
}

TEST(Http, SlowClientDoesNotBlockOthers) {
  Rig rig;
  // A client that sends its request one byte every 20 ms, while others are served.
  std::string req = http_post_text("/v1/completions", json{{"prompt", "slow"}, {"max_tokens", 3}}.dump());
  std::string slow_reply;
  std::thread slow([&] {
    int fd = raw_connect(rig.srv.port());
    for (char c : req.substr(0, 30)) {
      if (write(fd, &c, 1) != 1) break;
      std::this_thread::sleep_for(20ms);
    }
    std::string rest = req.substr(30);
    if (write(fd, rest.data(), rest.size()) < 0) ADD_FAILURE() << "write failed";
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) slow_reply.assign(buf, n);
    close(fd);
  });
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; i++)
    EXPECT_EQ(rig.post("/v1/completions", json{{"prompt", "fast"}, {"max_tokens", 4}}.dump()).first, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  slow.join();
  EXPECT_TRUE(slow_reply.starts_with("HTTP/1.1 200")) << slow_reply.substr(0, 100);
}

// A whole response with a Content-Length is in `r`.
bool complete_response(const std::string& r) {
  size_t h = r.find("\r\n\r\n");
  if (h == std::string::npos) return false;
  size_t cl = r.find("Content-Length: ");
  return cl != std::string::npos && cl < h && r.size() >= h + 4 + std::stoul(r.substr(cl + 16));
}

// The first response a raw socket gets back (until it is whole, the server closes, or `timeout`
// passes without a byte).
std::string raw_exchange(int port, const std::string& bytes, std::chrono::milliseconds timeout = 3000ms) {
  int fd = raw_connect(port);
  if (fd < 0) return "";
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())) {
    char buf[4096];
    for (ssize_t n; !complete_response(out) && (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  }
  close(fd);
  return out;
}

// The status line and JSON body of a raw HTTP response.
std::pair<int, std::string> raw_status_body(const std::string& resp) {
  if (!resp.starts_with("HTTP/1.1 ")) return {-1, resp};
  size_t b = resp.find("\r\n\r\n");
  return {std::stoi(resp.substr(9, 3)), b == std::string::npos ? "" : resp.substr(b + 4)};
}

TEST(Http, NumberOverflowIs400) {
  Rig rig;
  const std::string cc = "/v1/chat/completions";
  const std::string msgs = R"("messages":[{"role":"user","content":"S"}])";
  // nlohmann's parser throws out_of_range (not parse_error) for a number beyond double: it was a 500.
  for (std::string field : {R"("max_tokens":1e400)", R"("temperature":-1e400)", R"("seed":1e400)",
                            R"("logit_bias":{"5":1e400})", R"("frobnicate":[1,2,1e999])"}) {
    auto r = rig.post(cc, "{" + msgs + "," + field + "}");
    expect_error(r, 400);
    EXPECT_NE(r.second.find("number overflow"), std::string::npos) << r.second;
  }
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}})).first, 200);
}

TEST(Http, KnownRouteUnderAnotherMethodIs405) {
  Rig rig;
  auto c = rig.client();
  auto expect_405 = [](const httplib::Result& r, const std::string& allow) {
    ASSERT_TRUE(r);
    expect_error({r->status, r->body}, 405, "", "method_not_allowed");
    EXPECT_EQ(r->get_header_value("Allow"), allow);
  };
  // cpp-httplib answered these 404 "Unknown request URL".
  expect_405(c.Put("/v1/chat/completions", chat_body("S"), "application/json"), "POST");
  expect_405(c.Patch("/v1/completions", "{}", "application/json"), "POST");
  expect_405(c.Delete("/v1/chat/completions"), "POST");
  expect_405(c.Options("/v1/completions"), "POST");
  expect_405(c.Get("/v1/completions"), "POST");
  expect_405(c.Post("/health", "{}", "application/json"), "GET, HEAD");
  expect_405(c.Delete("/v1/models"), "GET, HEAD");
  expect_405(c.Put("/v1/models/fake-model", "{}", "application/json"), "GET, HEAD");
  auto nf = c.Put("/v1/nothing", "{}", "application/json");
  ASSERT_TRUE(nf);
  expect_error({nf->status, nf->body}, 404, "", "unknown_url");
  EXPECT_EQ(c.Get("/v1/models/other")->status, 404);
}

TEST(Http, BodyWithoutLengthIs411NotReadWithoutBound) {
  ServerConfig sc;
  sc.max_body_bytes = 64 * 1024;
  Rig rig(sc);
  // cpp-httplib reads the body of a POST without Content-Length (or with "Transfer-Encoding: identity")
  // until the client closes, past max_body_bytes: a client could fill the memory (200 MB sent that way
  // took the process from 138 to 335 MB). Refused at once, before the body.
  const std::string body = "{\"prompt\":\"S\"}";
  for (std::string hdr : {"", "Transfer-Encoding: identity\r\n"}) {
    for (std::string method : {"POST", "PUT"}) {
      auto r = raw_status_body(raw_exchange(rig.srv.port(), method + " /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" +
                                                                hdr + "Content-Type: application/json\r\n\r\n" + body));
      expect_error(r, 411, "", "length_required");
    }
  }
  // An empty POST says so with Content-Length: 0 (a 400 for the empty body, not a wait for the close).
  expect_error(raw_status_body(raw_exchange(rig.srv.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                                            "Content-Length: 0\r\nConnection: close\r\n\r\n")),
               400);
  // GET, HEAD, DELETE and OPTIONS without a length have no body.
  EXPECT_EQ(raw_status_body(raw_exchange(rig.srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).first, 200);
  EXPECT_EQ(raw_status_body(raw_exchange(rig.srv.port(), "DELETE /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).first, 405);
  EXPECT_EQ(rig.post("/v1/chat/completions", chat_body("S", {{"max_tokens", 2}})).first, 200);
}

TEST(Http, CompressedBodyLongUrlAndBadRangeAreNamed) {
  Rig rig;
  // cpp-httplib (built without zlib) answered a gzip body 400 "malformed HTTP request", a long URL and
  // an unsatisfiable Range "HTTP 414" / "HTTP 416".
  auto gz = raw_status_body(raw_exchange(rig.srv.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                                         "Content-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"));
  expect_error(gz, 415, "", "unsupported_media_type");
  EXPECT_NE(gz.second.find("Content-Encoding 'gzip'"), std::string::npos) << gz.second;
  auto url = raw_status_body(raw_exchange(rig.srv.port(), "GET /health?" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  expect_error(url, 414);
  EXPECT_NE(url.second.find("URL is too long"), std::string::npos) << url.second;
  auto range = raw_status_body(raw_exchange(rig.srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\nRange: bytes=9-1\r\n\r\n"));
  expect_error(range, 416);
  EXPECT_NE(range.second.find("bytes=9-1"), std::string::npos) << range.second;
  EXPECT_EQ(rig.post("/v1/chat/completions", chat_body("S", {{"max_tokens", 2}})).first, 200);
}

TEST(Http, AssistantToolCallWithNullContentRenders) {
  // Like Qwen3's template (`'</think>' in message.content`), this one fails on a content that is not text.
  ChatRenderFn strict = [](const json& messages, const json& tools, bool agp, const json& kwargs) -> Result<std::string> {
    for (auto& m : messages)
      if (!m.contains("content") || !m["content"].is_string()) return err("argument of type 'NoneType' is not iterable");
    return render_chatml(messages, tools, agp, kwargs);
  };
  Rig rig({}, Rig::opts(), {}, strict);
  // The assistant turn as OpenAI clients send it back after a tool call: content null, or left out.
  json call = {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}};
  for (bool left_out : {false, true}) {
    json body = json::parse(chat_body("S", {{"max_tokens", 2}}));
    json a = {{"role", "assistant"}, {"tool_calls", call}};
    if (!left_out) a["content"] = nullptr;
    body["messages"].push_back(a);
    body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "2"}});
    body["messages"].push_back({{"role", "user"}, {"content", "S"}});
    auto r = rig.post("/v1/chat/completions", body.dump());
    EXPECT_EQ(r.first, 200) << left_out << " " << r.second;
  }
  // A user message still needs its content.
  expect_error(rig.post("/v1/chat/completions", R"({"messages":[{"role":"user"}]})"), 400, "messages[0].content");
}

// A JSON object of n members "k0":0,"k1":1,...
std::string wide_object(int n) {
  std::string s = "{";
  for (int i = 0; i < n; i++) s += fmt::format("{}\"k{}\":{}", i ? "," : "", i, i);
  return s + "}";
}

TEST(Http, WideObjectsAreRefusedBeforeTheParse) {
  Rig rig;
  const std::string cc = "/v1/chat/completions";
  const std::string head = R"({"messages":[{"role":"user","content":"S"}],"max_tokens":2,"x":)";
  // ordered_json parses an object of n members in n²/2 key comparisons: 60,000 members (800 KB) held a
  // core for seconds (a 5 MB body with 300,000 members: 162 s).
  auto t0 = std::chrono::steady_clock::now();
  auto r = rig.post(cc, head + wide_object(60000) + "}");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  expect_error(r, 400);
  EXPECT_NE(r.second.find("more than 1024 members"), std::string::npos) << r.second;
  EXPECT_EQ(rig.post(cc, head + wide_object(kMaxJsonMembers) + "}").first, 200);
  expect_error(rig.post(cc, head + wide_object(kMaxJsonMembers + 1) + "}"), 400);
  // Commas inside strings and arrays are no members.
  std::string long_array = "[0";
  for (int i = 0; i < 3000; i++) long_array += ",1";
  EXPECT_EQ(rig.post(cc, head + "{\"a\":" + long_array + "],\"b\":\"" + std::string(5000, ',') + "\"}}").first, 200);
  // The same bound for the JSON text of a tool call's arguments, and for the model's own tool calls.
  json body = json::parse(chat_body("S", {{"max_tokens", 2}}));
  body["messages"].push_back({{"role", "assistant"},
                              {"content", ""},
                              {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", wide_object(2000)}}}}}}});
  auto a = rig.post(cc, body.dump());
  expect_error(a, 400, "messages[1].tool_calls");
  EXPECT_NE(a.second.find("more than 1024 members"), std::string::npos) << a.second;
  EXPECT_TRUE(parse_json_text(wide_object(kMaxJsonMembers + 1)).is_discarded());
  EXPECT_EQ(parse_json_text(wide_object(kMaxJsonMembers)).size(), static_cast<size_t>(kMaxJsonMembers));
}

TEST(Http, ErrorsNameNestedFieldsAndLogitBiasKeys) {
  Rig rig;
  const std::string cc = "/v1/chat/completions";
  expect_error(rig.post(cc, chat_body("S", {{"stream_options", {{"include_usage", "yes"}}}})), 400,
               "stream_options.include_usage");
  // Token ids are written in digits: strtoll alone took " 5", "+5" and "-0".
  for (std::string k : {" 5", "+5", "-0", "5 ", "0x5", "99999999999999999999"})
    expect_error(rig.post(cc, chat_body("S", {{"logit_bias", {{k, 1}}}})), 400, "logit_bias");
  EXPECT_EQ(rig.post(cc, chat_body("S", {{"max_tokens", 2}, {"logit_bias", {{"5", 1}, {"0", -100}}}})).first, 200);
}

// --- POST /v1/responses (the Responses API) on the same engine and parsing as chat ----------------------

std::string responses_body(json input, json extra = json::object()) {
  json b = {{"model", "fake-model"}, {"input", std::move(input)}};
  b.update(extra);
  return b.dump();
}

// "event: T\ndata: {...}\n\n" blocks -> the data objects (each names its type as the event line does).
std::vector<json> response_events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  for (size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string block = body.substr(pos, end - pos);
    if (block.starts_with(":")) continue;  // keep-alive
    const size_t nl = block.find('\n');
    EXPECT_TRUE(block.starts_with("event: ") && nl != std::string::npos) << block;
    if (nl == std::string::npos) continue;
    json d = json::parse(block.substr(nl + 7), nullptr, false);
    EXPECT_EQ(block.substr(7, nl - 7), d.value("type", "")) << block;
    out.push_back(std::move(d));
  }
  EXPECT_EQ(pos, body.size()) << "a trailing partial event";
  return out;
}

json output_of(const std::pair<int, std::string>& r, size_t n_items) {
  EXPECT_EQ(r.first, 200) << r.second;
  json j = json::parse(r.second, nullptr, false);
  EXPECT_EQ(j["output"].size(), n_items) << r.second;
  return j;
}

TEST(Http, ResponsesReasoningAndTextStreamingOrNot) {
  Rig rig;
  json j = output_of(rig.post("/v1/responses", responses_body("R please")), 2);
  EXPECT_TRUE(j["id"].get<std::string>().starts_with("resp_"));
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Thinking about it.");
  EXPECT_EQ(j["output"][1]["type"], "message");
  EXPECT_EQ(j["output"][1]["content"][0]["text"], "The answer is 42.");
  const std::string prompt = "<|im_start|>user\nR please<|im_end|>\n<|im_start|>assistant\n<think>\n";
  EXPECT_EQ(j["usage"]["input_tokens"], rig.codec.encode(prompt, true).size());
  EXPECT_EQ(j["usage"]["output_tokens"], rig.codec.encode(scripts().at('R'), true).size());
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
  EXPECT_GT(j["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 0);

  auto s = rig.post("/v1/responses", responses_body("R please", {{"stream", true}}));
  ASSERT_EQ(s.first, 200);
  auto evs = response_events(s.second);
  ASSERT_GE(evs.size(), 4u);
  EXPECT_EQ(evs.front()["type"], "response.created");
  EXPECT_EQ(evs.back()["type"], "response.completed");
  std::string text;
  for (size_t i = 0; i < evs.size(); i++) {
    EXPECT_EQ(evs[i]["sequence_number"], i);
    if (evs[i]["type"] == "response.output_text.delta") text += evs[i]["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "The answer is 42.");
  const json& fin = evs.back()["response"];
  EXPECT_EQ(fin["output"][1]["content"][0]["text"], text);
  EXPECT_EQ(fin["usage"]["output_tokens"], j["usage"]["output_tokens"]);
  EXPECT_EQ(fin["usage"]["input_tokens_details"]["cached_tokens"], j["usage"]["input_tokens"]);  // same prompt again

  // Counted in /metrics under its route; other methods are 405.
  auto c = rig.client();
  const std::string counted = "ds_http_requests_total{route=\"/v1/responses\",status=\"200\"} 2";
  EXPECT_NE(metrics_showing(rig, counted).find(counted), std::string::npos);
  auto g = c.Get("/v1/responses");
  expect_error({g->status, g->body}, 405, "", "method_not_allowed");
}

TEST(Http, ResponsesToolRoundTripContinuesByPreviousResponseId) {
  Rig rig;
  const json tools = json::parse(R"([{"type":"function","name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}}}},{"type":"function","name":"get_time"}])");
  json first = output_of(rig.post("/v1/responses", responses_body("T: weather in Paris?", {{"tools", tools}})), 2);
  const json call = first["output"][1];
  ASSERT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(first["tools"][0]["name"], "get_weather");  // echoed in the Responses form

  // The tool's result continues the stored conversation ("S..." is scripted text; thinking off).
  const json result = json::array({{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "Sunny"}}});
  const json extra = {{"tools", tools}, {"reasoning", {{"effort", "none"}}}};
  json next = extra;
  next["previous_response_id"] = first["id"];
  json second = output_of(rig.post("/v1/responses", responses_body(result, next)), 1);
  EXPECT_EQ(second["previous_response_id"], first["id"]);
  EXPECT_EQ(second["output"][0]["content"][0]["text"], "one two three four");
  // The same as the client replaying the whole conversation itself.
  json replay = json::array({{{"role", "user"}, {"content", "T: weather in Paris?"}}});
  for (auto& item : first["output"]) replay.push_back(item);
  replay.push_back(result[0]);
  json again = output_of(rig.post("/v1/responses", responses_body(replay, extra)), 1);
  EXPECT_EQ(again["usage"]["input_tokens"], second["usage"]["input_tokens"]);
  EXPECT_EQ(again["output"][0]["content"], second["output"][0]["content"]);
  const std::string alone = "<|im_start|>user\nSunny<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  EXPECT_GT(second["usage"]["input_tokens"].get<size_t>(), rig.codec.encode(alone, true).size());

  // Unknown ids, and responses made with store false, cannot be continued.
  expect_error(rig.post("/v1/responses", responses_body("S", {{"previous_response_id", "resp_unknown"}})), 400,
               "previous_response_id", "previous_response_not_found");
  json unstored = output_of(rig.post("/v1/responses", responses_body("S", {{"store", false}, {"max_output_tokens", 2}})), 1);
  EXPECT_EQ(unstored["store"], false);
  expect_error(rig.post("/v1/responses", responses_body("S", {{"previous_response_id", unstored["id"]}})), 400,
               "previous_response_id", "previous_response_not_found");

  // A named tool_choice forces that call, streaming too.
  const json named = {{"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "get_time"}}}};
  json forced = output_of(rig.post("/v1/responses", responses_body("S: weather?", named)), 1);
  EXPECT_EQ(forced["output"][0]["name"], "get_time");
  json sn = named;
  sn["stream"] = true;
  auto s = rig.post("/v1/responses", responses_body("S: weather?", sn));
  auto evs = response_events(s.second);
  ASSERT_FALSE(evs.empty());
  EXPECT_EQ(evs.back()["response"]["output"][0]["name"], "get_time");
  int done = 0;
  for (auto& e : evs)
    if (e["type"] == "response.function_call_arguments.done") {
      done++;
      EXPECT_EQ(e["name"], "get_time");
    }
  EXPECT_EQ(done, 1);
}

// A stored response: GET answers it as POST did, input_items lists its input (the continued conversation
// included), DELETE forgets it (then GET / DELETE are 404s naming the id and previous_response_id cannot name it);
// store false keeps nothing; an API key guards all three; other methods are 405s listing the ones served.
TEST(Http, ResponsesRetrieveInputItemsAndDelete) {
  Rig rig;
  auto c = rig.client();
  json first = output_of(rig.post("/v1/responses", responses_body("S", {{"max_output_tokens", 2},
                                                                        {"reasoning", {{"effort", "none"}}}})), 1);
  const std::string id = first["id"], path = "/v1/responses/" + id;
  auto g = c.Get(path);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200) << g->body;
  EXPECT_EQ(json::parse(g->body), first);
  const json next = {{"previous_response_id", id}, {"max_output_tokens", 2}, {"reasoning", {{"effort", "none"}}}};
  json second = output_of(rig.post("/v1/responses", responses_body("S again", next)), 1);
  auto items = c.Get("/v1/responses/" + second["id"].get<std::string>() + "/input_items?order=asc");
  ASSERT_TRUE(items);
  ASSERT_EQ(items->status, 200) << items->body;
  const json l = json::parse(items->body);
  EXPECT_EQ(l["object"], "list");
  ASSERT_EQ(l["data"].size(), 3u) << items->body;  // first's input and output, then this input
  EXPECT_EQ(l["data"][0]["content"][0], json({{"type", "input_text"}, {"text", "S"}}));
  EXPECT_EQ(l["data"][1]["role"], "assistant");
  EXPECT_EQ(l["data"][1]["content"][0]["text"], first["output"][0]["content"][0]["text"]);
  EXPECT_EQ(l["data"][2]["content"][0]["text"], "S again");
  auto bad = c.Get(path + "/input_items?limit=0");
  expect_error({bad->status, bad->body}, 400, "limit");
  auto streamed = c.Get(path + "?stream=true");
  expect_error({streamed->status, streamed->body}, 400, "stream");

  auto d = c.Delete(path);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body), json({{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
  auto expect_not_found = [&](const httplib::Result& r) {
    ASSERT_TRUE(r);
    expect_error({r->status, r->body}, 404, "", "response_not_found");
    EXPECT_NE(r->body.find(id), std::string::npos) << r->body;
  };
  expect_not_found(c.Get(path));
  expect_not_found(c.Delete(path));
  expect_not_found(c.Get(path + "/input_items"));
  expect_error(rig.post("/v1/responses", responses_body("S", {{"previous_response_id", id}})), 400,
               "previous_response_id", "previous_response_not_found");
  EXPECT_EQ(c.Get("/v1/responses/" + second["id"].get<std::string>())->status, 200);  // the other one stays
  json unstored = output_of(rig.post("/v1/responses", responses_body("S", {{"store", false}, {"max_output_tokens", 2}})), 1);
  EXPECT_EQ(c.Get("/v1/responses/" + unstored["id"].get<std::string>())->status, 404);

  auto put = c.Put(path, "{}", "application/json");
  ASSERT_TRUE(put);
  expect_error({put->status, put->body}, 405, "", "method_not_allowed");
  EXPECT_EQ(put->get_header_value("Allow"), "GET, HEAD, DELETE");
  auto del_items = c.Delete(path + "/input_items");
  ASSERT_TRUE(del_items);
  EXPECT_EQ(del_items->status, 405);
  EXPECT_EQ(del_items->get_header_value("Allow"), "GET, HEAD");
  // /metrics counts them under the route, not one label per id.
  const std::string counted = "ds_http_requests_total{route=\"/v1/responses/{id}\",status=\"404\"} 3";
  const std::string mt = metrics_showing(rig, counted);
  EXPECT_NE(mt.find(counted), std::string::npos) << mt;

  ServerConfig keyed;
  keyed.api_key = "sekret";
  Rig rk(keyed);
  const std::pair<std::string, std::string> auth = {"Authorization", "Bearer sekret"};
  json kept = output_of(rk.post("/v1/responses", responses_body("S", {{"max_output_tokens", 2}}), {auth}), 1);
  const std::string kpath = "/v1/responses/" + kept["id"].get<std::string>();
  auto anon = rk.client();
  auto expect_401 = [](const httplib::Result& r) {
    ASSERT_TRUE(r);
    expect_error({r->status, r->body}, 401, "", "invalid_api_key");
  };
  expect_401(anon.Get(kpath));
  expect_401(anon.Get(kpath + "/input_items"));
  expect_401(anon.Delete(kpath));
  auto authed = rk.client({auth});
  EXPECT_EQ(authed.Get(kpath)->status, 200);
  EXPECT_EQ(authed.Get(kpath + "/input_items")->status, 200);
  EXPECT_EQ(authed.Delete(kpath)->status, 200);
}

TEST(Http, ResponsesLimitsIncompleteAndErrors) {
  ServerConfig sc;
  sc.max_tokens_limit = 100;
  Rig rig(sc);
  json cut = output_of(rig.post("/v1/responses", responses_body("S", {{"max_output_tokens", 3},
                                                                      {"reasoning", {{"effort", "minimal"}}}})), 1);
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(cut["usage"]["output_tokens"], 3);
  EXPECT_EQ(cut["output"][0]["content"][0]["text"], "one");
  EXPECT_EQ(cut["max_output_tokens"], 3);

  expect_error(rig.post("/v1/responses", responses_body("S", {{"max_output_tokens", 101}})), 400, "max_output_tokens");
  expect_error(rig.post("/v1/responses", responses_body(std::string(600, 'x'))), 400, "input", "context_length_exceeded");
  expect_error(rig.post("/v1/responses", responses_body("S", {{"text", {{"format", {{"type", "xml"}}}}}})), 400,
               "text.format");
  expect_error(rig.post("/v1/responses", responses_body(json::array({{{"type", "input_file"}}}))), 400, "input[0].type");
  expect_error(rig.post("/v1/responses", "{\"input\": [1, 2"), 400);

  ServerConfig keyed;
  keyed.api_key = "sekret";
  Rig rk(keyed);
  expect_error(rk.post("/v1/responses", responses_body("S")), 401, "", "invalid_api_key");
  EXPECT_EQ(rk.post("/v1/responses", responses_body("S", {{"max_output_tokens", 2}}), {{"Authorization", "Bearer sekret"}}).first,
            200);
}

// Structured outputs on /v1/responses: text.format json_schema (the flat form) constrains the message text as chat's
// response_format does (the reasoning stays free), streamed or not, and is echoed; json_object too.
// Whether t is one JSON object. nlohmann refuses a number that overflows a double (out_of_range 406, "number overflow
// parsing '<token>'"), which JSON's grammar allows and the json_object format's grammar may emit (a sampled reply once
// wrote 22e3200198; Python reads it as inf): each such token is replaced by 0 and the text parsed again, so the rest
// is still checked.
bool parses_as_object(std::string t) {
  for (int i = 0; i < 64; i++) {
    try {
      return json::parse(t).is_object();
    } catch (const json::out_of_range& e) {
      const std::string w = e.what();
      const size_t a = w.find('\''), b = w.rfind('\'');
      if (e.id != 406 || a == std::string::npos || b <= a + 1) return false;
      const size_t p = t.find(w.substr(a + 1, b - a - 1));
      if (p == std::string::npos) return false;
      t.replace(p, b - a - 1, "0");
    } catch (const json::exception&) {
      return false;
    }
  }
  return false;
}

TEST(Http, JsonObjectCheckAcceptsOverflowingNumbers) {
  EXPECT_TRUE(parses_as_object(R"({"a": 22e3200198, "b": [1, -7E+999], "c": {}})"));
  EXPECT_FALSE(parses_as_object(R"({"a": 22e3200198, "b": )"));
  EXPECT_FALSE(parses_as_object(R"([1e999])"));
  EXPECT_FALSE(parses_as_object("{\"a\": 1"));
}

TEST(Http, ResponsesTextFormatJsonSchema) {
  Rig rig;
  const json schema = json::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"},
      "color": {"enum": ["red", "green"]}}, "required": ["ok", "color"], "additionalProperties": false})");
  const json format = {{"type", "json_schema"}, {"name", "verdict"}, {"schema", schema}, {"strict", true}};
  auto check = [](const std::string& text) {
    json d = json::parse(text, nullptr, false);
    ASSERT_TRUE(d.is_object()) << text;
    EXPECT_EQ(d.size(), 2u) << text;
    EXPECT_TRUE(d["ok"].is_boolean()) << text;
    EXPECT_TRUE(d["color"] == "red" || d["color"] == "green") << text;
  };
  json j = output_of(rig.post("/v1/responses", responses_body("R", {{"text", {{"format", format}}}, {"temperature", 0}})), 2);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Thinking about it.");
  const std::string doc = j["output"][1]["content"][0]["text"];
  check(doc);
  EXPECT_EQ(j["text"]["format"], format);
  auto s = rig.post("/v1/responses", responses_body("R", {{"text", {{"format", format}}}, {"temperature", 0}, {"stream", true}}));
  ASSERT_EQ(s.first, 200);
  std::string streamed;
  for (const json& e : response_events(s.second))
    if (e["type"] == "response.output_text.delta") streamed += e["delta"].get<std::string>();
  EXPECT_EQ(streamed, doc);
  j = output_of(rig.post("/v1/responses", responses_body("S", {{"text", {{"format", {{"type", "json_object"}}}}},
                                                               {"reasoning", {{"effort", "none"}}}})),
                1);
  const std::string obj = j["output"][0]["content"][0]["text"];
  if (j["status"] == "completed") {
    EXPECT_TRUE(parses_as_object(obj)) << obj;
  }
  EXPECT_EQ(obj.substr(obj.find_first_not_of(" \t\r\n")).substr(0, 1), "{") << obj;
}

TEST(Http, ResponsesDisconnectMidStreamFreesSlot) {
  expect_disconnect_frees_slot("/v1/responses", responses_body("go", {{"max_output_tokens", 400}, {"stream", true}}));
}


// /tokenize gives the tokens a completion prompt or a chat request would run (the same count the usage reports),
// /detokenize turns ids back into text; bad bodies are 400s naming the field; the API key applies.
TEST(Http, TokenizeAndDetokenize) {
  Rig rig;
  auto ask = [&](const std::string& path, json body) {
    auto r = rig.post(path, body.dump());
    EXPECT_EQ(r.first, 200) << path << " " << r.second;
    return json::parse(r.second, nullptr, false);
  };
  json t = ask("/tokenize", {{"prompt", "hello <|im_end|>"}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), rig.codec.encode("hello <|im_end|>", false));
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], 512);
  EXPECT_FALSE(t.contains("token_strs"));
  json back = ask("/detokenize", {{"tokens", t["tokens"]}});
  EXPECT_EQ(back["prompt"], "hello <|im_end|>");
  EXPECT_EQ(back["content"], "hello <|im_end|>");
  json strs = ask("/tokenize", {{"content", "ab"}, {"return_token_strs", true}});  // llama.cpp's field name
  std::string joined;
  for (auto& s : strs["token_strs"]) joined += s.get<std::string>();
  EXPECT_EQ(joined, "ab");

  // A chat body counts exactly what /v1/chat/completions then reports as prompt_tokens.
  json chat = json::parse(chat_body("S: how many?"));
  json n = ask("/tokenize", chat);
  json c = ask("/v1/chat/completions", json::parse(chat_body("S: how many?", {{"max_tokens", 2}})));
  EXPECT_EQ(n["count"], c["usage"]["prompt_tokens"]);
  EXPECT_GT(n["count"].get<int>(), ask("/tokenize", {{"prompt", "S: how many?"}})["count"].get<int>());

  expect_error(rig.post("/tokenize", "{}"), 400, "prompt");
  expect_error(rig.post("/tokenize", R"({"prompt": 5})"), 400, "prompt");
  expect_error(rig.post("/tokenize", R"({"prompt": "x", "messages": []})"), 400, "messages");
  expect_error(rig.post("/tokenize", R"({"messages": [{"role": "wizard", "content": "x"}]})"), 400);
  expect_error(rig.post("/tokenize", R"({"prompt": "x", "return_token_strs": "yes"})"), 400, "return_token_strs");
  expect_error(rig.post("/detokenize", "{}"), 400, "tokens");
  expect_error(rig.post("/detokenize", R"({"tokens": "1 2"})"), 400, "tokens");
  expect_error(rig.post("/detokenize", R"({"tokens": [1, 2.5]})"), 400, "tokens[1]");
  expect_error(rig.post("/detokenize", R"({"tokens": [1, 1000000]})"), 400, "tokens[1]");
  expect_error(rig.post("/detokenize", R"({"tokens": [-1]})"), 400, "tokens[0]");
  auto get = rig.client().Get("/tokenize");
  ASSERT_TRUE(get);
  expect_error({get->status, get->body}, 405);

  ServerConfig keyed;
  keyed.api_key = "sekret";
  Rig rk(keyed);
  expect_error(rk.post("/tokenize", R"({"prompt": "x"})"), 401, "", "invalid_api_key");
  EXPECT_EQ(rk.post("/detokenize", R"({"tokens": [65]})", {{"Authorization", "Bearer sekret"}}).first, 200);
}

// CORS is off by default; with --cors ORIGIN an allowed origin gets Access-Control-Allow-Origin on every reply
// (errors and streams included) and its preflight a 204 before authentication; other origins get nothing.
TEST(Http, CorsOnlyForConfiguredOrigins) {
  const httplib::Headers preflight = {{"Origin", "http://ui.example:3000"},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization, content-type"}};
  {
    Rig off;
    auto r = off.client().Options("/v1/chat/completions", preflight);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  }
  ServerConfig sc;
  sc.api_key = "sekret";
  sc.cors_origins = {"http://ui.example:3000"};
  Rig rig(sc);
  auto c = rig.client();
  auto r = c.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://ui.example:3000");
  EXPECT_EQ(r->get_header_value("Vary"), "Origin");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  r = c.Options("/v1/models", preflight);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "GET, HEAD");
  r = c.Options("/v1/responses/resp_x", preflight);  // a stored response: a browser's DELETE is preflighted
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "GET, HEAD, DELETE");

  const std::vector<std::pair<std::string, std::string>> from_ui = {{"Origin", "http://ui.example:3000"},
                                                                    {"Authorization", "Bearer sekret"}};
  auto ok = rig.client(from_ui).Post("/v1/chat/completions", chat_body("hi", {{"max_tokens", 2}}), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "http://ui.example:3000");
  auto streamed = rig.client(from_ui).Post("/v1/chat/completions", chat_body("hi", {{"max_tokens", 2}, {"stream", true}}),
                                           "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Access-Control-Allow-Origin"), "http://ui.example:3000");
  auto denied = rig.client({{"Origin", "http://ui.example:3000"}}).Get("/v1/models");  // no key: 401, still readable
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(denied->get_header_value("Access-Control-Allow-Origin"), "http://ui.example:3000");

  httplib::Headers evil_preflight = preflight;
  evil_preflight.erase("Origin");
  evil_preflight.emplace("Origin", "http://evil.example");
  auto other = rig.client().Options("/v1/chat/completions", evil_preflight);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 405);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  auto evil = rig.client({{"Origin", "http://evil.example"}, {"Authorization", "Bearer sekret"}}).Get("/v1/models");
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->status, 200);
  EXPECT_FALSE(evil->has_header("Access-Control-Allow-Origin"));

  ServerConfig any;
  any.cors_origins = {"*"};
  Rig ra(any);
  auto a = ra.client({{"Origin", "http://anything.example"}}).Get("/v1/models");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(a->has_header("Vary"));

  for (std::string bad : {"localhost:3000", "http://x/", "http://x/path", "", "http://"}) {
    ServerConfig b;
    b.cors_origins = {bad};
    EXPECT_FALSE(validate(b).ok()) << bad;
  }
  ServerConfig good;
  good.cors_origins = {"*", "https://chat.example", "http://127.0.0.1:8000"};
  EXPECT_TRUE(validate(good).ok());
}

}  // namespace
}  // namespace ds::server

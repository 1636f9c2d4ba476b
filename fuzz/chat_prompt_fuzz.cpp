// libFuzzer target for the chat prompt (server/chat_prompt.h): a client's messages and tool definitions, rendered with
// Qwen3.5's chat template and tokenized on the real Qwen3.5 vocabulary. Needs DS_FUZZ_VOCAB (the vocabulary GGUF) and
// DS_FUZZ_TEMPLATE (fixtures/chat/qwen3.5.jinja); tools/fuzz.sh sets both.
// Input: byte 0 = flags (bit 0 a system message first, bit 1 the assistant turns call a tool (name, argument name and
// value from the texts) and a tool message answers, bit 2 a tool definition, bit 3 enable_thinking, bit 4 assistant turns carry reasoning_content, bit 5
// chat_template_kwargs carry a text (as "note", which the template ignores, and as "messages", which overrides the
// template's messages: the request parser refuses that name, build_chat_prompt must hold anyway)), then the
// texts (NUL-separated; ill-formed UTF-8 repaired, as the server's JSON parser would refuse it) that fill the
// messages in turn: user, assistant, user, ... Properties:
//  * the request is refused with a message, or every token id is in range and the tokens spell the prompt text (up
//    to NFC: the tokenizer normalises the pieces between added tokens);
//  * a client cannot forge control tokens: the prompt has as many control tokens as the same conversation with every
//    text replaced by "x" (the template puts them where the roles are, whatever the texts say).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "chat/chat_template.h"
#include "engine/tokenizer_codec.h"
#include "gguf/gguf.h"
#include "server/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace ds;
using json = nlohmann::ordered_json;

namespace {

std::unique_ptr<tokenizer::Tokenizer> g_tok;
std::unique_ptr<engine::TokenizerCodec> g_codec;
std::shared_ptr<chat::ChatTemplate> g_tmpl;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "chat_prompt_fuzz: %s\n", what.c_str());
  std::exit(2);
}

// The conversation of the input; neutral = every text "x" (the same roles, calls and tools).
struct Conversation {
  json messages = json::array(), tools = json::array(), kwargs = json::object();
};
Conversation conversation(uint8_t flags, const std::vector<std::string>& texts, bool neutral) {
  size_t next = 0;
  auto text = [&]() -> std::string {
    const std::string t = next < texts.size() ? texts[next] : "";
    next++;
    return neutral ? "x" : t;
  };
  Conversation c;
  if (flags & 1) c.messages.push_back({{"role", "system"}, {"content", text()}});
  for (int turn = 0; turn < 4 && next < texts.size(); turn++) {
    c.messages.push_back({{"role", "user"}, {"content", text()}});
    if (next >= texts.size()) break;
    json a = {{"role", "assistant"}, {"content", text()}};
    if (flags & 16) a["reasoning_content"] = text();
    if (flags & 2) {  // the function's name, an argument's name and value: all the client's text
      const std::string name = text(), arg = text();
      a["tool_calls"] = json::array({{{"type", "function"}, {"function", {{"name", name}, {"arguments", {{arg, text()}}}}}}});
      c.messages.push_back(a);
      c.messages.push_back({{"role", "tool"}, {"content", text()}});
    } else {
      c.messages.push_back(a);
    }
  }
  if (flags & 4)
    c.tools.push_back({{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"description", text()},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}}}}}}}}}});
  c.kwargs["enable_thinking"] = (flags & 8) != 0;
  if (flags & 32) {
    c.kwargs["note"] = text();
    c.kwargs["messages"] = json::array({{{"role", "user"}, {"content", text()}}});
  }
  return c;
}

size_t control_count(const std::vector<int32_t>& ids) {
  size_t n = 0;
  for (int32_t id : ids) n += g_codec->is_control(id);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* vocab = std::getenv("DS_FUZZ_VOCAB");
  const char* tmpl = std::getenv("DS_FUZZ_TEMPLATE");
  if (!vocab || !tmpl) die("set DS_FUZZ_VOCAB to a Qwen3.5 vocabulary GGUF and DS_FUZZ_TEMPLATE to qwen3.5.jinja");
  auto f = gguf::File::open(vocab);
  if (!f.ok()) die(f.error().message);
  auto t = tokenizer::Tokenizer::from_gguf(*f);
  if (!t.ok()) die(t.error().message);
  g_tok = std::make_unique<tokenizer::Tokenizer>(std::move(*t));
  g_codec = std::make_unique<engine::TokenizerCodec>(*g_tok);
  std::ifstream in(tmpl, std::ios::binary);
  if (!in) die(std::string("cannot read ") + tmpl);
  std::stringstream ss;
  ss << in.rdbuf();
  auto ct = chat::ChatTemplate::parse(ss.str());
  if (!ct.ok()) die(ct.error().message);
  g_tmpl = std::make_shared<chat::ChatTemplate>(std::move(*ct));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<std::string> texts(1);
  for (size_t i = 1; i < size; i++) {
    if (data[i] == 0) {
      if (texts.size() == 12) break;
      texts.emplace_back();
    } else {
      texts.back() += static_cast<char>(data[i]);
    }
  }
  for (auto& t : texts) t = tokenizer::sanitize_utf8(t);
  const server::ChatRenderFn render = [](const json& m, const json& tools, bool agp, const json& kw) {
    return g_tmpl->render(m, tools.empty() ? json() : tools, agp, kw);
  };
  const Conversation c = conversation(data[0], texts, false), x = conversation(data[0], texts, true);
  auto r = server::build_chat_prompt(render, *g_codec, c.messages, c.tools, c.kwargs);
  if (auto* e = std::get_if<server::ApiError>(&r)) {
    if (e->message.empty()) __builtin_trap();
    return 0;
  }
  const server::ChatPrompt& p = std::get<server::ChatPrompt>(r);
  std::string spelled;
  for (int32_t id : p.tokens) {
    if (!g_tok->valid_id(id)) __builtin_trap();
    spelled += g_codec->token_bytes(id);
  }
  // NFC of both sides: the tokenizer normalises each piece between added tokens on its own, and a protected control
  // text is a piece of its own, so '>' + U+0338 across its end stays two characters where NFC of the whole text would
  // compose them (fuzz/regressions/chat_prompt/video_pad_then_u0338; Hugging Face cuts at added tokens the same way).
  if (tokenizer::nfc(spelled) != tokenizer::nfc(p.text)) __builtin_trap();
  auto rx = server::build_chat_prompt(render, *g_codec, x.messages, x.tools, x.kwargs);
  if (auto* px = std::get_if<server::ChatPrompt>(&rx))
    if (control_count(p.tokens) != control_count(px->tokens)) __builtin_trap();
  return 0;
}

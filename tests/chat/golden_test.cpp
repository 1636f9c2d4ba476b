// Chat templates against Hugging Face's renderings: fixtures/chat/golden-*.jsonl were rendered by
// Jinja2 3.1.6 set up as apply_chat_template sets it up; every conversation must come out byte for
// byte the same (or fail with the same raise_exception message). Also: the template read from GGUF
// files, and the chat-template CLI.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "chat/chat_template.h"
#include "chat_test_util.h"
#include "gguf/gguf.h"
#include "testutil.h"

using namespace ds;
using ojson = nlohmann::ordered_json;

namespace {

// Renders every golden line with `t`; returns the number of lines checked.
size_t check_goldens(const chat::ChatTemplate& t, const std::string& golden_path) {
  auto lines = test::read_jsonl(golden_path);
  EXPECT_EQ(lines.size(), 64u) << golden_path;
  size_t i = 0;
  for (const auto& g : lines) {
    SCOPED_TRACE("line " + std::to_string(++i) + ": " + g["messages"].dump().substr(0, 200));
    ojson extra = ojson::object();
    if (g.contains("enable_thinking")) extra["enable_thinking"] = g["enable_thinking"];
    auto r = t.render(g["messages"], g["tools"], g["add_generation_prompt"].get<bool>(), extra);
    if (g.contains("error")) {
      if (r.ok()) {
        ADD_FAILURE() << "expected error '" << g["error"].get<std::string>() << "', rendered:\n" << *r;
        continue;
      }
      EXPECT_EQ(r.error().message, g["error"].get<std::string>());
    } else {
      if (!r.ok()) {
        ADD_FAILURE() << r.error().message;
        continue;
      }
      EXPECT_EQ(*r, g["rendered"].get<std::string>());
    }
  }
  return lines.size();
}

chat::ChatTemplate load(const std::string& rel) {
  auto t = chat::ChatTemplate::parse(test::slurp(test::fixture(rel)));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return std::move(t).value();
}

int run_cli(const std::string& args, const std::string& stdin_path, std::string* out) {
  const char* bin = std::getenv("DS_BIN");
  if (!bin) return -1;
  std::string cmd = std::string(bin) + " " + args + " < " + stdin_path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST(ChatGolden, Qwen35TemplateMatchesHuggingFace) {
  EXPECT_EQ(check_goldens(load("chat/qwen3.5.jinja"), test::fixture("chat/golden-qwen3.5.jsonl")), 64u);
}

TEST(ChatGolden, Qwen3TemplateMatchesHuggingFace) {
  EXPECT_EQ(check_goldens(load("chat/qwen3.jinja"), test::fixture("chat/golden-qwen3.jsonl")), 64u);
}

TEST(ChatGolden, TemplateFromTinyModelGguf) {
  auto f = gguf::File::open(test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto t = chat::chat_template_from_gguf(*f);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->source(), test::slurp(test::fixture("chat/qwen3.jinja")));
  check_goldens(*t, test::fixture("chat/golden-qwen3.jsonl"));
}

TEST(ChatGolden, TemplateFromVocabGguf) {
  if (std::system("command -v xz > /dev/null 2>&1") != 0) GTEST_SKIP() << "xz is not installed";
  const std::string path = test::vocab_gguf("vocab-qwen3");
  ASSERT_FALSE(path.empty());
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto t = chat::chat_template_from_gguf(*f);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->source(), test::slurp(test::fixture("chat/qwen3.jinja")));
  // Qwen3's eos is <|im_end|> or <|endoftext|> depending on the converter; either is a real token.
  ASSERT_TRUE(t->special_tokens().contains("eos_token"));
  std::string eos = t->special_tokens()["eos_token"].get<std::string>();
  EXPECT_TRUE(eos == "<|im_end|>" || eos == "<|endoftext|>") << eos;
  check_goldens(*t, test::fixture("chat/golden-qwen3.jsonl"));
}

TEST(ChatGguf, MissingTemplateAndSpecialTokens) {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::make_str("qwen35"));
  auto f = gguf::File::from_bytes(w.to_bytes(), "no-template.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto t = chat::chat_template_from_gguf(*f);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("tokenizer.chat_template"), std::string::npos) << t.error().message;

  gguf::Writer w2;
  w2.set("tokenizer.chat_template", gguf::Value::make_str("{{ bos_token }}|{{ messages[0].content }}|{{ eos_token }}|{{ pad_token }}"));
  w2.set("tokenizer.ggml.tokens", gguf::Value::make_str_array({"<s>", "</s>", "a"}));
  w2.set("tokenizer.ggml.bos_token_id", gguf::Value::make_u32(0));
  w2.set("tokenizer.ggml.eos_token_id", gguf::Value::make_u32(1));
  w2.set("tokenizer.ggml.padding_token_id", gguf::Value::make_u32(2));
  auto f2 = gguf::File::from_bytes(w2.to_bytes(), "tiny.gguf");
  ASSERT_TRUE(f2.ok()) << f2.error().message;
  auto t2 = chat::chat_template_from_gguf(*f2);
  ASSERT_TRUE(t2.ok()) << t2.error().message;
  auto r = t2->render(ojson::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "<s>|hi|</s>|a");
  gguf::Writer w4 = gguf::writer_from(*f2);
  w4.set("tokenizer.ggml.eos_token_id", gguf::Value::make_u32(7));
  auto f4 = gguf::File::from_bytes(w4.to_bytes(), "badid.gguf");
  ASSERT_TRUE(f4.ok()) << f4.error().message;
  auto t4 = chat::chat_template_from_gguf(*f4);
  ASSERT_FALSE(t4.ok());
  EXPECT_NE(t4.error().message.find("outside the vocabulary"), std::string::npos) << t4.error().message;

  gguf::Writer w3;
  w3.set("tokenizer.chat_template", gguf::Value::make_str("{% if %}"));
  auto f3 = gguf::File::from_bytes(w3.to_bytes(), "bad.gguf");
  ASSERT_TRUE(f3.ok());
  auto t3 = chat::chat_template_from_gguf(*f3);
  ASSERT_FALSE(t3.ok());
  EXPECT_NE(t3.error().message.find("line 1"), std::string::npos) << t3.error().message;
  EXPECT_NE(t3.error().message.find("bad.gguf"), std::string::npos) << t3.error().message;
}

TEST(ChatCli, JsonlCheckAgainstGoldens) {
  if (!std::getenv("DS_BIN")) GTEST_SKIP() << "DS_BIN not set";
  std::string out;
  for (const char* m : {"qwen3.5", "qwen3"}) {
    std::string golden = test::fixture(std::string("chat/golden-") + m + ".jsonl");
    int rc = run_cli(std::string("chat-template --template ") + test::fixture(std::string("chat/") + m + ".jinja") +
                         " --jsonl --check",
                     golden, &out);
    EXPECT_EQ(rc, 0) << out.substr(0, 2000);
    // One JSON object per input line, each with exactly `rendered` or `error`, equal to the golden.
    auto goldens = test::read_jsonl(golden);
    std::stringstream ss(out);
    std::string line;
    size_t i = 0;
    while (std::getline(ss, line)) {
      if (line.empty() || line[0] != '{') continue;  // log lines
      ASSERT_LT(i, goldens.size());
      auto j = ojson::parse(line);
      if (goldens[i].contains("error"))
        EXPECT_EQ(j["error"], goldens[i]["error"]) << "line " << i + 1;
      else
        EXPECT_EQ(j["rendered"], goldens[i]["rendered"]) << "line " << i + 1;
      ++i;
    }
    EXPECT_EQ(i, goldens.size());
  }
  // The model's own template (-m), no --template.
  int rc = run_cli("chat-template -m " + test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf") + " --jsonl --check",
                   test::fixture("chat/golden-qwen3.jsonl"), &out);
  EXPECT_EQ(rc, 0) << out.substr(0, 2000);
  // --check notices a template that renders differently.
  rc = run_cli("chat-template --template " + test::fixture("chat/qwen3.jinja") + " --jsonl --check",
               test::fixture("chat/golden-qwen3.5.jsonl"), &out);
  EXPECT_EQ(rc, 1);
}

TEST(ChatCli, PlainModeAndBadInput) {
  if (!std::getenv("DS_BIN")) GTEST_SKIP() << "DS_BIN not set";
  std::string dir = test::temp_dir();
  {
    std::ofstream(dir + "/req.json") << R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true, "enable_thinking": false})";
    std::ofstream(dir + "/bad.json") << "{not json";
    std::ofstream(dir + "/bad.jinja") << "line one\n{% for x in %}";
    std::ofstream(dir + "/lines.jsonl") << "{\"messages\": []}\n\n{oops\n";
  }
  std::string out;
  int rc = run_cli("chat-template --template " + test::fixture("chat/qwen3.5.jinja"), dir + "/req.json", &out);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  rc = run_cli("chat-template --template " + test::fixture("chat/qwen3.5.jinja"), dir + "/bad.json", &out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("not valid JSON"), std::string::npos) << out;
  rc = run_cli("chat-template --template " + dir + "/bad.jinja", dir + "/req.json", &out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("line 2"), std::string::npos) << out;
  rc = run_cli("chat-template", dir + "/req.json", &out);
  EXPECT_EQ(rc, 2) << out;
  rc = run_cli("chat-template -m " + dir + "/bad.json", dir + "/req.json", &out);
  EXPECT_EQ(rc, 1) << out;
  // JSON lines: a template error and an unparsable line both come back as {"error": ...}; exit 1.
  rc = run_cli("chat-template --jsonl --template " + test::fixture("chat/qwen3.5.jinja"), dir + "/lines.jsonl", &out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("{\"error\":\"No messages provided.\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("input line 3: invalid JSON"), std::string::npos) << out;
  rc = run_cli("chat-template --help", dir + "/req.json", &out);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("--jsonl"), std::string::npos);
}

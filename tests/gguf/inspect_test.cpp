// `deltaserve inspect` end to end (DS_BIN, set by ctest): the config of every fixture model against
// its Hugging Face config, the vocabulary-only case, refusals, and corrupt copies (non-zero exit,
// an error on stderr, nothing that a sanitizer would report).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "gguf_test_util.h"
#include "testutil.h"

using namespace ds;

namespace {

struct CliRun {
  int rc = -1;
  std::string out, err;
};

CliRun inspect(const std::string& args) {
  CliRun r;
  const char* bin = std::getenv("DS_BIN");
  std::string err_path = test::temp_dir() + "/inspect.err";
  std::string cmd = std::string(bin) + " inspect " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(b.data()), (std::streamsize)b.size());
}

#define NEED_BIN() \
  if (!std::getenv("DS_BIN")) GTEST_SKIP() << "DS_BIN not set (run through ctest)"

}  // namespace

TEST(Inspect, JsonConfigOfEveryFixture) {
  NEED_BIN();
  for (const auto& p : test::model_ggufs()) {
    SCOPED_TRACE(p);
    CliRun r = inspect("--json '" + p + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    std::ifstream js(std::filesystem::path(p).parent_path() / "hf-config.json");
    auto hf = nlohmann::json::parse(js);
    const auto& c = j["config"];
    ASSERT_TRUE(c.is_object()) << r.out.substr(0, 2000);
    EXPECT_EQ(c["n_layer"], hf["num_hidden_layers"]);
    EXPECT_EQ(c["n_mtp"], hf.value("mtp_num_hidden_layers", 0));
    EXPECT_EQ(c["n_k_heads"], hf["linear_num_key_heads"]);
    EXPECT_EQ(c["n_v_heads"], hf["linear_num_value_heads"]);
    EXPECT_EQ(c["n_head"], hf["num_attention_heads"]);
    EXPECT_EQ(c["n_head_kv"], hf["num_key_value_heads"]);
    EXPECT_EQ(c["d_k"], hf["linear_key_head_dim"]);
    EXPECT_EQ(c["d_v"], hf["linear_value_head_dim"]);
    EXPECT_EQ(c["n_vocab"], hf["vocab_size"]);
    EXPECT_EQ(c["tied_embeddings"], hf["tie_word_embeddings"]);
    std::vector<std::string> kinds;
    for (const auto& t : hf["layer_types"]) kinds.push_back(t == "full_attention" ? "full_attention" : "gated_deltanet");
    EXPECT_EQ(c["layers"].get<std::vector<std::string>>(), kinds);
    // The tensor table and metadata summary agree with the reader.
    auto f = gguf::File::open(p);
    ASSERT_TRUE(f.ok());
    ASSERT_EQ(j["tensors"].size(), f->tensors().size());
    EXPECT_EQ(j["tensors"][0]["name"], f->tensors()[0].name);
    EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["count"], 4032);
    EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["truncated"], true);
  }
}

TEST(Inspect, TextOutput) {
  NEED_BIN();
  CliRun r = inspect("'" + test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf") + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* s : {"trunk layers (L)           4  (block_count 4 - nextn_predict_layers 0)", "LLLA",
                        "4 key, 4 value", "tied (no output.weight", "token_embd.weight", "Q8_0", "[4032 × STRING]"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  CliRun g = inspect("'" + test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf") + "'");
  ASSERT_EQ(g.rc, 0) << g.err;
  for (const char* s : {"trunk layers (L)           4  (block_count 5 - nextn_predict_layers 1)", "MTP layers                 1",
                        "2 key, 6 value (3 value heads per key head)", "untied (output.weight)", "1 key/value"})
    EXPECT_NE(g.out.find(s), std::string::npos) << s;
}

TEST(Inspect, VocabOnlyFile) {
  NEED_BIN();
  std::string p = test::vocab_gguf("vocab-qwen3");
  CliRun r = inspect("'" + p + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("vocabulary-only GGUF (no tensors)"), std::string::npos);
  EXPECT_NE(r.out.find("[151936 × STRING]"), std::string::npos);
  CliRun j = inspect("--json '" + p + "'");
  ASSERT_EQ(j.rc, 0) << j.err;
  auto js = nlohmann::json::parse(j.out);
  EXPECT_TRUE(js["config"].is_null());
  EXPECT_EQ(js["tensors"].size(), 0u);
}

TEST(Inspect, CorruptAndRefusedFilesExitNonZero) {
  NEED_BIN();
  auto orig = test::read_file(test::fixture("models/tiny-gqa/tiny-gqa-q4_k_m.gguf"));
  std::vector<uint8_t> base(orig.begin(), orig.end());
  auto f = gguf::File::from_bytes(base);
  ASSERT_TRUE(f.ok());
  auto find = [&](const std::string& s) {
    auto it = std::search(base.begin(), base.begin() + f->data_offset(), s.begin(), s.end());
    return (size_t)(it - base.begin());
  };
  struct C {
    std::string name;
    std::function<void(std::vector<uint8_t>&)> corrupt;
    std::string expect;
  };
  std::vector<C> cases = {
      {"truncated", [](auto& b) { b.resize(5000); }, "truncated"},
      {"bad-type", [&](auto& b) {
         size_t at = find("output_norm.weight") + 18 + 4 + 8;  // after n_dims 1 and ne[0]
         test::poke<uint32_t>(b, at, 5);
       }, "unknown tensor type id 5"},
      {"inconsistent", [&](auto& b) {  // value_length 64 -> 32
         test::poke<uint32_t>(b, find("qwen35.attention.value_length") + 29 + 4, 32);
       }, "qwen35.attention.key_length"},
      {"other-arch", [&](auto& b) { b[find("qwen35") + 4] = '9'; }, "architecture 'qwen95' is not supported"},
      {"mutated", [](auto& b) { test::poke<uint64_t>(b, 8, 1u << 20); }, "tensor count"},
  };
  for (const auto& c : cases) {
    auto b = base;
    c.corrupt(b);
    std::string p = test::temp_dir() + "/corrupt-" + c.name + ".gguf";
    write_bytes(p, b);
    CliRun r = inspect("'" + p + "'");
    EXPECT_EQ(r.rc, 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
  }
  CliRun missing = inspect("/nonexistent/x.gguf");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("No such file"), std::string::npos) << missing.err;
  CliRun dir = inspect(test::temp_dir());
  EXPECT_EQ(dir.rc, 1);
  EXPECT_NE(dir.err.find("not a regular file"), std::string::npos) << dir.err;
}

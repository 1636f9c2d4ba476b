// `deltaserve tokenize` / `detokenize` end to end ($DS_BIN, set by ctest): all golden-small texts
// through one --jsonl process each way, compared with Hugging Face's ids, plus the error paths.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "testutil.h"

namespace {

std::string bin() {
  const char* b = std::getenv("DS_BIN");
  return b ? b : "";
}

std::string model() { return ds::test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf"); }

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

// Runs `args` with stdin from `input`; returns the exit code, stdout in `out`, stderr in `errout`.
int run(const std::string& args, const std::string& input, std::string& out, std::string* errout = nullptr) {
  const std::string dir = ds::test::temp_dir();
  write(dir + "/cli_in", input);
  std::string cmd = fmt::format("'{}' {} < '{}/cli_in' > '{}/cli_out' 2> '{}/cli_err'", bin(), args, dir, dir, dir);
  int rc = std::system(cmd.c_str());
  out = slurp(dir + "/cli_out");
  if (errout) *errout = slurp(dir + "/cli_err");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(Cli, JsonlMatchesGoldenBothWays) {
  if (bin().empty()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  std::ifstream g(ds::test::fixture("tokenizer/golden-small.jsonl"));
  std::vector<nlohmann::json> cases;
  std::string in_text, in_ids;
  for (std::string l; std::getline(g, l);) {
    cases.push_back(nlohmann::json::parse(l));
    in_text += nlohmann::json{{"text", cases.back()["text"]}}.dump() + "\n";
    in_ids += cases.back()["ids_with_specials"].dump() + "\n";
  }
  ASSERT_EQ(cases.size(), 243u);
  for (bool special : {false, true}) {
    std::string out;
    ASSERT_EQ(run("tokenize -m '" + model() + "' --jsonl" + (special ? " --parse-special" : ""), in_text, out), 0);
    auto got = lines(out);
    ASSERT_EQ(got.size(), cases.size());
    for (size_t i = 0; i < cases.size(); i++) {
      EXPECT_EQ(nlohmann::json::parse(got[i]), cases[i][special ? "ids_with_specials" : "ids"]) << "case " << i;
    }
  }
  std::string out;
  ASSERT_EQ(run("detokenize -m '" + model() + "' --jsonl", in_ids, out), 0);
  auto got = lines(out);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); i++) EXPECT_EQ(nlohmann::json::parse(got[i])["text"], cases[i]["decoded"]) << i;
}

TEST(Cli, PlainModeAndErrors) {
  if (bin().empty()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  const std::string m = " -m '" + model() + "'";
  std::string out, errout;
  // Plain text in, one JSON array out; and back, byte for byte (no newline added).
  ASSERT_EQ(run("tokenize" + m, "<think>\nHi there\n", out), 0);
  std::string ids = out;
  ASSERT_EQ(run("detokenize" + m, ids, out), 0);
  EXPECT_EQ(out, "<think>\nHi there\n");

  EXPECT_EQ(run("tokenize" + m, "ok\xff", out, &errout), 1);
  EXPECT_NE(errout.find("invalid UTF-8 at byte 2"), std::string::npos) << errout;
  EXPECT_EQ(run("tokenize" + m + " --jsonl", "{\"text\":\"a\"}\n[1]\n", out, &errout), 1);
  EXPECT_NE(errout.find("line 2"), std::string::npos) << errout;
  EXPECT_EQ(run("detokenize" + m, "[1, 4032]", out, &errout), 1);
  EXPECT_NE(errout.find("element 1 = 4032"), std::string::npos) << errout;
  EXPECT_EQ(run("detokenize" + m, "[1,", out, &errout), 1);
  EXPECT_NE(errout.find("expected a JSON array"), std::string::npos) << errout;
  EXPECT_EQ(run("tokenize -m /nonexistent.gguf", "x", out, &errout), 1);
  EXPECT_NE(errout.find("/nonexistent.gguf"), std::string::npos) << errout;
  // A file that is not a GGUF: the error names it.
  EXPECT_EQ(run("tokenize -m '" + ds::test::fixture("tokenizer/golden-small.jsonl") + "'", "x", out, &errout), 1);
  EXPECT_NE(errout.find("golden-small.jsonl"), std::string::npos) << errout;
}

}  // namespace

// The `deltaserve logits` CLI (the contract external checks use) against the in-process API on one
// fixture: same token file semantics (--decode-from K), same bytes out. Also its error paths.
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "model_test_util.h"
#include "testutil.h"

using namespace ds;

namespace {
const char* bin() { return std::getenv("DS_BIN"); }
int run(const std::string& cmd) { return std::system((cmd + " 2>/dev/null").c_str()); }
}  // namespace

TEST(LogitsCli, MatchesInProcess) {
  if (!bin()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  const auto ref = ds::test::load_model_ref("tiny-gqa-q4_k_m");
  const std::string dir = ds::test::temp_dir();
  std::vector<int32_t> ids(ref.prompt.begin(), ref.prompt.begin() + 70);
  ids.insert(ids.end(), ref.generated.begin(), ref.generated.begin() + 5);
  {
    std::ofstream f(dir + "/ids.txt");
    for (size_t i = 0; i < ids.size(); i++) f << ids[i] << (i % 10 == 9 ? "\n" : " ");
  }
  const std::string out = dir + "/logits.f32";
  ASSERT_EQ(0, run(std::string(bin()) + " logits -m " + ref.gguf + " --tokens-file " + dir +
                   "/ids.txt --decode-from 70 --threads 2 --out " + out));
  const auto raw = ds::test::read_file(out);

  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok());
  const int64_t V = m->cfg.n_vocab, n = (int64_t)ids.size();
  ASSERT_EQ(raw.size(), n * V * sizeof(float));
  std::vector<float> want(n * V);
  auto st = SequenceState::create(m->cfg, n);
  ASSERT_TRUE(forward(*m, *st, std::span<const int32_t>(ids.data(), 70), want.data(), true).ok());
  for (int64_t t = 70; t < n; t++)
    ASSERT_TRUE(forward(*m, *st, std::span<const int32_t>(&ids[t], 1), &want[t * V], false).ok());
  EXPECT_EQ(0, std::memcmp(raw.data(), want.data(), raw.size())) << "CLI output differs from the in-process run";
}

TEST(LogitsCli, BadInputsFail) {
  if (!bin()) GTEST_SKIP() << "DS_BIN not set (run through ctest)";
  const std::string dir = ds::test::temp_dir(), model = ds::test::fixture("models/tiny-sym/tiny-sym-q8_0.gguf");
  std::ofstream(dir + "/bad.txt") << "1 2 x3";
  std::ofstream(dir + "/big.txt") << "1 2 999999";
  std::ofstream(dir + "/ok.txt") << "1 2 3";
  const std::string base = std::string(bin()) + " logits -m " + model + " --out " + dir + "/o.f32 --tokens-file ";
  EXPECT_NE(0, run(base + dir + "/bad.txt"));
  EXPECT_NE(0, run(base + dir + "/big.txt"));
  EXPECT_NE(0, run(base + dir + "/missing.txt"));
  EXPECT_NE(0, run(base + dir + "/ok.txt --decode-from 4"));
  EXPECT_NE(0, run(std::string(bin()) + " logits -m " + dir + "/ok.txt --tokens-file " + dir + "/ok.txt --out " +
                   dir + "/o.f32"));
  EXPECT_EQ(0, run(base + dir + "/ok.txt --decode-from 0"));
}

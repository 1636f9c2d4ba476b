// Teacher-forced logits of every fixture GGUF against its Hugging Face float32 reference
// (fixtures/README.md): within 2e-3 max |dlogit| at every stored position, and the same argmax wherever
// the reference's top-1 margin exceeds 1e-2. Prints max |dlogit| for prefill rows and decode rows per file.
// Both CPU paths: the reference ops (the specification) and the fast ops the engine runs by default.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model_test_util.h"

using namespace ds;

namespace {
using ds::test::compare_row;
using ds::test::RowStats;
constexpr double kMaxAbs = 2e-3;     // fixtures/README.md: the precise path's bound, every file and type

}  // namespace

class FixtureLogits : public ::testing::TestWithParam<std::tuple<std::string, CpuPath>> {};

TEST_P(FixtureLogits, TeacherForcedMatchesReference) {
  const auto& [name, path] = GetParam();
  const std::string label = name + (path == CpuPath::kReference ? " ref " : " fast");
  const auto ref = ds::test::load_model_ref(name);
  ASSERT_FALSE(ref.prompt.empty());
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const int64_t V = m->cfg.n_vocab, T = (int64_t)ref.prompt.size();
  ASSERT_EQ(V, ref.vocab);
  const auto logits = ds::test::teacher_forced_logits(*m, ref, path);
  ASSERT_FALSE(logits.empty());
  RowStats pre, dec;
  for (size_t i = 0; i < ref.prefill_pos.size(); i++) {
    const int64_t p = ref.prefill_pos[i];
    compare_row(&logits[p * V], &ref.prefill[i * V], V, pre, label + " prefill position " + std::to_string(p));
  }
  for (size_t i = 0; i + 1 < ref.generated.size(); i++)
    compare_row(&logits[(T + i) * V], &ref.decode[i * V], V, dec,
                label + " decode row " + std::to_string(i) + " (position " + std::to_string(T + i) + ")");
  std::printf("[ logits   ] %-21s max|dlogit| prefill %.3e (%zu rows)  decode %.3e (%zu rows)  argmax rows checked %d + %d\n",
              label.c_str(), pre.max_abs, ref.prefill_pos.size(), dec.max_abs, ref.generated.size() - 1,
              pre.argmax_checked, dec.argmax_checked);
  EXPECT_LE(pre.max_abs, kMaxAbs) << label << " prefill rows";
  EXPECT_LE(dec.max_abs, kMaxAbs) << label << " decode rows";
}

INSTANTIATE_TEST_SUITE_P(AllFiles, FixtureLogits,
                         ::testing::Combine(::testing::ValuesIn(ds::test::fixture_model_names()),
                                            ::testing::Values(CpuPath::kReference, CpuPath::kFast)),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param);
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s + (std::get<1>(info.param) == CpuPath::kReference ? "_reference" : "_fast");
                         });

// CPU vs CUDA, intermediate by intermediate: one prefill (40 tokens, one step) and three decode steps through
// both forwards with the dump hook on; every named intermediate of the CPU forward must exist on the GPU with
// the same shape and agree within a tolerance, and a failure names the first intermediate (in the CPU's
// order) that diverges, with its numbers. The CPU prefill uses the chunked delta rule, the GPU the recurrent
// one, so prefill rows differ by float rounding only.
#include <cstdio>
#include <map>

#include "cuda_test_util.h"

using namespace ds;

namespace {

// Relative to the intermediate's own scale: fp32 summation-order differences grow through the layers and
// the two prefill algorithms, but stay far below these.
constexpr double kRelRms = 2e-4;
constexpr double kMaxAbsRel = 2e-3;  // max |diff| / max(1, max |ref|)

struct Dumped {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using Dumps = std::vector<Dumped>;

DumpFn collector(Dumps& out) {
  return [&out](std::string_view name, const float* data, std::span<const int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    out.push_back({std::string(name), {shape.begin(), shape.end()}, {data, data + n}});
  };
}

// Compares one forward call's dumps; returns the number of intermediates compared.
int compare_call(const Dumps& cpu, const Dumps& gpu, const std::string& call) {
  std::map<std::string, const Dumped*> by_name;
  for (const auto& d : gpu) by_name[d.name] = &d;
  int n = 0;
  double worst_rel = 0;
  std::string worst_name;
  for (const auto& c : cpu) {
    auto it = by_name.find(c.name);
    if (it == by_name.end()) {
      ADD_FAILURE() << call << ": intermediate '" << c.name << "' is missing from the CUDA dump";
      return n;
    }
    const Dumped& g = *it->second;
    if (g.shape != c.shape) {
      ADD_FAILURE() << call << ": '" << c.name << "' has another shape on the GPU";
      return n;
    }
    const auto d = ds::test::diff(g.data.data(), c.data.data(), c.data.size());
    const double lim = kMaxAbsRel * std::max(1.0, d.ref_max);
    n++;
    if (d.rel_rms > worst_rel) {
      worst_rel = d.rel_rms;
      worst_name = c.name;
    }
    if (!d.finite || d.rel_rms > kRelRms || d.max_abs > lim) {
      ADD_FAILURE() << call << ": first divergence at '" << c.name << "' (" << c.data.size()
                    << " values): rel RMS " << d.rel_rms << " (limit " << kRelRms << "), max |diff| " << d.max_abs
                    << " at flat index " << d.worst << " (limit " << lim << "), GPU " << g.data[d.worst] << " vs CPU "
                    << c.data[d.worst] << (d.finite ? "" : ", non-finite values on the GPU");
      return n;
    }
  }
  std::printf("[ dump     ] %-28s %3d intermediates agree; largest rel RMS %.2e at %s\n", call.c_str(), n, worst_rel,
              worst_name.c_str());
  return n;
}

class CudaVsCpuDumps : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVsCpuDumps, EveryIntermediateAgrees) {
  DS_SKIP_WITHOUT_GPU();
  const auto ref = ds::test::load_model_ref(GetParam());
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto cm = ds::test::load_cuda(*m);
  ASSERT_TRUE(cm);
  const int64_t V = m->cfg.n_vocab, P = 40;
  auto cs = SequenceState::create(m->cfg, 64);
  ASSERT_TRUE(cs.ok());
  auto gs = ds::test::new_state(*cm, 64);
  ASSERT_TRUE(gs);

  const std::vector<int32_t> prompt(ref.prompt.begin(), ref.prompt.begin() + P);
  Dumps cd, gd;
  std::vector<float> cl(P * V), gl(P * V);
  ASSERT_TRUE(forward(*m, *cs, prompt, cl.data(), true, collector(cd)).ok());
  auto st = cm->prefill(*gs, prompt, gl.data(), true, collector(gd));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GT(compare_call(cd, gd, GetParam() + " prefill"), 30);
  for (int i = 0; i < 3; i++) {
    cd.clear();
    gd.clear();
    const int32_t tok = ref.prompt[P + i];
    ASSERT_TRUE(forward(*m, *cs, std::span<const int32_t>(&tok, 1), cl.data(), false, collector(cd)).ok());
    cuda::CudaSeqState* sp = gs.get();
    st = cm->decode({&sp, 1}, std::span<const int32_t>(&tok, 1), gl.data(), collector(gd));
    ASSERT_TRUE(st.ok()) << st.error().message;
    compare_call(cd, gd, GetParam() + " decode " + std::to_string(i));
    if (HasFailure()) break;
  }
}

// tiny-gqa: nv = 3 nk (the tiled head order), untied output, Q5_0 fallbacks; tiny-sym bf16: float weights.
INSTANTIATE_TEST_SUITE_P(Models, CudaVsCpuDumps, ::testing::Values("tiny-gqa-q4_k_m", "tiny-sym-bf16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace

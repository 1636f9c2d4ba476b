// CPU vs CUDA, intermediate by intermediate: one prefill (40 tokens, one step) and three decode steps through
// both forwards with the dump hook on; every named intermediate of the CPU forward must exist on the GPU with
// the same shape and agree within a tolerance, and a failure names the first intermediate (in the CPU's
// order) that diverges, with its numbers. The CPU prefill uses the chunked delta rule, the GPU the recurrent
// one, so prefill rows differ by float rounding only.
#include <cstdio>
#include <map>

#include "cuda_test_util.h"
#include "gguf/gguf.h"
#include "quant/random_blocks.h"

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

// One prefill of P prompt tokens and three decode steps through both forwards, dumps compared per call.
void compare_forwards(const Qwen35Model& m, const std::vector<int32_t>& tokens, const std::string& label) {
  auto cm = ds::test::load_cuda(m);
  ASSERT_TRUE(cm);
  const int64_t V = m.cfg.n_vocab, P = 40;
  ASSERT_GE((int64_t)tokens.size(), P + 3);
  auto cs = SequenceState::create(m.cfg, 64);
  ASSERT_TRUE(cs.ok());
  auto gs = ds::test::new_state(*cm, 64);
  ASSERT_TRUE(gs);

  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + P);
  Dumps cd, gd;
  std::vector<float> cl(P * V), gl(P * V);
  ASSERT_TRUE(forward(m, *cs, prompt, cl.data(), true, collector(cd)).ok());
  auto st = cm->prefill(*gs, prompt, gl.data(), true, collector(gd));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GT(compare_call(cd, gd, label + " prefill"), 30);
  for (int i = 0; i < 3; i++) {
    cd.clear();
    gd.clear();
    const int32_t tok = tokens[P + i];
    ASSERT_TRUE(forward(m, *cs, std::span<const int32_t>(&tok, 1), cl.data(), false, collector(cd)).ok());
    cuda::CudaSeqState* sp = gs.get();
    st = cm->decode({&sp, 1}, std::span<const int32_t>(&tok, 1), gl.data(), collector(gd));
    ASSERT_TRUE(st.ok()) << st.error().message;
    compare_call(cd, gd, label + " decode " + std::to_string(i));
    if (::testing::Test::HasFailure()) break;
  }
}

TEST_P(CudaVsCpuDumps, EveryIntermediateAgrees) {
  DS_SKIP_WITHOUT_GPU();
  const auto ref = ds::test::load_model_ref(GetParam());
  auto m = Qwen35Model::load_file(ref.gguf);
  ASSERT_TRUE(m.ok()) << m.error().message;
  compare_forwards(*m, ref.prompt, GetParam());
}

// tiny-gqa: nv = 3 nk (the tiled head order), untied output, Q5_0 fallbacks; tiny-sym bf16: float weights.
INSTANTIATE_TEST_SUITE_P(Models, CudaVsCpuDumps, ::testing::Values("tiny-gqa-q4_k_m", "tiny-sym-bf16"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The weight types users pick for small GPUs (Q3_K_M, Q2_K, IQ3 files; legacy Q4_1 / Q5_1): tiny-sym-q8_0
// with every Q8_0 matrix whose rows are whole blocks of the type (all of them, token_embd and the tied
// output included) replaced by random blocks of that type with valid scales. Random blocks, not a
// quantization of the fixture's weights: the CPU has no quantizer for most of these types, and this is
// CUDA vs CPU on the same weights (dequantization, tile matvec, prefill GEMM, embedding rows), not quality.
Result<gguf::File> tiny_with_type(GgmlType t, int& replaced) {
  DS_ASSIGN(auto f, gguf::File::open(ds::test::fixture_gguf("tiny-sym-q8_0")));
  gguf::Writer w(f.alignment());
  for (const auto& kv : f.metadata()) w.set(kv.key, kv.value);
  const int64_t bs = ggml_type_info(t)->block_size;
  replaced = 0;
  for (const auto& x : f.tensors()) {
    std::vector<int64_t> ne(x.ne, x.ne + x.n_dims);
    GgmlType type = x.type;
    std::vector<uint8_t> data(f.tensor_data(x), f.tensor_data(x) + x.n_bytes);
    if (x.type == GgmlType::Q8_0 && ne[0] % bs == 0) {
      int64_t n = 1;
      for (int64_t d : ne) n *= d;
      type = t;
      data = random_blocks(t, n, 100 + (uint64_t)replaced++);
    }
    const size_t i = w.add_tensor(x.name, type, ne);
    w.set_tensor_data(i, std::move(data));
  }
  return gguf::File::from_bytes(w.to_bytes(), "tiny-sym-" + std::string(ggml_type_name(t)));
}

class CudaVsCpuDumpsTypes : public ::testing::TestWithParam<GgmlType> {};

TEST_P(CudaVsCpuDumpsTypes, EveryIntermediateAgrees) {
  int replaced = 0;
  auto f = tiny_with_type(GetParam(), replaced);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_GE(replaced, 10) << "the matrices of tiny-sym are Q8_0 with rows of 256 or 512";
  auto m = Qwen35Model::load(*f);  // f outlives m
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto ref = ds::test::load_model_ref("tiny-sym-q8_0");
  {  // The edited model itself, checked without a GPU too: finite logits on the CPU.
    auto cs = SequenceState::create(m->cfg, 64);
    ASSERT_TRUE(cs.ok());
    const std::vector<int32_t> prompt(ref.prompt.begin(), ref.prompt.begin() + 40);
    std::vector<float> logits(prompt.size() * m->cfg.n_vocab);
    Dumps unused;
    ASSERT_TRUE(forward(*m, *cs, prompt, logits.data(), true, collector(unused)).ok());
    for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << "the CPU forward of the edited model";
  }
  DS_SKIP_WITHOUT_GPU();
  compare_forwards(*m, ref.prompt, "tiny-sym " + std::string(ggml_type_name(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(Types, CudaVsCpuDumpsTypes,
                         ::testing::Values(GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
                                           GgmlType::IQ3_XXS, GgmlType::IQ3_S),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

}  // namespace

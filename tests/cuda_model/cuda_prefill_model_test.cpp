// The piece prefill of CudaModel (issue 6) beyond the fixture bounds (cuda_fixture_test.cpp): a prompt in one
// call and token by token leave the same state (precise mode), the piece size does not change the result
// (the delta-rule states, conv windows and KV cache carry across pieces), the final state lets decode continue
// in both modes, and a prompt past the context is an Error that leaves the state alone.
#include <cstdio>

#include "cuda_test_util.h"

using namespace ds;

namespace {

const std::string kModel = "tiny-gqa-q4_k_m";

struct Loaded {
  ds::test::ModelRef ref;
  Result<Qwen35Model> m = Error{"not loaded"};
};

Loaded load_fixture(const std::string& name = kModel) {
  Loaded f{ds::test::load_model_ref(name)};
  f.m = Qwen35Model::load_file(f.ref.gguf);
  EXPECT_TRUE(f.m.ok()) << f.m.error().message;
  return f;
}

cuda::CudaModelOptions precise(int piece = 4096) {
  cuda::CudaModelOptions o;
  o.precision = cuda::Precision::kPrecise;
  o.prefill_piece = piece;
  return o;
}

// max |a - b| over max(1, max |b|): the states hold values of different scales (conv windows, delta-rule
// states, keys after RoPE).
void expect_states_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_FALSE(a.empty()) << what;
  const auto d = ds::test::diff(a.data(), b.data(), a.size());
  std::printf("[ state    ] %s: max|diff| %.3e, max|ref| %.3e, rel rms %.3e\n", what.c_str(), d.max_abs, d.ref_max,
              d.rel_rms);
  EXPECT_TRUE(d.finite) << what;
  EXPECT_LE(d.max_abs, tol * std::max(1.0, d.ref_max)) << what << ": at float " << d.worst;
}

std::vector<float> download(const cuda::CudaModel& m, const cuda::CudaSeqState& s) {
  auto r = m.download(s);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : std::vector<float>{};
}

}  // namespace

TEST(CudaPrefill, OneCallEqualsTokenByTokenPrecise) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m, precise());
  ASSERT_TRUE(cm);
  ASSERT_TRUE(cm->piece_prefill_supported());
  const int64_t T = (int64_t)f.ref.prompt.size(), V = cm->cfg().n_vocab;
  auto one = ds::test::new_state(*cm, T + 8), tok = ds::test::new_state(*cm, T + 8);
  ASSERT_TRUE(one && tok);
  std::vector<float> l_one(V), l_tok(V);
  ASSERT_TRUE(cm->prefill(*one, f.ref.prompt, l_one.data(), false).ok());  // the piece path (T >= 16)
  for (int64_t t = 0; t < T; t++)  // the step path, one token at a time (recurrent rule)
    ASSERT_TRUE(cm->prefill(*tok, std::span<const int32_t>(&f.ref.prompt[t], 1), l_tok.data(), false).ok());
  EXPECT_EQ(one->n_past(), T);
  EXPECT_EQ(tok->n_past(), T);
  expect_states_close(download(*cm, *one), download(*cm, *tok), 1e-3, "one call vs token by token (precise)");
  const auto d = ds::test::diff(l_one.data(), l_tok.data(), V);
  EXPECT_LE(d.max_abs, 2e-3) << "last-token logits";
  const auto a = ds::test::decode_step(*cm, {one.get()}, {f.ref.generated[0]});
  const auto b = ds::test::decode_step(*cm, {tok.get()}, {f.ref.generated[0]});
  EXPECT_LE(ds::test::diff(a.data(), b.data(), V).max_abs, 2e-3) << "decode after the two prefills";
}

TEST(CudaPrefill, PieceSizeDoesNotMatter) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  // 185 tokens: one piece, or pieces of 50 (chunks of 64 restart in each piece) and of 100.
  auto whole = ds::test::load_cuda(*f.m, precise()), p50 = ds::test::load_cuda(*f.m, precise(50)),
       p100 = ds::test::load_cuda(*f.m, precise(100));
  ASSERT_TRUE(whole && p50 && p100);
  const int64_t T = (int64_t)f.ref.prompt.size(), V = whole->cfg().n_vocab;
  auto sw = ds::test::new_state(*whole, T + 4), s50 = ds::test::new_state(*p50, T + 4),
       s100 = ds::test::new_state(*p100, T + 4);
  std::vector<float> lw(T * V), l50(T * V), l100(T * V);
  ASSERT_TRUE(whole->prefill(*sw, f.ref.prompt, lw.data(), true).ok());
  ASSERT_TRUE(p50->prefill(*s50, f.ref.prompt, l50.data(), true).ok());
  ASSERT_TRUE(p100->prefill(*s100, f.ref.prompt, l100.data(), true).ok());
  EXPECT_LE(ds::test::diff(l50.data(), lw.data(), lw.size()).max_abs, 1e-3) << "all logits, pieces of 50";
  EXPECT_LE(ds::test::diff(l100.data(), lw.data(), lw.size()).max_abs, 1e-3) << "all logits, pieces of 100";
  const auto vw = download(*whole, *sw);
  expect_states_close(download(*p50, *s50), vw, 1e-3, "pieces of 50 vs one piece");
  expect_states_close(download(*p100, *s100), vw, 1e-3, "pieces of 100 vs one piece");
  // A second prefill continues the first: 185 = 120 + 65 in two calls.
  auto s2 = ds::test::new_state(*whole, T + 4);
  std::vector<float> last(V);
  ASSERT_TRUE(whole->prefill(*s2, std::span<const int32_t>(f.ref.prompt).first(120), nullptr, false).ok());
  ASSERT_TRUE(whole->prefill(*s2, std::span<const int32_t>(f.ref.prompt).subspan(120), last.data(), false).ok());
  EXPECT_LE(ds::test::diff(last.data(), &lw[(T - 1) * V], V).max_abs, 1e-3) << "prefill in two calls";
  expect_states_close(download(*whole, *s2), vw, 1e-3, "two calls vs one");
}

// Fast mode: the prefill's state lets decode continue within the fast bound of the step path's decode.
TEST(CudaPrefill, FastPrefillThenDecode) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  cuda::CudaModelOptions steps;
  steps.prefill_min_tokens = 1 << 30;
  auto fast = ds::test::load_cuda(*f.m), ref = ds::test::load_cuda(*f.m, steps);
  ASSERT_TRUE(fast && ref);
  EXPECT_EQ(fast->options().precision, cuda::Precision::kFast);  // the default
  const int64_t T = (int64_t)f.ref.prompt.size(), V = fast->cfg().n_vocab;
  auto a = ds::test::new_state(*fast, T + 8), b = ds::test::new_state(*ref, T + 8);
  ASSERT_TRUE(fast->prefill(*a, f.ref.prompt, nullptr, false).ok());
  ASSERT_TRUE(ref->prefill(*b, f.ref.prompt, nullptr, false).ok());
  double worst = 0;
  for (int i = 0; i < 6; i++) {
    const auto x = ds::test::decode_step(*fast, {a.get()}, {f.ref.generated[i]});
    const auto y = ds::test::decode_step(*ref, {b.get()}, {f.ref.generated[i]});
    worst = std::max(worst, ds::test::diff(x.data(), y.data(), V).max_abs);
  }
  std::printf("[ fast     ] decode after a fast prefill vs after the fp32 steps: max|dlogit| %.3e\n", worst);
  EXPECT_LE(worst, 0.02);
}

TEST(CudaPrefill, ContextOverflowIsAnError) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m, precise(64));
  ASSERT_TRUE(cm);
  auto s = ds::test::new_state(*cm, 100);
  ASSERT_TRUE(s);
  const auto r = cm->prefill(*s, f.ref.prompt, nullptr, false);  // 185 > 100
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("context"), std::string::npos) << r.error().message;
  EXPECT_EQ(s->n_past(), 0);
  ASSERT_TRUE(cm->prefill(*s, std::span<const int32_t>(f.ref.prompt).first(60), nullptr, false).ok());
  EXPECT_FALSE(cm->prefill(*s, std::span<const int32_t>(f.ref.prompt).subspan(60, 41), nullptr, false).ok());
  EXPECT_EQ(s->n_past(), 60);
  EXPECT_TRUE(cm->prefill(*s, std::span<const int32_t>(f.ref.prompt).subspan(60, 40), nullptr, false).ok());
  EXPECT_EQ(s->n_past(), 100);
}

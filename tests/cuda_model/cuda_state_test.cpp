// Sequence states on the GPU: batched decode equals each sequence alone, prefill chunking does not change the
// result, reset, snapshot/restore (model and Backend level), the load-time type check (no GPU needed), the
// backend factory and `deltaserve logits --backend cuda`.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "cuda/dequant.h"
#include "cuda_test_util.h"
#include "engine/backend_factory.h"
#include "engine/cuda_backend.h"
#include "testutil.h"

using namespace ds;

namespace {

// The single-vector and multi-vector matvec kernels sum in different orders, so a sequence decoded alone and
// in a batch agree to float rounding, not bit for bit (engine/cuda_backend.h).
constexpr double kBatchTol = 1e-4;

const std::string kModel = "tiny-gqa-q4_k_m";

struct Fixture {
  ds::test::ModelRef ref;
  Result<Qwen35Model> m = Error{"not loaded"};
};

Fixture load_fixture() {
  Fixture f{ds::test::load_model_ref(kModel)};
  f.m = Qwen35Model::load_file(f.ref.gguf);
  EXPECT_TRUE(f.m.ok()) << f.m.error().message;
  return f;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, size_t from, size_t n) {
  return std::vector<int32_t>(v.begin() + from, v.begin() + from + n);
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  const auto d = ds::test::diff(a.data(), b.data(), a.size());
  EXPECT_TRUE(d.finite) << what;
  EXPECT_LE(d.max_abs, tol) << what << ": max |diff| at " << d.worst;
}

}  // namespace

TEST(CudaState, BatchedDecodeEqualsEachAlone) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m);
  ASSERT_TRUE(cm);
  const int64_t V = cm->cfg().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {slice(f.ref.prompt, 0, 9), slice(f.ref.prompt, 30, 70),
                                                     slice(f.ref.prompt, 100, 3)};
  const size_t B = prompts.size();
  std::vector<std::unique_ptr<cuda::CudaSeqState>> alone, batch;
  for (size_t i = 0; i < B; i++) {
    alone.push_back(ds::test::new_state(*cm, 128));
    batch.push_back(ds::test::new_state(*cm, 128));
    ASSERT_TRUE(alone.back() && batch.back());
    ASSERT_TRUE(cm->prefill(*alone[i], prompts[i], nullptr, false).ok());
    ASSERT_TRUE(cm->prefill(*batch[i], prompts[i], nullptr, false).ok());
  }
  // Steps of 3, 2 (sequence 1 sits out) and 3 sequences again: graphs for two batch sizes.
  for (int step = 0; step < 5; step++) {
    std::vector<size_t> members = step == 2 ? std::vector<size_t>{0, 2} : std::vector<size_t>{0, 1, 2};
    std::vector<cuda::CudaSeqState*> states;
    std::vector<int32_t> toks;
    for (size_t i : members) {
      states.push_back(batch[i].get());
      toks.push_back(f.ref.generated[step * 3 + i]);
    }
    const auto together = ds::test::decode_step(*cm, states, toks);
    for (size_t j = 0; j < members.size(); j++) {
      const auto one = ds::test::decode_step(*cm, {alone[members[j]].get()}, {toks[j]});
      expect_close(std::vector<float>(together.begin() + j * V, together.begin() + (j + 1) * V), one, kBatchTol,
                   "step " + std::to_string(step) + " sequence " + std::to_string(members[j]));
    }
  }
  for (size_t i = 0; i < B; i++) EXPECT_EQ(alone[i]->n_past(), batch[i]->n_past());
}

// A profiled step is a whole decode step: its op list ends with the output head (final norm, vocabulary product),
// each op timed, and its logits equal those of the same step decoded normally (both without a graph's replay being
// required: decode may use one; the ops are the same kernels in the same order).
TEST(CudaState, ProfiledStepIncludesTheOutputHead) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m);
  ASSERT_TRUE(cm);
  const int64_t V = cm->cfg().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {slice(f.ref.prompt, 0, 7), slice(f.ref.prompt, 20, 11)};
  std::vector<std::unique_ptr<cuda::CudaSeqState>> a, b;
  std::vector<cuda::CudaSeqState*> pa, pb;
  for (const auto& p : prompts) {
    a.push_back(ds::test::new_state(*cm, 64));
    b.push_back(ds::test::new_state(*cm, 64));
    ASSERT_TRUE(a.back() && b.back());
    ASSERT_TRUE(cm->prefill(*a.back(), p, nullptr, false).ok());
    ASSERT_TRUE(cm->prefill(*b.back(), p, nullptr, false).ok());
    pa.push_back(a.back().get());
    pb.push_back(b.back().get());
  }
  const std::vector<int32_t> toks = {f.ref.generated[0], f.ref.generated[1]};
  std::vector<float> profiled(toks.size() * V);
  auto prof = cm->profile_decode(pa, toks, profiled.data());
  ASSERT_TRUE(prof.ok()) << prof.error().message;
  ASSERT_GE(prof->size(), 3u);
  EXPECT_EQ(prof->back().name.rfind("output[", 0), 0u) << prof->back().name;
  EXPECT_GT(prof->back().bytes, 0.0);
  EXPECT_GT(prof->back().ms, 0.0);
  bool norm = false;
  for (const auto& k : *prof) {
    EXPECT_GE(k.ms, 0.0) << k.name;
    norm = norm || k.name == "final_norm";
  }
  EXPECT_TRUE(norm) << "no final_norm op in the profiled step";
  const auto decoded = ds::test::decode_step(*cm, pb, toks);
  expect_close(profiled, decoded, kBatchTol, "profiled vs decoded logits");
  // Without a buffer the head still runs (scratch logits): the same ops.
  auto again = cm->profile_decode(pa, toks, nullptr);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->size(), prof->size());
  EXPECT_EQ(again->back().name, prof->back().name);
}

// 40 sequences in one step: the Q4_K products take the wgmma kernel at B >= 25 (matvec_wgmma.cuh, on the
// H200) instead of the fold kernel; each sequence still matches its own decode alone (the batch-1 path).
TEST(CudaState, BatchOf40DecodeEqualsEachAlone) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m);
  ASSERT_TRUE(cm);
  const int64_t V = cm->cfg().n_vocab;
  const size_t B = 40;
  std::vector<std::unique_ptr<cuda::CudaSeqState>> batch;
  std::vector<cuda::CudaSeqState*> states;
  std::vector<int32_t> toks;
  for (size_t i = 0; i < B; i++) {
    batch.push_back(ds::test::new_state(*cm, 64));
    ASSERT_TRUE(batch.back());
    ASSERT_TRUE(cm->prefill(*batch[i], slice(f.ref.prompt, 2 * i, 3 + i % 7), nullptr, false).ok());
    states.push_back(batch[i].get());
    toks.push_back(f.ref.generated[i % f.ref.generated.size()]);
  }
  const auto together = ds::test::decode_step(*cm, states, toks);
  for (size_t i : {size_t(0), size_t(1), size_t(17), size_t(39)}) {
    auto alone = ds::test::new_state(*cm, 64);
    ASSERT_TRUE(alone);
    ASSERT_TRUE(cm->prefill(*alone, slice(f.ref.prompt, 2 * i, 3 + i % 7), nullptr, false).ok());
    const auto one = ds::test::decode_step(*cm, {alone.get()}, {toks[i]});
    expect_close(std::vector<float>(together.begin() + i * V, together.begin() + (i + 1) * V), one, kBatchTol,
                 "sequence " + std::to_string(i) + " of 40");
  }
}

// kv19 / st20: the K / V caches (CudaModelOptions::kv_f16) or the GDN states (state_f16) in f16: half the bytes;
// the logits stay near the f32 run's (the measured error printed) through the step-path prefill (short prompts:
// qk_norm_rope_store, the multi-token delta rule), the piece prefill (a 40-token prompt: attention_prefill's store and
// its f16 rows; the chunked delta rule on the widened state, rounded back), 40 sequences at once (the ring kernel,
// gdn_tma_out_kernel) and batch 1 (the register loop, gdn_conv_kernel); and within f16 a sequence decoded alone
// matches its row of the batch as closely as in f32 (every path reads the same rounded values).
struct HalfRun {
  size_t kv_bytes = 0, rec_bytes = 0;
  std::vector<std::vector<float>> batch;  // per step [B, V]
  std::vector<float> alone;               // sequence 1 decoded alone, step 0
};

HalfRun run_half_case(const Fixture& f, const cuda::CudaModelOptions& o, size_t B, int steps) {
  HalfRun out;
  auto prompt_of = [&](size_t i) { return i == 0 ? slice(f.ref.prompt, 0, 40) : slice(f.ref.prompt, 2 * i, 3 + i % 7); };
  auto cm = ds::test::load_cuda(*f.m, o);
  if (!cm) return out;
  out.kv_bytes = cm->kv_bytes_per_token();
  out.rec_bytes = cm->recurrent_state_bytes();
  std::vector<std::unique_ptr<cuda::CudaSeqState>> batch;
  std::vector<cuda::CudaSeqState*> states;
  for (size_t i = 0; i < B; i++) {
    batch.push_back(ds::test::new_state(*cm, 128));
    if (!batch.back()) return out;
    EXPECT_TRUE(cm->prefill(*batch[i], prompt_of(i), nullptr, false).ok());
    states.push_back(batch[i].get());
  }
  auto alone = ds::test::new_state(*cm, 128);
  if (!alone) return out;
  EXPECT_TRUE(cm->prefill(*alone, prompt_of(1), nullptr, false).ok());
  for (int step = 0; step < steps; step++) {
    std::vector<int32_t> toks;
    for (size_t i = 0; i < B; i++) toks.push_back(f.ref.generated[(i + step) % f.ref.generated.size()]);
    out.batch.push_back(ds::test::decode_step(*cm, states, toks));
    if (step == 0) out.alone = ds::test::decode_step(*cm, {alone.get()}, {toks[1]});
  }
  return out;
}

// h (an f16 option) against a (f32): the worst step's logits rel RMS within bound and not 0; within h and a, sequence
// 1 alone as its row of the batch.
void expect_half_near(const HalfRun& a, const HalfRun& h, int64_t V, int steps, double bound, const char* tag,
                      const char* what) {
  ASSERT_EQ(a.batch.size(), (size_t)steps);
  ASSERT_EQ(h.batch.size(), (size_t)steps);
  double worst_rel = 0, worst_abs = 0;
  for (int st = 0; st < steps; st++) {
    ASSERT_EQ(h.batch[st].size(), a.batch[st].size());
    double num = 0, den = 0;
    for (size_t i = 0; i < a.batch[st].size(); i++) {
      const double d = (double)h.batch[st][i] - a.batch[st][i];
      ASSERT_TRUE(std::isfinite(h.batch[st][i])) << "step " << st << " logit " << i;
      num += d * d;
      den += (double)a.batch[st][i] * a.batch[st][i];
      worst_abs = std::max(worst_abs, std::abs(d));
    }
    worst_rel = std::max(worst_rel, std::sqrt(num / den));
  }
  std::printf("[%s] %s vs f32, %zu sequences x %d steps: logits rel RMS %.3g, max |diff| %.3g\n", tag, what,
              a.batch[0].size() / V, steps, worst_rel, worst_abs);
  EXPECT_LE(worst_rel, bound) << what << ": logits far from the f32 run's";
  EXPECT_GT(worst_rel, 0.0) << what << " gave the f32 logits bit for bit: the option did nothing";
  expect_close(std::vector<float>(h.batch[0].begin() + V, h.batch[0].begin() + 2 * V), h.alone, kBatchTol,
               std::string(what) + ": sequence 1 alone vs in the batch");
  expect_close(std::vector<float>(a.batch[0].begin() + V, a.batch[0].begin() + 2 * V), a.alone, kBatchTol,
               "f32: sequence 1 alone vs in the batch");
}

TEST(CudaState, F16KvCacheNearF32) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  cuda::CudaModelOptions o32, o16;
  o16.kv_f16 = true;
  const HalfRun a = run_half_case(f, o32, 40, 3), h = run_half_case(f, o16, 40, 3);
  EXPECT_EQ(h.kv_bytes * 2, a.kv_bytes) << "f16 caches: half the bytes per position";
  expect_half_near(a, h, f.m->cfg.n_vocab, 3, 1e-2, "kv19", "f16 K / V caches");
}

// st20: f16 GDN states; 8 decode steps, as the rounding is made once per step and carried in the state.
TEST(CudaState, F16StateNearF32) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  cuda::CudaModelOptions o32, o16;
  o16.state_f16 = true;
  const HalfRun a = run_half_case(f, o32, 40, 8), h = run_half_case(f, o16, 40, 8);
  // Half of the delta-rule states' bytes saved (the conv windows, and lz23's histories under DS_GDN_LAZY, stay f32).
  const Qwen35Config& c = f.m->cfg;
  size_t st32 = 0;
  for (const auto& L : f.m->layers)
    if (L.kind == LayerKind::GatedDeltaNet) st32 += (size_t)(c.n_v_heads * c.d_v * c.d_k) * sizeof(float);
  EXPECT_GE(a.rec_bytes - h.rec_bytes, st32 / 2 - 256 * f.m->layers.size()) << "f16 states: half the state bytes";
  EXPECT_LE(a.rec_bytes - h.rec_bytes, st32 / 2 + 256 * f.m->layers.size()) << "f16 states: half the state bytes";
  EXPECT_EQ(h.kv_bytes, a.kv_bytes) << "f16 states: the K / V caches unchanged";
  expect_half_near(a, h, f.m->cfg.n_vocab, 8, 1e-2, "st20", "f16 GDN states");
}

TEST(CudaState, PrefillChunkSizeDoesNotMatter) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  cuda::CudaModelOptions steps;
  steps.prefill_min_tokens = 1 << 30;  // the step path (the piece prefill: cuda_prefill_model_test.cpp)
  cuda::CudaModelOptions small = steps;
  small.max_tokens = 7;  // 185 tokens = 26 steps of 7 + 3
  auto big = ds::test::load_cuda(*f.m, steps), sm = ds::test::load_cuda(*f.m, small);
  ASSERT_TRUE(big && sm);
  const int64_t T = (int64_t)f.ref.prompt.size(), V = big->cfg().n_vocab;
  auto a = ds::test::new_state(*big, T + 4), b = ds::test::new_state(*sm, T + 4);
  std::vector<float> la(T * V), lb(T * V);
  ASSERT_TRUE(big->prefill(*a, f.ref.prompt, la.data(), true).ok());
  ASSERT_TRUE(sm->prefill(*b, f.ref.prompt, lb.data(), true).ok());
  expect_close(la, lb, kBatchTol, "prefill logits, steps of 64 vs 7");
  const auto da = ds::test::decode_step(*big, {a.get()}, {f.ref.generated[0]});
  const auto db = ds::test::decode_step(*sm, {b.get()}, {f.ref.generated[0]});
  expect_close(da, db, kBatchTol, "decode after the two prefills");
}

TEST(CudaState, ResetAndSnapshotRestore) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  auto cm = ds::test::load_cuda(*f.m);
  ASSERT_TRUE(cm);
  const int64_t V = cm->cfg().n_vocab;
  const auto prompt = slice(f.ref.prompt, 0, 80);
  auto s = ds::test::new_state(*cm, 128), other = ds::test::new_state(*cm, 128);
  ASSERT_TRUE(s && other);
  std::vector<float> first(V), again(V);
  ASSERT_TRUE(cm->prefill(*s, prompt, first.data(), false).ok());
  auto snap = cm->save(*s);
  ASSERT_TRUE(snap.ok()) << snap.error().message;
  EXPECT_EQ((*snap)->n_tokens(), 80);
  std::vector<std::vector<float>> cont;
  for (int i = 0; i < 4; i++) cont.push_back(ds::test::decode_step(*cm, {s.get()}, {f.ref.generated[i]}));
  // Restore into the same state and into another one: the same continuation, bit for bit.
  for (cuda::CudaSeqState* t : {s.get(), other.get()}) {
    ASSERT_TRUE(cm->restore(*t, **snap).ok());
    EXPECT_EQ(t->n_past(), 80);
    for (int i = 0; i < 4; i++) {
      const auto l = ds::test::decode_step(*cm, {t}, {f.ref.generated[i]});
      EXPECT_EQ(0, std::memcmp(l.data(), cont[i].data(), V * sizeof(float))) << "restored step " << i;
    }
  }
  // Reset: the same prompt gives the same logits as on a fresh state.
  ASSERT_TRUE(s->reset().ok());
  EXPECT_EQ(s->n_past(), 0);
  ASSERT_TRUE(cm->prefill(*s, prompt, again.data(), false).ok());
  EXPECT_EQ(0, std::memcmp(first.data(), again.data(), V * sizeof(float)));
  // Errors: past the context, bad token, a state twice in one step.
  std::vector<int32_t> too_long(60, 1);
  EXPECT_FALSE(cm->prefill(*s, too_long, nullptr, false).ok());
  const int32_t bad = (int32_t)V;
  EXPECT_FALSE(cm->prefill(*other, std::span<const int32_t>(&bad, 1), nullptr, false).ok());
  std::vector<float> two(2 * V);
  EXPECT_FALSE(cm->decode(std::vector<cuda::CudaSeqState*>{s.get(), s.get()}, std::vector<int32_t>{1, 2}, two.data()).ok());
}

TEST(CudaState, BackendSlotsSnapshotsAndDecode) {
  DS_SKIP_WITHOUT_GPU();
  auto f = load_fixture();
  engine::BackendOptions o;
  o.n_slots = 3;
  o.n_ctx = 256;
  auto be = engine::make_backend("cuda", f.ref.gguf, o);
  ASSERT_TRUE(be.ok()) << be.error().message;
  engine::Backend& b = **be;
  EXPECT_EQ(b.name(), "cuda");
  EXPECT_EQ(b.n_slots(), 3);
  EXPECT_EQ(b.n_ctx(), 256);
  const int64_t V = b.n_vocab();
  EXPECT_GT(b.memory().fixed_bytes_per_slot, 0u);
  EXPECT_GT(b.memory().kv_bytes_per_token, 0u);
  const auto prompt = slice(f.ref.prompt, 0, 50);
  std::vector<float> l0(V), l2(V);
  ASSERT_TRUE(b.prefill(0, prompt, l0).ok());
  ASSERT_TRUE(b.prefill(2, prompt, l2).ok());
  EXPECT_EQ(0, std::memcmp(l0.data(), l2.data(), V * sizeof(float)));
  auto snap = b.save(0);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ((*snap)->n_tokens(), 50);
  std::vector<float> two(2 * V), again(2 * V);
  const std::vector<int32_t> slots{0, 2}, toks{f.ref.generated[0], f.ref.generated[1]};
  ASSERT_TRUE(b.decode(slots, toks, two).ok());
  ASSERT_TRUE(b.restore(2, **snap).ok());
  ASSERT_TRUE(b.restore(0, **snap).ok());
  ASSERT_TRUE(b.decode(slots, toks, again).ok());
  EXPECT_EQ(0, std::memcmp(two.data(), again.data(), two.size() * sizeof(float)));
  EXPECT_FALSE(b.reset(3).ok());
  EXPECT_FALSE(b.decode(std::vector<int32_t>{0, 1}, std::vector<int32_t>{1}, two).ok());
  EXPECT_TRUE(b.reset(0).ok());
}

// A matrix type the CUDA kernels cannot read is a load-time error naming the tensor and the type, found
// before any GPU work (so this runs without a GPU).
TEST(CudaLoad, UnsupportedTypeNamesTensorAndType) {
  auto f = gguf::File::open(ds::test::fixture_gguf("tiny-sym-q8_0"));
  ASSERT_TRUE(f.ok()) << f.error().message;
  gguf::Writer w(f->alignment());
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  const std::string victim = "blk.1.ffn_up.weight";
  for (const auto& t : f->tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    GgmlType type = t.type;
    std::vector<uint8_t> data(f->tensor_data(t), f->tensor_data(t) + t.n_bytes);
    if (t.name == victim) {  // all-zero MXFP4 blocks: valid, and no CUDA kernel reads MXFP4
      type = GgmlType::MXFP4;
      data.assign(ggml_row_bytes(*ggml_type_info(type), ne[0]) * ne[1], 0);
    }
    const size_t i = w.add_tensor(t.name, type, ne);
    w.set_tensor_data(i, std::move(data));
  }
  auto edited = gguf::File::from_bytes(w.to_bytes(), "edited.gguf");
  ASSERT_TRUE(edited.ok()) << edited.error().message;
  ASSERT_FALSE(cuda::has_kernel(GgmlType::MXFP4)) << "pick another type for this test";
  auto m = Qwen35Model::load(*edited);
  ASSERT_TRUE(m.ok()) << "the CPU loader reads MXFP4: " << m.error().message;
  auto cm = cuda::CudaModel::load(*m);
  ASSERT_FALSE(cm.ok());
  EXPECT_NE(cm.error().message.find(victim), std::string::npos) << cm.error().message;
  EXPECT_NE(cm.error().message.find("MXFP4"), std::string::npos) << cm.error().message;
  EXPECT_NE(cm.error().message.find("--backend cpu"), std::string::npos) << "the error says how to run it anyway";
}

// The lazy rule's length (lz23) is checked with the other options, before any device call (no GPU needed): out of
// range from the options, and a DS_GDN_LAZY that is not a whole number, each a clear error naming the setting.
TEST(CudaLoad, GdnLazyLengthChecked) {
  auto f = load_fixture();
  ASSERT_TRUE(f.m.ok());
  const char* saved = std::getenv("DS_GDN_LAZY");
  const std::string keep = saved ? saved : "";
  unsetenv("DS_GDN_LAZY");
  for (int bad : {-1, 17}) {
    cuda::CudaModelOptions o;
    o.gdn_lazy = bad;
    auto cm = cuda::CudaModel::load(*f.m, o);
    ASSERT_FALSE(cm.ok()) << bad;
    EXPECT_NE(cm.error().message.find("lazy delta rule length " + std::to_string(bad)), std::string::npos)
        << cm.error().message;
    EXPECT_NE(cm.error().message.find("0 .. 16"), std::string::npos) << cm.error().message;
  }
  for (const char* bad : {"8x", "eight", "4.5", "99999999999"}) {
    setenv("DS_GDN_LAZY", bad, 1);
    auto cm = cuda::CudaModel::load(*f.m);
    ASSERT_FALSE(cm.ok()) << bad;
    EXPECT_NE(cm.error().message.find("DS_GDN_LAZY"), std::string::npos) << cm.error().message;
  }
  if (saved) setenv("DS_GDN_LAZY", keep.c_str(), 1);
  else unsetenv("DS_GDN_LAZY");
}

TEST(CudaLoad, BackendFactoryKinds) {
  EXPECT_FALSE(engine::resolve_backend_kind("gpu").ok());
  auto a = engine::resolve_backend_kind("auto");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, ds::cuda::device_count() > 0 ? "cuda" : "cpu");
  EXPECT_EQ(*engine::resolve_backend_kind("cuda"), "cuda");
  if (ds::cuda::device_count() == 0) {
    auto b = engine::make_backend("cuda", ds::test::fixture_gguf(kModel), {});
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("no CUDA device"), std::string::npos) << b.error().message;
  }
}

// `deltaserve logits --backend cuda --precise`: the fixture's teacher-forcing contract through the CLI, checked
// on the reference's prefill rows and decode rows (2e-3).
TEST(CudaCli, LogitsBackendCuda) {
  DS_SKIP_WITHOUT_GPU();
  const char* bin = std::getenv("DS_BIN");
  if (!bin) GTEST_SKIP() << "DS_BIN is not set";
  const auto ref = ds::test::load_model_ref("tiny-sym-q4_k_m");
  const std::string dir = ds::test::temp_dir(), ids = dir + "/cuda_cli_ids.txt", out = dir + "/cuda_cli.f32";
  {
    std::ofstream f(ids);
    for (int32_t t : ref.prompt) f << t << ' ';
    for (size_t i = 0; i + 1 < ref.generated.size(); i++) f << ref.generated[i] << ' ';
  }
  const std::string cmd = std::string(bin) + " logits --backend cuda --precise -m " + ref.gguf + " --tokens-file " + ids +
                          " --out " + out + " --decode-from " + std::to_string(ref.prompt.size()) + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto raw = ds::test::read_file(out);
  const size_t T = ref.prompt.size(), G = ref.generated.size() - 1, V = ref.vocab;
  ASSERT_EQ(raw.size(), (T + G) * V * sizeof(float));
  std::vector<float> logits(raw.size() / 4);
  std::memcpy(logits.data(), raw.data(), raw.size());
  double worst = 0;
  for (size_t i = 0; i < ref.prefill_pos.size(); i++)
    worst = std::max(worst, ds::test::diff(&logits[ref.prefill_pos[i] * V], &ref.prefill[i * V], V).max_abs);
  for (size_t i = 0; i < G; i++)
    worst = std::max(worst, ds::test::diff(&logits[(T + i) * V], &ref.decode[i * V], V).max_abs);
  EXPECT_LE(worst, 2e-3);
}

// `deltaserve bench --backend cuda` and `run --backend cuda`: the llama-bench JSON fields plus the prefill mode
// and the time to first token of each ppN.
TEST(CudaCli, BenchAndRunBackendCuda) {
  DS_SKIP_WITHOUT_GPU();
  const char* bin = std::getenv("DS_BIN");
  if (!bin) GTEST_SKIP() << "DS_BIN is not set";
  const auto ref = ds::test::load_model_ref("tiny-sym-q4_k_m");
  const std::string dir = ds::test::temp_dir(), out = dir + "/cuda_bench.jsonl";
  for (const std::string mode : {"fast", "precise"}) {
    const std::string cmd = std::string(bin) + " bench --backend cuda -m " + ref.gguf + " -p 64,200 -n 8 -r 2 --json" +
                            (mode == "precise" ? " --precise" : "") + " > " + out + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    std::string line;
    std::vector<nlohmann::json> js;
    while (std::getline(f, line)) js.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(js.size(), 3u);
    for (const auto& j : js) {
      for (const char* k : {"model", "file_bytes", "params", "backend", "test", "tokens_per_s", "min", "max", "runs",
                            "commit", "device", "mode"})
        EXPECT_TRUE(j.contains(k)) << k;
      EXPECT_EQ(j["backend"], "cuda");
      EXPECT_EQ(j["mode"], mode);
      EXPECT_GT(j["tokens_per_s"].get<double>(), 0);
    }
    EXPECT_EQ(js[0]["test"], "pp64");
    EXPECT_EQ(js[1]["test"], "pp200");
    EXPECT_EQ(js[2]["test"], "tg8");
    EXPECT_GT(js[0]["ttft_ms"].get<double>(), 0);
    EXPECT_GT(js[1]["ttft_ms"].get<double>(), 0);
    EXPECT_FALSE(js[2].contains("ttft_ms"));
  }
  const std::string run = std::string(bin) + " run --backend cuda -m " + ref.gguf +
                          " -p 'hello there, this prompt has a few more than sixteen tokens in it for sure' -n 8 "
                          "--temp 0 > /dev/null 2>&1";
  EXPECT_EQ(std::system(run.c_str()), 0) << run;
}

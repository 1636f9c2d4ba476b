// The CPU model backend on the fixture models: prefill bit-identical to the model's forward() and
// batched decode bit-identical to forward() with the reference ops (CpuPath::kReference) per sequence, the batched path within the fixture's tolerance of the Hugging Face
// reference while other sequences share its batches, exact snapshot/restore, and greedy replies
// through the engine identical alone and in a full batch.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "engine/cuda_backend.h"
#include "engine/engine.h"
#include "engine/qwen35_backend.h"
#include "engine/tokenizer_codec.h"
#include "grammar/schema.h"
#include "testutil.h"

namespace ds::engine {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  Qwen35Model model;
  std::vector<int32_t> prompt, generated;
  std::vector<float> ref_decode;  // [generated.size() - 1, V]
};

std::unique_ptr<Fixture> load(const std::string& name) {
  const std::string dir = name.starts_with("tiny-gqa") ? "tiny-gqa" : "tiny-sym";
  const std::string base = test::fixture("models/" + dir + "/" + name);
  auto m = Qwen35Model::load_file(base + ".gguf");
  if (!m.ok()) {
    ADD_FAILURE() << m.error().message;
    return nullptr;
  }
  auto f = std::make_unique<Fixture>(Fixture{std::move(m.value()), {}, {}, {}});
  std::ifstream js(base + ".ref.json");
  auto j = nlohmann::json::parse(js);
  f->prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  f->generated = j["generated"].get<std::vector<int32_t>>();
  auto bytes = test::read_file(base + ".ref.decode.f32");
  f->ref_decode.resize(bytes.size() / 4);
  std::memcpy(f->ref_decode.data(), bytes.data(), bytes.size());
  return f;
}

class Backend : public ::testing::TestWithParam<std::string> {};

TEST_P(Backend, BatchedDecodeBitIdenticalToForward) {
  auto f = load(GetParam());
  ASSERT_TRUE(f);
  const int64_t V = f->model.cfg.n_vocab;
  auto b = Qwen35Backend::create(f->model, 4, 256);
  ASSERT_TRUE(b.ok()) << b.error().message;
  auto& be = *b.value();
  std::vector<SequenceState> ref;
  const std::pair<int, int> spans[4] = {{0, 10}, {5, 70}, {20, 21}, {50, 120}};  // 1 token to 2 chunks
  std::vector<float> l(V), lr(V);
  for (int s = 0; s < 4; s++) {
    auto st = SequenceState::create(f->model.cfg, 256);
    ASSERT_TRUE(st.ok());
    ref.push_back(std::move(st.value()));
    std::span<const int32_t> p(f->prompt.data() + spans[s].first, spans[s].second - spans[s].first);
    ASSERT_TRUE(be.prefill(s, p, l).ok());
    ASSERT_TRUE(forward(f->model, ref[s], p, lr.data(), false).ok());
    ASSERT_EQ(std::memcmp(l.data(), lr.data(), V * 4), 0) << "prefill slot " << s;
  }
  const std::vector<std::vector<int32_t>> steps = {{0, 1, 2, 3}, {2}, {3, 0}, {1, 2, 3}, {0, 1, 2, 3}, {1}};
  int32_t tok = 7;
  for (auto& slots : steps) {
    std::vector<int32_t> toks;
    for (size_t i = 0; i < slots.size(); i++) toks.push_back(tok = (tok * 31 + 11) % static_cast<int32_t>(V));
    std::vector<float> out(slots.size() * V);
    ASSERT_TRUE(be.decode(slots, toks, out).ok());
    for (size_t i = 0; i < slots.size(); i++) {
      ASSERT_TRUE(forward(f->model, ref[slots[i]], std::span(&toks[i], 1), lr.data(), false, {}, CpuPath::kReference).ok());
      EXPECT_EQ(std::memcmp(out.data() + i * V, lr.data(), V * 4), 0) << "slot " << slots[i] << " batch " << slots.size();
    }
  }
}

TEST_P(Backend, BatchedDecodeMatchesReferenceBesideOthers) {
  auto f = load(GetParam());
  ASSERT_TRUE(f);
  const int64_t V = f->model.cfg.n_vocab;
  const int64_t T = static_cast<int64_t>(f->prompt.size());
  auto b = Qwen35Backend::create(f->model, 3, 512);
  ASSERT_TRUE(b.ok());
  auto& be = *b.value();
  std::vector<float> l(V);
  ASSERT_TRUE(be.prefill(0, f->prompt, l).ok());
  ASSERT_TRUE(be.prefill(1, std::span(f->prompt).first(33), l).ok());
  ASSERT_TRUE(be.prefill(2, std::span(f->prompt).subspan(100, 7), l).ok());
  double worst = 0;
  for (size_t i = 0; i + 1 < f->generated.size(); i++) {
    // Slot 0 is teacher-forced with the reference's tokens; the others decode alongside.
    std::vector<int32_t> slots = {1, 0, 2}, toks = {static_cast<int32_t>(i + 3), f->generated[i], 42};
    if (i % 3 == 2) slots.pop_back(), toks.pop_back();
    std::vector<float> out(slots.size() * V);
    ASSERT_TRUE(be.decode(slots, toks, out).ok());
    auto e = test::compare(out.data() + V, f->ref_decode.data() + i * V, V);
    worst = std::max(worst, e.max_abs);
  }
  EXPECT_LT(worst, 2e-3) << GetParam() << ": decode rows vs the HF reference (positions " << T << "+)";
}

TEST_P(Backend, SnapshotRestoreIsExact) {
  auto f = load(GetParam());
  ASSERT_TRUE(f);
  const int64_t V = f->model.cfg.n_vocab;
  auto b = Qwen35Backend::create(f->model, 2, 256);
  ASSERT_TRUE(b.ok());
  auto& be = *b.value();
  std::vector<float> l(V);
  ASSERT_TRUE(be.prefill(0, std::span(f->prompt).first(90), l).ok());
  auto snap = be.save(0);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap.value()->n_tokens(), 90);
  const int32_t toks[3] = {11, 222, 3333 % static_cast<int32_t>(V)};
  std::vector<float> a(3 * V), c(3 * V);
  int32_t s0 = 0, s1 = 1;
  for (int i = 0; i < 3; i++) ASSERT_TRUE(be.decode(std::span(&s0, 1), std::span(&toks[i], 1), std::span(a).subspan(i * V, V)).ok());
  ASSERT_TRUE(be.prefill(1, std::span(f->prompt).first(5), l).ok());  // dirty the target slot first
  ASSERT_TRUE(be.restore(1, *snap.value()).ok());
  for (int i = 0; i < 3; i++) ASSERT_TRUE(be.decode(std::span(&s1, 1), std::span(&toks[i], 1), std::span(c).subspan(i * V, V)).ok());
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Backend, ::testing::Values("tiny-sym-q8_0", "tiny-gqa-q4_k_m"));

TEST(EngineOnModel, GreedyAloneEqualsFullBatch) {
  auto f = load("tiny-sym-q8_0");
  ASSERT_TRUE(f);
  auto tok = tokenizer::Tokenizer::from_gguf(*f->model.file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  TokenizerCodec codec(*tok);
  auto b = Qwen35Backend::create(f->model, 4, 256);
  ASSERT_TRUE(b.ok());
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  cfg.prefill_chunk = 16;
  Engine eng(*b.value(), codec, cfg);
  eng.start();
  auto run = [&](std::vector<int32_t> prompt) {
    GenerationRequest g;
    g.prompt = std::move(prompt);
    g.sampling.temperature = 0;
    g.max_tokens = 16;
    g.ignore_eos = true;
    auto s = eng.submit(std::move(g));
    EXPECT_EQ(s.status, SubmitStatus::Ok);
    return s.handle;
  };
  auto drain = [](RequestHandle& h) {
    std::vector<int32_t> out;
    for (int i = 0; i < 2000; i++) {
      std::vector<Event> evs;
      h.wait(evs, 50ms);
      for (auto& e : evs) {
        for (auto& t : e.tokens) out.push_back(t.id);
        if (e.finish != FinishReason::None) return out;
      }
    }
    ADD_FAILURE() << "timeout";
    return out;
  };
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; i++) prompts.push_back(codec.encode("Request " + std::to_string(i) + ": " + std::string(i * 7, 'x'), false));
  std::vector<std::vector<int32_t>> alone;
  for (auto& p : prompts) alone.push_back(drain(*run(p)));
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (auto& p : prompts) hs.push_back(run(p));
  for (size_t i = 0; i < hs.size(); i++) EXPECT_EQ(drain(*hs[i]), alone[i]) << "prompt " << i;
  EXPECT_GT(eng.stats().batch_size.sum, eng.stats().batch_size.count);  // batches did form
}

// response_format on the real model backends: constrained greedy and sampled requests, four at once beside an
// unconstrained one, give instances of a bounded schema on the CPU backend and, with a GPU, on the CUDA backend
// (its full-row download path, decode_select's full_rows, under the mask); the unconstrained reply equals its lone
// run. Without a GPU the CUDA half is skipped with a message.
void constrained_replies(engine::Backend& be, const TextCodec& codec) {
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  Engine eng(be, codec, cfg);
  eng.start();
  auto g = grammar::compile_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "ok": {"type": "boolean"}, "color": {"enum": ["red", "green"]},
      "n": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 2}},
      "required": ["ok", "color", "n"], "additionalProperties": false})"),
                                   "schema");
  ASSERT_TRUE(std::holds_alternative<grammar::Grammar>(g));
  auto c = std::make_shared<const grammar::Constraint>(std::get<grammar::Grammar>(std::move(g)));
  auto submit = [&](int i, bool constrained) {
    GenerationRequest r;
    r.prompt = codec.encode("Answer " + std::to_string(i) + " as JSON:", false);
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = (uint64_t)i;
    r.max_tokens = 120;
    if (constrained) r.constraint = c;
    auto s = eng.submit(std::move(r));
    EXPECT_EQ(s.status, SubmitStatus::Ok) << s.message;
    return s.handle;
  };
  auto drain = [](RequestHandle& h, std::string& text) {
    for (int i = 0; i < 4000; i++) {
      std::vector<Event> evs;
      h.wait(evs, 50ms);
      for (auto& e : evs) {
        text += e.text;
        if (e.finish != FinishReason::None) return e.finish;
      }
    }
    ADD_FAILURE() << "timeout";
    return FinishReason::None;
  };
  std::string lone;
  drain(*submit(9, false), lone);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 4; i++) hs.push_back(submit(i, true));
  auto free_h = submit(9, false);
  for (int i = 0; i < 4; i++) {
    std::string text;
    EXPECT_EQ(drain(*hs[i], text), FinishReason::Stop) << text;
    auto j = nlohmann::json::parse(text, nullptr, false);
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_EQ(j.size(), 3u) << text;
    EXPECT_TRUE(j["ok"].is_boolean()) << text;
    EXPECT_TRUE(j["color"] == "red" || j["color"] == "green") << text;
    EXPECT_TRUE(j["n"].is_array() && j["n"].size() <= 2) << text;
  }
  std::string text;
  drain(*free_h, text);
  EXPECT_EQ(text, lone) << "an unconstrained reply beside constrained ones";
  EXPECT_GT(eng.stats().full_rows, 0u);
  eng.stop();
}

TEST(EngineOnModel, ConstrainedRepliesOnCpuAndCuda) {
  auto f = load("tiny-gqa-q4_k_m");
  ASSERT_TRUE(f);
  auto tok = tokenizer::Tokenizer::from_gguf(*f->model.file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  TokenizerCodec codec(*tok);
  auto cpu = Qwen35Backend::create(f->model, 6, 256);
  ASSERT_TRUE(cpu.ok());
  constrained_replies(*cpu.value(), codec);
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device: the CPU backend passed, the CUDA half did not run";
  CudaBackendOptions o;
  o.n_slots = 6;
  o.n_ctx = 256;
  auto cuda = make_cuda_backend(f->model, o);
  ASSERT_TRUE(cuda.ok()) << cuda.error().message;
  constrained_replies(**cuda, codec);
}

// The CUDA backend's serving aids (serve11), on the GPU (skipped without one). Every step below is a CUDA graph
// replay of decode_select, so the steps of a backend that warmed up replay the graphs warm_up captured.
std::vector<float> serve_some(engine::Backend& be, const Fixture& f) {
  const int32_t V = be.n_vocab();
  std::vector<float> out;
  std::vector<float> l(V);
  const std::vector<int32_t> p1(f.prompt.begin(), f.prompt.begin() + 9), p3(f.prompt.begin() + 5, f.prompt.begin() + 25);
  EXPECT_TRUE(be.prefill(1, p1, l).ok());
  EXPECT_TRUE(be.prefill(3, p3, l).ok());
  SelectSpec spec;
  spec.k = 4;
  spec.full_rows = {0, 1};
  Selection sel;
  for (int i = 0; i < 4; i++) {
    const std::vector<int32_t> slots = {3, 1}, toks = {f.generated[i], f.generated[i + 1]};
    EXPECT_TRUE(be.decode_select(slots, toks, spec, sel).ok());
    out.insert(out.end(), sel.full.begin(), sel.full.end());
  }
  return out;
}

TEST(CudaBackendServing, WarmUpLeavesSlotsEmptyAndStepsUnchanged) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device";
  auto f = load("tiny-gqa-q4_k_m");
  ASSERT_TRUE(f);
  CudaBackendOptions o;
  o.n_slots = 4;
  o.n_ctx = 64;  // warm-up decodes slot 0 four times: it stays within the context
  auto cold = make_cuda_backend(f->model, o);
  auto warm = make_cuda_backend(f->model, o);
  ASSERT_TRUE(cold.ok() && warm.ok());
  ASSERT_TRUE((*warm)->warm_up().ok());
  const auto a = serve_some(**cold, *f), b = serve_some(**warm, *f);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // Every slot is empty after warm_up: a slot used by it prefills and decodes as on the cold backend.
  std::vector<float> x(4 * (size_t)f->model.cfg.n_vocab), y(x.size());
  const std::vector<int32_t> p(f->prompt.begin(), f->prompt.begin() + 7);
  std::vector<float> l((size_t)f->model.cfg.n_vocab);
  for (auto* be : {cold->get(), warm->get()}) {
    ASSERT_TRUE(be->reset(0).ok());
    ASSERT_TRUE(be->prefill(0, p, l).ok());
    const int32_t s0 = 0;
    auto& dst = be == cold->get() ? x : y;
    for (int i = 0; i < 4; i++)
      ASSERT_TRUE(be->decode(std::span(&s0, 1), std::span(&f->generated[i], 1), std::span(dst).subspan(i * l.size(), l.size())).ok());
  }
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)));
}

// Snapshots go back to the backend's pool when dropped; a later save reuses the buffer (a longer state than the
// first snapshot's: room is rounded up to 256 positions) and restores exactly; also with f16 GDN states and K / V
// caches (st20 / kv19: smaller snapshots, the same exactness). Without a GPU: skipped.
void recycled_snapshot_case(const Fixture& fx, bool half, size_t* snap_bytes) {
  CudaBackendOptions o;
  o.n_slots = 3;
  o.n_ctx = 512;
  o.state_f16 = o.kv_f16 = half;
  auto be = make_cuda_backend(fx.model, o);
  ASSERT_TRUE(be.ok());
  auto& b = **be;
  const size_t V = (size_t)b.n_vocab();
  std::vector<float> l(V);
  ASSERT_TRUE(b.prefill(0, std::vector<int32_t>(fx.prompt.begin(), fx.prompt.begin() + 5), l).ok());
  size_t first_bytes = 0;
  {
    auto s = b.save(0);
    ASSERT_TRUE(s.ok());
    first_bytes = s.value()->bytes();
  }  // dropped: its buffer waits in the pool
  ASSERT_TRUE(b.prefill(1, std::vector<int32_t>(fx.prompt.begin(), fx.prompt.begin() + 30), l).ok());
  auto s = b.save(1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value()->n_tokens(), 30);
  EXPECT_GE(s.value()->bytes(), first_bytes);
  *snap_bytes = s.value()->bytes();
  ASSERT_TRUE(b.restore(2, *s.value()).ok());
  std::vector<float> x(3 * V), y(3 * V);
  for (int32_t slot : {1, 2}) {
    auto& dst = slot == 1 ? x : y;
    for (int i = 0; i < 3; i++)
      ASSERT_TRUE(b.decode(std::span(&slot, 1), std::span(&fx.generated[i], 1), std::span(dst).subspan(i * V, V)).ok());
  }
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)));
}

TEST(CudaBackendServing, RecycledSnapshotRestoresExactly) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device";
  auto f = load("tiny-gqa-q4_k_m");
  ASSERT_TRUE(f);
  size_t b32 = 0, b16 = 0;
  {
    SCOPED_TRACE("f32 states and caches");
    recycled_snapshot_case(*f, false, &b32);
  }
  {
    SCOPED_TRACE("f16 states and caches");
    recycled_snapshot_case(*f, true, &b16);
  }
  EXPECT_LT(b16, b32) << "f16 states and caches: smaller snapshots";
}

// host13: decode_select_begin / decode_select_end give the bits of decode_select (rows, candidates, lse, full rows);
// no other call runs while a step is in flight; a reply-end snapshot keeps its logits row on the device (no
// host copy) equal to last_row's, and the snapshot, saved without a host synchronisation, restores exactly even
// when the saved slot runs on at once. Without a GPU: skipped.
TEST(CudaBackendServing, AsyncStepMatchesDecodeSelectAndSnapshotsKeepTheirRow) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA device";
  auto f = load("tiny-gqa-q4_k_m");
  ASSERT_TRUE(f);
  CudaBackendOptions o;
  o.n_slots = 4;
  o.n_ctx = 128;
  auto sync_be = make_cuda_backend(f->model, o), async_be = make_cuda_backend(f->model, o);
  ASSERT_TRUE(sync_be.ok() && async_be.ok());
  engine::Backend &a = **sync_be, &b = **async_be;
  const size_t V = (size_t)a.n_vocab();
  std::vector<float> l(V);
  const std::vector<int32_t> p1(f->prompt.begin(), f->prompt.begin() + 9), p3(f->prompt.begin() + 5, f->prompt.begin() + 25);
  for (engine::Backend* be : {&a, &b}) {
    ASSERT_TRUE(be->prefill(1, p1, l).ok());
    ASSERT_TRUE(be->prefill(3, p3, l).ok());
  }
  SelectSpec spec;
  spec.k = 8;
  spec.lse = true;
  spec.full_rows = {1};
  Selection sa, sb;
  const std::vector<int32_t> slots = {3, 1};
  for (int i = 0; i < 4; i++) {
    const std::vector<int32_t> toks = {f->generated[i], f->generated[i + 1]};
    ASSERT_TRUE(a.decode_select(slots, toks, spec, sa).ok());
    ASSERT_TRUE(b.decode_select_begin(slots, toks, spec).ok());
    EXPECT_FALSE(b.prefill(0, p1, l).ok()) << "a prefill while the step is in flight must be refused";
    EXPECT_FALSE(b.decode_select_begin(slots, toks, spec).ok());
    ASSERT_TRUE(b.decode_select_end(sb).ok());
    ASSERT_EQ(sa.rows.size(), sb.rows.size());
    for (size_t r = 0; r < sa.rows.size(); r++) {
      EXPECT_EQ(sa.rows[r].argmax, sb.rows[r].argmax);
      EXPECT_EQ(sa.rows[r].max, sb.rows[r].max);
      EXPECT_EQ(sa.rows[r].lse, sb.rows[r].lse);
      ASSERT_EQ(sa.rows[r].top.size(), sb.rows[r].top.size());
      for (size_t j = 0; j < sa.rows[r].top.size(); j++) {
        EXPECT_EQ(sa.rows[r].top[j].token, sb.rows[r].top[j].token);
        EXPECT_EQ(sa.rows[r].top[j].logit, sb.rows[r].top[j].logit);
      }
    }
    ASSERT_EQ(sa.full.size(), V);
    ASSERT_EQ(sb.full.size(), V);
    EXPECT_EQ(0, std::memcmp(sa.full.data(), sb.full.data(), V * sizeof(float))) << "step " << i;
  }
  // The reply-end snapshot of slot 1 (row 1): its logits stay on the device and equal last_row(1).
  std::vector<float> want(V), kept(V), host;
  ASSERT_TRUE(a.last_row(1, want).ok());
  auto snap = b.save_with_row(1, 1, host);
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(host.empty());
  ASSERT_TRUE(snap.value()->has_logits());
  // Slot 1 runs on at once (its copies were only queued): the snapshot must still hold the state it was taken at.
  std::vector<float> x(V), y(V);
  const int32_t s1 = 1, s2 = 2;
  ASSERT_TRUE(b.decode(std::span(&s1, 1), std::span(&f->generated[7], 1), x).ok());
  ASSERT_TRUE(snap.value()->logits(kept).ok());
  EXPECT_EQ(0, std::memcmp(want.data(), kept.data(), V * sizeof(float)));
  ASSERT_TRUE(b.restore(2, *snap.value()).ok());
  ASSERT_TRUE(b.decode(std::span(&s2, 1), std::span(&f->generated[7], 1), y).ok());
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), V * sizeof(float)));
}

}  // namespace
}  // namespace ds::engine

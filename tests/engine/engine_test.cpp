// Scheduler tests on the fake backend: every reply is checked token for token against the same
// prompt computed alone (FakeBackend::logits_for + argmax), so a mixed-up or corrupted state, a
// lost token or a wrong prefix restore fails the test.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "engine/byte_codec.h"
#include "engine/fake_backend.h"
#include "engine/text_stream.h"
#include "engine_rig.h"
#include "sampler/sampler.h"

namespace ds::engine {
namespace {

using namespace std::chrono_literals;

FakeBackendOptions opts(int32_t slots = 4, int32_t ctx = 256) {
  FakeBackendOptions o;
  o.n_vocab = ByteCodec::kVocab;
  o.n_ctx = ctx;
  o.n_slots = slots;
  o.suppressed = {ByteCodec::kImEnd, ByteCodec::kEndOfText};
  return o;
}

std::vector<int32_t> prompt_of(int seed, int len) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; i++) p.push_back(static_cast<int32_t>((seed * 131 + i * 17 + 7) % 250));
  return p;
}

// Greedy tokens of `prompt` run alone.
std::vector<int32_t> reference(const FakeBackend& fb, std::vector<int32_t> hist, int n, const ByteCodec& c) {
  std::vector<float> l(fb.n_vocab());
  std::vector<int32_t> out;
  for (int i = 0; i < n; i++) {
    fb.logits_for(hist, l);
    int32_t t = sampler::argmax(l);
    out.push_back(t);
    if (c.is_eog(t)) break;
    hist.push_back(t);
  }
  return out;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  Event last;
  std::vector<TokenOut> token_info;
};

Result collect(RequestHandle& h, std::chrono::milliseconds limit = 10s) {
  Result r;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<Event> evs;
    h.wait(evs, 50ms);
    for (auto& e : evs) {
      r.text += e.text;
      for (auto& t : e.tokens) {
        r.tokens.push_back(t.id);
        r.token_info.push_back(t);
      }
      if (e.finish != FinishReason::None) {
        r.last = e;
        return r;
      }
    }
  }
  ADD_FAILURE() << "request did not finish in time";
  return r;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  return r;
}

using Rig = test::EngineRig;

TEST(Engine, SingleGreedyMatchesReference) {
  Rig rig(opts());
  auto p = prompt_of(1, 20);
  auto r = collect(*rig.submit(greedy(p, 30)));
  EXPECT_EQ(r.tokens, reference(rig.fb, p, 30, rig.codec));
  EXPECT_EQ(r.last.finish, FinishReason::Length);
  EXPECT_EQ(r.last.n_prompt, 20);
  EXPECT_EQ(r.last.n_generated, 30);
}

TEST(Engine, FullBatchEqualsAloneAndBatchesContinuously) {
  auto o = opts(4);
  o.decode_delay = 200us;
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;  // every prompt computed from scratch
  cfg.prefill_chunk = 8;       // prompts span several chunks
  Rig rig(o, cfg);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  std::vector<std::vector<int32_t>> ps;
  for (int i = 0; i < 12; i++) {  // 12 requests on 4 slots: 8 wait, then join as others leave
    ps.push_back(prompt_of(i + 10, 5 + 3 * i));
    hs.push_back(rig.submit(greedy(ps.back(), 10 + 4 * i)));
  }
  for (int i = 0; i < 12; i++) {
    auto r = collect(*hs[i]);
    EXPECT_EQ(r.tokens, reference(rig.fb, ps[i], 10 + 4 * i, rig.codec)) << "request " << i;
  }
  EXPECT_EQ(rig.fb.max_batch.load(), 4);
  auto st = rig.eng.stats();
  EXPECT_EQ(st.requests_length, 12u);
  EXPECT_GT(st.batch_size.count, 0u);
}

TEST(Engine, WarmsUpTheBackendOnceUnlessTurnedOff) {
  for (bool on : {true, false}) {
    EngineConfig cfg;
    cfg.warm_up = on;
    Rig rig(opts(), cfg);
    auto p = prompt_of(3, 10);
    EXPECT_EQ(collect(*rig.submit(greedy(p, 5))).tokens, reference(rig.fb, p, 5, rig.codec));
    EXPECT_EQ(rig.fb.n_warm_ups.load(), on ? 1 : 0);
  }
}

// A prompt of 150 tokens, then (once its first chunk has started: 60 ms of prefill in all) a burst of three of 40,
// on 4 slots with 8-token chunks and an 8-token budget, 30 tokens generated each. Checks every reply against the
// prompt run alone and returns the decode steps' batch sizes in order.
std::vector<int32_t> burst_batches(bool prefill_first, int64_t prefill_first_max, int32_t seed) {
  auto o = opts(4, 1024);
  o.decode_delay = 200us;
  o.prefill_delay_per_token = 400us;
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  cfg.prefill_chunk = 8;
  cfg.prefill_budget = 8;
  cfg.prefill_first = prefill_first;
  cfg.prefill_first_max = prefill_first_max;
  Rig rig(o, cfg);
  std::vector<std::vector<int32_t>> ps = {prompt_of(seed, 150)};
  std::vector<std::shared_ptr<RequestHandle>> hs = {rig.submit(greedy(ps[0], 30))};
  for (int w = 0; w < 2000 && rig.fb.n_prefill_tokens.load() == 0; w++) std::this_thread::sleep_for(100us);
  EXPECT_GT(rig.fb.n_prefill_tokens.load(), 0) << "the first prompt never started";
  for (int i = 1; i < 4; i++) {
    ps.push_back(prompt_of(seed + i, 40));
    hs.push_back(rig.submit(greedy(ps.back(), 30)));
  }
  for (size_t i = 0; i < hs.size(); i++)
    EXPECT_EQ(collect(*hs[i]).tokens, reference(rig.fb, ps[i], 30, rig.codec))
        << "request " << i << " prefill_first " << prefill_first << " max " << prefill_first_max;
  return rig.fb.batches();
}

// With prefill_first the burst that arrives while the first prompt runs joins it before the first decode step (the
// default bound, 32768 tokens, lets it all through), so every decode step is a full batch; without it the budget lets
// 8 prompt tokens through per step, so the one decoding sequence steps alone meanwhile. Replies equal the prompts run
// alone either way.
TEST(Engine, PrefillFirstFillsTheBatchAfterABurst) {
  if (std::getenv("DS_BURST_JOIN")) GTEST_SKIP() << "DS_BURST_JOIN overrides the mode under test";
  const auto on = burst_batches(true, EngineConfig{}.prefill_first_max, 40);
  ASSERT_GE(on.size(), 2u);
  EXPECT_EQ(on[0], 4) << "the burst's prompts ran after the first one's, before the first decode step";
  EXPECT_EQ(on[1], 4);
  const auto off = burst_batches(false, EngineConfig{}.prefill_first_max, 40);
  ASSERT_GE(off.size(), 2u);
  EXPECT_EQ(off[1], 1) << "8 prompt tokens per step: the burst takes 15 steps";
}

// prefill_first_max bounds the lifted budget: with room for 48 prompt tokens per step, the first prompt's rest and
// the burst of 3 x 40 tokens take three steps with decode steps between them (with the default bound: one step, above).
TEST(Engine, PrefillFirstMaxBoundsTheStall) {
  const auto b = burst_batches(true, 48, 70);
  ASSERT_GE(b.size(), 3u);
  // The first prompt's last 6 tokens leave 42 of the step's 48 for the burst: at most one burst prompt joins the
  // first decode step, and 78 burst tokens remain for the next steps (48 per step), so the second has < 4 too.
  EXPECT_LT(b[0], 4) << "the whole burst ran before the first decode step";
  EXPECT_LT(b[1], 4) << "48 tokens per step: the burst of 120 prompt tokens cannot all run before the second step";
  EXPECT_EQ(*std::max_element(b.begin(), b.end()), 4) << "all four decode together once the burst is in";
}

// Requests that arrive while a burst's prompts run (submitted here from inside the first prefill calls: each call
// brings more) join the burst before the first decode step (EngineConfig::burst_join): one batch of 8 from the first
// step on, and each reply is its prompt run alone. Without burst_join, or without prefill_first, the first step has
// only what had arrived before the first prompt ran.
TEST(Engine, ArrivalsDuringABurstJoinItBeforeTheFirstStep) {
  if (std::getenv("DS_BURST_JOIN")) GTEST_SKIP() << "DS_BURST_JOIN overrides the mode under test";
  for (int mode : {0, 1, 2}) {  // prefill_first + burst_join, prefill_first alone, neither
    const bool first = mode < 2, join = mode == 0;
    auto o = opts(8, 256);
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 8; i++) ps.push_back(prompt_of(60 + i, 12 + i));
    std::vector<std::shared_ptr<RequestHandle>> hs(8);
    std::mutex m;
    EngineConfig cfg;
    cfg.prefix_cache_bytes = 0;
    cfg.prefill_first = first;
    cfg.burst_join = join;
    std::unique_ptr<Rig> rig;
    o.on_prefill = [&](int64_t call) {  // calls 0, 1, 2 bring requests 1-3, 4-5, 6-7: one burst arriving in pieces
      static constexpr int kFrom[] = {1, 4, 6, 8};
      if (call > 2) return;
      std::lock_guard lk(m);
      for (int i = kFrom[call]; i < kFrom[call + 1]; i++) hs[i] = rig->submit(greedy(ps[i], 6));
    };
    rig = std::make_unique<Rig>(o, cfg);
    {
      std::lock_guard lk(m);
      hs[0] = rig->submit(greedy(ps[0], 6));
    }
    for (int w = 0; w < 2000 && rig->fb.n_prefill_calls.load() < 3; w++) std::this_thread::sleep_for(1ms);
    for (int i = 0; i < 8; i++) {
      std::shared_ptr<RequestHandle> h;
      for (int w = 0; w < 2000 && !h; w++) {
        {
          std::lock_guard lk(m);
          h = hs[i];
        }
        if (!h) std::this_thread::sleep_for(1ms);
      }
      ASSERT_TRUE(h) << "request " << i << " was never submitted (mode " << mode << ")";
      EXPECT_EQ(collect(*h).tokens, reference(rig->fb, ps[i], 6, rig->codec)) << "request " << i << " mode " << mode;
    }
    const auto b = rig->fb.batches();
    ASSERT_FALSE(b.empty());
    if (join) {
      EXPECT_EQ(b[0], 8) << "the pieces of the burst joined before the first decode step";
      EXPECT_EQ(b.size(), 5u) << "5 decode steps of 8: every sequence generated its 6 tokens together";
    } else {
      EXPECT_EQ(b[0], 1) << "mode " << mode << ": the first request's step came before the rest were admitted";
    }
  }
}

TEST(Engine, RejectsNegativePrefillFirstMax) {
  EngineConfig cfg;
  cfg.prefill_first_max = -1;
  EXPECT_FALSE(validate(cfg).ok());
}

// prefill_first lifts the budget only while prompts outnumber (or equal) the decoding sequences: a prompt that
// arrives while three sequences decode still runs 8 tokens per step.
TEST(Engine, PrefillFirstKeepsTheBudgetWhileMostDecode) {
  // The late prompt must arrive while the three are decoding with most of their tokens to go, and the
  // measured steps must start after the three's own prompts. Waiting for their first tokens and then
  // submitting left both to timing: under TSan the engine started the first sequence before the other two
  // were submitted, their two prompts then ran together (16 tokens, as prefill_first wants) and the step
  // after them was logged only after the test had read its count, so the 16 fell in the measured range;
  // with the test thread 100 ms late the three had finished and the late prompt ran alone (40). Instead
  // the engine's steps wait: none before the three are submitted, and the first after a batch of three
  // until the late prompt is in (the step count is read there).
  auto o = opts(4, 1024);
  std::mutex m;
  std::condition_variable cv;
  bool three_in = false, held = false, released = false;
  std::atomic<FakeBackend*> fb{nullptr};
  o.on_launch = [&](int64_t) {
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return three_in; });
    FakeBackend* b = fb.load();
    if (released || b->batches().empty() || b->batches().back() != 3) return;
    held = true;
    cv.notify_all();
    cv.wait(lk, [&] { return released; });
  };
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  cfg.prefill_chunk = 8;
  cfg.prefill_budget = 8;
  cfg.prefill_first = true;
  Rig rig(o, cfg);
  fb = &rig.fb;
  std::vector<std::vector<int32_t>> ps;
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 3; i++) {
    ps.push_back(prompt_of(60 + i, 8));
    hs.push_back(rig.submit(greedy(ps.back(), 200)));
  }
  {
    std::lock_guard lk(m);
    three_in = true;
  }
  cv.notify_all();
  size_t steps_before = 0;
  bool was_held = false;
  {
    std::unique_lock lk(m);
    was_held = cv.wait_for(lk, 10s, [&] { return held; });
    steps_before = rig.fb.batches().size();
    ps.push_back(prompt_of(63, 40));
    hs.push_back(rig.submit(greedy(ps.back(), 20)));
    released = true;
  }
  cv.notify_all();
  ASSERT_TRUE(was_held) << "the three never decoded together";
  ASSERT_LT(steps_before, 10u);  // each of the three has at least 190 tokens to go
  for (size_t i = 0; i < hs.size(); i++)
    EXPECT_EQ(collect(*hs[i]).tokens, reference(rig.fb, ps[i], i < 3 ? 200 : 20, rig.codec)) << "request " << i;
  const auto pf = rig.fb.prefill_before_batches();
  int64_t worst = 0;
  for (size_t i = steps_before; i < pf.size(); i++) worst = std::max(worst, pf[i] - pf[i - 1]);
  EXPECT_EQ(pf.back() - pf[steps_before - 1], 40) << "the late prompt ran after the gate";
  EXPECT_EQ(worst, 8) << "the late prompt ran 8 tokens between decode steps";
}

TEST(Engine, CancelFreesSlotAndLeavesOthersIntact) {
  auto o = opts(4);
  o.decode_delay = 500us;
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  Rig rig(o, cfg);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  std::vector<std::vector<int32_t>> ps;
  for (int i = 0; i < 8; i++) {
    ps.push_back(prompt_of(100 + i, 12));
    hs.push_back(rig.submit(greedy(ps.back(), 60)));
  }
  // Cancel the odd ones: two are running (after a few tokens), two still wait for a slot.
  std::vector<Event> tmp;
  hs[1]->wait(tmp, 1s);
  hs[1]->cancel();
  hs[3]->cancel();
  hs[5]->cancel();
  hs[7]->cancel();
  for (int i = 0; i < 8; i++) {
    auto r = collect(*hs[i]);
    if (i % 2) {
      EXPECT_EQ(r.last.finish, FinishReason::Cancelled) << i;
    } else {
      EXPECT_EQ(r.last.finish, FinishReason::Length) << i;
      EXPECT_EQ(r.tokens, reference(rig.fb, ps[i], 60, rig.codec)) << "request " << i;
    }
  }
  std::this_thread::sleep_for(20ms);
  auto st = rig.eng.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.requests_cancelled, 4u);
  // The freed slots serve new requests correctly.
  auto p = prompt_of(999, 9);
  EXPECT_EQ(collect(*rig.submit(greedy(p, 20))).tokens, reference(rig.fb, p, 20, rig.codec));
}

TEST(Engine, EosEndsReplyAndIsNotShown) {
  auto o = opts();
  o.suppressed.clear();
  // Scripted reply: "Hi!" then <|im_end|>.
  o.oracle = [](std::span<const int32_t> h) -> int32_t {
    static const std::vector<int32_t> script = {'H', 'i', '!', ByteCodec::kImEnd};
    size_t k = 0;
    while (k < h.size() && h[h.size() - 1 - k] != 0x7f) k++;  // tokens after the 0x7f marker
    return k < script.size() ? script[k] : -1;
  };
  Rig rig(o);
  auto r = collect(*rig.submit(greedy({'a', 'b', 0x7f}, 50)));
  EXPECT_EQ(r.text, "Hi!");
  EXPECT_EQ(r.last.finish, FinishReason::Stop);
  EXPECT_EQ(r.last.n_generated, 4);  // the EOS counts as a generated token
  // ignore_eos: the EOS is neither shown nor a reason to stop.
  auto g = greedy({'a', 'b', 0x7f}, 6);
  g.ignore_eos = true;
  auto r2 = collect(*rig.submit(g));
  EXPECT_EQ(r2.last.finish, FinishReason::Length);
  EXPECT_EQ(r2.tokens.size(), 6u);
  EXPECT_EQ(r2.text.substr(0, 3), "Hi!");
}

TEST(Engine, StopStringsTruncate) {
  auto o = opts();
  o.oracle = [](std::span<const int32_t> h) -> int32_t {
    static const std::string script = "hello world, and more";
    size_t k = 0;
    while (k < h.size() && h[h.size() - 1 - k] != 0x7f) k++;
    return k < script.size() ? static_cast<unsigned char>(script[k]) : -1;
  };
  Rig rig(o);
  auto g = greedy({0x7f}, 50);
  g.stop = {"xyz", "o w"};
  auto r = collect(*rig.submit(g));
  EXPECT_EQ(r.text, "hell");
  EXPECT_EQ(r.last.finish, FinishReason::Stop);
  EXPECT_EQ(r.last.n_generated, 7);  // "hello w": the stop string's last token ends it
  g.stop = {"and more!"};            // a prefix held back, then released at the end
  g.max_tokens = 21;
  auto r2 = collect(*rig.submit(g));
  EXPECT_EQ(r2.text, "hello world, and more");
  EXPECT_EQ(r2.last.finish, FinishReason::Length);
}

TEST(Engine, ContextFullEndsWithLength) {
  Rig rig(opts(2, 40));
  auto p = prompt_of(5, 30);
  auto r = collect(*rig.submit(greedy(p, 100)));
  // 30 prompt tokens + 10 fed tokens fill the 40 positions; the 11th sampled token is never fed.
  EXPECT_EQ(r.tokens.size(), 11u);
  EXPECT_EQ(r.last.finish, FinishReason::Length);
  EXPECT_EQ(r.tokens, reference(rig.fb, p, 11, rig.codec));
}

// A greedy turn after earlier ones on the same rig: its reply (checked against the prompt run alone, so a wrong
// restore fails) and the prompt tokens the backend prefilled for it (those a snapshot did not provide).
struct Turn {
  Result r;
  int64_t prefilled = 0;
};

Turn run_turn(Rig& rig, GenerationRequest g) {
  const int64_t before = rig.fb.n_prefill_tokens.load();
  const std::vector<int32_t> p = g.prompt;
  const int n = g.max_tokens;
  Turn t{collect(*rig.submit(std::move(g)))};
  t.prefilled = rig.fb.n_prefill_tokens.load() - before;
  EXPECT_EQ(t.r.tokens, reference(rig.fb, p, n, rig.codec));
  return t;
}

TEST(Engine, PrefixReuseSkipsPrefixExactly) {
  Rig rig(opts());
  auto p = prompt_of(7, 40);
  const Turn t1 = run_turn(rig, greedy(p, 12));
  const Result& r1 = t1.r;
  ASSERT_EQ(r1.tokens.size(), 12u);
  EXPECT_EQ(t1.prefilled, 40);

  // Next turn extends the whole conversation: prompt + the 11 fed reply tokens + 5 new ones.
  auto p2 = p;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end() - 1);
  for (int i = 0; i < 5; i++) p2.push_back(200 + i);
  const Turn t2 = run_turn(rig, greedy(p2, 10));
  EXPECT_EQ(t2.prefilled, 5);
  EXPECT_EQ(t2.r.last.n_cached, 51);

  // A turn that rewrites the reply: only the prompt-end snapshot is a whole prefix.
  auto p3 = p;
  for (int i = 0; i < 6; i++) p3.push_back(100 + i);
  const Turn t3 = run_turn(rig, greedy(p3, 10));
  EXPECT_EQ(t3.r.last.n_cached, 40);
  EXPECT_EQ(t3.prefilled, 6);

  // Diverging inside every snapshot: no reuse, whole prompt processed.
  auto p4 = std::vector<int32_t>(p.begin(), p.begin() + 30);
  p4.push_back(249);
  const Turn t4 = run_turn(rig, greedy(p4, 10));
  EXPECT_EQ(t4.r.last.n_cached, 0);
  EXPECT_EQ(t4.prefilled, 31);

  // The same prompt again: served entirely from the cache (stored logits), same reply.
  const Turn t5 = run_turn(rig, greedy(p, 12));
  EXPECT_EQ(t5.prefilled, 0);
  EXPECT_EQ(t5.r.last.n_cached, 40);
  EXPECT_EQ(t5.r.tokens, r1.tokens);
  auto st = rig.eng.stats();
  EXPECT_GE(st.prefix_cache_hits, 3u);
  EXPECT_GT(st.prefix_cache_bytes, 0u);
}

TEST(Engine, SnapshotPointServesARewrittenTurn) {
  Rig rig(opts());
  // Turn 1: conversation (30 tokens) + generation prompt (4 tokens); snapshot asked at 30.
  auto conv = prompt_of(21, 30);
  auto p1 = conv;
  for (int32_t t : {7, 8, 9, 10}) p1.push_back(t);
  auto g1 = greedy(p1, 6);
  g1.snapshot_at = {30};
  run_turn(rig, g1);
  // Turn 2 shares only the conversation: the reply is rendered differently.
  auto p2 = conv;
  for (int32_t t : {11, 12, 13, 14, 15}) p2.push_back(t);
  const Turn t2 = run_turn(rig, greedy(p2, 8));
  EXPECT_EQ(t2.r.last.n_cached, 30);
  EXPECT_EQ(t2.prefilled, 5);
  // A prompt equal to the snapshot point cannot use it (no logits stored there): processed anew.
  const Turn t3 = run_turn(rig, greedy(conv, 4));
  EXPECT_LT(t3.r.last.n_cached, 30);
}

TEST(Engine, PrefixCacheRespectsBudget) {
  EngineConfig cfg;
  cfg.prefix_cache_entries = 3;
  Rig rig(opts(), cfg);
  for (int i = 0; i < 10; i++) collect(*rig.submit(greedy(prompt_of(300 + i, 20), 4)));
  std::this_thread::sleep_for(10ms);
  EXPECT_LE(rig.eng.stats().prefix_cache_entries, 3u);
}

TEST(Engine, SeededSamplingIsReproducible) {
  Rig rig(opts());
  auto make = [&](uint64_t seed) {
    GenerationRequest g;
    g.prompt = prompt_of(11, 25);
    g.sampling.temperature = 1.0f;
    g.sampling.top_p = 0.9f;
    g.sampling.seed = seed;
    g.max_tokens = 25;
    return g;
  };
  auto a = collect(*rig.submit(make(5)));
  auto b = collect(*rig.submit(make(5)));  // second one restores the cached prompt
  auto c = collect(*rig.submit(make(6)));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens, c.tokens);
}

TEST(Engine, LogprobsOfRawLogits) {
  Rig rig(opts());
  auto g = greedy(prompt_of(12, 10), 5);
  g.top_logprobs = 3;
  auto r = collect(*rig.submit(g));
  ASSERT_EQ(r.token_info.size(), 5u);
  std::vector<int32_t> hist = g.prompt;
  std::vector<float> l(rig.fb.n_vocab());
  for (auto& t : r.token_info) {
    rig.fb.logits_for(hist, l);
    EXPECT_NEAR(t.logprob, sampler::token_logprob(l, t.id), 1e-6);
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_EQ(t.top[0].token, t.id);  // greedy: the chosen token is the most likely
    EXPECT_GE(t.top[0].logprob, t.top[1].logprob);
    hist.push_back(t.id);
  }
}

TEST(Engine, RefusesInvalidAndOverCapacity) {
  auto o = opts(1);
  o.decode_delay = 2ms;
  EngineConfig cfg;
  cfg.max_queue = 2;
  Rig rig(o, cfg);
  EXPECT_EQ(rig.eng.submit(greedy({}, 5)).status, SubmitStatus::Invalid);
  EXPECT_EQ(rig.eng.submit(greedy({1, 2, 999}, 5)).status, SubmitStatus::Invalid);
  EXPECT_EQ(rig.eng.submit(greedy(prompt_of(1, 300), 5)).status, SubmitStatus::Invalid);
  EXPECT_EQ(rig.eng.submit(greedy({1}, 0)).status, SubmitStatus::Invalid);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 3; i++) hs.push_back(rig.submit(greedy(prompt_of(i, 5), 50)));  // 1 running + 2 queued
  auto s = rig.eng.submit(greedy({1, 2}, 5));
  EXPECT_EQ(s.status, SubmitStatus::QueueFull);
  EXPECT_NE(s.message.find("capacity"), std::string::npos);
  for (auto& h : hs) EXPECT_EQ(collect(*h).last.finish, FinishReason::Length);
  EXPECT_EQ(rig.eng.submit(greedy({1, 2}, 5)).status, SubmitStatus::Ok);
}

// A model whose arithmetic overflows (NaN logits after the prompt; the CUDA fast prefill's f16 inputs did this to the
// 9B synth, session 26) fails that request with a message that says so and how to avoid it, instead of sampling
// garbage; the other requests run as before, and the bad state is not cached for the next request with that prompt.
TEST(Engine, NonFiniteLogitsFailTheRequestOnly) {
  auto o = opts(2);
  o.nan_token = 249;
  Rig rig(o);
  std::vector<int32_t> bad_prompt = prompt_of(3, 20);  // long enough to be cached (prefix_cache_min_tokens 16)
  bad_prompt[10] = 249;
  auto bad = rig.submit(greedy(bad_prompt, 5));
  auto good = rig.submit(greedy(prompt_of(2, 5), 5));
  const auto b = collect(*bad);
  EXPECT_EQ(b.last.finish, FinishReason::Error);
  EXPECT_NE(b.last.error.find("non-finite"), std::string::npos) << b.last.error;
  EXPECT_NE(b.last.error.find("--precise"), std::string::npos) << b.last.error;
  EXPECT_EQ(collect(*good).last.finish, FinishReason::Length);
  const auto again = collect(*rig.submit(greedy(bad_prompt, 5)));  // computed again, not restored from a cache
  EXPECT_EQ(again.last.finish, FinishReason::Error);
  EXPECT_EQ(collect(*rig.submit(greedy(prompt_of(4, 20), 5))).last.finish, FinishReason::Length);
}

// The same while generating: the model steered to emit the poison token as its 3rd token gives NaN logits from
// then on; the request fails after its first 3 tokens (streamed as usual) with a message that says what happened,
// through the summary path (greedy) and the full-row path (a penalty needs the full row); the other request runs.
TEST(Engine, NonFiniteLogitsWhileGeneratingFailTheRequestOnly) {
  auto o = opts(2);
  o.nan_token = 249;
  o.oracle = [](std::span<const int32_t> h) -> int32_t { return h.size() == 7 ? 249 : -1; };  // 5-token prompts
  Rig rig(o);
  for (float penalty : {0.0f, 0.5f}) {
    auto g = greedy(prompt_of(3, 5), 10);
    g.sampling.presence_penalty = penalty;
    auto bad = rig.submit(g);
    auto good = rig.submit(greedy(prompt_of(2, 20), 10));  // its history never has 7 tokens
    const auto b = collect(*bad);
    EXPECT_EQ(b.last.finish, FinishReason::Error) << "penalty " << penalty;
    EXPECT_NE(b.last.error.find("non-finite"), std::string::npos) << b.last.error;
    EXPECT_NE(b.last.error.find("after 3 generated tokens"), std::string::npos) << b.last.error;
    ASSERT_EQ(b.tokens.size(), 3u) << "penalty " << penalty;
    EXPECT_EQ(b.tokens[2], 249);
    EXPECT_EQ(collect(*good).last.finish, FinishReason::Length);
  }
}

TEST(Engine, StopFailsUnfinishedRequests) {
  auto o = opts(1);
  o.decode_delay = 1ms;
  auto rig = std::make_unique<Rig>(o);
  auto h1 = rig->submit(greedy(prompt_of(1, 5), 200));
  auto h2 = rig->submit(greedy(prompt_of(2, 5), 200));
  std::this_thread::sleep_for(10ms);
  std::thread other([&] { rig->eng.stop(); });  // stop() from two threads at once (signal + main)
  rig->eng.stop();
  other.join();
  EXPECT_EQ(collect(*h1).last.finish, FinishReason::Error);
  EXPECT_EQ(collect(*h2).last.finish, FinishReason::Error);
  EXPECT_EQ(rig->eng.submit(greedy({1}, 1)).status, SubmitStatus::Stopped);
}

// A handle is shared: a client may still cancel after the engine is gone (cleaning up after the server's end).
// The engine's waker then has nothing to wake (before: it locked the destroyed engine's mutex; ASan: use after free).
TEST(Engine, CancelAfterTheEngineIsGoneIsHarmless) {
  std::shared_ptr<RequestHandle> done, queued;
  {
    auto o = opts(1);
    o.decode_delay = 1ms;
    Rig rig(o);
    done = rig.submit(greedy(prompt_of(1, 5), 3));
    EXPECT_EQ(collect(*done).last.finish, FinishReason::Length);
    queued = rig.submit(greedy(prompt_of(2, 5), 200));
  }
  done->cancel();
  queued->cancel();
  EXPECT_TRUE(queued->cancelled());
  EXPECT_EQ(collect(*queued).last.finish, FinishReason::Error);  // "the server is shutting down", as before
}

TEST(TextStream, Utf8AndStops) {
  TextStream ts({"END"});
  EXPECT_EQ(ts.push("a\xE2\x82"), "a");  // incomplete euro sign held
  EXPECT_EQ(ts.push("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(ts.push("xE"), "x");         // "E" may start "END"
  EXPECT_EQ(ts.push("Nd"), "ENd");
  EXPECT_EQ(ts.push("\xFF"), "\xEF\xBF\xBD");  // invalid byte replaced
  EXPECT_EQ(ts.push("qEN"), "q");
  EXPECT_EQ(ts.push("D tail"), "");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.finish(), "");
  TextStream t2;
  EXPECT_EQ(t2.push("\xF0\x9F"), "");
  EXPECT_EQ(t2.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_sanitize("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                 // overlong
}

TEST(ByteCodec, SpecialTokens) {
  ByteCodec c;
  EXPECT_EQ(c.encode("<|im_start|>x<think>", true),
            (std::vector<int32_t>{ByteCodec::kImStart, 'x', ByteCodec::kThink}));
  auto plain = c.encode("<|im_start|>", false);
  EXPECT_EQ(plain.size(), 12u);  // plain text without special parsing
  EXPECT_EQ(c.encode("<think>", false), (std::vector<int32_t>{ByteCodec::kThink}));  // user-defined: always
}

}  // namespace
}  // namespace ds::engine

namespace ds::engine {
namespace {

// Row selection (Backend::decode_select, the candidate path) changes nothing a client sees: the same requests
// (greedy, seeded top-k/top-p sampling, logprobs, penalties) give the same tokens and logprobs, bit for bit,
// with every decode row downloaded whole; and rows are downloaded whole only for samplers that need them.
TEST(Engine, RowSelectionEqualsFullRows) {
  auto requests = [] {
    std::vector<GenerationRequest> rs;
    for (int i = 0; i < 8; i++) {
      GenerationRequest g = greedy(prompt_of(40 + i, 12 + i), 20);
      if (i % 4 == 1) {  // seeded top-k sampling, some with top-p / min-p
        g.sampling.temperature = 0.8f;
        g.sampling.top_k = 8 + i;
        g.sampling.top_p = i % 8 == 1 ? 0.9f : 1.0f;
        g.sampling.min_p = 0.02f;
        g.sampling.seed = 77 + i;
      }
      if (i % 4 == 2) g.top_logprobs = 4;
      if (i == 3) g.sampling.presence_penalty = 0.5f;  // needs the full row
      if (i == 7) {  // top_k 0 at temperature > 0: the whole distribution
        g.sampling.temperature = 1.0f;
        g.sampling.seed = 5;
      }
      rs.push_back(g);
    }
    return rs;
  };
  std::vector<std::vector<TokenOut>> out[2];
  EngineStats st[2];
  for (int select = 0; select < 2; select++) {
    EngineConfig cfg;
    cfg.select_rows = select == 1;
    cfg.prefix_cache_bytes = 0;
    Rig rig(opts(8), cfg);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (auto& r : requests()) hs.push_back(rig.submit(r));
    for (auto& h : hs) out[select].push_back(collect(*h).token_info);
    for (int w = 0; w < 200 && rig.eng.stats().running > 0; w++) std::this_thread::sleep_for(5ms);  // the last step's counters
    st[select] = rig.eng.stats();
  }
  ASSERT_EQ(out[0].size(), out[1].size());
  for (size_t i = 0; i < out[0].size(); i++) {
    ASSERT_EQ(out[0][i].size(), 20u) << "request " << i;
    ASSERT_EQ(out[1][i].size(), out[0][i].size()) << "request " << i;
    for (size_t t = 0; t < out[0][i].size(); t++) {
      const TokenOut &a = out[0][i][t], &b = out[1][i][t];
      EXPECT_EQ(a.id, b.id) << "request " << i << " token " << t;
      EXPECT_EQ(a.logprob, b.logprob) << "request " << i << " token " << t;
      ASSERT_EQ(a.top.size(), b.top.size());
      for (size_t j = 0; j < a.top.size(); j++) {
        EXPECT_EQ(a.top[j].token, b.top[j].token);
        EXPECT_EQ(a.top[j].logprob, b.top[j].logprob);
      }
    }
  }
  // Without selection every decode row comes whole; with it only those of requests 3 and 7 (19 decode rows
  // each: the first token comes from the prefill).
  EXPECT_EQ(st[0].full_rows, st[0].generated_tokens - 8);
  EXPECT_EQ(st[1].full_rows, 2u * 19u);
  EXPECT_GT(st[1].decode_s, 0.0);
  EXPECT_GT(st[1].prefill_tokens, 0u);
}


// ---- host13: the decode step overlapped with the host work of the one before (EngineConfig::async_step) ----

// The FakeBackend's begin only records a step and its end runs it, rejecting any other call in between, so an
// engine that touched a slot (prefill, save, restore, reset) while a step was in flight would fail these tests.
bool async_env_set() { return std::getenv("DS_ASYNC_STEP") != nullptr; }

TEST(EngineAsync, EventsOfAStepGoOutAfterTheNextLaunch) {
  if (async_env_set()) GTEST_SKIP() << "DS_ASYNC_STEP overrides the mode under test";
  for (bool async : {false, true}) {
    auto o = opts();
    std::atomic<Engine*> eng{nullptr};
    std::mutex m;
    std::vector<uint64_t> sent_at_launch;  // tokens counted (sent) when launch k began
    o.on_launch = [&](int64_t) {
      Engine* e = eng.load();
      std::lock_guard lk(m);
      sent_at_launch.push_back(e ? e->stats().generated_tokens : ~0ull);
    };
    EngineConfig cfg;
    cfg.async_step = async;
    Rig rig(o, cfg);
    eng = &rig.eng;
    auto p = prompt_of(3, 10);
    auto r = collect(*rig.submit(greedy(p, 12)));
    EXPECT_EQ(r.tokens, reference(rig.fb, p, 12, rig.codec)) << "async " << async;
    std::lock_guard lk(m);
    ASSERT_EQ(sent_at_launch.size(), 11u) << "async " << async;  // the first token comes from the prompt
    for (size_t k = 0; k < sent_at_launch.size(); k++) {
      // Launch k feeds the (k+1)-th token. In the old order every sampled token was sent before the next launch;
      // with async_step the last one goes out while the step runs.
      EXPECT_EQ(sent_at_launch[k], async ? k : k + 1) << "async " << async << " launch " << k;
    }
  }
}

TEST(EngineAsync, StopInAStepIsNeverFedAgain) {
  if (async_env_set()) GTEST_SKIP() << "DS_ASYNC_STEP overrides the mode under test";
  for (bool async : {false, true}) {
    auto o = opts();
    o.oracle = [](std::span<const int32_t> h) -> int32_t {
      static const std::string script = "hello world, and more";
      size_t k = 0;
      while (k < h.size() && h[h.size() - 1 - k] != 0x7f) k++;
      return k < script.size() ? static_cast<unsigned char>(script[k]) : -1;
    };
    EngineConfig cfg;
    cfg.async_step = async;
    cfg.prefix_cache_bytes = 0;
    Rig rig(o, cfg);
    auto g = greedy({0x7f}, 50);
    g.stop = {"o w"};
    auto other = greedy({0x7f}, 21);  // the whole script beside it
    other.stop = {"zzz"};
    auto h1 = rig.submit(g);
    auto h2 = rig.submit(other);
    auto r1 = collect(*h1), r2 = collect(*h2);
    EXPECT_EQ(r1.text, "hell") << "async " << async;
    EXPECT_EQ(r1.last.n_generated, 7);
    EXPECT_EQ(r2.text, "hello world, and more") << "async " << async;
    EXPECT_EQ(r2.last.finish, FinishReason::Length);
    // The stopped sequence's 7 tokens: 1 from the prompt, 6 from decode steps; no 7th step holds its row.
    const auto b = rig.fb.batches();
    int rows_of_two = 0;
    for (int32_t n : b) rows_of_two += n == 2;
    EXPECT_LE(rows_of_two, 6) << "async " << async;
    int64_t rows = 0;
    for (int32_t n : b) rows += n;
    EXPECT_EQ(rows, 6 + 20) << "async " << async;  // 6 + (21 - 1) decode rows in all
  }
}

TEST(EngineAsync, CancelWhileItsStepRunsFreesTheSlot) {
  if (async_env_set()) GTEST_SKIP() << "DS_ASYNC_STEP overrides the mode under test";
  for (bool async : {false, true}) {
    auto o = opts(4);
    std::mutex m;
    std::shared_ptr<RequestHandle> victim;
    constexpr int64_t kAt = 10;  // cancelled while launch 10 is in flight
    o.on_launch = [&](int64_t call) {
      std::lock_guard lk(m);
      if (call == kAt && victim) victim->cancel();
    };
    EngineConfig cfg;
    cfg.async_step = async;
    cfg.prefix_cache_bytes = 0;
    Rig rig(o, cfg);
    std::vector<std::vector<int32_t>> ps;
    std::vector<std::shared_ptr<RequestHandle>> hs;
    {
      std::lock_guard lk(m);  // the engine cannot reach launch 10 before every handle is known
      for (int i = 0; i < 4; i++) {
        ps.push_back(prompt_of(40 + i, 9));
        hs.push_back(rig.submit(greedy(ps.back(), 40)));
      }
      victim = hs[1];
    }
    for (int i = 0; i < 4; i++) {
      auto r = collect(*hs[i]);
      auto ref = reference(rig.fb, ps[i], 40, rig.codec);
      if (i == 1) {
        EXPECT_EQ(r.last.finish, FinishReason::Cancelled) << "async " << async;
        ASSERT_LE(r.tokens.size(), ref.size());
        EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + r.tokens.size()));
      } else {
        EXPECT_EQ(r.last.finish, FinishReason::Length) << "async " << async << " request " << i;
        EXPECT_EQ(r.tokens, ref) << "async " << async << " request " << i;
      }
    }
    const auto b = rig.fb.batches();
    ASSERT_GT(b.size(), static_cast<size_t>(kAt + 1));
    EXPECT_EQ(b[kAt], 4) << "async " << async;
    EXPECT_EQ(b[kAt + 1], 3) << "async " << async << ": the cancelled row leaves right after its step";
    for (int w = 0; w < 200 && rig.eng.stats().running > 0; w++) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(rig.eng.stats().running, 0);
    EXPECT_EQ(rig.eng.stats().requests_cancelled, 1u);
    auto p = prompt_of(77, 9);  // the freed slot serves a new request correctly
    EXPECT_EQ(collect(*rig.submit(greedy(p, 20))).tokens, reference(rig.fb, p, 20, rig.codec));
  }
}

TEST(EngineAsync, ReplyEndSnapshotKeepsItsLogitsRow) {
  if (async_env_set()) GTEST_SKIP() << "DS_ASYNC_STEP overrides the mode under test";
  for (bool async : {false, true})
    for (bool on_backend : {false, true}) {
      auto o = opts();
      o.snapshot_logits = on_backend;
      EngineConfig cfg;
      cfg.async_step = async;
      Rig rig(o, cfg);
      auto p = prompt_of(8, 40);
      auto other = rig.submit(greedy(prompt_of(9, 30), 25));  // a batch of two: the row index matters
      auto r1 = collect(*rig.submit(greedy(p, 12)));
      collect(*other);
      ASSERT_EQ(r1.tokens.size(), 12u);
      EXPECT_EQ(rig.fb.n_row_snapshots.load(), on_backend ? 2 : 0);
      // The next prompt is exactly what the first request fed: served from the reply-end snapshot and its logits.
      auto p2 = p;
      p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end() - 1);
      const int64_t before = rig.fb.n_prefill_tokens.load();
      auto r2 = collect(*rig.submit(greedy(p2, 10)));
      EXPECT_EQ(rig.fb.n_prefill_tokens.load() - before, 0) << "async " << async << " on_backend " << on_backend;
      EXPECT_EQ(r2.last.n_cached, 51);
      EXPECT_EQ(r2.tokens, reference(rig.fb, p2, 10, rig.codec)) << "async " << async << " on_backend " << on_backend;
    }
}


// The step gap (EngineStats::gap_s): host time from a step's result to the next launch, counted only for steps
// launched right after one ended. 64 sequences decoding together: every step but the first follows one. Also the
// deferred token events (async_step): each reply's tokens and text as the prompt alone gives them.
TEST(EngineStats, StepGapCountsStepsLaunchedAfterAResult) {
  auto o = opts(64, 512);
  o.decode_delay = 500us;  // the device's share of a step
  EngineConfig cfg;
  cfg.prefix_cache_bytes = 0;
  Rig rig(o, cfg);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 64; i++) hs.push_back(rig.submit(greedy(prompt_of(i, 16), 40)));
  for (int i = 0; i < 64; i++) {
    // Most of these rows' events are built after the next launch (on_token's may_defer): the same tokens as alone,
    // and the text of exactly those tokens, in order.
    const Result r = collect(*hs[i]);
    EXPECT_EQ(r.last.finish, FinishReason::Length);
    EXPECT_EQ(r.tokens, reference(rig.fb, prompt_of(i, 16), 40, rig.codec)) << "request " << i;
    std::string bytes;
    for (int32_t t : r.tokens) bytes += rig.codec.is_control(t) ? "" : rig.codec.token_bytes(t);
    EXPECT_EQ(r.text, utf8_sanitize(bytes)) << "request " << i;
  }
  const EngineStats st = rig.eng.stats();
  ASSERT_GE(st.decode_steps, 39u);
  EXPECT_GE(st.gap_steps, 30u);  // the steps of a batch already decoding
  EXPECT_LT(st.gap_steps, st.decode_steps);  // the first step of a burst follows no result
  EXPECT_GT(st.gap_s, 0.0);
  // The gap is host work only: far below the simulated device time of the steps it separates.
  EXPECT_LT(st.gap_s, st.decode_s);
  std::printf("[step gap] %llu steps, %llu after a result: %.1f us per gap (64 rows)\n",
              static_cast<unsigned long long>(st.decode_steps), static_cast<unsigned long long>(st.gap_steps),
              st.gap_s * 1e6 / static_cast<double>(st.gap_steps));
}

}  // namespace
}  // namespace ds::engine

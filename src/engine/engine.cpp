#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <optional>

#include "core/check.h"
#include "core/log.h"
#include "engine/prefix_cache.h"
#include "engine/text_stream.h"
#include "engine/token_trie.h"

namespace ds::engine {

using Clock = std::chrono::steady_clock;

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}

bool RequestHandle::wait(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lk(m_);
  cv_.wait_for(lk, timeout, [&] { return !q_.empty(); });
  if (q_.empty()) return false;
  for (auto& e : q_) out.push_back(std::move(e));
  q_.clear();
  return true;
}

void RequestHandle::cancel() {
  cancel_ = true;
  if (waker_) waker_();
}

void RequestHandle::push(Event e) {
  {
    std::lock_guard lk(m_);
    q_.push_back(std::move(e));
  }
  cv_.notify_all();
}

Status validate(const EngineConfig& c) {
  if (c.max_queue < 0) return err("engine: max_queue must be >= 0, got {}", c.max_queue);
  if (c.prefill_chunk < 1) return err("engine: prefill_chunk must be >= 1, got {}", c.prefill_chunk);
  if (c.prefill_budget < 1) return err("engine: prefill_budget must be >= 1, got {}", c.prefill_budget);
  if (c.prefill_first_max < 0)
    return err("engine: prefill_first_max must be >= 0 (0: no limit), got {}", c.prefill_first_max);
  if (c.prefix_cache_min_tokens < 1)
    return err("engine: prefix_cache_min_tokens must be >= 1, got {}", c.prefix_cache_min_tokens);
  return {};
}

struct Engine::Seq {
  std::shared_ptr<RequestHandle> h;
  GenerationRequest req;
  int32_t slot = -1;
  std::vector<int32_t> fed;  // tokens the slot has processed
  size_t n_prompt_done = 0;
  int32_t n_cached = 0;
  std::unique_ptr<sampler::Sampler> smp;
  std::unique_ptr<grammar::Matcher> matcher;  // the document so far, while the constraint applies
  std::shared_ptr<const grammar::Mask> mask;  // the matcher's mask for the row in flight, made while the step runs
  std::vector<int32_t> generated;
  int32_t pending = -1;  // sampled, shown, not yet fed
  // A decode row's token whose event (text, latency sample) is built after the next step's launch (emit_deferred):
  // a sequence that goes on and has no stop strings or constraint needs no text to know that it goes on.
  struct Deferred {
    TokenOut tok;
    bool first = false;
    double dt = 0;
  };
  std::optional<Deferred> deferred;
  TextStream text;
  Clock::time_point t_submit, t_last;
  bool done = false;
};

// An event on its way to a client, with what it adds to the stats (its token's latency, a finished request).
// The engine queues these (Impl::post) and sends them in flush_post: with async_step after the next decode step
// is launched. Self-contained: the sequence may be gone by then.
struct PostEvent {
  std::shared_ptr<RequestHandle> h;
  Event ev;
  bool token = false, first = false;  // a generated token (ttft if first, else itl = dt)
  double dt = 0;
  FinishReason counted = FinishReason::None;  // the request ended: requests_* counter
};

struct Engine::Impl {
  explicit Impl(const EngineConfig& c) : cache(c.prefix_cache_bytes, c.prefix_cache_entries) {}
  std::mutex m;  // incoming, stopping, wakeups
  std::condition_variable cv;
  std::deque<std::unique_ptr<Seq>> incoming;
  bool stopping = false, started = false;
  uint64_t wakeups = 0;
  std::atomic<int32_t> n_queued{0}, n_active{0};
  std::atomic<uint64_t> next_id{1};

  // Engine thread only.
  std::deque<std::unique_ptr<Seq>> waiting;
  std::vector<std::unique_ptr<Seq>> active;
  std::vector<int32_t> free_slots;
  PrefixCache cache;
  std::vector<float> logits;   // [V]: a prompt's last logits
  std::vector<float> scratch;  // [V]: the row the sampler edits
  std::vector<float> row;      // [V]: a decode row fetched for the prefix cache
  SelectSpec spec;             // what the decode step downloads
  Selection sel;               // and its result
  std::vector<Seq*> inflight;  // the rows of the decode step launched and not yet ended
  std::unique_ptr<const grammar::TokenTrie> trie;  // the vocabulary's (response_format), built with the engine
  std::vector<PostEvent> post; // events not yet sent (flush_post)
  // When the last decode step's result came back (decode_select_end returned), while the next step is not launched:
  // the stretch in between is host time with no step of this engine on the device (EngineStats::gap_s).
  std::optional<Clock::time_point> t_result;
  std::vector<Seq*> deferred;  // the sequences holding a Seq::deferred token, in row order

  mutable std::mutex stats_m;
  EngineStats stats;
  uint64_t log_steps = 0;  // decode_steps at the last phase log line
  EngineStats log_at;      // the phase counters then
};

constexpr uint64_t kLogEvery = 256;  // decode steps between two phase log lines (--log-level debug)

Engine::Engine(Backend& backend, const TextCodec& codec, EngineConfig cfg)
    : backend_(backend), codec_(codec), cfg_(cfg), impl_(std::make_shared<Impl>(cfg)) {
  auto& I = *impl_;
  for (int32_t s = backend_.n_slots() - 1; s >= 0; s--) I.free_slots.push_back(s);
  I.stats.n_slots = backend_.n_slots();
  MemoryInfo mi = backend_.memory();
  I.stats.state_bytes_allocated =
      static_cast<size_t>(backend_.n_slots()) * (mi.fixed_bytes_per_slot + mi.kv_bytes_per_token * backend_.n_ctx());
  I.stats.ttft_s = Histogram({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  I.stats.itl_s = Histogram({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  I.stats.batch_size = Histogram({1, 2, 4, 8, 16, 32, 64, 128, 256});
  if (const char* e = std::getenv("DS_ASYNC_STEP"); e && e[0]) cfg_.async_step = e[0] != '0';
  if (const char* e = std::getenv("DS_BURST_JOIN"); e && e[0]) cfg_.burst_join = e[0] != '0';
  // The vocabulary's trie for response_format, built here: the server constructs the engine once the model has
  // loaded and before it listens. Built on the engine thread at the first constrained request instead, its ~60 ms
  // (Qwen3's vocabulary) stalled every running sequence for that step. Here and not on a background thread that the
  // first constrained request would wait for: startup already waits seconds for the weights, and a trie that exists
  // from the start needs no wait or lock on the engine thread.
  const auto t0 = Clock::now();
  I.trie = make_token_trie(codec_);
  spdlog::info("engine: vocabulary trie for response_format: {} tokens, {} nodes, built in {:.1f} ms", I.trie->n_vocab(),
               I.trie->n_nodes(), std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
}

const grammar::TokenTrie* Engine::vocabulary_trie() const { return impl_->trie.get(); }

Engine::~Engine() {
  stop();
  impl_->cache.clear();  // the snapshots go now, while the backend surely exists (a waker may hold Impl a moment)
}

void Engine::start() {
  std::lock_guard lk(impl_->m);
  if (impl_->started) return;
  impl_->started = true;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lk(impl_->m);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  std::lock_guard lk(stop_m_);  // stop() may be called from several threads
  if (thread_.joinable()) thread_.join();
}

Submitted Engine::submit(GenerationRequest r) {
  auto& I = *impl_;
  Submitted out;
  if (r.prompt.empty()) return {SubmitStatus::Invalid, "the prompt is empty", nullptr};
  if (r.prompt.size() > static_cast<size_t>(backend_.n_ctx()))
    return {SubmitStatus::Invalid,
            fmt::format("the prompt has {} tokens; the context holds {}", r.prompt.size(), backend_.n_ctx()), nullptr};
  for (int32_t t : r.prompt)
    if (t < 0 || t >= backend_.n_vocab())
      return {SubmitStatus::Invalid, fmt::format("token id {} is outside the vocabulary [0, {})", t, backend_.n_vocab()),
              nullptr};
  if (r.max_tokens < 1) return {SubmitStatus::Invalid, "max_tokens must be at least 1", nullptr};
  auto s = std::make_unique<Seq>();
  s->h = std::make_shared<RequestHandle>(I.next_id++);
  s->smp = std::make_unique<sampler::Sampler>(r.sampling);
  if (r.constraint && r.constraint_after < 0) s->matcher = std::make_unique<grammar::Matcher>(r.constraint->grammar());
  s->text = TextStream(r.stop);
  s->req = std::move(r);
  s->t_submit = Clock::now();
  // A client may cancel after the engine is gone (its handle is shared): the waker then finds no Impl to wake.
  std::weak_ptr<Impl> wp = impl_;
  s->h->set_waker([wp] {
    const std::shared_ptr<Impl> ip = wp.lock();
    if (!ip) return;
    {
      std::lock_guard lk(ip->m);
      ip->wakeups++;
    }
    ip->cv.notify_all();
  });
  {
    std::lock_guard lk(I.m);
    if (!I.started || I.stopping) return {SubmitStatus::Stopped, "the server is shutting down", nullptr};
    const int32_t capacity = backend_.n_slots() + cfg_.max_queue;
    if (I.n_queued.load() + I.n_active.load() >= capacity)
      return {SubmitStatus::QueueFull,
              fmt::format("the server is at capacity ({} running, {} queued); retry later", I.n_active.load(),
                          I.n_queued.load()),
              nullptr};
    I.n_queued++;
    out.handle = s->h;
    I.incoming.push_back(std::move(s));
  }
  I.cv.notify_all();
  return out;
}

EngineStats Engine::stats() const {
  std::lock_guard lk(impl_->stats_m);
  return impl_->stats;
}

// ---- engine thread ----

void Engine::loop() {
  auto& I = *impl_;
  const int32_t V = backend_.n_vocab();
  const MemoryInfo mi = backend_.memory();
  I.scratch.resize(V);

  auto observe = [&](auto fn) {
    std::lock_guard lk(I.stats_m);
    fn(I.stats);
  };

  auto release = [&](Seq& s) {
    if (s.slot >= 0) {
      I.free_slots.push_back(s.slot);
      s.slot = -1;
      I.n_active--;
    }
    s.done = true;
  };

  // Where the logits after a sequence's fed tokens are: a host row, or row `row` of the last decode step.
  struct LogitsAt {
    std::span<const float> host;
    int32_t row = -1;
  };

  // Sends the queued events, after counting what they add to the stats (one lock for all of them).
  auto flush_post = [&] {
    if (I.post.empty()) return;
    observe([&](EngineStats& st) {  // before the events, so a client that saw one sees its counts
      for (const PostEvent& p : I.post) {
        if (p.token) {
          (p.first ? st.ttft_s : st.itl_s).observe(p.dt);
          st.generated_tokens++;
        }
        if (p.counted == FinishReason::Stop) st.requests_stop++;
        if (p.counted == FinishReason::Length) st.requests_length++;
        if (p.counted == FinishReason::Cancelled) st.requests_cancelled++;
        if (p.counted == FinishReason::Error) st.requests_error++;
      }
    });
    for (PostEvent& p : I.post) p.h->push(std::move(p.ev));
    I.post.clear();
  };

  // The event of s's token `tok` (first: its first; dt: its latency sample); with_text: its bytes go through s's text
  // stream (not for an end-of-generation token that stops the reply).
  auto token_event = [&](Seq& s, TokenOut tok, bool first, double dt, bool with_text) {
    PostEvent p;
    if (with_text && !codec_.is_control(tok.id)) p.ev.text = s.text.push(codec_.token_bytes(tok.id));
    p.ev.tokens.push_back(std::move(tok));
    p.token = true;
    p.first = first;
    p.dt = dt;
    p.h = s.h;
    return p;
  };
  // Builds and queues the event of s's deferred token (its text after the text before it). finish() calls this
  // first, so a client sees its tokens in order.
  auto emit_deferred = [&](Seq& s) {
    if (!s.deferred) return;
    Seq::Deferred d = std::move(*s.deferred);
    s.deferred.reset();
    I.post.push_back(token_event(s, std::move(d.tok), d.first, d.dt, true));
  };
  // The deferred events of the rows of the step just launched, in row order (after the launch: host work that the
  // device no longer waits for).
  auto emit_all_deferred = [&] {
    for (Seq* s : I.deferred) emit_deferred(*s);
    I.deferred.clear();
  };

  // Ends a sequence: final event with usage (queued: flush_post); a normally finished one leaves its state in the
  // prefix cache (the tokens it fed and the logits after the last of them, `at`: a decode row stays with the
  // backend, which keeps it with the snapshot where it can). The slot is free on return: the snapshot is taken
  // (or ordered on the backend's stream) before any later use of the slot.
  auto finish = [&](Seq& s, FinishReason why, PostEvent p, const LogitsAt& at, std::string error = {}) {
    if (s.deferred) {  // its token's event first; s leaves the list (it is swept before the list is emptied)
      emit_deferred(s);
      std::erase(I.deferred, &s);
    }
    Event& ev = p.ev;
    ev.finish = why;
    ev.error = std::move(error);
    ev.n_prompt = static_cast<int32_t>(s.req.prompt.size());
    ev.n_cached = s.n_cached;
    ev.n_generated = static_cast<int32_t>(s.generated.size());
    if ((why == FinishReason::Stop || why == FinishReason::Length) && I.cache.enabled() && s.slot >= 0 &&
        (!at.host.empty() || at.row >= 0) && s.fed.size() >= static_cast<size_t>(cfg_.prefix_cache_min_tokens) &&
        !I.cache.touch(s.fed, true)) {
      if (!at.host.empty()) {
        std::vector<float> logits(at.host.begin(), at.host.end());
        auto snap = backend_.save(s.slot);
        if (snap.ok()) I.cache.insert(s.fed, std::move(snap.value()), std::move(logits));
      } else {
        std::vector<float> logits;  // stays empty when the backend keeps them with the snapshot
        auto snap = backend_.save_with_row(s.slot, at.row, logits);
        if (snap.ok()) I.cache.insert(s.fed, std::move(snap.value()), std::move(logits));
      }
    }
    release(s);
    p.h = s.h;
    p.counted = why;
    I.post.push_back(std::move(p));
  };

  auto fail = [&](Seq& s, const std::string& msg) {
    spdlog::warn("engine: request {}: {}", s.h->id(), msg);
    if (s.slot >= 0) (void)backend_.reset(s.slot);
    finish(s, FinishReason::Error, PostEvent{}, LogitsAt{}, msg);
  };

  // Takes `tok` (sampled from the logits after s.fed, which `at` locates): decides at once whether the sequence
  // ends (so a sequence that stops here is never fed again) and queues its event. may_defer (a decode row with
  // async_step): a sequence that goes on, with no stop strings and no constraint, gets its event built after the
  // next launch (emit_deferred): per row the text, the event and its allocations were most of the host time between
  // two steps at 64 rows (gap_s).
  auto on_token = [&](Seq& s, TokenOut tok, const LogitsAt& at, bool may_defer = false) {
    const int32_t t = tok.id;
    s.generated.push_back(t);
    if (s.matcher && !codec_.is_eog(t) && !s.matcher->advance(codec_.token_bytes(t)))
      return fail(s, "response_format: a sampled token does not continue the document");  // a masking bug
    if (!s.matcher && s.req.constraint && t == s.req.constraint_after)
      s.matcher = std::make_unique<grammar::Matcher>(s.req.constraint->grammar());
    const auto now = Clock::now();
    const bool first = s.generated.size() == 1;
    const double dt = std::chrono::duration<double>(now - (first ? s.t_submit : s.t_last)).count();
    s.t_last = now;
    const bool eog_stop = !s.req.ignore_eos && codec_.is_eog(t);
    const bool at_length = s.generated.size() >= static_cast<size_t>(s.req.max_tokens) ||
                           s.fed.size() + 1 > static_cast<size_t>(backend_.n_ctx());
    // Without stop strings the text cannot end the reply, so a sequence that goes on needs no text now.
    if (may_defer && cfg_.async_step && !s.matcher && !s.req.constraint && s.req.stop.empty() && !eog_stop &&
        !at_length) {
      s.pending = t;
      s.deferred = Seq::Deferred{std::move(tok), first, dt};
      I.deferred.push_back(&s);
      return;
    }
    PostEvent p = token_event(s, std::move(tok), first, dt, !eog_stop);
    const FinishReason why = eog_stop || s.text.stopped() ? FinishReason::Stop
                             : at_length                 ? FinishReason::Length
                                                         : FinishReason::None;
    if (why != FinishReason::None) {
      p.ev.text += s.text.finish();
      finish(s, why, std::move(p), at);
    } else {
      s.pending = t;
      I.post.push_back(std::move(p));
    }
  };

  // The mask of s's matcher state.
  auto mask_of = [&](const Seq& s) { return s.req.constraint->mask(*I.trie, *s.matcher); };
  // Samples from `raw` (the logits after s.fed, a full row).
  auto on_logits = [&](Seq& s, std::span<const float> raw) {
    std::copy(raw.begin(), raw.end(), I.scratch.begin());
    if (s.matcher) {  // response_format: what cannot continue the document is out
      const auto mask = s.mask ? std::move(s.mask) : mask_of(s);
      s.mask.reset();
      const bool any = grammar::apply_mask(*mask, I.trie->n_vocab(), I.scratch);  // a model may pad its vocabulary
      if (!any) return fail(s, "response_format: no token of the vocabulary can continue the document");
    }
    TokenOut tok{s.smp->sample(I.scratch, s.generated), 0, {}};
    if (s.req.top_logprobs >= 0) {
      tok.logprob = sampler::token_logprob(raw, tok.id);
      tok.top = sampler::top_logprobs(raw, s.req.top_logprobs);
    }
    on_token(s, std::move(tok), LogitsAt{raw, -1});
  };

  // Logits holding NaN / inf (a model whose arithmetic overflowed) after the prompt (in_prompt) or a generated token:
  // the request fails with what it has streamed so far, rather than sampling garbage (and a prompt's state is not
  // cached). Returns whether it failed.
  auto failed_nonfinite = [&](Seq& s, int64_t n_bad, bool in_prompt) {
    if (n_bad == 0) return false;
    const std::string where = in_prompt ? fmt::format("this prompt ({} tokens)", s.req.prompt.size())
                                        : fmt::format("{} generated tokens", s.generated.size());
    fail(s, fmt::format("the model's logits after {} hold {} non-finite values (NaN or inf): its arithmetic "
                        "overflowed{}",
                        where, n_bad, in_prompt ? "; with the CUDA backend, --precise runs the prompt in fp32" : ""));
    return true;
  };

  // Samples from the summary of row `row` of the last decode step (the candidate path: same token and
  // logprobs as on_logits on the full row).
  auto on_summary = [&](Seq& s, const sampler::RowSummary& sum, int32_t row) {  // a decode row (may defer)
    TokenOut tok{s.smp->sample_candidates(sum), 0, {}};
    if (s.req.top_logprobs >= 0) {
      float logit = sum.max;
      for (const sampler::Candidate& c : sum.top)
        if (c.token == tok.id) logit = c.logit;
      tok.logprob = sampler::token_logprob(sum, logit);
      tok.top = sampler::top_logprobs(sum, s.req.top_logprobs);
    }
    on_token(s, std::move(tok), LogitsAt{{}, row}, true);
  };

  // Puts a newly admitted sequence in its slot: the longest cached prefix, or empty.
  auto start_seq = [&](Seq& s) {
    const auto& prompt = s.req.prompt;
    const PrefixCache::Entry* e = I.cache.enabled() ? I.cache.lookup(prompt) : nullptr;
    if (e) {
      Status st = backend_.restore(s.slot, *e->snap);
      if (st.ok()) {
        s.fed = e->tokens;
        s.n_prompt_done = e->tokens.size();
        s.n_cached = static_cast<int32_t>(e->tokens.size());
        observe([&](EngineStats& x) {
          x.prefix_cache_hits++;
          x.prompt_tokens += prompt.size();
          x.cached_prompt_tokens += s.n_cached;
        });
        if (s.n_prompt_done == prompt.size()) {
          std::vector<float> raw = e->logits;  // copy: on_logits may insert into the cache
          if (raw.empty()) {                   // kept with the snapshot (a reply-end snapshot on the device)
            raw.resize(V);
            Status ls = e->snap->logits(raw);
            if (!ls.ok()) {
              fail(s, ls.error().message);
              return;
            }
          }
          on_logits(s, raw);
        }
        return;
      }
      spdlog::warn("engine: prefix restore failed ({}); processing the whole prompt", st.error().message);
    }
    observe([&](EngineStats& x) {
      x.prefix_cache_misses++;
      x.prompt_tokens += prompt.size();
    });
    Status st = backend_.reset(s.slot);
    if (!st.ok()) fail(s, st.error().message);
  };

  auto sweep = [&] { std::erase_if(I.active, [](const std::unique_ptr<Seq>& s) { return s->done; }); };

  using Secs = std::chrono::duration<double>;
  // Waits for the decode step in flight and samples its rows (their events are queued; finished sequences are
  // released). Adds the wait to t_decode and the sampling to t_sample.
  auto end_step = [&](double& t_decode, double& t_sample) {
    if (I.inflight.empty()) return;
    std::vector<Seq*> batch = std::move(I.inflight);
    I.inflight.clear();
    const auto t0 = Clock::now();
    Status st = backend_.decode_select_end(I.sel);
    const auto t1 = Clock::now();
    t_decode += Secs(t1 - t0).count();
    if (st.ok()) I.t_result = t1;
    if (!st.ok()) {
      for (Seq* s : batch) fail(*s, st.error().message);
    } else {
      observe([&](EngineStats& x) {
        x.decode_steps++;
        x.batch_size.observe(static_cast<double>(batch.size()));
      });
      const SelectSpec& spec = I.spec;
      size_t next_full = 0;
      for (size_t i = 0; i < batch.size(); i++) {
        Seq& s = *batch[i];
        s.fed.push_back(s.pending);
        s.pending = -1;
        const bool full = next_full < spec.full_rows.size() && spec.full_rows[next_full] == static_cast<int32_t>(i);
        if (full) next_full++;
        if (failed_nonfinite(s, I.sel.rows[i].nonfinite, false)) continue;  // every row is summarized, full ones too
        if (full) {
          on_logits(s, std::span<const float>(I.sel.full.data() + (next_full - 1) * V, V));
        } else {
          on_summary(s, I.sel.rows[i], static_cast<int32_t>(i));
        }
      }
    }
    t_sample += Secs(Clock::now() - t1).count();
  };
  // flush_post, timed as sampling.
  auto flush_timed = [&](double& t_sample) {
    if (I.post.empty()) return;
    const auto t0 = Clock::now();
    flush_post();
    t_sample += Secs(Clock::now() - t0).count();
  };

  if (cfg_.warm_up) {
    Status st = backend_.warm_up();
    if (!st.ok()) spdlog::warn("engine: backend warm-up failed ({}); serving without it", st.error().message);
  }

  while (true) {
    {
      std::unique_lock lk(I.m);
      uint64_t seen = I.wakeups;
      I.cv.wait(lk, [&] {
        return I.stopping || !I.incoming.empty() || !I.waiting.empty() || !I.active.empty() || I.wakeups != seen;
      });
      if (I.stopping) break;
      for (auto& s : I.incoming) I.waiting.push_back(std::move(s));
      I.incoming.clear();
    }
    const auto t_step = Clock::now();
    double t_prefill = 0, t_decode = 0, t_sample = 0, t_gap = -1;  // t_gap: this iteration's, if it had one
    uint64_t n_prefill_calls = 0, n_prefill_tokens = 0, n_full = 0;
    const uint64_t steps_before = I.stats.decode_steps;  // engine thread: the only writer

    // The step launched by the last iteration (async_step): its rows are sampled before anything else, so the
    // scheduling below sees what it saw before host13 (finished sequences gone, the rest with a pending token).
    end_step(t_decode, t_sample);

    // Cancelled requests leave first, so their slots serve this very step.
    for (auto it = I.waiting.begin(); it != I.waiting.end();) {
      if ((*it)->h->cancelled()) {
        Event ev;
        ev.finish = FinishReason::Cancelled;
        ev.n_prompt = static_cast<int32_t>((*it)->req.prompt.size());
        I.n_queued--;
        observe([](EngineStats& st) { st.requests_cancelled++; });
        (*it)->h->push(std::move(ev));
        it = I.waiting.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& s : I.active)
      if (s->h->cancelled()) finish(*s, FinishReason::Cancelled, PostEvent{}, LogitsAt{});
    sweep();

    // Admission and prompts, in rounds: with prefill_first, requests that arrived while a burst's prompts ran join
    // it (another round) before the decode step, so a burst decodes as one batch, not as the few rows admitted first
    // and the rest a step later (a step of a few rows costs nearly as much as a full one; with 64 clients sending at
    // once, the first admission sees only some of them). The burst's prompt tokens stay bounded by prefill_first_max
    // over all rounds (`used`).
    int64_t used = 0;
    bool burst = false;  // the last round ran its prompts under prefill_first's budget
    for (int round = 0;; round++) {
      if (round > 0) {
        if (!burst || !cfg_.burst_join || I.free_slots.empty()) break;
        std::lock_guard lk(I.m);
        if (I.incoming.empty()) break;
        for (auto& s : I.incoming) I.waiting.push_back(std::move(s));
        I.incoming.clear();
      }
      // Admission: FIFO while slots are free. Queued events go first: restores and prompts keep this thread busy.
      if (!I.free_slots.empty() && !I.waiting.empty()) flush_timed(t_sample);
      while (!I.free_slots.empty() && !I.waiting.empty()) {
        std::unique_ptr<Seq> s = std::move(I.waiting.front());
        I.waiting.pop_front();
        I.n_queued--;
        s->slot = I.free_slots.back();
        I.free_slots.pop_back();
        I.n_active++;
        start_seq(*s);
        I.active.push_back(std::move(s));
      }
      sweep();

      // Prompt chunks, oldest sequence first, until the step's token budget is spent.
      const auto t_prefill0 = Clock::now();
      int64_t budget = cfg_.prefill_budget;
      burst = false;
      if (cfg_.prefill_first) {
        size_t n_prompt = 0, n_decode = 0;
        for (auto& s : I.active) {
          if (s->done) continue;
          if (s->n_prompt_done < s->req.prompt.size()) n_prompt++;
          else if (s->pending >= 0) n_decode++;
        }
        if (n_prompt > 0 && n_prompt >= n_decode) {
          budget = cfg_.prefill_first_max > 0 ? std::max<int64_t>(budget, cfg_.prefill_first_max)
                                               : std::numeric_limits<int64_t>::max();
          burst = true;
        }
      }
      for (auto& sp : I.active) {
        Seq& s = *sp;
        const auto& prompt = s.req.prompt;
        while (!s.done && s.n_prompt_done < prompt.size() && used < budget) {
          const size_t begin = s.n_prompt_done;
          size_t end = std::min(prompt.size(), (begin / cfg_.prefill_chunk + 1) * cfg_.prefill_chunk);
          for (int32_t b : s.req.snapshot_at)  // requested snapshot points end a chunk too
            if (b > 0 && static_cast<size_t>(b) > begin && static_cast<size_t>(b) < end) end = b;
          const bool last = end == prompt.size();
          if (I.logits.size() < static_cast<size_t>(V)) I.logits.resize(V);
          std::span<float> out = last ? std::span<float>(I.logits.data(), V) : std::span<float>();
          flush_timed(t_sample);
          Status st = backend_.prefill(s.slot, std::span(prompt).subspan(begin, end - begin), out);
          used += static_cast<int64_t>(end - begin);
          n_prefill_calls++;
          n_prefill_tokens += end - begin;
          if (!st.ok()) {
            fail(s, st.error().message);
            break;
          }
          s.fed.insert(s.fed.end(), prompt.begin() + begin, prompt.begin() + end);
          s.n_prompt_done = end;
          const auto& snaps = s.req.snapshot_at;
          const bool snap_here = std::find(snaps.begin(), snaps.end(), static_cast<int32_t>(end)) != snaps.end();
          if (!last && snap_here && I.cache.enabled() && end >= static_cast<size_t>(cfg_.prefix_cache_min_tokens) &&
              !I.cache.touch(s.fed, false)) {
            auto snap = backend_.save(s.slot);
            if (snap.ok()) I.cache.insert(s.fed, std::move(snap.value()), {});  // no logits: a prefix only
          }
          if (last) {
            if (failed_nonfinite(s, std::count_if(out.begin(), out.end(), [](float v) { return !std::isfinite(v); }),
                                 true))
              break;
            if (I.cache.enabled() && prompt.size() >= static_cast<size_t>(cfg_.prefix_cache_min_tokens) &&
                !I.cache.touch(prompt, true)) {
              auto snap = backend_.save(s.slot);
              if (snap.ok())
                I.cache.insert(prompt, std::move(snap.value()), std::vector<float>(out.begin(), out.end()));
            }
            on_logits(s, out);
          }
        }
        if (used >= budget) break;
      }
      sweep();
      t_prefill += std::chrono::duration<double>(Clock::now() - t_prefill0).count();
      if (used >= budget) break;
    }

    // One batched decode step for every sequence with a token to feed.
    std::vector<Seq*> batch;
    std::vector<int32_t> slots, toks;
    for (auto& s : I.active) {
      if (s->pending < 0) continue;
      batch.push_back(s.get());
      slots.push_back(s->slot);
      toks.push_back(s->pending);
    }
    if (!batch.empty()) {
      // Per row: the argmax alone, the k best candidates, or the full row (sampler::Sampler::candidates_needed;
      // top_logprobs come from the candidates too when there are enough of them).
      SelectSpec& spec = I.spec;
      spec.k = 0;
      spec.lse = false;
      spec.full_rows.clear();
      for (size_t i = 0; i < batch.size(); i++) {
        const Seq& s = *batch[i];
        const int32_t need = s.matcher ? -1 : s.smp->candidates_needed(kMaxCandidates);  // a mask needs the row
        if (!cfg_.select_rows || need < 0 || s.req.top_logprobs > kMaxCandidates) {
          spec.full_rows.push_back(static_cast<int32_t>(i));
          continue;
        }
        spec.k = std::max({spec.k, need, s.req.top_logprobs});
        if (s.req.top_logprobs >= 0) spec.lse = true;
      }
      n_full = spec.full_rows.size();
      if (!cfg_.async_step) flush_timed(t_sample);  // the old order: every event out before the step
      const auto t0 = Clock::now();
      Status st = backend_.decode_select_begin(slots, toks, spec);
      const auto t_launched = Clock::now();
      t_decode += Secs(t_launched - t0).count();
      // (a step after prompts ran is not counted: its wait is the prompts', which prefill_s has)
      if (st.ok() && I.t_result && n_prefill_calls == 0) t_gap = Secs(t_launched - *I.t_result).count();
      I.t_result.reset();
      if (!st.ok()) {
        for (Seq* s : batch) fail(*s, st.error().message);
      } else {
        I.inflight = batch;
        if (!cfg_.async_step) end_step(t_decode, t_sample);
        // response_format: the masks of the constrained rows in flight (their matchers already hold the token
        // fed now) are walked while the device runs the step, not after it (a new state inside a string walks
        // most of the vocabulary's trie: milliseconds); sampling at end_step then only applies them.
        for (Seq* s : I.inflight) {
          if (!s->matcher) continue;
          const auto t1 = Clock::now();
          s->mask = mask_of(*s);
          t_sample += Secs(Clock::now() - t1).count();
        }
      }
    }
    {  // the deferred events of the rows just sampled (with async_step, while the launched step runs)
      const auto t1 = Clock::now();
      emit_all_deferred();
      t_sample += Secs(Clock::now() - t1).count();
    }
    // No step launched after a result in this iteration: not a gap between two steps (without async_step the result
    // of the step just launched came in above, and the gap runs to the next iteration's launch).
    if (batch.empty()) I.t_result.reset();
    // With async_step the step runs while this thread sends the events of the one before.
    flush_timed(t_sample);
    sweep();

    observe([&](EngineStats& x) {
      x.running = static_cast<int32_t>(I.active.size());
      x.waiting = I.n_queued.load();
      size_t used = 0;
      for (auto& s : I.active) used += mi.fixed_bytes_per_slot + mi.kv_bytes_per_token * s->fed.size();
      x.state_bytes_in_use = used;
      x.prefix_cache_bytes = I.cache.bytes();
      x.prefix_cache_entries = I.cache.size();
      const double total = std::chrono::duration<double>(Clock::now() - t_step).count();
      x.prefill_s += t_prefill;
      x.decode_s += t_decode;
      x.sample_s += t_sample;
      x.other_s += std::max(0.0, total - t_prefill - t_decode - t_sample);
      if (t_gap >= 0) {
        x.gap_s += t_gap;
        x.gap_steps++;
      }
      x.prefill_calls += n_prefill_calls;
      x.prefill_tokens += n_prefill_tokens;
      x.full_rows += n_full;
      if (x.decode_steps != steps_before && x.decode_steps % kLogEvery == 0) {
        const EngineStats& a = x;  // the phase means since the last such line
        const double n = static_cast<double>(a.decode_steps - I.log_steps);
        spdlog::debug(
            "engine: last {} decode steps: per step {:.2f} ms prefill ({:.1f} tokens), {:.2f} ms decode, {:.2f} ms "
            "sampling, {:.2f} ms other; {:.1f} rows per step, {:.2f} full rows; {:.3f} ms from a step's result to the "
            "next launch",
            a.decode_steps - I.log_steps, (a.prefill_s - I.log_at.prefill_s) * 1e3 / n,
            (a.prefill_tokens - I.log_at.prefill_tokens) / n, (a.decode_s - I.log_at.decode_s) * 1e3 / n,
            (a.sample_s - I.log_at.sample_s) * 1e3 / n, (a.other_s - I.log_at.other_s) * 1e3 / n,
            (a.batch_size.sum - I.log_at.batch_size.sum) / n, (a.full_rows - I.log_at.full_rows) / n,
            a.gap_steps > I.log_at.gap_steps
                ? (a.gap_s - I.log_at.gap_s) * 1e3 / static_cast<double>(a.gap_steps - I.log_at.gap_steps)
                : 0.0);
        I.log_steps = a.decode_steps;
        I.log_at.prefill_s = a.prefill_s;
        I.log_at.decode_s = a.decode_s;
        I.log_at.sample_s = a.sample_s;
        I.log_at.other_s = a.other_s;
        I.log_at.prefill_tokens = a.prefill_tokens;
        I.log_at.full_rows = a.full_rows;
        I.log_at.batch_size.sum = a.batch_size.sum;
        I.log_at.gap_s = a.gap_s;
        I.log_at.gap_steps = a.gap_steps;
      }
    });
  }

  // Shutdown: the step in flight ends (its tokens are sent), then everyone still here gets an error.
  {
    double a = 0, b = 0;
    end_step(a, b);
    emit_all_deferred();
    flush_post();
  }
  std::deque<std::unique_ptr<Seq>> rest;
  {
    std::lock_guard lk(I.m);
    for (auto& s : I.incoming) rest.push_back(std::move(s));
    I.incoming.clear();
  }
  for (auto& s : I.waiting) rest.push_back(std::move(s));
  I.waiting.clear();
  for (auto& s : rest) {
    Event ev;
    ev.finish = FinishReason::Error;
    ev.error = "the server is shutting down";
    s->h->push(std::move(ev));
  }
  for (auto& s : I.active)
    if (!s->done) finish(*s, FinishReason::Error, PostEvent{}, LogitsAt{}, "the server is shutting down");
  flush_post();
  I.active.clear();
}

}  // namespace ds::engine

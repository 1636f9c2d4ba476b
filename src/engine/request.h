// A generation request as the engine sees it (token ids in, text and tokens out), and the handle
// through which the submitting thread receives its events and can cancel. The engine thread only
// pushes to a handle and never blocks on a client: a slow reader only grows its own queue.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/token_mask.h"
#include "sampler/sampler.h"

namespace ds::engine {

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct GenerationRequest {
  std::vector<int32_t> prompt;       // at least one token
  sampler::SamplingParams sampling;
  int32_t max_tokens = 16;           // sampled tokens at most (an EOS counts)
  std::vector<std::string> stop;     // stop strings (not included in the output)
  bool ignore_eos = false;
  int32_t top_logprobs = -1;         // -1: no logprobs; n >= 0: chosen token + n alternatives
  // Prompt lengths after which the engine also keeps a snapshot for prefix reuse (besides the end
  // of the prompt and of the reply), e.g. the conversation before the chat generation prompt, which
  // the next turn shares even when the template re-renders this reply differently.
  std::vector<int32_t> snapshot_at;
  // response_format: the reply must be a document of this grammar. At each step every token that cannot
  // continue the document gets -inf before sampling (logprobs stay those of the raw logits); end-of-generation
  // tokens only when the document is complete (then only they). Such rows are sampled from the full row.
  std::shared_ptr<const grammar::Constraint> constraint;
  // The constraint starts after this token is sampled (the model's </think>, with thinking on); -1: at once.
  int32_t constraint_after = -1;
};

struct TokenOut {
  int32_t id = 0;
  float logprob = 0;                          // when top_logprobs >= 0
  std::vector<sampler::TokenLogprob> top;     // top_logprobs alternatives
};

struct Event {
  std::string text;              // new output text: valid UTF-8, EOS and stop strings removed
  std::vector<TokenOut> tokens;  // tokens sampled since the previous event
  FinishReason finish = FinishReason::None;
  std::string error;             // finish == Error
  // Usage, on the final event.
  int32_t n_prompt = 0;
  int32_t n_cached = 0;          // prompt tokens served from the prefix cache
  int32_t n_generated = 0;
};

class RequestHandle {
 public:
  explicit RequestHandle(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }
  // Waits up to `timeout` for events and moves them into `out`; false if there were none.
  bool wait(std::vector<Event>& out, std::chrono::milliseconds timeout);
  // Asks the engine to drop the request; its slot is freed at the next step.
  void cancel();
  bool cancelled() const { return cancel_.load(); }

  // Engine side.
  void push(Event e);
  void set_waker(std::function<void()> w) { waker_ = std::move(w); }

 private:
  uint64_t id_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Event> q_;
  std::atomic<bool> cancel_{false};
  std::function<void()> waker_;
};

}  // namespace ds::engine

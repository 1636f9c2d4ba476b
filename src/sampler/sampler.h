// Token sampling from one row of logits [V]: logit bias, repetition/presence/frequency penalties,
// then greedy (temperature 0) or a seeded draw after top-k -> temperature -> top-p -> min-p.
// Deterministic: the same params (seed included), logits and history give the same token on every
// machine (own 64-bit RNG and uniform conversion, ties broken toward the lower token id).
// Log-probabilities (logprobs/top_logprobs) are those of the raw model logits, before any of the
// above, as vLLM reports them by default.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace ds::sampler {

struct SamplingParams {
  float temperature = 1.0f;         // <= 0: greedy (argmax)
  int32_t top_k = 0;                // <= 0: off; keep the k largest logits
  float top_p = 1.0f;               // >= 1: off; smallest set of most likely tokens with mass >= top_p
  float min_p = 0.0f;               // <= 0: off; drop tokens with p < min_p * p_max
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence if the token occurs in history
  float frequency_penalty = 0.0f;   // OpenAI: logit -= frequency * count in history
  float repetition_penalty = 1.0f;  // CTRL/HF: positive logits / r, negative * r, for tokens in history
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit)
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplingParams p);

  // Draws the next token. `logits` is modified in place (bias, penalties, temperature);
  // `history` is the tokens the penalties count (the engine passes the generated tokens, as
  // OpenAI's penalties do). Never returns a token outside [0, logits.size()).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return p_; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch: (logit or prob, token)
};

// Index of the largest logit, the lowest index among ties. Empty input gives -1.
int32_t argmax(std::span<const float> logits);

// log-softmax of `logits` at `token`.
float token_logprob(std::span<const float> logits, int32_t token);

// The n most likely tokens under log-softmax(logits), most likely first (ties: lower id first).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n);

}  // namespace ds::sampler

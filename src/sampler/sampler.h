// Token sampling from one row of logits [V]: logit bias, repetition/presence/frequency penalties,
// then greedy (temperature 0) or a seeded draw after top-k -> temperature -> top-p -> min-p.
// Deterministic: the same params (seed included), logits and history give the same token on every
// machine (own 64-bit RNG and uniform conversion, ties broken toward the lower token id).
// Log-probabilities (logprobs/top_logprobs) are those of the raw model logits, before any of the
// above, as vLLM reports them by default; also before a response_format mask (the engine sets the
// tokens that cannot continue the document to -inf before sample(); see grammar/token_mask.h).
// Candidate path: a decode step on a GPU can download, per row, only its argmax, its k best
// (logit, token) pairs and its log-sum-exp (RowSummary). When the params need nothing else
// (Sampler::candidates_needed >= 0), sample_candidates and the *_of(RowSummary) functions give exactly
// the token and the log-probabilities that the full-row functions give on that row (same order of
// every float and double operation), for rows of finite logits.
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

struct Candidate {
  int32_t token = 0;
  float logit = 0;
};

// What a row of logits is reduced to for the candidate path.
struct RowSummary {
  int32_t argmax = 0;          // argmax(row)
  float max = 0;               // row[argmax]
  double lse = 0;              // log_sum_exp(row, max) (when asked for)
  std::vector<Candidate> top;  // the k best, most likely first (ties: lower id first)
  int32_t nonfinite = 0;       // how many logits of the row are NaN or +-inf (a model whose arithmetic overflowed)
};

// Fills `out` from a full row: k best candidates (k clamped to the row size), lse if want_lse, the non-finite count.
void summarize(std::span<const float> row, int k, bool want_lse, RowSummary& out);

class Sampler {
 public:
  explicit Sampler(SamplingParams p);

  // Draws the next token. `logits` is modified in place (bias, penalties, temperature);
  // `history` is the tokens the penalties count (the engine passes the generated tokens, as
  // OpenAI's penalties do). Never returns a token outside [0, logits.size()).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return p_; }

  // How many best candidates sample_candidates needs to draw exactly as sample() would on the full
  // row: 0 (greedy, or top_k 1: the argmax alone), top_k (top_k in [2, max_k]); -1 when it needs the
  // full row (logit bias, a penalty, no top_k with temperature > 0, or top_k > max_k).
  int32_t candidates_needed(int32_t max_k) const;
  // Draws from a row summary holding at least candidates_needed() candidates (checked).
  int32_t sample_candidates(const RowSummary& row);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  int32_t draw();  // from cand_ (finite logits; after top_k, most likely first)
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch: (logit or prob, token)
};

// Index of the largest logit, the lowest index among ties. Empty input gives -1.
int32_t argmax(std::span<const float> logits);

// log(sum exp(l - mx)) over the row, summed in double in index order.
double log_sum_exp(std::span<const float> logits, float mx);

// log-softmax of `logits` at `token`.
float token_logprob(std::span<const float> logits, int32_t token);
// The same from a summary (with lse) and the token's logit.
float token_logprob(const RowSummary& row, float logit);

// The n most likely tokens under log-softmax(logits), most likely first (ties: lower id first).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n);
// The same from a summary (with lse) holding at least min(n, V) candidates (checked).
std::vector<TokenLogprob> top_logprobs(const RowSummary& row, int n);

}  // namespace ds::sampler

#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/check.h"

namespace ds::sampler {

namespace {

// Larger value first; among equal values the lower token id first, so every order is total.
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  if (a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

// Uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution whose algorithm is implementation-defined.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

}  // namespace

double log_sum_exp(std::span<const float> logits, float mx) {
  double s = 0;
  for (float l : logits) s += std::exp(static_cast<double>(l) - mx);
  return std::log(s);
}

void summarize(std::span<const float> row, int k, bool want_lse, RowSummary& out) {
  DS_CHECK(!row.empty(), "empty logits");
  out.argmax = argmax(row);
  out.max = row[out.argmax];
  out.lse = want_lse ? log_sum_exp(row, out.max) : 0;
  out.nonfinite = static_cast<int32_t>(std::count_if(row.begin(), row.end(), [](float v) { return !std::isfinite(v); }));
  out.top.clear();
  k = std::clamp<int>(k, 0, static_cast<int>(row.size()));
  if (k == 0) return;
  std::vector<std::pair<float, int32_t>> c(row.size());
  for (size_t i = 0; i < row.size(); i++) c[i] = {row[i], static_cast<int32_t>(i)};
  std::partial_sort(c.begin(), c.begin() + k, c.end(), better);
  for (int i = 0; i < k; i++) out.top.push_back({c[i].second, c[i].first});
}

float token_logprob(const RowSummary& row, float logit) {
  return static_cast<float>(logit - row.max - row.lse);  // the float difference first, as token_logprob(span)
}

std::vector<TokenLogprob> top_logprobs(const RowSummary& row, int n) {
  std::vector<TokenLogprob> out;
  n = std::min<int>(n, static_cast<int>(row.top.size()));
  if (n <= 0) return out;
  const float mx = row.top[0].logit;
  for (int i = 0; i < n; i++)
    out.push_back({row.top[i].token, static_cast<float>(row.top[i].logit - mx - row.lse)});
  return out;
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) return -1;
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); i++)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);  // strict: lowest index wins ties
  return best;
}

float token_logprob(std::span<const float> logits, int32_t token) {
  DS_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token {} out of range", token);
  float mx = *std::max_element(logits.begin(), logits.end());
  return static_cast<float>(logits[token] - mx - log_sum_exp(logits, mx));
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int n) {
  std::vector<TokenLogprob> out;
  if (n <= 0 || logits.empty()) return out;
  n = std::min<int>(n, static_cast<int>(logits.size()));
  std::vector<std::pair<float, int32_t>> c(logits.size());
  for (size_t i = 0; i < logits.size(); i++) c[i] = {logits[i], static_cast<int32_t>(i)};
  std::partial_sort(c.begin(), c.begin() + n, c.end(), better);
  float mx = c[0].first;
  double lse = log_sum_exp(logits, mx);
  for (int i = 0; i < n; i++) out.push_back({c[i].second, static_cast<float>(c[i].first - mx - lse)});
  return out;
}

Sampler::Sampler(SamplingParams p) : p_(std::move(p)), rng_(p_.seed) {}

int32_t Sampler::candidates_needed(int32_t max_k) const {
  const bool rep = p_.repetition_penalty != 1.0f && p_.repetition_penalty > 0;
  if (!p_.logit_bias.empty() || rep || p_.presence_penalty != 0 || p_.frequency_penalty != 0) return -1;
  if (p_.temperature <= 0 || p_.top_k == 1) return 0;
  if (p_.top_k >= 2 && p_.top_k <= max_k) return p_.top_k;
  return -1;
}

int32_t Sampler::sample_candidates(const RowSummary& row) {
  const int32_t need = candidates_needed(std::numeric_limits<int32_t>::max());
  DS_CHECK(need >= 0, "sample_candidates: these params need the full row");
  if (need == 0) return row.argmax;
  // sample() keeps the top_k best finite logits, most likely first; so do we. With fewer than need
  // candidates the summary must hold the whole row (a vocabulary smaller than top_k).
  cand_.clear();
  for (const Candidate& c : row.top)
    if (std::isfinite(c.logit) && cand_.size() < static_cast<size_t>(need)) cand_.emplace_back(c.logit, c.token);
  if (cand_.empty()) return row.argmax;
  return draw();
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const bool rep = p_.repetition_penalty != 1.0f && p_.repetition_penalty > 0;
  if (history.empty() || (!rep && p_.presence_penalty == 0 && p_.frequency_penalty == 0)) return;
  std::unordered_map<int32_t, int32_t> count;
  for (int32_t t : history)
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) count[t]++;
  for (auto [t, n] : count) {
    float& l = logits[t];
    if (rep) l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    l -= p_.frequency_penalty * static_cast<float>(n) + p_.presence_penalty;
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  DS_CHECK(!logits.empty(), "empty logits");
  const size_t V = logits.size();
  for (auto [t, b] : p_.logit_bias)
    if (t >= 0 && static_cast<size_t>(t) < V) logits[t] += b;
  apply_penalties(logits, history);
  if (p_.temperature <= 0 || p_.top_k == 1) return argmax(logits);

  // Candidates: every finite logit (a bias of -inf removes a token entirely).
  cand_.clear();
  for (size_t i = 0; i < V; i++)
    if (std::isfinite(logits[i])) cand_.emplace_back(logits[i], static_cast<int32_t>(i));
  if (cand_.empty()) return argmax(logits);

  if (p_.top_k > 0) {
    // Most likely first: every later sum then runs in one defined order (nth_element's order is not
    // specified), the same order as the candidate path's (sample_candidates).
    if (static_cast<size_t>(p_.top_k) < cand_.size()) {
      std::nth_element(cand_.begin(), cand_.begin() + (p_.top_k - 1), cand_.end(), better);
      cand_.resize(p_.top_k);
    }
    std::sort(cand_.begin(), cand_.end(), better);
  }
  return draw();
}

int32_t Sampler::draw() {
  // Temperature and softmax numerators; the largest candidate gets exactly 1.
  float mx = -std::numeric_limits<float>::infinity();
  for (auto& c : cand_) mx = std::max(mx, c.first);
  const double inv_t = 1.0 / p_.temperature;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = static_cast<float>(std::exp((static_cast<double>(c.first) - mx) * inv_t));
    sum += c.first;
  }

  if (p_.top_p < 1.0f) {
    // Sort only as much as needed: most of the mass usually sits in the first few candidates.
    const double need = static_cast<double>(p_.top_p) * sum;
    size_t sorted = 0, keep = cand_.size();
    double cum = 0;
    bool done = false;
    for (size_t m = std::min<size_t>(64, cand_.size()); !done; m = std::min(cand_.size(), m * 8)) {
      if (m * 4 >= cand_.size()) m = cand_.size();  // heap-based partial_sort loses to sort here
      if (m == cand_.size())
        std::sort(cand_.begin() + sorted, cand_.end(), better);
      else
        std::partial_sort(cand_.begin() + sorted, cand_.begin() + m, cand_.end(), better);
      for (; sorted < m; sorted++) {
        cum += cand_[sorted].first;
        if (cum >= need) {
          keep = sorted + 1;
          done = true;
          break;
        }
      }
      if (m == cand_.size()) done = true;
    }
    cand_.resize(keep);
    sum = 0;
    for (auto& c : cand_) sum += c.first;
  }

  if (p_.min_p > 0) {
    // Relative to the most likely token, whose numerator is 1 (it survives every filter above).
    const float thresh = p_.min_p;
    std::erase_if(cand_, [&](const auto& c) { return c.first < thresh; });
    sum = 0;
    for (auto& c : cand_) sum += c.first;
  }

  const double target = uniform01(rng_) * sum;
  double cum = 0;
  for (auto& c : cand_) {
    cum += c.first;
    if (cum > target) return c.second;
  }
  return cand_.back().second;  // rounding left target at the very top
}

}  // namespace ds::sampler

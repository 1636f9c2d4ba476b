// The candidate path (sampler.h): a sampler fed a row summary (argmax, k best, log-sum-exp) must pick the
// same tokens, draw for draw, and report the same logprobs, bit for bit, as the same sampler fed the full row,
// over many random rows (with and without ties) and parameters; and it must say when it needs the full row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "sampler/sampler.h"

namespace ds::sampler {
namespace {

std::vector<float> random_row(std::mt19937& rng, int V, bool ties) {
  std::normal_distribution<float> nd(0, 2.5f);
  std::vector<float> r(V);
  for (auto& x : r) x = ties ? std::round(nd(rng)) : nd(rng);  // ties: integer logits, dozens of equal values
  return r;
}

TEST(Candidates, NeededMatchesParams) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(Sampler(p).candidates_needed(64), 0);
  p.temperature = 0.7f;
  EXPECT_EQ(Sampler(p).candidates_needed(64), -1);  // no top_k: the whole distribution
  p.top_k = 1;
  EXPECT_EQ(Sampler(p).candidates_needed(64), 0);
  p.top_k = 40;
  EXPECT_EQ(Sampler(p).candidates_needed(64), 40);
  EXPECT_EQ(Sampler(p).candidates_needed(20), -1);
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  EXPECT_EQ(Sampler(p).candidates_needed(64), 40);  // top-p and min-p act within the top-k
  SamplingParams q = p;
  q.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(q).candidates_needed(64), -1);
  q = p;
  q.frequency_penalty = 0.1f;
  EXPECT_EQ(Sampler(q).candidates_needed(64), -1);
  q = p;
  q.repetition_penalty = 1.1f;
  EXPECT_EQ(Sampler(q).candidates_needed(64), -1);
  q = p;
  q.logit_bias = {{3, 1.0f}};
  EXPECT_EQ(Sampler(q).candidates_needed(64), -1);
  q.temperature = 0;  // greedy with a bias: the bias moves the argmax
  EXPECT_EQ(Sampler(q).candidates_needed(64), -1);
}

TEST(Candidates, SummaryMatchesFullRow) {
  std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f, -INFINITY};
  RowSummary s;
  summarize(l, 4, true, s);
  EXPECT_EQ(s.argmax, 1);
  EXPECT_EQ(s.max, 3.0f);
  EXPECT_EQ(s.lse, log_sum_exp(l, 3.0f));
  ASSERT_EQ(s.top.size(), 4u);
  EXPECT_EQ(s.top[0].token, 1);  // the tie 1 vs 3: lower id first
  EXPECT_EQ(s.top[1].token, 3);
  EXPECT_EQ(s.top[2].token, 4);
  EXPECT_EQ(s.top[3].token, 0);
  summarize(l, 64, false, s);
  EXPECT_EQ(s.top.size(), l.size());  // k beyond the row: the whole row, -inf last
  EXPECT_EQ(s.top.back().token, 5);
  EXPECT_EQ(s.nonfinite, 1);  // the -inf
  l[2] = std::numeric_limits<float>::quiet_NaN();
  l[0] = INFINITY;
  summarize(l, 0, false, s);
  EXPECT_EQ(s.nonfinite, 3);
  l = {1.0f, 2.0f};
  summarize(l, 0, false, s);
  EXPECT_EQ(s.nonfinite, 0);
}

// Many rows and parameter sets: every draw of a seeded sampler on summaries equals the draw of a twin sampler
// (same seed) on the full rows, and the logprobs are equal as floats.
TEST(Candidates, DrawsAndLogprobsEqualFullRow) {
  std::mt19937 rng(1234);
  const std::vector<float> temps = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
  const std::vector<int> top_ks = {1, 2, 5, 20, 40, 64};
  const std::vector<float> top_ps = {1.0f, 0.95f, 0.5f, 0.1f};
  const std::vector<float> min_ps = {0.0f, 0.05f, 0.3f};
  int cases = 0, sampled_non_argmax = 0;
  for (int trial = 0; trial < 400; trial++) {
    SamplingParams p;
    p.temperature = temps[trial % temps.size()];
    p.top_k = top_ks[(trial / 5) % top_ks.size()];
    p.top_p = top_ps[(trial / 30) % top_ps.size()];
    p.min_p = min_ps[(trial / 120) % min_ps.size()];
    p.seed = 1000 + trial;
    Sampler full(p), cand(p);
    const int32_t need = cand.candidates_needed(64);
    ASSERT_GE(need, 0);
    const int V = trial % 7 == 0 ? 30 : 2000;  // a vocabulary smaller than top_k too
    const bool ties = trial % 2 == 0;
    const int n_logprobs = trial % 3 == 0 ? 5 : 0;
    for (int draw = 0; draw < 12; draw++) {
      const std::vector<float> row = random_row(rng, V, ties);
      std::vector<float> edit = row;
      const int32_t want = full.sample(edit, {});
      RowSummary s;
      summarize(row, std::max(need, n_logprobs), n_logprobs > 0, s);
      const int32_t got = cand.sample_candidates(s);
      ASSERT_EQ(got, want) << "trial " << trial << " draw " << draw;
      cases++;
      if (got != s.argmax) sampled_non_argmax++;
      if (n_logprobs > 0 && need >= 0) {
        float logit = s.max;
        for (const Candidate& c : s.top)
          if (c.token == got) logit = c.logit;
        EXPECT_EQ(token_logprob(s, logit), token_logprob(row, got));
        const auto a = top_logprobs(s, n_logprobs), b = top_logprobs(row, n_logprobs);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); i++) {
          EXPECT_EQ(a[i].token, b[i].token);
          EXPECT_EQ(a[i].logprob, b[i].logprob);
        }
      }
    }
  }
  EXPECT_EQ(cases, 400 * 12);
  EXPECT_GT(sampled_non_argmax, 500);  // the draws really sample, not only argmax
}

// Ties at the top-k boundary: which of the equal logits stay is defined (lower ids), so both paths keep the
// same set.
TEST(Candidates, TieAtTopKBoundary) {
  std::vector<float> row(100, 0.0f);
  row[50] = 2.0f;
  row[70] = 1.0f;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 10;  // 50, 70, then 8 of the 98 zeros: ids 0..7
  for (uint64_t seed = 0; seed < 200; seed++) {
    p.seed = seed;
    Sampler a(p), b(p);
    std::vector<float> e = row;
    RowSummary s;
    summarize(row, 10, false, s);
    const int32_t t = a.sample(e, {});
    EXPECT_EQ(b.sample_candidates(s), t);
    EXPECT_TRUE(t == 50 || t == 70 || t < 8) << t;
  }
}

}  // namespace
}  // namespace ds::sampler

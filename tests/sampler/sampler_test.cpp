#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace ds::sampler {
namespace {

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

// Frequencies of n draws from one sampler (logits copied each time: sample() edits them).
std::vector<double> frequencies(SamplingParams p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < n; i++) {
    auto l = logits;
    int32_t t = s.sample(l, {});
    EXPECT_GE(t, 0);
    EXPECT_LT(t, static_cast<int32_t>(logits.size()));
    f[t] += 1.0 / n;
  }
  return f;
}

// 200k draws: the standard deviation of a frequency is <= 0.0012, so 0.006 is a 5-sigma bound.
void expect_distribution(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); i++) {
    if (want[i] == 0) {
      EXPECT_EQ(got[i], 0) << "token " << i << " must be masked";
    } else {
      EXPECT_NEAR(got[i], want[i], 0.006) << "token " << i;
    }
  }
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 3.0f, -2.0f, 3.0f, 1.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-1.0f, -1.0f}), 0);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (int rep = 0; rep < 20; rep++) {
    std::vector<float> r(1000);
    for (auto& x : r) x = nd(rng);
    int32_t want = static_cast<int32_t>(std::max_element(r.begin(), r.end()) - r.begin());
    EXPECT_EQ(s.sample(r, {}), want);
  }
}

TEST(Sampler, TopK1IsGreedyAtAnyTemperature) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 100; i++) {
    std::vector<float> l = {0.5f, 0.4f, 0.45f};
    EXPECT_EQ(s.sample(l, {}), 0);
  }
}

TEST(Sampler, PlainDistribution) {
  SamplingParams p;
  p.seed = 1;
  expect_distribution(frequencies(p, log_probs({0.5, 0.3, 0.2}), 200000), {0.5, 0.3, 0.2});
}

TEST(Sampler, TemperatureSharpens) {
  SamplingParams p;
  p.seed = 2;
  p.temperature = 0.5f;  // p^(1/T) = p^2, renormalised
  double z = 0.25 + 0.09 + 0.04;
  expect_distribution(frequencies(p, log_probs({0.5, 0.3, 0.2}), 200000), {0.25 / z, 0.09 / z, 0.04 / z});
}

TEST(Sampler, TopKMasksExactly) {
  SamplingParams p;
  p.seed = 3;
  p.top_k = 2;
  expect_distribution(frequencies(p, log_probs({0.2, 0.5, 0.3}), 200000), {0, 0.5 / 0.8, 0.3 / 0.8});
}

TEST(Sampler, TopPKeepsSmallestSetReachingMass) {
  SamplingParams p;
  p.seed = 4;
  auto l = log_probs({0.1, 0.4, 0.2, 0.3});
  p.top_p = 0.65f;  // 0.4 + 0.3 = 0.7 >= 0.65: keeps tokens 1 and 3
  expect_distribution(frequencies(p, l, 200000), {0, 0.4 / 0.7, 0, 0.3 / 0.7});
  p.top_p = 0.75f;  // needs 0.2 as well
  expect_distribution(frequencies(p, l, 200000), {0, 0.4 / 0.9, 0.2 / 0.9, 0.3 / 0.9});
  p.top_p = 0.3f;  // the top token alone already reaches it
  expect_distribution(frequencies(p, l, 1000), {0, 1, 0, 0});
}

TEST(Sampler, MinPRelativeToTopToken) {
  SamplingParams p;
  p.seed = 5;
  p.min_p = 0.2f;  // threshold 0.2 * 0.5 = 0.1: drops 0.05 and 0.08, keeps 0.12
  auto l = log_probs({0.5, 0.25, 0.12, 0.05, 0.08});
  double z = 0.5 + 0.25 + 0.12;
  expect_distribution(frequencies(p, l, 200000), {0.5 / z, 0.25 / z, 0.12 / z, 0, 0});
}

TEST(Sampler, FilterOrderTopKThenTemperatureThenTopP) {
  // top_k = 3 keeps {0.4, 0.3, 0.2}; T = 0.5 gives 16:9:4 (/29); top_p 0.8 keeps 16+9 = 25/29 = 0.862.
  SamplingParams p;
  p.seed = 6;
  p.top_k = 3;
  p.temperature = 0.5f;
  p.top_p = 0.8f;
  expect_distribution(frequencies(p, log_probs({0.4, 0.3, 0.2, 0.1}), 200000), {16.0 / 25, 9.0 / 25, 0, 0});
}

TEST(Sampler, LargeVocabTopPMatchesFullSortReference) {
  // 5,000 tokens with a flat-ish distribution force the progressive partial sort past its first
  // window; every drawn token must lie in the set a full sort keeps.
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 0.3f);
  std::vector<float> l(5000);
  for (auto& x : l) x = nd(rng);
  const float top_p = 0.9f;
  std::vector<std::pair<double, int>> s;
  double z = 0;
  for (size_t i = 0; i < l.size(); i++) z += std::exp(static_cast<double>(l[i]));
  for (size_t i = 0; i < l.size(); i++) s.push_back({std::exp(static_cast<double>(l[i])) / z, static_cast<int>(i)});
  std::sort(s.begin(), s.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::set<int> keep;
  double cum = 0;
  for (auto& [pr, id] : s) {
    keep.insert(id);
    cum += pr;
    if (cum >= top_p - 1e-6) break;
  }
  ASSERT_GT(keep.size(), 512u);  // past the 64 and 512 windows
  SamplingParams p;
  p.seed = 12;
  p.top_p = top_p;
  Sampler smp(p);
  std::set<int> seen;
  for (int i = 0; i < 1000; i++) {
    auto c = l;
    int t = smp.sample(c, {});
    ASSERT_TRUE(keep.count(t)) << "token " << t << " outside the top-p set";
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), keep.size() / 6);  // 1,000 draws over ~4,000 tokens
}

TEST(Sampler, SeedDeterminesSequence) {
  auto l = log_probs({0.25, 0.25, 0.25, 0.25});
  auto draw = [&](uint64_t seed) {
    SamplingParams p;
    p.seed = seed;
    Sampler s(p);
    std::vector<int> out;
    for (int i = 0; i < 64; i++) {
      auto c = l;
      out.push_back(s.sample(c, {}));
    }
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, PenaltiesExactArithmetic) {
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l = {4.0f, -1.0f, 2.0f, 3.0f};
  std::vector<int32_t> hist = {0, 0, 1, 0, 99 /* out of vocab: ignored */};
  int t = s.sample(l, hist);
  // token 0: 4 / 2 - 3 * 0.25 - 0.5 = 0.75 ; token 1: -1 * 2 - 0.25 - 0.5 = -2.75 ; others untouched
  EXPECT_FLOAT_EQ(l[0], 0.75f);
  EXPECT_FLOAT_EQ(l[1], -2.75f);
  EXPECT_FLOAT_EQ(l[2], 2.0f);
  EXPECT_FLOAT_EQ(l[3], 3.0f);
  EXPECT_EQ(t, 3);
}

TEST(Sampler, LogitBias) {
  SamplingParams p;
  p.seed = 9;
  p.logit_bias = {{0, -INFINITY}, {2, -100.0f}};
  auto f = frequencies(p, log_probs({0.6, 0.2, 0.2}), 20000);
  EXPECT_EQ(f[0], 0);
  EXPECT_NEAR(f[1], 1, 1e-9);
  p.logit_bias = {{2, 100.0f}};
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {5, 4, 3};
  EXPECT_EQ(s.sample(l, {}), 2);
}

TEST(Logprobs, MatchLogSoftmax) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f, 3.0f, -50.0f};
  double z = std::exp(1.0) + std::exp(2.0) + 2 * std::exp(3.0) + std::exp(-50.0);
  for (int t = 0; t < 5; t++) EXPECT_NEAR(token_logprob(l, t), l[t] - std::log(z), 1e-6);
  auto top = top_logprobs(l, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 2);  // tie 2 vs 3: lower id first
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 1);
  EXPECT_NEAR(top[2].logprob, 2.0 - std::log(z), 1e-6);
  EXPECT_EQ(top_logprobs(l, 10).size(), 5u);
  EXPECT_TRUE(top_logprobs(l, 0).empty());
  // Probabilities sum to one.
  double s = 0;
  for (auto& t : top_logprobs(l, 5)) s += std::exp(t.logprob);
  EXPECT_NEAR(s, 1.0, 1e-6);
}

}  // namespace
}  // namespace ds::sampler

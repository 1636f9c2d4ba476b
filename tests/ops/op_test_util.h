// Helpers for the op tests: seeded random data and a check that prints op, case and worst index.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "testutil.h"

namespace ds::test {

inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Fails with a useful message if max |a - b| > tol_abs or rel_rms > tol_rel.
inline void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol_abs,
                         double tol_rel, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  const ErrStats e = compare(a.data(), b.data(), a.size());
  EXPECT_LE(e.max_abs, tol_abs) << what << ": max |diff| " << e.max_abs << " at " << e.worst << " (got "
                                << a[e.worst] << ", want " << b[e.worst] << "), rel rms " << e.rel_rms;
  EXPECT_LE(e.rel_rms, tol_rel) << what << ": rel rms " << e.rel_rms;
}

inline std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace ds::test

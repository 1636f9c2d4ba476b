#include "prefill_test_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/fp16.h"

namespace ds::test {

bool prefill_have_gpu() { return cuda::device_count() > 0; }

std::vector<float> puniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol_abs, double tol_rel,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const ErrStats e = compare(got.data(), want.data(), want.size());
  std::printf("[ measured ] %-60s max|d| %.3e  rel_rms %.3e  (tol %.1e / %.1e)\n", what.c_str(), e.max_abs,
              e.rel_rms, tol_abs, tol_rel);
  EXPECT_LE(e.max_abs, tol_abs) << what << ": max |diff| " << e.max_abs << " at " << e.worst << " (got "
                                << got[e.worst] << ", want " << want[e.worst] << "), rel rms " << e.rel_rms;
  EXPECT_LE(e.rel_rms, tol_rel) << what << ": rel rms " << e.rel_rms;
}

}  // namespace ds::test

// Shared by the CUDA model tests: the GPU skip, loading a fixture model on both sides, error metrics.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/model/qwen35_cuda.cuh"
#include "model/qwen35.h"
#include "model_test_util.h"
#include "testutil.h"

#define DS_SKIP_WITHOUT_GPU()                                                   \
  do {                                                                          \
    if (ds::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)

namespace ds::test {

inline std::string fixture_gguf(const std::string& name) {
  const std::string model = name.substr(0, name.find('-', 5));  // "tiny-sym" / "tiny-gqa"
  return fixture("models/" + model + "/" + name + ".gguf");
}

struct Diff {
  double max_abs = 0;   // max |a - b|
  double ref_max = 0;   // max |b|
  double rel_rms = 0;   // ||a - b|| / ||b||
  size_t worst = 0;
  bool finite = true;
};

inline Diff diff(const float* a, const float* b, size_t n) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (!std::isfinite(a[i])) d.finite = false;
    const double e = std::fabs((double)a[i] - b[i]);
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst = i;
    }
    d.ref_max = std::max(d.ref_max, std::fabs((double)b[i]));
    num += e * e;
    den += (double)b[i] * b[i];
  }
  d.rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

inline std::unique_ptr<cuda::CudaModel> load_cuda(const Qwen35Model& m, cuda::CudaModelOptions o = {}) {
  auto r = cuda::CudaModel::load(m, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : nullptr;
}

inline std::unique_ptr<cuda::CudaSeqState> new_state(const cuda::CudaModel& m, int64_t max_ctx) {
  auto r = m.create_state(max_ctx);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(*r) : nullptr;
}

// Decodes one token for each state (one step) and returns [B, V] logits.
inline std::vector<float> decode_step(cuda::CudaModel& m, std::vector<cuda::CudaSeqState*> states,
                                      const std::vector<int32_t>& tokens) {
  std::vector<float> out(states.size() * m.cfg().n_vocab);
  auto s = m.decode(states, tokens, out.data());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return out;
}

}  // namespace ds::test

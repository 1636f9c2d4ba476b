// Device-side row selection (src/cuda/model/kernels_sample.cu, CudaModel::decode_select) against the host's
// sampler::summarize: argmax, max and the k best candidates bit for bit (ties included), the log-sum-exp to
// rounding; and the CUDA backend's decode_select against its decode on the same state (same logits, so the same
// summary, and last_row equal to the full row). Skips without a GPU.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cuda_test_util.h"
#include "engine/backend_factory.h"
#include "sampler/sampler.h"

using namespace ds;
using ds::cuda::DeviceBuffer;

namespace {

struct DevSel {
  DeviceBuffer logits, scratch, argmax, max, lse, top_id, top_logit, nonfinite;
};

// Runs select_rows on `rows` ([B, V]) and returns the host copies as summaries.
std::vector<sampler::RowSummary> select_on_device(const std::vector<float>& rows, int B, int64_t V, int k, bool lse) {
  DevSel d;
  auto alloc = [](DeviceBuffer& b, size_t bytes) {
    auto r = DeviceBuffer::alloc(bytes);
    EXPECT_TRUE(r.ok());
    b = std::move(*r);
  };
  alloc(d.logits, rows.size() * sizeof(float));
  EXPECT_TRUE(d.logits.upload(rows.data(), rows.size() * sizeof(float)).ok());
  alloc(d.scratch, cuda::select_scratch_bytes(B, V));
  alloc(d.argmax, B * 4);
  alloc(d.max, B * 4);
  alloc(d.lse, B * 8);
  alloc(d.top_id, B * cuda::kMaxSelect * 4);
  alloc(d.top_logit, B * cuda::kMaxSelect * 4);
  alloc(d.nonfinite, B * 4);
  cuda::SelectResultDev r{d.argmax.as<int32_t>(), d.max.as<float>(),      d.lse.as<double>(),
                          d.top_id.as<int32_t>(), d.top_logit.as<float>(), d.nonfinite.as<int32_t>()};
  Status st = cuda::select_rows(d.logits.as<float>(), B, V, k, lse, d.scratch.data(), d.scratch.size(), r, nullptr);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int32_t> am(B), ids(B * cuda::kMaxSelect), bad(B);
  std::vector<float> mx(B), tl(B * cuda::kMaxSelect);
  std::vector<double> ls(B);
  EXPECT_TRUE(d.argmax.download(am.data(), B * 4).ok());
  EXPECT_TRUE(d.max.download(mx.data(), B * 4).ok());
  if (lse) {
    EXPECT_TRUE(d.lse.download(ls.data(), B * 8).ok());
  }
  EXPECT_TRUE(d.top_id.download(ids.data(), ids.size() * 4).ok());
  EXPECT_TRUE(d.top_logit.download(tl.data(), tl.size() * 4).ok());
  EXPECT_TRUE(d.nonfinite.download(bad.data(), B * 4).ok());
  std::vector<sampler::RowSummary> out(B);
  for (int i = 0; i < B; i++) {
    out[i].argmax = am[i];
    out[i].max = mx[i];
    out[i].lse = lse ? ls[i] : 0;
    out[i].nonfinite = bad[i];
    for (int j = 0; j < k; j++) {
      if (ids[i * cuda::kMaxSelect + j] < 0) break;
      out[i].top.push_back({ids[i * cuda::kMaxSelect + j], tl[i * cuda::kMaxSelect + j]});
    }
  }
  return out;
}

void expect_same(const sampler::RowSummary& got, const sampler::RowSummary& want, bool lse, const std::string& what) {
  EXPECT_EQ(got.argmax, want.argmax) << what;
  EXPECT_EQ(got.max, want.max) << what;
  EXPECT_EQ(got.nonfinite, want.nonfinite) << what;
  if (lse) {
    EXPECT_NEAR(got.lse, want.lse, 1e-12 * std::max(1.0, std::fabs(want.lse))) << what;
  }
  ASSERT_EQ(got.top.size(), want.top.size()) << what;
  for (size_t j = 0; j < want.top.size(); j++) {
    EXPECT_EQ(got.top[j].token, want.top[j].token) << what << " candidate " << j;
    EXPECT_EQ(got.top[j].logit, want.top[j].logit) << what << " candidate " << j;
  }
}

TEST(CudaSelect, MatchesHostSummaryWithTies) {
  DS_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 3);
  struct Case {
    int B;
    int64_t V;
    int k;
  };
  for (Case c : {Case{1, 248320, 64}, Case{64, 248320, 20}, Case{7, 248320, 0}, Case{5, 1000, 64}, Case{3, 40, 64},
                 Case{4, 262144, 1}, Case{2, 4097, 33}}) {
    for (int ties = 0; ties < 2; ties++) {
      std::vector<float> rows(c.B * c.V);
      for (auto& x : rows) x = ties ? std::round(nd(rng) * 2) / 2 : nd(rng);  // ties: many equal values
      if (c.V > 100) rows[c.V / 2] = -INFINITY;                               // a -inf (a masked token)
      // The maximum twice in a late row: the lower id must win.
      rows[(c.B - 1) * c.V + 3] = rows[(c.B - 1) * c.V + c.V - 1] = 1e3f;
      for (int lse = 0; lse < 2; lse++) {
        const auto got = select_on_device(rows, c.B, c.V, c.k, lse);
        for (int i = 0; i < c.B; i++) {
          sampler::RowSummary want;
          sampler::summarize(std::span<const float>(rows.data() + i * c.V, c.V), c.k, lse, want);
          expect_same(got[i], want, lse,
                      "B " + std::to_string(c.B) + " V " + std::to_string(c.V) + " k " + std::to_string(c.k) +
                          " ties " + std::to_string(ties) + " row " + std::to_string(i));
        }
      }
    }
  }
  // Signed zeros tie (the host compares values): -0 at id 7 beats +0 at id 9 as the lower id.
  std::vector<float> z(300, -1.0f);
  z[7] = -0.0f;
  z[9] = 0.0f;
  const auto got = select_on_device(z, 1, 300, 3, true);
  sampler::RowSummary want;
  sampler::summarize(z, 3, true, want);
  expect_same(got[0], want, true, "signed zeros");
  EXPECT_EQ(got[0].argmax, 7);
  EXPECT_FALSE(cuda::select_supported(262145));
}

// A row's NaN / +-inf logits are counted (the engine fails a request whose row holds any: a model whose arithmetic
// overflowed), across chunks and rows, the same count as the host's summarize; finite rows count 0.
TEST(CudaSelect, CountsNonFiniteLogits) {
  DS_SKIP_WITHOUT_GPU();
  const int B = 4;
  const int64_t V = 248320;
  std::vector<float> rows(B * V);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0, 3);
  for (auto& x : rows) x = nd(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill(rows.begin(), rows.begin() + V, nan);  // row 0: all NaN (what the 9B synth's overflow gave)
  rows[V + 0] = nan;                               // row 1: one NaN, one +inf, one -inf in three chunks
  rows[V + 5000] = INFINITY;
  rows[V + V - 1] = -INFINITY;
  rows[3 * V + 77] = nan;  // row 3: one NaN; row 2: finite
  for (int k : {0, 8}) {
    const auto got = select_on_device(rows, B, V, k, true);
    const int32_t want[B] = {(int32_t)V, 3, 0, 1};
    for (int i = 0; i < B; i++) {
      sampler::RowSummary host;
      sampler::summarize(std::span<const float>(rows.data() + i * V, V), k, true, host);
      EXPECT_EQ(host.nonfinite, want[i]) << "row " << i;
      EXPECT_EQ(got[i].nonfinite, want[i]) << "row " << i << " k " << k;
    }
    EXPECT_EQ(got[2].argmax, [&] {
      sampler::RowSummary h;
      sampler::summarize(std::span<const float>(rows.data() + 2 * V, V), 0, false, h);
      return h.argmax;
    }());
  }
}

TEST(CudaSelect, BackendDecodeSelectEqualsDecode) {
  DS_SKIP_WITHOUT_GPU();
  engine::BackendOptions o;
  o.n_slots = 4;
  o.n_ctx = 128;
  auto be = engine::make_backend("cuda", test::fixture_gguf("tiny-gqa-q4_k_m"), o);
  ASSERT_TRUE(be.ok()) << be.error().message;
  engine::Backend& b = **be;
  const int64_t V = b.n_vocab();
  const std::vector<int32_t> prompt{1, 5, 9, 200, 31, 7, 7, 64};
  for (int s = 0; s < 4; s++) ASSERT_TRUE(b.prefill(s, prompt, {}).ok());
  std::vector<int32_t> toks{3, 11};
  for (int step = 0; step < 4; step++) {
    std::vector<float> full(2 * V);
    ASSERT_TRUE(b.decode(std::vector<int32_t>{0, 1}, toks, full).ok());
    engine::SelectSpec spec;
    spec.k = 40;
    spec.lse = true;
    spec.full_rows = {1};
    engine::Selection sel;
    ASSERT_TRUE(b.decode_select(std::vector<int32_t>{2, 3}, toks, spec, sel).ok());
    ASSERT_EQ(sel.rows.size(), 2u);
    ASSERT_EQ(sel.full.size(), (size_t)V);
    EXPECT_EQ(0, std::memcmp(sel.full.data(), full.data() + V, V * sizeof(float)));
    std::vector<float> row(V);
    for (int i = 0; i < 2; i++) {
      sampler::RowSummary want;
      sampler::summarize(std::span<const float>(full.data() + i * V, V), spec.k, true, want);
      expect_same(sel.rows[i], want, true, "step " + std::to_string(step) + " row " + std::to_string(i));
      ASSERT_TRUE(b.last_row(i, row).ok());
      EXPECT_EQ(0, std::memcmp(row.data(), full.data() + i * V, V * sizeof(float)));
    }
    toks = {sel.rows[0].argmax, sel.rows[1].argmax};
  }
  std::vector<float> row(V);
  EXPECT_FALSE(b.last_row(2, row).ok());
}

}  // namespace

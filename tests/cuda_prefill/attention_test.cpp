// cuda::prefill::attention_prefill against cpu::attention: T = 1, 63, 64, 65 and 1000 new tokens after a
// non-empty cache prefix, GQA groups 1, 2, 4 and 6, head_dim 64, 128 and 256, a prompt with no prefix, and
// packed sequences in permuted cache slots. Both modes; the whole K/V caches must equal the CPU's bit for bit
// (the store is a copy; rows no token maps to stay untouched).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/prefill/prefill.cuh"
#include "prefill_test_util.h"

namespace ds {
namespace {
using cuda::prefill::Mode;
using test::Dev;

// fp32 path: summation order and expf only. f16 path: q, k, v and the probabilities rounded to f16 (11-bit
// mantissa), fp32 accumulation: ~1e-3 relative on random data.
constexpr double kPreciseAbs = 1e-4, kPreciseRel = 2e-5;
constexpr double kFastAbs = 2e-2, kFastRel = 5e-3;

struct Case {
  int64_t nh, nkv, hd, max_ctx;
  std::vector<int32_t> lens, prefix, slots;  // per sequence: new tokens, cached rows before, slot
  std::string what;
};

void run_case(const Case& c, Mode mode, uint64_t seed) {
  const int64_t S = (int64_t)c.lens.size(), row = c.nkv * c.hd;
  std::vector<int32_t> starts = {0}, pos;
  for (int64_t s = 0; s < S; s++) {
    starts.push_back(starts.back() + c.lens[s]);
    for (int32_t i = 0; i < c.lens[s]; i++) pos.push_back(c.prefix[s] + i);
  }
  const int64_t T = starts.back();
  const int64_t n_slots = *std::max_element(c.slots.begin(), c.slots.end()) + 1;
  ops::AttentionParams p{T, S, c.nh, c.nkv, c.hd, c.max_ctx, 1.0f / std::sqrt((float)c.hd)};
  const auto q = test::prandn(T * c.nh * c.hd, seed + 1), k = test::prandn(T * row, seed + 2),
             v = test::prandn(T * row, seed + 3);
  // Whole caches random: the prefix rows are what earlier calls stored; the rest must not be read or touched.
  const auto kc0 = test::prandn(n_slots * p.cache_floats(), seed + 4), vc0 = test::prandn(n_slots * p.cache_floats(), seed + 5);
  std::vector<float> out_ref(T * c.nh * c.hd), kc_ref = kc0, vc_ref = vc0;
  cpu::attention(p, q.data(), k.data(), v.data(), kc_ref.data(), vc_ref.data(), pos.data(), starts.data(),
                 c.slots.data(), out_ref.data());

  Dev<float> dq(q), dk(k), dv(v), dkc(kc0), dvc(vc0);
  Dev<float> dout(std::vector<float>(T * c.nh * c.hd, std::numeric_limits<float>::quiet_NaN()));
  Dev<int32_t> dpos(pos), dstarts(starts), dslots(c.slots);
  const size_t ws_bytes = cuda::prefill::attention_prefill_workspace_bytes(p);
  auto ws = cuda::DeviceBuffer::alloc(ws_bytes);
  ASSERT_TRUE(ws.ok());
  DS_CHECK_OK(cuda::prefill::attention_prefill(p, dq.p(), dk.p(), dv.p(), dkc.p(), dvc.p(), dpos.p(), dstarts.p(),
                                               dslots.p(), dout.p(), ws->data(), ws_bytes, nullptr, mode));
  const bool fast = mode == Mode::kFast;
  const std::string what = c.what + (fast ? " [fast f16]" : " [precise f32]");
  test::expect_near(dout.host(), out_ref, fast ? kFastAbs : kPreciseAbs, fast ? kFastRel : kPreciseRel, what);
  EXPECT_TRUE(dkc.host() == kc_ref) << what << ": K cache differs from the CPU's";
  EXPECT_TRUE(dvc.host() == vc_ref) << what << ": V cache differs from the CPU's";
}

TEST(PrefillAttention, MatchesCpuAtAwkwardLengths) {
  DS_PREFILL_REQUIRE_GPU();
  uint64_t seed = 10;
  for (int32_t T : {1, 63, 64, 65}) {
    const Case c{16, 4, 256, 256, {T}, {37}, {0}, "9B heads, T=" + std::to_string(T) + " after 37 cached"};
    for (Mode m : {Mode::kFast, Mode::kPrecise}) run_case(c, m, seed += 10);
  }
}

TEST(PrefillAttention, LongPromptAfterPrefix) {
  DS_PREFILL_REQUIRE_GPU();
  const Case c{8, 2, 256, 1400, {1000}, {300}, {0}, "T=1000 after 300 cached, group 4"};
  for (Mode m : {Mode::kFast, Mode::kPrecise}) run_case(c, m, 555);
}

TEST(PrefillAttention, GroupsAndHeadDims) {
  DS_PREFILL_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {6, 1, 256, 128, {65}, {10}, {0}, "27B-like group 6, T=65"},
      {4, 2, 64, 256, {185}, {0}, {0}, "fixture-like hd 64 group 2, no prefix"},
      {4, 1, 64, 256, {100}, {20}, {0}, "fixture-like hd 64 group 4"},
      {4, 4, 128, 128, {70}, {5}, {0}, "hd 128 group 1"},
      {32, 2, 64, 128, {33}, {7}, {0}, "group 16"},
  };
  uint64_t seed = 900;
  for (const auto& c : cases)
    for (Mode m : {Mode::kFast, Mode::kPrecise}) run_case(c, m, seed += 10);
}

TEST(PrefillAttention, PackedSequencesInSlots) {
  DS_PREFILL_REQUIRE_GPU();
  // Lengths 50, 0, 70 after prefixes 10, 3, 0, in slots 2, 0, 1.
  const Case c{8, 2, 256, 160, {50, 0, 70}, {10, 3, 0}, {2, 0, 1}, "packed 50|0|70 in slots 2,0,1"};
  for (Mode m : {Mode::kFast, Mode::kPrecise}) run_case(c, m, 4321);
}

TEST(PrefillAttention, RejectsBadParams) {
  DS_PREFILL_REQUIRE_GPU();
  Dev<float> buf = Dev<float>::zeros(1 << 16);
  Dev<int32_t> pos = Dev<int32_t>::zeros(16);
  auto call = [&](ops::AttentionParams p) {
    return cuda::prefill::attention_prefill(p, buf.p(), buf.p(), buf.p(), buf.p(), buf.p(), pos.p(), nullptr, nullptr,
                                            buf.p(), buf.p(), 4096, nullptr);
  };
  EXPECT_FALSE(call({4, 1, 8, 2, 96, 16, 0.1f}).ok()) << "head_dim 96";
  EXPECT_FALSE(call({4, 1, 64, 2, 64, 16, 0.1f}).ok()) << "group 32";
  EXPECT_FALSE(call({4, 1, 6, 4, 64, 16, 0.1f}).ok()) << "heads not a multiple of kv heads";
  EXPECT_TRUE(call({0, 1, 8, 2, 64, 16, 0.1f}).ok()) << "no tokens is a no-op";
}

}  // namespace
}  // namespace ds

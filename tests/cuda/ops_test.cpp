// Every CUDA op (src/cuda/ops.h) against its CPU reference (src/cpu/cpu.h) on random inputs, at the
// real shapes and at awkward ones (nv = 3 nk, sizes that are not multiples of any tile, several
// sequences with permuted state slots, positions far into the context). One tolerance table below:
// the relative RMS error ||cuda - cpu|| / ||cpu|| per op (fp32 on both sides; only summation order and
// libm-vs-CUDA transcendental rounding differ).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/ops.h"
#include "cuda_test_util.h"
#include "testutil.h"

namespace ds {
namespace {

const std::map<std::string, double> kTol = {
    {"rms_norm", 2e-6},       {"add_rms_norm", 2e-6}, {"rms_norm_gated", 2e-6}, {"l2_norm", 2e-6},
    {"conv1d_silu", 2e-6},    {"conv_state", 0},      {"conv1d_silu_l2", 2e-6}, {"gdn_gates", 2e-6},
    {"gdn_recurrent", 2e-5},  {"gdn_state", 2e-5},    {"rope_neox", 2e-6},      {"attention", 1e-5},
    {"kv_cache", 0},          {"output_gate", 2e-6},  {"swiglu", 2e-6},         {"add", 0},
    {"get_rows", 0},          {"matmul", 1e-5},
};

// Device copy of a host vector, and back.
template <typename T>
struct Dev {
  cuda::DeviceBuffer buf;
  size_t n = 0;
  explicit Dev(const std::vector<T>& v) : buf(test::to_device(v.data(), std::max<size_t>(v.size(), 1) * sizeof(T))), n(v.size()) {}
  T* p() const { return buf.as<T>(); }
  std::vector<T> host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return test::to_host<T>(buf, n);
  }
};

void expect_close(const std::string& op, const std::vector<float>& got, const std::vector<float>& ref,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << op << " " << what;
  const auto e = test::compare(got.data(), ref.data(), ref.size());
  const double tol = kTol.at(op);
  if (tol == 0) {
    EXPECT_EQ(e.max_abs, 0.0) << op << " " << what << ": must be exact; worst index " << e.worst << " "
                              << got[e.worst] << " vs " << ref[e.worst];
  } else {
    EXPECT_LE(e.rel_rms, tol) << op << " " << what << ": max_abs " << e.max_abs << " at " << e.worst << " ("
                              << got[e.worst] << " vs " << ref[e.worst] << ")";
  }
}

#define CHECK_OK(expr)                          \
  do {                                          \
    auto _s = (expr);                           \
    ASSERT_TRUE(_s.ok()) << _s.error().message; \
  } while (0)

uint64_t g_seed = 1;
std::vector<float> rnd(int64_t n, float scale = 1.f) { return test::random_floats(n, g_seed++, scale); }

TEST(CudaOps, RmsNorm) {
  DS_REQUIRE_GPU();
  struct Case { ops::RmsNormParams p; int64_t x_len, y_len; const char* what; };
  std::vector<Case> cases = {
      {ops::RmsNormParams::packed(3, 1024, 1e-6f), 3 * 1024, 3 * 1024, "0.8B layer norm, 3 tokens"},
      {ops::RmsNormParams::packed(1, 5120, 1e-6f), 5120, 5120, "27B layer norm"},
      {ops::RmsNormParams::packed(5, 1000, 1e-6f), 5000, 5000, "awkward width"},
      {ops::RmsNormParams::packed(2, 37, 1e-5f), 74, 74, "tiny width"},
      // q_norm: per head over hd, reading q out of the interleaved [q | gate] projection.
      {{2, 8, 256, 2 * 8 * 256, 2 * 256, 8 * 256, 256, 1e-6f}, 2 * 2 * 8 * 256, 2 * 8 * 256, "q_norm strided"},
  };
  for (const auto& c : cases) {
    const auto x = rnd(c.x_len), w = rnd(c.p.n_cols);
    std::vector<float> ref(c.y_len, 0.f);
    cpu::rms_norm(c.p, x.data(), w.data(), ref.data());
    Dev<float> dx(x), dw(w), dy(std::vector<float>(c.y_len, 0.f));
    CHECK_OK(cuda::rms_norm(c.p, dx.p(), dw.p(), dy.p(), nullptr));
    expect_close("rms_norm", dy.host(), ref, c.what);
  }
  // In place, packed.
  const auto p = ops::RmsNormParams::packed(4, 2048, 1e-6f);
  const auto x = rnd(4 * 2048), w = rnd(2048);
  std::vector<float> ref(x.size());
  cpu::rms_norm(p, x.data(), w.data(), ref.data());
  Dev<float> dx(x), dw(w);
  CHECK_OK(cuda::rms_norm(p, dx.p(), dw.p(), dx.p(), nullptr));
  expect_close("rms_norm", dx.host(), ref, "in place");
}

TEST(CudaOps, AddRmsNorm) {
  DS_REQUIRE_GPU();
  for (int64_t H : {1024, 4096, 1000}) {
    const int64_t T = 3;
    const auto a = rnd(T * H), b = rnd(T * H), w = rnd(H);
    std::vector<float> sum(T * H), ref(T * H);
    cpu::add({T * H}, a.data(), b.data(), sum.data());
    const auto p = ops::RmsNormParams::packed(T, H, 1e-6f);
    cpu::rms_norm(p, sum.data(), w.data(), ref.data());
    Dev<float> da(a), db(b), dw(w), dy(std::vector<float>(T * H));
    CHECK_OK(cuda::add_rms_norm(p, da.p(), db.p(), da.p(), dw.p(), dy.p(), nullptr));  // sum in place of a
    expect_close("add", da.host(), sum, "residual sum, H " + std::to_string(H));
    expect_close("add_rms_norm", dy.host(), ref, "H " + std::to_string(H));
  }
}

TEST(CudaOps, RmsNormGated) {
  DS_REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{48, 128}, {3 * 32, 128}, {7, 100}, {5, 33}}) {
    const ops::RmsNormGatedParams p{rows, cols, 1e-6f};
    const auto x = rnd(rows * cols), z = rnd(rows * cols, 3.f), w = rnd(cols);
    std::vector<float> ref(rows * cols);
    cpu::rms_norm_gated(p, x.data(), z.data(), w.data(), ref.data());
    Dev<float> dx(x), dz(z), dw(w);
    CHECK_OK(cuda::rms_norm_gated(p, dx.p(), dz.p(), dw.p(), dx.p(), nullptr));  // in place
    expect_close("rms_norm_gated", dx.host(), ref, std::to_string(rows) + "x" + std::to_string(cols));
  }
}

TEST(CudaOps, L2Norm) {
  DS_REQUIRE_GPU();
  // In place on the conv output U [T, Cc]: q and k heads at once (9B: nk 16, dk 128, Cc 8192).
  for (auto [T, nk, dk, Cc] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 16, 128, 8192}, {3, 2, 100, 620}}) {
    const ops::L2NormParams p{T, 2 * nk, dk, Cc, dk, Cc, dk, ops::kL2NormEps};
    const auto x = rnd(T * Cc);
    auto ref = x;
    cpu::l2_norm(p, ref.data(), ref.data());
    Dev<float> dx(x);
    CHECK_OK(cuda::l2_norm(p, dx.p(), dx.p(), nullptr));
    expect_close("l2_norm", dx.host(), ref, "dk " + std::to_string(dk));
  }
}

struct ConvCase {
  std::vector<int32_t> lens;   // tokens per sequence
  std::vector<int32_t> slots;  // state slot per sequence
  int64_t Cc, Kc, n_slots;
  const char* what;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> v = {
      {{1, 1, 1}, {2, 0, 1}, 6144, 4, 3, "decode, 3 sequences, permuted slots (0.8B Cc)"},
      {{5, 1, 2, 0}, {3, 1, 0, 2}, 300, 4, 5, "mixed lengths, an empty sequence, awkward Cc"},
      {{70}, {0}, 8192, 4, 1, "prefill of 70 tokens (9B Cc)"},
      {{3}, {0}, 256, 2, 1, "kernel 2"},
  };
  return v;
}

TEST(CudaOps, Conv1dSilu) {
  DS_REQUIRE_GPU();
  for (const auto& c : conv_cases()) {
    std::vector<int32_t> starts = {0};
    for (int32_t l : c.lens) starts.push_back(starts.back() + l);
    const int64_t T = starts.back();
    const ops::ConvParams p{T, (int64_t)c.lens.size(), c.Cc, c.Kc};
    const auto x = rnd(T * c.Cc), w = rnd(c.Cc * c.Kc, 0.5f);
    auto state = rnd(c.n_slots * (c.Kc - 1) * c.Cc);
    std::vector<float> ref(T * c.Cc);
    auto ref_state = state;
    cpu::conv1d_silu(p, x.data(), w.data(), ref_state.data(), starts.data(), c.slots.data(), ref.data());
    Dev<float> dx(x), dw(w), ds(state), dy(std::vector<float>(T * c.Cc));
    Dev<int32_t> dst(starts), dsl(c.slots);
    CHECK_OK(cuda::conv1d_silu(p, dx.p(), dw.p(), ds.p(), dst.p(), dsl.p(), dy.p(), nullptr));
    expect_close("conv1d_silu", dy.host(), ref, c.what);
    expect_close("conv_state", ds.host(), ref_state, c.what);
  }
}

TEST(CudaOps, Conv1dSiluL2Fused) {
  DS_REQUIRE_GPU();
  for (const auto& c : conv_cases()) {
    const int64_t hd = c.Cc % 128 == 0 ? 128 : 64;
    if (c.Cc % hd != 0) continue;
    std::vector<int32_t> starts = {0};
    for (int32_t l : c.lens) starts.push_back(starts.back() + l);
    const int64_t T = starts.back(), n_norm = (c.Cc / hd) * 2 / 3 * hd;  // about 2/3 of the heads (q, k)
    const ops::ConvParams p{T, (int64_t)c.lens.size(), c.Cc, c.Kc};
    const auto x = rnd(T * c.Cc), w = rnd(c.Cc * c.Kc, 0.5f);
    auto state = rnd(c.n_slots * (c.Kc - 1) * c.Cc);
    std::vector<float> ref(T * c.Cc);
    auto ref_state = state;
    cpu::conv1d_silu(p, x.data(), w.data(), ref_state.data(), starts.data(), c.slots.data(), ref.data());
    cpu::l2_norm({T, n_norm / hd, hd, c.Cc, hd, c.Cc, hd, ops::kL2NormEps}, ref.data(), ref.data());
    Dev<float> dx(x), dw(w), ds(state), dy(std::vector<float>(T * c.Cc));
    Dev<int32_t> dst(starts), dsl(c.slots);
    CHECK_OK(cuda::conv1d_silu_l2(p, n_norm, hd, ops::kL2NormEps, dx.p(), dw.p(), ds.p(), dst.p(), dsl.p(), dy.p(),
                                  nullptr));
    expect_close("conv1d_silu_l2", dy.host(), ref, c.what);
    expect_close("conv_state", ds.host(), ref_state, c.what);
  }
}

TEST(CudaOps, GdnGates) {
  DS_REQUIRE_GPU();
  for (auto [T, nv] : {std::pair<int64_t, int64_t>{1, 48}, {7, 6}, {3, 32}}) {
    const ops::GdnGatesParams p{T, nv};
    auto a = rnd(T * nv, 8.f), b = rnd(T * nv, 4.f);  // wide enough to reach softplus's x > 20 branch
    a[0] = 25.f;
    const auto dt = rnd(nv), ssm_a = rnd(nv);
    std::vector<float> g(T * nv), beta(T * nv);
    cpu::gdn_gates(p, a.data(), b.data(), ssm_a.data(), dt.data(), g.data(), beta.data());
    Dev<float> da(a), db(b), dd(dt), dsa(ssm_a);
    CHECK_OK(cuda::gdn_gates(p, da.p(), db.p(), dsa.p(), dd.p(), da.p(), db.p(), nullptr));  // in place
    expect_close("gdn_gates", da.host(), g, "g");
    expect_close("gdn_gates", db.host(), beta, "beta");
  }
}

struct GdnCase {
  int64_t nk, nv, dk, dv;
  std::vector<int32_t> lens, slots;
  const char* what;
};

TEST(CudaOps, GdnRecurrent) {
  DS_REQUIRE_GPU();
  const std::vector<GdnCase> cases = {
      {16, 32, 128, 128, {1}, {0}, "9B decode"},
      {16, 48, 128, 128, {1, 1}, {1, 0}, "27B decode, 2 sequences, swapped slots"},
      {2, 6, 128, 128, {5, 3}, {0, 1}, "nv = 3 nk, several tokens per sequence"},
      {2, 6, 64, 100, {4}, {0}, "dk 64, dv 100 (not a multiple of the 16-row block)"},
  };
  for (const auto& c : cases) {
    std::vector<int32_t> starts = {0};
    for (int32_t l : c.lens) starts.push_back(starts.back() + l);
    const int64_t T = starts.back(), S = (int64_t)c.lens.size();
    const int64_t Kd = c.nk * c.dk, Cc = 2 * Kd + c.nv * c.dv;
    ops::GdnParams p{T, S, c.nk, c.nv, c.dk, c.dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)c.dk)};
    // q, k, v as views into one U [T, Cc]; q and k L2-normalized as in the model.
    auto U = rnd(T * Cc);
    cpu::l2_norm({T, 2 * c.nk, c.dk, Cc, c.dk, Cc, c.dk, ops::kL2NormEps}, U.data(), U.data());
    auto g = rnd(T * c.nv, 0.5f);
    for (auto& x : g) x = -std::fabs(x);  // g <= 0
    auto beta = rnd(T * c.nv);
    for (auto& x : beta) x = 1.f / (1.f + std::exp(-x));
    const int64_t n_slots = S;
    auto state = rnd(n_slots * p.state_floats(), 0.3f);
    std::vector<float> out(T * c.nv * c.dv);
    auto ref_state = state;
    cpu::gdn_recurrent(p, U.data(), U.data() + Kd, U.data() + 2 * Kd, g.data(), beta.data(), ref_state.data(),
                       starts.data(), c.slots.data(), out.data());
    Dev<float> dU(U), dg(g), db(beta), ds(state), dout(std::vector<float>(out.size(), NAN));
    Dev<int32_t> dst(starts), dsl(c.slots);
    CHECK_OK(cuda::gdn_recurrent(p, dU.p(), dU.p() + Kd, dU.p() + 2 * Kd, dg.p(), db.p(), ds.p(), dst.p(), dsl.p(),
                                 dout.p(), nullptr));
    expect_close("gdn_recurrent", dout.host(), out, c.what);
    expect_close("gdn_state", ds.host(), ref_state, c.what);
  }
}

TEST(CudaOps, RopeNeox) {
  DS_REQUIRE_GPU();
  // q inside the interleaved [q | gate] projection (head stride 2 hd), positions far into the context.
  const int64_t T = 4, nh = 8, hd = 256;
  const ops::RopeParams p{T, nh, hd, 64, 2 * nh * hd, 2 * hd, 1e7f};
  const std::vector<int32_t> pos = {0, 17, 100000, 262143};
  const auto x = rnd(T * 2 * nh * hd);
  auto ref = x;
  cpu::rope_neox(p, ref.data(), pos.data());
  Dev<float> dx(x);
  Dev<int32_t> dp(pos);
  CHECK_OK(cuda::rope_neox(p, dx.p(), dp.p(), nullptr));
  expect_close("rope_neox", dx.host(), ref, "partial rotary 64 of 256, strided");
  // k: packed [T, nkv, hd], awkward n_rot.
  const ops::RopeParams pk{T, 2, 96, 30, 2 * 96, 96, 1e4f};
  const auto xk = rnd(T * 2 * 96);
  auto refk = xk;
  cpu::rope_neox(pk, refk.data(), pos.data());
  Dev<float> dk(xk);
  CHECK_OK(cuda::rope_neox(pk, dk.p(), dp.p(), nullptr));
  expect_close("rope_neox", dk.host(), refk, "n_rot 30 of 96");
}

struct AttnCase {
  int64_t nh, nkv, hd, max_ctx;
  std::vector<int32_t> lens, slots, first_pos;  // per sequence: tokens, slot, position of its first token
  const char* what;
};

TEST(CudaOps, Attention) {
  DS_REQUIRE_GPU();
  const std::vector<AttnCase> cases = {
      {8, 2, 256, 1024, {1, 1}, {1, 0}, {700, 35}, "0.8B decode, 2 sequences, split over the cache"},
      {24, 4, 256, 4096, {1}, {0}, {4000}, "27B decode (group 6), long context"},
      {16, 4, 256, 256, {3, 1}, {0, 1}, {10, 0}, "short cache (no split), 3-token chunk + fresh sequence"},
      {4, 1, 128, 128, {70}, {0}, {0}, "prefill of 70 tokens (group 4, hd 128)"},
      {6, 2, 64, 600, {2}, {0}, {511}, "hd 64, positions across a split boundary"},
  };
  for (const auto& c : cases) {
    std::vector<int32_t> starts = {0}, pos;
    for (size_t s = 0; s < c.lens.size(); s++) {
      starts.push_back(starts.back() + c.lens[s]);
      for (int32_t i = 0; i < c.lens[s]; i++) pos.push_back(c.first_pos[s] + i);
    }
    const int64_t T = starts.back(), S = (int64_t)c.lens.size();
    const ops::AttentionParams p{T, S, c.nh, c.nkv, c.hd, c.max_ctx, 1.0f / std::sqrt((float)c.hd)};
    const auto q = rnd(T * c.nh * c.hd), k = rnd(T * c.nkv * c.hd), v = rnd(T * c.nkv * c.hd);
    auto kc = rnd(S * p.cache_floats()), vc = rnd(S * p.cache_floats());  // earlier rows: random history
    std::vector<float> out(T * c.nh * c.hd);
    auto rkc = kc, rvc = vc;
    cpu::attention(p, q.data(), k.data(), v.data(), rkc.data(), rvc.data(), pos.data(), starts.data(),
                   c.slots.data(), out.data());
    Dev<float> dq(q), dk(k), dv(v), dkc(kc), dvc(vc), dout(std::vector<float>(out.size(), NAN));
    Dev<int32_t> dp(pos), dst(starts), dsl(c.slots);
    CHECK_OK(cuda::attention(p, dq.p(), dk.p(), dv.p(), dkc.p(), dvc.p(), dp.p(), dst.p(), dsl.p(), dout.p(),
                             nullptr));
    expect_close("attention", dout.host(), out, c.what);
    expect_close("kv_cache", dkc.host(), rkc, c.what);
    expect_close("kv_cache", dvc.host(), rvc, c.what);
  }
}

TEST(CudaOps, OutputGateSwigluAdd) {
  DS_REQUIRE_GPU();
  {
    const int64_t T = 3, nh = 24, hd = 256;
    const ops::OutputGateParams p{T, nh, hd, 2 * nh * hd, 2 * hd};
    const auto x = rnd(T * nh * hd), qg = rnd(T * 2 * nh * hd, 3.f);
    auto ref = x;
    cpu::output_gate(p, ref.data(), qg.data() + hd);
    Dev<float> dx(x), dg(qg);
    CHECK_OK(cuda::output_gate(p, dx.p(), dg.p() + hd, nullptr));
    expect_close("output_gate", dx.host(), ref, "27B heads, gate inside [q | gate]");
  }
  for (auto [T, I] : {std::pair<int64_t, int64_t>{1, 17408}, {3, 1001}}) {
    const ops::SwigluParams p{T, I};
    const auto g = rnd(T * I, 3.f), u = rnd(T * I);
    std::vector<float> ref(T * I);
    cpu::swiglu(p, g.data(), u.data(), ref.data());
    Dev<float> dg(g), du(u);
    CHECK_OK(cuda::swiglu(p, dg.p(), du.p(), dg.p(), nullptr));
    expect_close("swiglu", dg.host(), ref, "n_ff " + std::to_string(I));
  }
  {
    const auto a = rnd(5121), b = rnd(5121);
    std::vector<float> ref(a.size());
    cpu::add({5121}, a.data(), b.data(), ref.data());
    Dev<float> da(a), db(b);
    CHECK_OK(cuda::add({5121}, da.p(), db.p(), db.p(), nullptr));
    expect_close("add", db.host(), ref, "5121 elements");
  }
}

TEST(CudaOps, GetRows) {
  DS_REQUIRE_GPU();
  for (GgmlType t : test::cuda_types()) {
    const int64_t V = 301, H = 1024;
    const auto w = test::random_weights(t, V * H, 40 + (int)t);
    const std::vector<int32_t> ids = {5, 0, 300, 5, 17};
    const ops::GetRowsParams p{t, V, H, (int64_t)ids.size()};
    std::vector<float> ref(ids.size() * H);
    cpu::get_rows(p, w.data(), ids.data(), ref.data());
    Dev<uint8_t> dw(w);
    Dev<int32_t> di(ids);
    Dev<float> dy(std::vector<float>(ref.size(), NAN));
    CHECK_OK(cuda::get_rows(p, dw.p(), di.p(), dy.p(), nullptr));
    expect_close("get_rows", dy.host(), ref, std::string(ggml_type_name(t)));
  }
}

TEST(CudaOps, Matmul) {
  DS_REQUIRE_GPU();
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::BF16}) {
    for (int64_t T : {1, 3, 70}) {
      const ops::MatmulParams p{t, 517, 1024, T};
      const auto w = test::random_weights(t, p.n_rows * p.n_cols, 60 + T);
      const auto x = rnd(T * p.n_cols);
      std::vector<float> ref(T * p.n_rows);
      cpu::matmul(p, w.data(), x.data(), ref.data());
      Dev<uint8_t> dw(w);
      Dev<float> dx(x), dy(std::vector<float>(ref.size(), NAN));
      CHECK_OK(cuda::matmul(p, dw.p(), dx.p(), dy.p(), nullptr));
      expect_close("matmul", dy.host(), ref, std::string(ggml_type_name(t)) + " T " + std::to_string(T));
    }
  }
}

TEST(CudaOps, RejectBadShapes) {
  DS_REQUIRE_GPU();
  EXPECT_FALSE(cuda::gdn_recurrent({1, 1, 2, 6, 96, 128, 96, 96, 96, 1.f}, nullptr, nullptr, nullptr, nullptr, nullptr,
                                   nullptr, nullptr, nullptr, nullptr, nullptr).ok());  // dk 96
  EXPECT_FALSE(cuda::attention({1, 1, 16, 1, 256, 128, 1.f}, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, nullptr, nullptr).ok());  // group 16 > 8
  EXPECT_FALSE(cuda::conv1d_silu({1, 1, 64, 9}, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

TEST(CudaOps, GdnRecurrentGatedFused) {
  DS_REQUIRE_GPU();
  const std::vector<GdnCase> cases = {
      {16, 32, 128, 128, {1, 1}, {1, 0}, "9B decode, 2 sequences"},
      {2, 6, 64, 100, {3}, {0}, "nv = 3 nk, dk 64, dv 100"},
  };
  for (const auto& c : cases) {
    std::vector<int32_t> starts = {0};
    for (int32_t l : c.lens) starts.push_back(starts.back() + l);
    const int64_t T = starts.back(), S = (int64_t)c.lens.size();
    const int64_t Kd = c.nk * c.dk, Cc = 2 * Kd + c.nv * c.dv;
    ops::GdnParams p{T, S, c.nk, c.nv, c.dk, c.dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)c.dk)};
    auto U = rnd(T * Cc);
    cpu::l2_norm({T, 2 * c.nk, c.dk, Cc, c.dk, Cc, c.dk, ops::kL2NormEps}, U.data(), U.data());
    auto g = rnd(T * c.nv, 0.5f);
    for (auto& x : g) x = -std::fabs(x);
    auto beta = rnd(T * c.nv);
    for (auto& x : beta) x = 1.f / (1.f + std::exp(-x));
    auto state = rnd(S * p.state_floats(), 0.3f);
    const auto z = rnd(T * c.nv * c.dv, 2.f), w = rnd(c.dv);
    std::vector<float> out(T * c.nv * c.dv);
    auto ref_state = state;
    cpu::gdn_recurrent(p, U.data(), U.data() + Kd, U.data() + 2 * Kd, g.data(), beta.data(), ref_state.data(),
                       starts.data(), c.slots.data(), out.data());
    cpu::rms_norm_gated({T * c.nv, c.dv, 1e-6f}, out.data(), z.data(), w.data(), out.data());
    Dev<float> dU(U), dg(g), db(beta), ds(state), dz(z), dw(w), dout(std::vector<float>(out.size(), NAN));
    Dev<int32_t> dst(starts), dsl(c.slots);
    CHECK_OK(cuda::gdn_recurrent_gated(p, dU.p(), dU.p() + Kd, dU.p() + 2 * Kd, dg.p(), db.p(), ds.p(), dst.p(),
                                       dsl.p(), dz.p(), dw.p(), 1e-6f, dout.p(), nullptr));
    expect_close("gdn_recurrent", dout.host(), out, std::string("gated: ") + c.what);
    expect_close("gdn_state", ds.host(), ref_state, std::string("gated: ") + c.what);
  }
}

}  // namespace
}  // namespace ds

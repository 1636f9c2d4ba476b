// Every CUDA op (src/cuda/ops.h) against its CPU reference (src/cpu/cpu.h) on random inputs, at the
// real shapes and at awkward ones (nv = 3 nk, sizes that are not multiples of any tile, several
// sequences with permuted state slots, positions far into the context). One tolerance table below:
// the relative RMS error ||cuda - cpu|| / ||cpu|| per op (fp32 on both sides; only summation order and
// libm-vs-CUDA transcendental rounding differ).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/model/model_kernels.cuh"
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

// The model's attention-layer kernels (src/cuda/model/kernels_attn.cu) at every DS_ATTN_FUSED level (attn9):
// 0 qk_norm_rope_store + partial + combine, 1 the combine folded into the partial kernel, 2 attention_qk (one
// kernel) — each against the CPU reference (q/k RMSNorm, NEOX RoPE, cache store, attention, output gate) and
// against level 0, at awkward shapes: several splits with empty ones, G = nh/nkv 1..8, the current position at
// split edges, several sequences, multi-token chunks (this step's earlier rows computed, not read), RoPE pairs
// across lanes (n_rot/2 not a multiple of 32).
namespace ds {
namespace {

struct FusedAttnCase {
  int nh, nkv, hd, n_rot, max_ctx, n_splits;
  std::vector<int32_t> lens, first_pos;  // per sequence: tokens, position of its first token
  const char* what;
};

// Restores the attention level a test changed.
struct AttnLevelGuard {
  int saved = cuda::mk::attn_fused();
  ~AttnLevelGuard() { cuda::mk::set_attn_fused(saved); }
};

struct ModelAttnOut {
  std::vector<float> out, core, qn, kn, kr, qr, kc, vc;  // kc / vc: [S][max_ctx][nkv][hd]
  std::vector<unsigned> cnt;
};

TEST(CudaOps, ModelAttentionFused) {
  DS_REQUIRE_GPU();
  AttnLevelGuard guard;
  const std::vector<FusedAttnCase> cases = {
      {8, 2, 256, 64, 4096, 16, {1}, {127}, "0.8B decode: 128 keys over 16 splits"},
      {16, 4, 256, 64, 4096, 16, {1}, {4000}, "9B-like decode (G 4), long context"},
      {24, 4, 256, 64, 1024, 4, {1, 1, 1}, {12, 15, 16}, "G 6, 3 sequences: last split of 1 key / full / next"},
      {8, 8, 128, 128, 512, 3, {1, 1}, {0, 300}, "G 1, full rotary, position 0 (empty splits)"},
      {6, 3, 64, 40, 600, 5, {2, 1}, {119, 598}, "G 2, hd 64, n_rot 40 (pairs across lanes), 2-token chunk"},
      {24, 8, 32, 16, 100, 7, {1, 3}, {6, 50}, "G 3, hd 32, 7 splits, 3-token chunk"},
      {40, 8, 128, 64, 256, 16, {1, 1}, {1, 254}, "G 5, 16 splits mostly empty"},
      {16, 2, 128, 96, 256, 1, {1, 4}, {200, 3}, "G 8, one split, a decode + a 4-token chunk"},
      {8, 1, 256, 64, 300, 16, {5, 1}, {40, 96}, "G 8, a 5-token chunk across a split edge + a decode"},
      {14, 2, 64, 64, 128, 16, {9}, {0}, "G 7, 9 tokens from position 0, 16 splits"},
      {4, 1, 128, 32, 2048, 16, {1, 1, 1, 1}, {63, 64, 65, 1023}, "G 4, 4 sequences at split edges"},
      {32, 4, 256, 64, 4096, 16, {1, 16}, {1000, 200}, "G 8, hd 256, a decode + a 16-token chunk"},
  };
  const float eps = 1e-6f, base = 1e7f;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const int64_t nh = c.nh, nkv = c.nkv, hd = c.hd, S = (int64_t)c.lens.size();
    std::vector<int32_t> starts = {0}, pos, seq;
    for (int64_t s = 0; s < S; s++) {
      starts.push_back(starts.back() + c.lens[s]);
      for (int32_t i = 0; i < c.lens[s]; i++) {
        pos.push_back(c.first_pos[s] + i);
        seq.push_back((int32_t)s);
      }
    }
    const int64_t T = starts.back();
    ASSERT_LE(T, cuda::kMaxStepTokens);
    const int64_t ldq = nh * 2 * hd, row = nkv * hd, cache = c.max_ctx * row;
    const auto qp = rnd(T * ldq), k = rnd(T * row), v = rnd(T * row);
    auto qw = rnd(hd, 0.3f), kw = rnd(hd, 0.3f);
    for (auto& x : qw) x += 1.f;
    for (auto& x : kw) x += 1.f;
    std::vector<float> inv_freq(c.n_rot / 2);
    for (int i = 0; i < c.n_rot / 2; i++) inv_freq[i] = 1.0f / std::pow(base, (float)(2 * i) / (float)c.n_rot);
    const auto kc0 = rnd(S * cache), vc0 = rnd(S * cache);  // earlier rows: random history

    // CPU reference.
    std::vector<float> qn(T * nh * hd), kn(T * row), core(T * nh * hd);
    cpu::rms_norm({T, nh, hd, ldq, 2 * hd, nh * hd, hd, eps}, qp.data(), qw.data(), qn.data());
    cpu::rms_norm({T, nkv, hd, row, hd, row, hd, eps}, k.data(), kw.data(), kn.data());
    auto qr = qn, kr = kn;
    cpu::rope_neox({T, nh, hd, c.n_rot, nh * hd, hd, base}, qr.data(), pos.data());
    cpu::rope_neox({T, nkv, hd, c.n_rot, row, hd, base}, kr.data(), pos.data());
    auto kc_ref = kc0, vc_ref = vc0;
    const ops::AttentionParams ap{T, S, nh, nkv, hd, c.max_ctx, 1.0f / std::sqrt((float)hd)};
    cpu::attention(ap, qr.data(), kr.data(), v.data(), kc_ref.data(), vc_ref.data(), pos.data(), starts.data(),
                   nullptr, core.data());
    auto gated = core;
    cpu::output_gate({T, nh, hd, ldq, 2 * hd}, gated.data(), qp.data() + hd);

    // Device inputs, shared by the runs; the counters too (each run must leave them zero).
    Dev<float> dqp(qp), dk(k), dv(v), dqw(qw), dkw(kw), dfreq(inv_freq);
    Dev<unsigned> dcnt(std::vector<unsigned>(T * nkv, 0u));
    cudaStream_t st = nullptr;
    ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
    const int64_t rec = 512, k_off = rec, v_off = rec + cache * (int64_t)sizeof(float);

    // One run at `level` on fresh sequence states (history kc0 / vc0), with or without the dbg outputs.
    auto run = [&](int level, bool dbg, ModelAttnOut& r) {
      std::vector<Dev<float>> states;
      states.reserve(S);
      for (int64_t s = 0; s < S; s++) {
        std::vector<float> h(rec / 4 + 2 * cache, 0.f);
        std::memcpy(h.data() + rec / 4, kc0.data() + s * cache, cache * sizeof(float));
        std::memcpy(h.data() + rec / 4 + cache, vc0.data() + s * cache, cache * sizeof(float));
        states.emplace_back(h);
      }
      cuda::mk::StepIO io{};
      for (int64_t t = 0; t < T; t++) {
        io.pos[t] = pos[t];
        io.seq[t] = seq[t];
      }
      for (int64_t s = 0; s <= S; s++) io.start[s] = starts[s];
      for (int64_t s = 0; s < S; s++) io.base[s] = (unsigned long long)(uintptr_t)states[s].p();
      cuda::DeviceBuffer dio = test::to_device(&io, sizeof(io));
      const std::vector<float> nan_q(T * nh * hd, NAN), nan_k(T * row, NAN);
      Dev<float> dout(nan_q), dcore(nan_q), dqn(nan_q), dkn(nan_k), dkr(nan_k), dqr(nan_q);
      Dev<float> dpart(std::vector<float>(T * nh * c.n_splits * (hd + 2), NAN));
      cuda::mk::QkArgs qa;
      qa.q = dqp.p();
      qa.ldq = ldq;
      qa.k = dk.p();
      qa.ldk = row;
      qa.v = dv.p();
      qa.ldv = row;
      qa.q_norm = dqw.p();
      qa.k_norm = dkw.p();
      qa.inv_freq = dfreq.p();
      qa.k_off = k_off;
      qa.v_off = v_off;
      qa.n_head = c.nh;
      qa.n_head_kv = c.nkv;
      qa.head_dim = c.hd;
      qa.n_rot = c.n_rot;
      qa.eps = eps;
      qa.q_out = (dbg || level < 2) ? dqr.p() : nullptr;
      qa.dbg_qn = dbg ? dqn.p() : nullptr;
      qa.dbg_kn = dbg ? dkn.p() : nullptr;
      qa.dbg_kr = dbg ? dkr.p() : nullptr;
      cuda::mk::AttnArgs aa;
      aa.q = dqr.p();
      aa.gate = dqp.p() + hd;
      aa.ld_gate = ldq;
      aa.k_off = k_off;
      aa.v_off = v_off;
      aa.n_head = c.nh;
      aa.n_head_kv = c.nkv;
      aa.head_dim = c.hd;
      aa.n_splits = c.n_splits;
      aa.scale = ap.scale;
      aa.part = dpart.p();
      aa.out = dout.p();
      aa.dbg_core = dbg ? dcore.p() : nullptr;
      aa.counters = dcnt.p();
      cuda::mk::set_attn_fused(level);
      ASSERT_EQ(cuda::mk::attn_fused(), level);
      const auto* dio_p = dio.as<cuda::mk::StepIO>();
      if (level >= 2) {
        CHECK_OK(cuda::mk::attention_qk(qa, aa, dio_p, (int)T, st));
      } else {
        CHECK_OK(cuda::mk::qk_norm_rope_store(qa, dio_p, (int)T, st));
        CHECK_OK(cuda::mk::attention(aa, dio_p, (int)T, st));
      }
      ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
      r.out = dout.host();
      r.core = dcore.host();
      r.qn = dqn.host();
      r.kn = dkn.host();
      r.kr = dkr.host();
      r.qr = dqr.host();
      r.kc.clear();
      r.vc.clear();
      for (int64_t s = 0; s < S; s++) {
        const auto h = states[s].host();
        r.kc.insert(r.kc.end(), h.begin() + rec / 4, h.begin() + rec / 4 + cache);
        r.vc.insert(r.vc.end(), h.begin() + rec / 4 + cache, h.end());
      }
      r.cnt = dcnt.host();
    };

    ModelAttnOut ref0;
    for (int level = 0; level <= 2; level++) {
      SCOPED_TRACE("DS_ATTN_FUSED=" + std::to_string(level));
      ModelAttnOut r;
      run(level, true, r);
      if (HasFatalFailure()) break;
      const std::string w = std::string(c.what) + " (level " + std::to_string(level) + ")";
      expect_close("attention", r.out, gated, w + " out");
      expect_close("attention", r.core, core, w + " core");
      expect_close("rms_norm", r.qn, qn, w + " q_norm");
      expect_close("rms_norm", r.kn, kn, w + " k_norm");
      expect_close("rope_neox", r.qr, qr, w + " q_rope");
      expect_close("rope_neox", r.kr, kr, w + " k_rope");
      expect_close("rope_neox", r.kc, kc_ref, w + " K cache");
      expect_close("kv_cache", r.vc, vc_ref, w + " V cache");
      for (size_t i = 0; i < r.cnt.size(); i++) EXPECT_EQ(r.cnt[i], 0u) << w << ": counter " << i << " not reset";
      if (level == 0) {
        ref0 = r;
        continue;
      }
      // Against the three kernels: the same arithmetic in the same order, so expected the same bits (FMA
      // contraction may differ between kernels: then within float rounding). Printed for the record.
      const auto eo = test::compare(r.out.data(), ref0.out.data(), r.out.size());
      const auto ek = test::compare(r.kc.data(), ref0.kc.data(), r.kc.size());
      std::printf("[attn9] %s: level %d vs 0: out max_abs %.3g, K cache max_abs %.3g%s\n", c.what, level,
                  eo.max_abs, ek.max_abs, eo.max_abs == 0 && ek.max_abs == 0 ? " (same bits)" : "");
      EXPECT_LE(eo.rel_rms, 1e-6) << w << ": vs level 0";
      EXPECT_LE(ek.rel_rms, 1e-6) << w << ": K cache vs level 0";
      EXPECT_EQ(r.vc, ref0.vc) << w << ": V cache vs level 0";
      // Again with the same counters and no dbg outputs (q_out null at level 2): the same bits.
      ModelAttnOut r2;
      run(level, false, r2);
      if (HasFatalFailure()) break;
      EXPECT_EQ(r2.out, r.out) << w << ": second run (counters reused, no dbg outputs)";
      EXPECT_EQ(r2.kc, r.kc) << w << ": second run K cache";
      for (size_t i = 0; i < r2.cnt.size(); i++) EXPECT_EQ(r2.cnt[i], 0u) << w << ": counter " << i << " (run 2)";
    }
    cudaStreamDestroy(st);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaOps, ModelAttentionFusedRejects) {  // shape checks only: runs without a GPU
  cuda::mk::QkArgs qa;
  qa.n_head = 8;
  qa.n_head_kv = 2;
  qa.head_dim = 256;
  qa.n_rot = 64;
  cuda::mk::AttnArgs aa;
  aa.n_head = 8;
  aa.n_head_kv = 2;
  aa.head_dim = 256;
  aa.n_splits = 4;
  EXPECT_FALSE(cuda::mk::attention_qk(qa, aa, nullptr, 1, nullptr).ok());  // 4 splits without counters
  aa.n_splits = 1;
  qa.n_rot = 63;
  EXPECT_FALSE(cuda::mk::attention_qk(qa, aa, nullptr, 1, nullptr).ok());  // odd n_rot
  qa.n_rot = 64;
  qa.n_head_kv = 4;
  EXPECT_FALSE(cuda::mk::attention_qk(qa, aa, nullptr, 1, nullptr).ok());  // q/k args disagree
  qa.n_head_kv = 2;
  aa.n_head = 32;
  qa.n_head = 32;
  EXPECT_FALSE(cuda::mk::attention_qk(qa, aa, nullptr, 1, nullptr).ok());  // group 16 > 8
}

}  // namespace
}  // namespace ds

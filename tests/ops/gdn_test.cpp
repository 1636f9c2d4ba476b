// Gated delta rule: the recurrent form against an independent double-precision formulation in HF's
// layout (S [dk][dv] per head, q scaled first), the chunked form against the recurrent one at the awkward
// lengths (T = 1, 63, 64, 65, 200; with and without initial state; nv = 3*nk), packed batches vs each
// sequence alone, and the gates against hand-computed values.
#include <cmath>

#include "cpu/cpu.h"
#include "op_test_util.h"

using namespace ds;
using ds::test::expect_close;

namespace {
// Tolerances: chunked vs recurrent differ only by fp32 rounding order.
constexpr double kRecVsDoubleAbs = 2e-5, kRecVsDoubleRel = 2e-6;
constexpr double kChunkVsRecAbs = 5e-5, kChunkVsRecRel = 1e-5;

struct GdnCase {
  int64_t T, nk, nv, dk, dv;
  std::vector<float> q, k, v, g, beta;  // q, k L2-normalized, packed [T, nk, dk]; v [T, nv, dv]
  std::vector<float> state0;            // [nv, dv, dk]

  GdnCase(int64_t T_, int64_t nk_, int64_t nv_, int64_t dk_, int64_t dv_, bool with_state, uint64_t seed)
      : T(T_), nk(nk_), nv(nv_), dk(dk_), dv(dv_) {
    q = ds::test::randn(T * nk * dk, seed + 1);
    k = ds::test::randn(T * nk * dk, seed + 2);
    v = ds::test::randn(T * nv * dv, seed + 3);
    for (auto* x : {&q, &k}) {
      const int64_t rows = T * nk;
      cpu::l2_norm({rows, 1, dk, dk, 0, dk, 0, 1e-6f}, x->data(), x->data());
    }
    // Gates as the model makes them: g = -exp(A_log) * softplus(a + dt), beta = sigmoid(b).
    auto a = ds::test::randn(T * nv, seed + 4), b = ds::test::randn(T * nv, seed + 5, 2.0f);
    auto ssm_a = ds::test::uniform(nv, seed + 6, -8.0f, -0.5f), dt = ds::test::randn(nv, seed + 7);
    g.resize(T * nv);
    beta.resize(T * nv);
    cpu::gdn_gates({T, nv}, a.data(), b.data(), ssm_a.data(), dt.data(), g.data(), beta.data());
    state0 = with_state ? ds::test::randn(nv * dv * dk, seed + 8, 0.5f) : std::vector<float>(nv * dv * dk, 0.0f);
  }
  ops::GdnParams params() const {
    return {T, 1, nk, nv, dk, dv, nk * dk, nk * dk, nv * dv, 1.0f / std::sqrt((float)dk)};
  }
};

// Independent formulation (spec §4.4 in HF's layout, double): S[h] [dk][dv], kh = h % nk (GGUF order).
void gdn_double(const GdnCase& c, std::vector<float>& out, std::vector<float>& state) {
  const int64_t nk = c.nk, nv = c.nv, dk = c.dk, dv = c.dv;
  out.assign(c.T * nv * dv, 0.0f);
  state.assign(nv * dv * dk, 0.0f);
  for (int64_t h = 0; h < nv; h++) {
    const int64_t kh = h % nk;
    std::vector<double> S(dk * dv);
    for (int64_t i = 0; i < dk; i++)
      for (int64_t j = 0; j < dv; j++) S[i * dv + j] = c.state0[(h * dv + j) * dk + i];
    for (int64_t t = 0; t < c.T; t++) {
      const float* q = &c.q[(t * nk + kh) * dk];
      const float* k = &c.k[(t * nk + kh) * dk];
      const float* v = &c.v[(t * nv + h) * dv];
      const double decay = std::exp((double)c.g[t * nv + h]), b = c.beta[t * nv + h];
      for (auto& s : S) s *= decay;
      for (int64_t j = 0; j < dv; j++) {
        double mem = 0;
        for (int64_t i = 0; i < dk; i++) mem += S[i * dv + j] * k[i];
        const double delta = (v[j] - mem) * b;
        for (int64_t i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
      }
      for (int64_t j = 0; j < dv; j++) {
        double o = 0;
        for (int64_t i = 0; i < dk; i++) o += S[i * dv + j] * q[i] / std::sqrt((double)dk);
        out[(t * nv + h) * dv + j] = (float)o;
      }
    }
    for (int64_t i = 0; i < dk; i++)
      for (int64_t j = 0; j < dv; j++) state[(h * dv + j) * dk + i] = (float)S[i * dv + j];
  }
}

std::string name(const GdnCase& c, bool st) {
  return "T=" + std::to_string(c.T) + " nk=" + std::to_string(c.nk) + " nv=" + std::to_string(c.nv) +
         " dk=" + std::to_string(c.dk) + (st ? " with state" : " zero state");
}
}  // namespace

TEST(GdnGates, HandComputed) {
  // softplus(0) = ln 2; softplus(25) = 25 (threshold); softplus(-30) = log1p(e^-30) ~ 9.36e-14 (not 0).
  const std::vector<float> a = {0.5f, 25.0f, -30.0f}, b = {0.0f, 2.0f, -1.0f};
  const std::vector<float> ssm_a = {-2.0f, -0.5f, -1.0f}, dt = {-0.5f, 0.0f, 0.0f};
  std::vector<float> g(3), beta(3);
  cpu::gdn_gates({1, 3}, a.data(), b.data(), ssm_a.data(), dt.data(), g.data(), beta.data());
  EXPECT_NEAR(g[0], -2.0 * std::log(2.0), 1e-7);
  EXPECT_FLOAT_EQ(g[1], -12.5f);
  EXPECT_NEAR(g[2], -std::exp(-30.0), 1e-19);
  EXPECT_FLOAT_EQ(beta[0], 0.5f);
  EXPECT_NEAR(beta[1], 1 / (1 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(beta[2], 1 / (1 + std::exp(1.0)), 1e-7);
}

TEST(Gdn, RecurrentAgainstDoubleFormulation) {
  for (auto [nk, nv] : {std::pair<int64_t, int64_t>{2, 2}, {2, 6}}) {
    for (bool st : {false, true}) {
      GdnCase c(37, nk, nv, 32, 16, st, 1000 + nv);
      std::vector<float> out(c.T * nv * c.dv), state = c.state0, out_ref, state_ref;
      cpu::gdn_recurrent(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), state.data(),
                         nullptr, nullptr, out.data());
      gdn_double(c, out_ref, state_ref);
      expect_close(out, out_ref, kRecVsDoubleAbs, kRecVsDoubleRel, "recurrent out " + name(c, st));
      expect_close(state, state_ref, kRecVsDoubleAbs, kRecVsDoubleRel, "recurrent state " + name(c, st));
    }
  }
}

TEST(Gdn, HeadMappingIsModuloNotDivision) {
  // nv = 3*nk: value head h reads key head h % nk. Make key head 1's q/k zero: then value heads 1, 3, 5
  // (h % 2 == 1) must output exactly 0 from a zero state, and heads 0, 2, 4 must not.
  GdnCase c(3, 2, 6, 8, 8, false, 77);
  for (int64_t t = 0; t < c.T; t++)
    for (int64_t i = 0; i < c.dk; i++) c.q[(t * 2 + 1) * c.dk + i] = c.k[(t * 2 + 1) * c.dk + i] = 0.0f;
  std::vector<float> out(c.T * 6 * c.dv), state = c.state0;
  cpu::gdn_recurrent(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), state.data(),
                     nullptr, nullptr, out.data());
  for (int64_t h = 0; h < 6; h++) {
    double mag = 0;
    for (int64_t t = 0; t < c.T; t++)
      for (int64_t j = 0; j < c.dv; j++) mag += std::fabs(out[(t * 6 + h) * c.dv + j]);
    if (h % 2 == 1) EXPECT_EQ(mag, 0.0) << "head " << h;
    else EXPECT_GT(mag, 1e-3) << "head " << h;
  }
}

TEST(Gdn, ChunkedEqualsRecurrent) {
  for (int64_t T : {1, 63, 64, 65, 200}) {
    for (bool st : {false, true}) {
      GdnCase c(T, 2, 6, 32, 32, st, 5000 + T);  // nv = 3*nk
      std::vector<float> out_r(T * c.nv * c.dv), out_c(out_r.size()), st_r = c.state0, st_c = c.state0;
      cpu::gdn_recurrent(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st_r.data(),
                         nullptr, nullptr, out_r.data());
      cpu::gdn_chunked(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st_c.data(),
                       nullptr, nullptr, out_c.data());
      expect_close(out_c, out_r, kChunkVsRecAbs, kChunkVsRecRel, "chunked out " + name(c, st));
      expect_close(st_c, st_r, kChunkVsRecAbs, kChunkVsRecRel, "chunked state " + name(c, st));
    }
  }
}

TEST(Gdn, ChunkedThenRecurrentContinues) {
  // Prefill 100 tokens chunked, then 30 recurrent: equals 130 recurrent (the state handed over is right).
  GdnCase c(130, 2, 4, 16, 24, true, 99);
  const auto p = c.params();
  std::vector<float> out_all(c.T * c.nv * c.dv), st_all = c.state0;
  cpu::gdn_recurrent(p, c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st_all.data(), nullptr,
                     nullptr, out_all.data());
  std::vector<float> out(out_all.size()), st = c.state0;
  auto p1 = p;
  p1.n_tokens = 100;
  cpu::gdn_chunked(p1, c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st.data(), nullptr, nullptr,
                   out.data());
  for (int64_t t = 100; t < c.T; t++) {
    auto p2 = p;
    p2.n_tokens = 1;
    cpu::gdn_recurrent(p2, &c.q[t * c.nk * c.dk], &c.k[t * c.nk * c.dk], &c.v[t * c.nv * c.dv], &c.g[t * c.nv],
                       &c.beta[t * c.nv], st.data(), nullptr, nullptr, &out[t * c.nv * c.dv]);
  }
  expect_close(out, out_all, kChunkVsRecAbs, kChunkVsRecRel, "chunked+recurrent out");
  expect_close(st, st_all, kChunkVsRecAbs, kChunkVsRecRel, "chunked+recurrent state");
}

TEST(Gdn, StridedViewsAndPackedBatch) {
  // q, k, v as views into one U [T, Cc] buffer; three sequences packed with slots, both forms, vs each alone.
  const int64_t nk = 2, nv = 4, dk = 8, dv = 8, Kd = nk * dk, Cc = 2 * Kd + nv * dv;
  const std::vector<int32_t> starts = {0, 70, 71, 71, 90}, slots = {3, 0, 2, 1};
  const int64_t T = starts.back(), S = 4, sf = nv * dv * dk;
  auto U = ds::test::randn(T * Cc, 314);
  cpu::l2_norm({T, 2 * nk, dk, Cc, dk, Cc, dk, 1e-6f}, U.data(), U.data());
  auto g = ds::test::uniform(T * nv, 315, -2.0f, 0.0f), beta = ds::test::uniform(T * nv, 316, 0.0f, 1.0f);
  const auto pool0 = ds::test::randn(S * sf, 317, 0.3f);
  ops::GdnParams p{T, S, nk, nv, dk, dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)dk)};
  for (bool chunked : {false, true}) {
    auto fn = chunked ? cpu::gdn_chunked : cpu::gdn_recurrent;
    std::vector<float> out(T * nv * dv), pool = pool0;
    fn(p, U.data(), U.data() + Kd, U.data() + 2 * Kd, g.data(), beta.data(), pool.data(), starts.data(),
       slots.data(), out.data());
    std::vector<float> out1(out.size()), pool1 = pool0;
    for (int64_t s = 0; s < S; s++) {
      auto p1 = p;
      p1.n_seqs = 1;
      p1.n_tokens = starts[s + 1] - starts[s];
      const int64_t t0 = starts[s];
      fn(p1, U.data() + t0 * Cc, U.data() + t0 * Cc + Kd, U.data() + t0 * Cc + 2 * Kd, g.data() + t0 * nv,
         beta.data() + t0 * nv, pool1.data() + slots[s] * sf, nullptr, nullptr, out1.data() + t0 * nv * dv);
    }
    EXPECT_EQ(out, out1) << (chunked ? "chunked" : "recurrent");
    EXPECT_EQ(pool, pool1) << (chunked ? "chunked" : "recurrent");
  }
}

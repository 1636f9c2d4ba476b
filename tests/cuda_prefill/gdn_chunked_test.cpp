// cuda::prefill::gdn_chunked against cpu::gdn_chunked and cpu::gdn_recurrent (outputs and final states) at
// T = 1, 63, 64, 65, 200 and 4096 (4096 with one key head and three value heads to keep the CPU side fast),
// with and without an initial state, nv = 3 nk, dk = dv = 128 (and 64, the fixtures' size); packed sequences
// with permuted state slots; and each stage alone against a double-precision recomputation from the GPU's own
// inputs to that stage, so a failure names the stage. q, k are views into one U [T, Cc] buffer as in the model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/prefill/prefill.cuh"
#include "prefill_test_util.h"

namespace ds {
namespace {
using cuda::prefill::GdnLayout;
using cuda::prefill::GdnStages;
using test::Dev;

// Tolerances (max |Δ|, relative RMS). Both sides are fp32 with the same summation order; fused multiply-adds
// and expf rounding differ. Against the recurrent form the algorithms themselves round differently.
constexpr double kVsChunkedAbs = 2e-4, kVsChunkedRel = 2e-5;
constexpr double kVsRecurrentAbs = 1e-3, kVsRecurrentRel = 1e-4;
constexpr double kStageRel = 2e-5, kStageAbs = 2e-4;  // one stage vs double from the same inputs

struct Case {
  int64_t T, nk, nv, D, n_slots;
  std::vector<int32_t> starts, slots;  // empty: one sequence in slot 0
  std::vector<float> U, g, beta, pool0;

  int64_t Kd() const { return nk * D; }
  int64_t Cc() const { return 2 * nk * D + nv * D; }
  int64_t S() const { return starts.empty() ? 1 : (int64_t)starts.size() - 1; }
  ops::GdnParams params() const {
    return {T, S(), nk, nv, D, D, Cc(), Cc(), Cc(), 1.0f / std::sqrt((float)D)};
  }
  std::string name() const {
    return "T=" + std::to_string(T) + " nk=" + std::to_string(nk) + " nv=" + std::to_string(nv) +
           " d=" + std::to_string(D) + " seqs=" + std::to_string(S());
  }
};

Case make_case(int64_t T, int64_t nk, int64_t nv, int64_t D, bool with_state, uint64_t seed,
               std::vector<int32_t> starts = {}, std::vector<int32_t> slots = {}) {
  Case c{T, nk, nv, D, 1, std::move(starts), std::move(slots), {}, {}, {}, {}};
  if (!c.slots.empty()) c.n_slots = *std::max_element(c.slots.begin(), c.slots.end()) + 1;
  c.U = test::prandn(T * c.Cc(), seed + 1);
  cpu::l2_norm({T, 2 * nk, D, c.Cc(), D, c.Cc(), D, 1e-6f}, c.U.data(), c.U.data());  // q and k heads
  const auto a = test::prandn(T * nv, seed + 2), b = test::prandn(T * nv, seed + 3, 2.0f);
  const auto ssm_a = test::puniform(nv, seed + 4, -8.0f, -0.5f), dt = test::prandn(nv, seed + 5);
  c.g.resize(T * nv);
  c.beta.resize(T * nv);
  cpu::gdn_gates({T, nv}, a.data(), b.data(), ssm_a.data(), dt.data(), c.g.data(), c.beta.data());
  const size_t sf = nv * D * D;
  c.pool0 = with_state ? test::prandn(c.n_slots * sf, seed + 6, 0.5f) : std::vector<float>(c.n_slots * sf, 0.f);
  return c;
}

using CpuFn = void (*)(const ops::GdnParams&, const float*, const float*, const float*, const float*, const float*,
                       float*, const int32_t*, const int32_t*, float*);

void run_cpu(const Case& c, CpuFn fn, std::vector<float>& out, std::vector<float>& pool) {
  out.assign(c.T * c.nv * c.D, 0.f);
  pool = c.pool0;
  fn(c.params(), c.U.data(), c.U.data() + c.Kd(), c.U.data() + 2 * c.Kd(), c.g.data(), c.beta.data(), pool.data(),
     c.starts.empty() ? nullptr : c.starts.data(), c.slots.empty() ? nullptr : c.slots.data(), out.data());
}

void run_cuda(const Case& c, std::vector<float>& out, std::vector<float>& pool,
              cuda::prefill::Mode mode = cuda::prefill::Mode::kPrecise) {
  const auto p = c.params();
  Dev<float> U(c.U), g(c.g), beta(c.beta), dpool(c.pool0);
  Dev<float> dout(std::vector<float>(c.T * c.nv * c.D, std::numeric_limits<float>::quiet_NaN()));  // poison
  Dev<int32_t> starts(c.starts), slots(c.slots);
  const size_t ws_bytes = cuda::prefill::gdn_chunked_workspace_bytes(p);
  auto ws = cuda::DeviceBuffer::alloc(ws_bytes);
  ASSERT_TRUE(ws.ok()) << ws.error().message;
  DS_CHECK_OK(cuda::prefill::gdn_chunked(p, U.p(), U.p() + c.Kd(), U.p() + 2 * c.Kd(), g.p(), beta.p(), dpool.p(),
                                         c.starts.empty() ? nullptr : starts.p(),
                                         c.slots.empty() ? nullptr : slots.p(), dout.p(), ws->data(), ws_bytes,
                                         nullptr, mode));
  out = dout.host();
  pool = dpool.host();
}

TEST(PrefillGdn, MatchesCpuChunkedAndRecurrent) {
  DS_PREFILL_REQUIRE_GPU();
  struct Shape { int64_t T, nk, nv, D; };
  const std::vector<Shape> shapes = {{1, 2, 6, 128},  {63, 2, 6, 128}, {64, 2, 6, 128},  {65, 2, 6, 128},
                                     {200, 2, 6, 64}, {130, 4, 4, 128}, {4096, 1, 3, 128}};
  uint64_t seed = 100;
  for (const auto& sh : shapes) {
    for (bool st : {false, true}) {
      const Case c = make_case(sh.T, sh.nk, sh.nv, sh.D, st, seed += 10);
      const std::string what = c.name() + (st ? " with state" : " zero state");
      std::vector<float> out, pool, out_c, pool_c, out_r, pool_r;
      run_cuda(c, out, pool);
      run_cpu(c, cpu::gdn_chunked, out_c, pool_c);
      run_cpu(c, cpu::gdn_recurrent, out_r, pool_r);
      test::expect_near(out, out_c, kVsChunkedAbs, kVsChunkedRel, "out vs cpu chunked, " + what);
      test::expect_near(pool, pool_c, kVsChunkedAbs, kVsChunkedRel, "state vs cpu chunked, " + what);
      test::expect_near(out, out_r, kVsRecurrentAbs, kVsRecurrentRel, "out vs cpu recurrent, " + what);
      test::expect_near(pool, pool_r, kVsRecurrentAbs, kVsRecurrentRel, "state vs cpu recurrent, " + what);
    }
  }
}

TEST(PrefillGdn, FastModeMatches) {
  DS_PREFILL_REQUIRE_GPU();
  const Case c = make_case(300, 2, 6, 128, true, 4242);
  std::vector<float> out, pool, out_c, pool_c;
  run_cuda(c, out, pool, cuda::prefill::Mode::kFast);
  run_cpu(c, cpu::gdn_chunked, out_c, pool_c);
  test::expect_near(out, out_c, kVsChunkedAbs, kVsChunkedRel, "fast mode out, " + c.name());
  test::expect_near(pool, pool_c, kVsChunkedAbs, kVsChunkedRel, "fast mode state, " + c.name());
}

TEST(PrefillGdn, PackedSequencesWithSlots) {
  DS_PREFILL_REQUIRE_GPU();
  // Lengths 70, 1, 0, 129 in slots 3, 0, 2, 1 (an empty sequence keeps its state).
  const Case c = make_case(200, 2, 4, 128, true, 777, {0, 70, 71, 71, 200}, {3, 0, 2, 1});
  std::vector<float> out, pool, out_c, pool_c;
  run_cuda(c, out, pool);
  run_cpu(c, cpu::gdn_chunked, out_c, pool_c);
  test::expect_near(out, out_c, kVsChunkedAbs, kVsChunkedRel, "packed out, " + c.name());
  test::expect_near(pool, pool_c, kVsChunkedAbs, kVsChunkedRel, "packed state, " + c.name());
  const size_t sf = c.nv * c.D * c.D;  // slot 2 (the empty sequence) must come back bit for bit
  EXPECT_TRUE(std::equal(pool.begin() + 2 * sf, pool.begin() + 3 * sf, c.pool0.begin() + 2 * sf));
}

TEST(PrefillGdn, DecodeContinuesFromPrefillState) {
  DS_PREFILL_REQUIRE_GPU();
  // CUDA prefill of 100 tokens, then the CPU recurrent rule for 30 more from the state it handed over,
  // equals 130 tokens of the recurrent rule.
  const Case all = make_case(130, 2, 6, 128, true, 31);
  std::vector<float> out_r, pool_r;
  run_cpu(all, cpu::gdn_recurrent, out_r, pool_r);
  Case head = all;
  head.T = 100;
  std::vector<float> out, pool;
  run_cuda(head, out, pool);
  out.resize(all.T * all.nv * all.D);
  auto p = all.params();
  p.n_tokens = 30;
  const int64_t t0 = 100, Cc = all.Cc();
  cpu::gdn_recurrent(p, all.U.data() + t0 * Cc, all.U.data() + t0 * Cc + all.Kd(), all.U.data() + t0 * Cc + 2 * all.Kd(),
                     all.g.data() + t0 * all.nv, all.beta.data() + t0 * all.nv, pool.data(), nullptr, nullptr,
                     out.data() + t0 * all.nv * all.D);
  test::expect_near(out, out_r, kVsRecurrentAbs, kVsRecurrentRel, "prefill 100 + decode 30, out");
  test::expect_near(pool, pool_r, kVsRecurrentAbs, kVsRecurrentRel, "prefill 100 + decode 30, state");
}

TEST(PrefillGdn, RecurColumnSplitsAgree) {
  DS_PREFILL_REQUIRE_GPU();
  // The recurrence runs in blocks of 8, 16 or 32 value columns (chosen from the head count at run time): each
  // split, pinned, through the whole pipeline, for both head dims.
  for (int64_t D : {128, 64}) {
    const Case c = make_case(150, 2, 4, D, true, 60 + D, {0, 100, 150}, {1, 0});
    std::vector<float> out_c, pool_c;
    run_cpu(c, cpu::gdn_chunked, out_c, pool_c);
    for (int bv : {8, 16, 32}) {
      const auto p = c.params();
      Dev<float> U(c.U), g(c.g), beta(c.beta), pool(c.pool0), out = Dev<float>::zeros(c.T * c.nv * c.D);
      Dev<int32_t> starts(c.starts), slots(c.slots);
      const GdnLayout L = GdnLayout::make(p);
      auto ws = cuda::DeviceBuffer::alloc(L.total);
      ASSERT_TRUE(ws.ok());
      GdnStages S{p, U.p(), U.p() + c.Kd(), U.p() + 2 * c.Kd(), g.p(), beta.p(), pool.p(), starts.p(), slots.p(),
                  out.p(), ws->as<uint8_t>(), L, nullptr, bv};
      DS_CHECK_OK(S.check());
      for (auto fn : {&GdnStages::table, &GdnStages::cumsum, &GdnStages::kkt, &GdnStages::solve, &GdnStages::wu,
                      &GdnStages::recur, &GdnStages::output})
        DS_CHECK_OK((S.*fn)());
      const std::string what = c.name() + " recur columns " + std::to_string(bv);
      test::expect_near(out.host(), out_c, kVsChunkedAbs, kVsChunkedRel, "out, " + what);
      test::expect_near(pool.host(), pool_c, kVsChunkedAbs, kVsChunkedRel, "state, " + what);
    }
  }
}

TEST(PrefillGdn, RejectsBadParams) {
  DS_PREFILL_REQUIRE_GPU();
  auto ws = cuda::DeviceBuffer::alloc(1 << 20);
  ASSERT_TRUE(ws.ok());
  float* f = ws->as<float>();
  auto call = [&](ops::GdnParams p, size_t bytes) {
    return cuda::prefill::gdn_chunked(p, f, f, f, f, f, f, nullptr, nullptr, f, ws->data(), bytes, nullptr);
  };
  const ops::GdnParams ok{8, 1, 2, 6, 128, 128, 512, 512, 768, 0.088f};
  auto bad = ok;
  bad.d_k = bad.d_v = 96;
  EXPECT_FALSE(call(bad, 1 << 20).ok()) << "dk 96";
  bad = ok;
  bad.d_v = 64;
  EXPECT_FALSE(call(bad, 1 << 20).ok()) << "dk != dv";
  bad = ok;
  bad.n_v_heads = 5;
  EXPECT_FALSE(call(bad, 1 << 20).ok()) << "nv not a multiple of nk";
  EXPECT_FALSE(call(ok, 1024).ok()) << "workspace too small";
  bad = ok;
  bad.n_tokens = 0;
  EXPECT_TRUE(call(bad, 1 << 20).ok()) << "no tokens is a no-op";
}

// ---- stage by stage ------------------------------------------------------------------------------------

struct Host {  // the workspace on the host, viewed through the layout
  std::vector<uint8_t> b;
  const GdnLayout* L;
  const int32_t* tiles() const { return reinterpret_cast<const int32_t*>(b.data() + L->tiles); }
  const int32_t* seq_first() const { return reinterpret_cast<const int32_t*>(b.data() + L->seq_first); }
  std::vector<float> f(size_t off, size_t n) const {
    std::vector<float> v(n);
    std::memcpy(v.data(), b.data() + off, n * 4);
    return v;
  }
};

Host download(const cuda::DeviceBuffer& ws, const GdnLayout& L) {
  Host h{std::vector<uint8_t>(L.total), &L};
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto s = ws.download(h.b.data(), L.total);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return h;
}

TEST(PrefillGdn, EachStageAgainstDouble) {
  DS_PREFILL_REQUIRE_GPU();
  // Two sequences (100 and 30 tokens: chunks of 64, 36 and 30) in slots 1 and 0, nv = 3 nk.
  const Case c = make_case(130, 2, 6, 128, true, 2024, {0, 100, 130}, {1, 0});
  const auto p = c.params();
  const int64_t nv = c.nv, nk = c.nk, D = c.D, Cc = c.Cc(), Kd = c.Kd();
  constexpr int64_t C = cuda::prefill::kGdnChunk;
  Dev<float> U(c.U), g(c.g), beta(c.beta), pool(c.pool0), out = Dev<float>::zeros(c.T * nv * D);
  Dev<int32_t> starts(c.starts), slots(c.slots);
  const GdnLayout L = GdnLayout::make(p);
  auto wsb = cuda::DeviceBuffer::alloc(L.total);
  ASSERT_TRUE(wsb.ok());
  GdnStages S{p, U.p(), U.p() + Kd, U.p() + 2 * Kd, g.p(), beta.p(), pool.p(), starts.p(), slots.p(), out.p(),
              wsb->as<uint8_t>(), L, nullptr};
  DS_CHECK_OK(S.check());
  const float scale = p.scale;
  auto q_at = [&](int64_t t, int64_t kh, int64_t i) { return (double)c.U[t * Cc + kh * D + i]; };
  auto k_at = [&](int64_t t, int64_t kh, int64_t i) { return (double)c.U[t * Cc + Kd + kh * D + i]; };
  auto v_at = [&](int64_t t, int64_t h, int64_t j) { return (double)c.U[t * Cc + 2 * Kd + h * D + j]; };

  // table
  DS_CHECK_OK(S.table());
  Host h = download(*wsb, L);
  const std::vector<std::vector<int32_t>> want_tiles = {{0, 0, 64, 0}, {0, 64, 36, 1}, {1, 100, 30, 0}};
  ASSERT_EQ(L.max_chunks, 5);
  for (int64_t i = 0; i < L.max_chunks; i++) {
    const std::vector<int32_t> got(h.tiles() + 4 * i, h.tiles() + 4 * i + 4);
    const std::vector<int32_t> want = i < 3 ? want_tiles[i] : std::vector<int32_t>(4, 0);
    EXPECT_EQ(got, want) << "tile " << i;
  }
  EXPECT_EQ(std::vector<int32_t>(h.seq_first(), h.seq_first() + 3), (std::vector<int32_t>{0, 2, 3}));
  const int n_chunks = 3;
  auto tile = [&](int ci) { return std::vector<int32_t>(h.tiles() + 4 * ci, h.tiles() + 4 * ci + 4); };

  // cumsum
  DS_CHECK_OK(S.cumsum());
  h = download(*wsb, L);
  std::vector<float> G(n_chunks * nv * C), Gref(n_chunks * nv * C, 0.f);
  {
    const auto all = h.f(L.gcum, L.max_chunks * nv * C);
    std::copy(all.begin(), all.begin() + G.size(), G.begin());
    for (int ci = 0; ci < n_chunks; ci++) {
      const auto tl = tile(ci);
      for (int64_t hh = 0; hh < nv; hh++) {
        double acc = 0;
        for (int tau = 0; tau < tl[2]; tau++) Gref[(ci * nv + hh) * C + tau] = (float)(acc += c.g[(tl[1] + tau) * nv + hh]);
      }
    }
    test::expect_near(G, Gref, kStageAbs, kStageRel, "stage cumsum");
  }
  auto Gat = [&](int ci, int64_t hh, int tau) { return (double)G[(ci * nv + hh) * C + tau]; };

  // kkt: A and Aqk from the GPU's G
  DS_CHECK_OK(S.kkt());
  h = download(*wsb, L);
  const size_t nCC = n_chunks * nv * C * C;
  {
    auto A = h.f(L.a, nCC), Aqk = h.f(L.aqk, nCC);
    std::vector<float> Ar(nCC, 0.f), Qr(nCC, 0.f);
    for (int ci = 0; ci < n_chunks; ci++) {
      const auto tl = tile(ci);
      for (int64_t hh = 0; hh < nv; hh++) {
        const int64_t kh = hh % nk;
        for (int tau = 0; tau < tl[2]; tau++)
          for (int sg = 0; sg <= tau; sg++) {
            double kk = 0, qk = 0;
            for (int64_t i = 0; i < D; i++) {
              kk += k_at(tl[1] + tau, kh, i) * k_at(tl[1] + sg, kh, i);
              qk += q_at(tl[1] + tau, kh, i) * scale * k_at(tl[1] + sg, kh, i);
            }
            const double dec = std::exp(Gat(ci, hh, tau) - Gat(ci, hh, sg));
            const size_t at = ((ci * nv + hh) * C + tau) * C + sg;
            if (sg < tau) Ar[at] = (float)(c.beta[(tl[1] + tau) * nv + hh] * kk * dec);
            Qr[at] = (float)(qk * dec);
          }
      }
    }
    test::expect_near(A, Ar, kStageAbs, kStageRel, "stage kkt: A");
    test::expect_near(Aqk, Qr, kStageAbs, kStageRel, "stage kkt: Aqk");
  }
  const auto Adev = h.f(L.a, nCC);

  // solve: Tm = (I + A)^-1 from the GPU's A; also (I + A) Tm = I
  DS_CHECK_OK(S.solve());
  h = download(*wsb, L);
  const auto Tm = h.f(L.a, nCC);
  {
    std::vector<float> Tr(nCC, 0.f), resid(nCC, 0.f), zero(nCC, 0.f);
    for (int ci = 0; ci < n_chunks; ci++) {
      const int n = tile(ci)[2];
      for (int64_t hh = 0; hh < nv; hh++) {
        const size_t base = (ci * nv + hh) * C * C;
        std::vector<double> X(C * C, 0.0);
        for (int t = 0; t < n; t++) {
          for (int u = 0; u < t; u++) {
            double x = -Adev[base + t * C + u];
            for (int m = u + 1; m < t; m++) x -= Adev[base + t * C + m] * X[m * C + u];
            X[t * C + u] = x;
          }
          X[t * C + t] = 1.0;
        }
        for (int t = 0; t < C; t++)
          for (int u = 0; u < C; u++) {
            Tr[base + t * C + u] = (float)X[t * C + u];
            double r = 0;  // ((I + A) Tm)[t][u] - I
            for (int m = 0; m < C; m++) r += ((t == m ? 1.0 : 0.0) + Adev[base + t * C + m]) * Tm[base + m * C + u];
            resid[base + t * C + u] = (float)(r - (t == u && t < n ? 1.0 : 0.0));
          }
      }
    }
    test::expect_near(Tm, Tr, kStageAbs, kStageRel, "stage solve: Tm");
    test::expect_near(resid, zero, kStageAbs, 1.0, "stage solve: (I + A) Tm - I");
  }

  // wu: W = Tm diag(β e^G) K, U = Tm diag(β) V from the GPU's Tm and G
  DS_CHECK_OK(S.wu());
  h = download(*wsb, L);
  const size_t nCD = n_chunks * nv * C * D;
  const auto Wdev = h.f(L.w, nCD), Udev = h.f(L.u, nCD);
  {
    std::vector<float> Wr(nCD, 0.f), Ur(nCD, 0.f);
    for (int ci = 0; ci < n_chunks; ci++) {
      const auto tl = tile(ci);
      for (int64_t hh = 0; hh < nv; hh++) {
        const int64_t kh = hh % nk;
        const size_t tb = (ci * nv + hh) * C * C, ob = (ci * nv + hh) * C * D;
        for (int tau = 0; tau < tl[2]; tau++)
          for (int64_t i = 0; i < D; i++) {
            double w = 0, uu = 0;
            for (int u = 0; u <= tau; u++) {
              const double b = c.beta[(tl[1] + u) * nv + hh];
              w += Tm[tb + tau * C + u] * b * std::exp(Gat(ci, hh, u)) * k_at(tl[1] + u, kh, i);
              uu += Tm[tb + tau * C + u] * b * v_at(tl[1] + u, hh, i);
            }
            Wr[ob + tau * D + i] = (float)w;
            Ur[ob + tau * D + i] = (float)uu;
          }
      }
    }
    test::expect_near(Wdev, Wr, kStageAbs, kStageRel, "stage wu: W");
    test::expect_near(Udev, Ur, kStageAbs, kStageRel, "stage wu: U");
  }

  // recur: S_c, V' and the final states from the GPU's W, U, G and the initial states
  DS_CHECK_OK(S.recur());
  h = download(*wsb, L);
  const size_t nDD = n_chunks * nv * D * D;
  const auto Hs = h.f(L.hs, nDD), Vp = h.f(L.u, nCD);
  const auto pool_dev = pool.host();
  {
    std::vector<float> Hr(nDD, 0.f), Vr(nCD, 0.f), pool_ref = c.pool0;
    const int32_t* sf = h.seq_first();
    for (int s = 0; s < 2; s++) {
      const int slot = c.slots[s];
      for (int64_t hh = 0; hh < nv; hh++) {
        const int64_t kh = hh % nk;
        float* M = pool_ref.data() + (slot * nv + hh) * D * D;
        std::vector<double> St(D * D);  // St[i][j] = S[i][j]
        for (int64_t i = 0; i < D; i++)
          for (int64_t j = 0; j < D; j++) St[i * D + j] = M[j * D + i];
        for (int ci = sf[s]; ci < sf[s + 1]; ci++) {
          const auto tl = tile(ci);
          const int n = tl[2];
          const size_t ob = (ci * nv + hh) * C * D;
          for (int64_t i = 0; i < D; i++)
            for (int64_t j = 0; j < D; j++) Hr[(ci * nv + hh) * D * D + j * D + i] = (float)St[i * D + j];
          std::vector<double> V(C * D, 0.0);
          for (int tau = 0; tau < n; tau++)
            for (int64_t j = 0; j < D; j++) {
              double x = Udev[ob + tau * D + j];
              for (int64_t i = 0; i < D; i++) x -= (double)Wdev[ob + tau * D + i] * St[i * D + j];
              V[tau * D + j] = x;
              Vr[ob + tau * D + j] = (float)x;
            }
          const double gl = Gat(ci, hh, n - 1);
          for (int64_t i = 0; i < D; i++)
            for (int64_t j = 0; j < D; j++) {
              double x = std::exp(gl) * St[i * D + j];
              for (int tau = 0; tau < n; tau++)
                x += k_at(tl[1] + tau, kh, i) * std::exp(gl - Gat(ci, hh, tau)) * V[tau * D + j];
              St[i * D + j] = x;
            }
        }
        for (int64_t i = 0; i < D; i++)
          for (int64_t j = 0; j < D; j++) M[j * D + i] = (float)St[i * D + j];
      }
    }
    test::expect_near(Hs, Hr, kStageAbs, kStageRel, "stage recur: S_c");
    test::expect_near(Vp, Vr, kStageAbs, kStageRel, "stage recur: V'");
    test::expect_near(pool_dev, pool_ref, kStageAbs, kStageRel, "stage recur: final states");
  }

  // output: O = diag(e^G) (scale Q) S_c + Aqk V' from the GPU's S_c, Aqk, V' and G
  DS_CHECK_OK(S.output());
  const auto out_dev = out.host();
  {
    const auto Aqk = h.f(L.aqk, nCC);
    std::vector<float> Or(c.T * nv * D, 0.f);
    for (int ci = 0; ci < n_chunks; ci++) {
      const auto tl = tile(ci);
      for (int64_t hh = 0; hh < nv; hh++) {
        const int64_t kh = hh % nk;
        const size_t hb = (ci * nv + hh) * D * D, ob = (ci * nv + hh) * C * D, ab = (ci * nv + hh) * C * C;
        for (int tau = 0; tau < tl[2]; tau++)
          for (int64_t j = 0; j < D; j++) {
            double x = 0;
            for (int64_t i = 0; i < D; i++) x += q_at(tl[1] + tau, kh, i) * scale * Hs[hb + j * D + i];
            x *= std::exp(Gat(ci, hh, tau));
            for (int u = 0; u <= tau; u++) x += (double)Aqk[ab + tau * C + u] * Vp[ob + u * D + j];
            Or[((tl[1] + tau) * nv + hh) * D + j] = (float)x;
          }
      }
    }
    test::expect_near(out_dev, Or, kStageAbs, kStageRel, "stage output: O");
  }
}

}  // namespace
}  // namespace ds

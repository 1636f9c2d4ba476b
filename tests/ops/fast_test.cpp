// The fast CPU paths (cpu/fast.h) against the references (cpu/cpu.h), on every instruction set this CPU
// has (AVX-512, AVX2, none: isa.h caps), at the awkward sizes: T = 1, 7, 63, 64, 65, 200, weight rows not a
// multiple of the 16/32-row panel, several jobs in one call, head sizes that are not a multiple of the
// vector width. Also the vector exp against std::exp, and the bf16 (--fast) products' error bound.
#include <cmath>
#include <cstring>

#include "cpu/fast.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "op_test_util.h"
#include "quant/quant.h"

using namespace ds;
using ds::test::expect_close;

namespace {
// matmul: |fast - exact| <= tol * sum_k |w_k x_k| (fp32 sums of K products, another order than dot_row).
constexpr double kMatmulTolScaled = 4e-6;
// bf16 products: both factors rounded to 8 significant bits (relative error 2^-9 each).
constexpr double kMatmulBf16TolScaled = 8e-3;
// gdn/attention fast vs reference: fp32 rounding order only.
constexpr double kGdnAbs = 5e-5, kGdnRel = 1e-5;
constexpr double kAttnAbs = 2e-6, kAttnRel = 2e-6;

// Runs fn once per instruction set this CPU supports (and the scalar fallback), with isa() capped.
template <class Fn>
void for_each_isa(Fn fn) {
  for (cpu::Isa cap : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Scalar}) {
    cpu::set_isa_cap(cap);
    if (cpu::isa() == cap) fn(std::string(cpu::isa_name(cap)));
  }
  cpu::set_isa_cap(cpu::Isa::Avx512);
}

struct QMatrix {
  GgmlType type;
  int64_t N, K;
  std::vector<unsigned char> bytes;
  std::vector<float> f;  // dequantized (the exact weights)
};

QMatrix make_matrix(GgmlType t, int64_t N, int64_t K, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  const uint64_t rb = ggml_row_bytes(info, K);
  QMatrix m{t, N, K, std::vector<unsigned char>(N * rb), std::vector<float>(N * K)};
  const auto w = ds::test::randn(N * K, seed, 0.05f);
  for (int64_t r = 0; r < N; r++) {
    quant::quantize_row(t, &w[r * K], &m.bytes[r * rb], K);
    quant::dequantize_row_ref(t, &m.bytes[r * rb], &m.f[r * K], K);
  }
  return m;
}

// Worst |y - exact| / sum |w x| over all outputs.
double scaled_error(const QMatrix& m, const std::vector<float>& x, int64_t T, const std::vector<float>& y) {
  double worst = 0;
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < m.N; n++) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < m.K; k++) {
        ref += (double)m.f[n * m.K + k] * x[t * m.K + k];
        mag += std::fabs((double)m.f[n * m.K + k] * x[t * m.K + k]);
      }
      worst = std::max(worst, std::fabs(y[t * m.N + n] - ref) / std::max(mag, 1e-30));
    }
  return worst;
}
}  // namespace

TEST(Fast, VectorExpAgainstStdExp) {
  std::vector<float> x;
  for (float v = -110.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  for (cpu::Isa cap : {cpu::Isa::Avx512, cpu::Isa::Avx2}) {
    cpu::set_isa_cap(cap);
    if (cpu::isa() != cap) continue;
    const cpu::VecOps* o = cpu::vec_ops();
    ASSERT_NE(o, nullptr);
    std::vector<float> y(x.size());
    o->exp(x.data(), (int64_t)x.size(), y.data());
    double worst_rel = 0;
    for (size_t i = 0; i < x.size(); i++) {
      const double ref = std::exp((double)x[i]);
      if (x[i] < -86.0f) {
        EXPECT_LE(y[i], 5e-38) << cpu::isa_name(cap) << " exp(" << x[i] << ")";
        continue;
      }
      worst_rel = std::max(worst_rel, std::fabs(y[i] - ref) / ref);
    }
    EXPECT_LE(worst_rel, 3e-7) << cpu::isa_name(cap);
    // exp_sum: the same values minus a shift, and their sum.
    std::vector<float> z(37);
    const float s = o->exp_sum(x.data() + 7000, 37, 1.5f, z.data());
    double ref_sum = 0;
    for (int i = 0; i < 37; i++) {
      ref_sum += std::exp((double)x[7000 + i] - 1.5);
      EXPECT_NEAR(z[i], std::exp((double)x[7000 + i] - 1.5), 3e-7 * std::exp((double)x[7000 + i] - 1.5));
    }
    EXPECT_NEAR(s, ref_sum, 1e-6 * ref_sum);
  }
  cpu::set_isa_cap(cpu::Isa::Avx512);
}

TEST(Fast, MatmulAgainstExactProduct) {
  // 45 rows (not a multiple of 16 or 32), K = 512; every type of the Q4_K_M / Q8_0 / BF16 files and F32/F16.
  const int64_t N = 45, K = 512;
  std::vector<QMatrix> mats;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::BF16, GgmlType::F16, GgmlType::F32})
    mats.push_back(make_matrix(t, N, K, 10 + (int)t));
  for_each_isa([&](const std::string& isa) {
    for (int64_t T : {1, 7, 63, 64, 65, 200}) {
      const auto x = ds::test::randn(T * K, 100 + T);
      for (const QMatrix& m : mats) {
        std::vector<float> y(T * N, NAN);
        cpu::matmul_fast({m.type, N, K, T}, m.bytes.data(), x.data(), y.data());
        EXPECT_LE(scaled_error(m, x, T, y), kMatmulTolScaled)
            << isa << " " << ggml_type_name(m.type) << " T=" << T;
      }
    }
  });
}

TEST(Fast, MatmulPanelColumnsPastTheLastTile) {
  // The prefill panel is transposed in width x width register tiles (8 or 16 columns of K); K = 37 and 72
  // leave a remainder for both widths (F32 and F16 rows take any K), and 19 rows a partial panel.
  for (int64_t K : {37, 72}) {
    std::vector<QMatrix> mats;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16}) mats.push_back(make_matrix(t, 19, K, 30 + (int)t));
    for_each_isa([&](const std::string& isa) {
      const int64_t T = 9;
      const auto x = ds::test::randn(T * K, 5 + K);
      for (const QMatrix& m : mats) {
        std::vector<float> y(T * 19, NAN);
        cpu::matmul_fast({m.type, 19, K, T}, m.bytes.data(), x.data(), y.data());
        EXPECT_LE(scaled_error(m, x, T, y), kMatmulTolScaled) << isa << " " << ggml_type_name(m.type) << " K=" << K;
      }
    });
  }
}

TEST(Fast, MatmulJobsShareOneCall) {
  // Three weights of different types and row counts (1, 33, 300) with one x, in one call: each equals
  // its own call bit for bit (the same kernels see the same rows), and both paths of T.
  const int64_t K = 256;
  const QMatrix a = make_matrix(GgmlType::Q4_K, 300, K, 1), b = make_matrix(GgmlType::Q6_K, 33, K, 2),
                c = make_matrix(GgmlType::F32, 1, K, 3);
  for_each_isa([&](const std::string& isa) {
    for (int64_t T : {1, 65}) {
      const auto x = ds::test::randn(T * K, 7);
      std::vector<float> ya(T * 300), yb(T * 33), yc(T), ya1(ya.size()), yb1(yb.size()), yc1(yc.size());
      const cpu::MatmulJob jobs[3] = {{{a.type, 300, K, T}, a.bytes.data(), ya.data()},
                                      {{b.type, 33, K, T}, b.bytes.data(), yb.data()},
                                      {{c.type, 1, K, T}, c.bytes.data(), yc.data()}};
      cpu::matmul_fast(jobs, x.data());
      cpu::matmul_fast({a.type, 300, K, T}, a.bytes.data(), x.data(), ya1.data());
      cpu::matmul_fast({b.type, 33, K, T}, b.bytes.data(), x.data(), yb1.data());
      cpu::matmul_fast({c.type, 1, K, T}, c.bytes.data(), x.data(), yc1.data());
      EXPECT_EQ(ya, ya1) << isa << " T=" << T;
      EXPECT_EQ(yb, yb1) << isa << " T=" << T;
      EXPECT_EQ(yc, yc1) << isa << " T=" << T;
      EXPECT_LE(scaled_error(a, x, T, ya), kMatmulTolScaled) << isa << " T=" << T;
    }
  });
}

TEST(Fast, MatmulBf16WithinBf16Rounding) {
  if (!cpu::has_avx512_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU: Precision::Bf16 runs the fp32 path";
  const int64_t N = 70, K = 768;
  const QMatrix m = make_matrix(GgmlType::Q4_K, N, K, 5);
  for (int64_t T : {2, 7, 64, 65, 200}) {
    const auto x = ds::test::randn(T * K, 55 + T);
    std::vector<float> y(T * N), y32(T * N);
    cpu::matmul_fast({m.type, N, K, T}, m.bytes.data(), x.data(), y.data(), cpu::Precision::Bf16);
    cpu::matmul_fast({m.type, N, K, T}, m.bytes.data(), x.data(), y32.data(), cpu::Precision::Fp32);
    const double e = scaled_error(m, x, T, y);
    EXPECT_LE(e, kMatmulBf16TolScaled) << "T=" << T;
    EXPECT_GT(e, kMatmulTolScaled) << "T=" << T << ": bf16 path looks unused";  // it really is approximate
    EXPECT_NE(y, y32);
  }
}

namespace {
struct GdnData {
  int64_t T, nk, nv, dk, dv;
  std::vector<float> q, k, v, g, beta, state0;
  GdnData(int64_t T_, int64_t nk_, int64_t nv_, int64_t dk_, int64_t dv_, uint64_t seed)
      : T(T_), nk(nk_), nv(nv_), dk(dk_), dv(dv_) {
    q = ds::test::randn(T * nk * dk, seed + 1);
    k = ds::test::randn(T * nk * dk, seed + 2);
    v = ds::test::randn(T * nv * dv, seed + 3);
    cpu::l2_norm({T * nk, 1, dk, dk, 0, dk, 0, 1e-6f}, q.data(), q.data());
    cpu::l2_norm({T * nk, 1, dk, dk, 0, dk, 0, 1e-6f}, k.data(), k.data());
    auto a = ds::test::randn(T * nv, seed + 4), b = ds::test::randn(T * nv, seed + 5, 2.0f);
    auto ssm_a = ds::test::uniform(nv, seed + 6, -8.0f, -0.5f), dt = ds::test::randn(nv, seed + 7);
    g.resize(T * nv);
    beta.resize(T * nv);
    cpu::gdn_gates({T, nv}, a.data(), b.data(), ssm_a.data(), dt.data(), g.data(), beta.data());
    state0 = ds::test::randn(nv * dv * dk, seed + 8, 0.5f);
  }
  ops::GdnParams params() const {
    return {T, 1, nk, nv, dk, dv, nk * dk, nk * dk, nv * dv, 1.0f / std::sqrt((float)dk)};
  }
};
}  // namespace

TEST(Fast, GdnChunkedAndRecurrentAgainstReference) {
  // dk/dv: the real 128, the fixtures' 64, and 24 x 40 (not multiples of 16: the scalar tails); nv = 3*nk.
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {64, 64}, {24, 40}}) {
    for (int64_t T : {1, 7, 63, 64, 65, 200}) {
      if (dk == 128 && T == 200) continue;  // keep the test quick; 65 already spans two chunks
      const GdnData c(T, 2, 6, dk, dv, 900 + T + dk);
      const std::string what = "T=" + std::to_string(T) + " dk=" + std::to_string(dk) + " dv=" + std::to_string(dv);
      std::vector<float> out_ref(T * c.nv * dv), st_ref = c.state0, rec_ref(out_ref.size()), st_rec = c.state0;
      cpu::gdn_chunked(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st_ref.data(),
                       nullptr, nullptr, out_ref.data());
      cpu::gdn_recurrent(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st_rec.data(),
                         nullptr, nullptr, rec_ref.data());
      for_each_isa([&](const std::string& isa) {
        std::vector<float> out(out_ref.size()), st = c.state0;
        cpu::gdn_chunked_fast(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(), st.data(),
                              nullptr, nullptr, out.data());
        expect_close(out, out_ref, kGdnAbs, kGdnRel, isa + " chunked out " + what);
        expect_close(st, st_ref, kGdnAbs, kGdnRel, isa + " chunked state " + what);
        std::vector<float> out_r(out_ref.size()), st_r = c.state0;
        cpu::gdn_recurrent_fast(c.params(), c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data(),
                                st_r.data(), nullptr, nullptr, out_r.data());
        expect_close(out_r, rec_ref, kGdnAbs, kGdnRel, isa + " recurrent out " + what);
        expect_close(st_r, st_rec, kGdnAbs, kGdnRel, isa + " recurrent state " + what);
      });
    }
  }
}

TEST(Fast, GdnPackedBatchWithSlots) {
  // Strided views into one U buffer, four sequences (one empty) with slots: fast == reference.
  const int64_t nk = 2, nv = 4, dk = 32, dv = 32, Kd = nk * dk, Cc = 2 * Kd + nv * dv;
  const std::vector<int32_t> starts = {0, 70, 71, 71, 90}, slots = {3, 0, 2, 1};
  const int64_t T = starts.back(), S = 4, sf = nv * dv * dk;
  auto U = ds::test::randn(T * Cc, 314);
  cpu::l2_norm({T, 2 * nk, dk, Cc, dk, Cc, dk, 1e-6f}, U.data(), U.data());
  auto g = ds::test::uniform(T * nv, 315, -2.0f, 0.0f), beta = ds::test::uniform(T * nv, 316, 0.0f, 1.0f);
  const auto pool0 = ds::test::randn(S * sf, 317, 0.3f);
  const ops::GdnParams p{T, S, nk, nv, dk, dv, Cc, Cc, Cc, 1.0f / std::sqrt((float)dk)};
  for (bool chunked : {false, true}) {
    std::vector<float> out_ref(T * nv * dv), pool_ref = pool0;
    (chunked ? cpu::gdn_chunked : cpu::gdn_recurrent)(p, U.data(), U.data() + Kd, U.data() + 2 * Kd, g.data(),
                                                      beta.data(), pool_ref.data(), starts.data(), slots.data(),
                                                      out_ref.data());
    for_each_isa([&](const std::string& isa) {
      std::vector<float> out(out_ref.size()), pool = pool0;
      (chunked ? cpu::gdn_chunked_fast : cpu::gdn_recurrent_fast)(p, U.data(), U.data() + Kd, U.data() + 2 * Kd,
                                                                  g.data(), beta.data(), pool.data(), starts.data(),
                                                                  slots.data(), out.data());
      expect_close(out, out_ref, kGdnAbs, kGdnRel, isa + (chunked ? " chunked" : " recurrent") + " packed out");
      expect_close(pool, pool_ref, kGdnAbs, kGdnRel, isa + (chunked ? " chunked" : " recurrent") + " packed pool");
    });
  }
}

TEST(Fast, AttentionAgainstReference) {
  // (nh, nkv, hd): the 0.8B's 8/2/256, the fixtures' 4/2/64, and 6/6/40 (G = 1, a tail past 32 floats).
  for (auto [nh, nkv, hd] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 256}, {4, 2, 64}, {6, 6, 40}}) {
    for (int64_t T : {1, 7, 63, 64, 65, 200}) {
      if (hd == 256 && T == 200) continue;
      const int64_t past = 5, max_ctx = past + T;  // a cache with 5 earlier positions
      const ops::AttentionParams p{T, 1, nh, nkv, hd, max_ctx, 1.0f / std::sqrt((float)hd)};
      const auto q = ds::test::randn(T * nh * hd, 1 + T), k = ds::test::randn(T * nkv * hd, 2 + T),
                 v = ds::test::randn(T * nkv * hd, 3 + T), cache0 = ds::test::randn(p.cache_floats(), 4, 0.7f);
      std::vector<int32_t> pos(T);
      for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(past + t);
      std::vector<float> kc = cache0, vc = cache0, out_ref(T * nh * hd);
      cpu::attention(p, q.data(), k.data(), v.data(), kc.data(), vc.data(), pos.data(), nullptr, nullptr, out_ref.data());
      for_each_isa([&](const std::string& isa) {
        std::vector<float> kc1 = cache0, vc1 = cache0, out(out_ref.size());
        cpu::attention_fast(p, q.data(), k.data(), v.data(), kc1.data(), vc1.data(), pos.data(), nullptr, nullptr,
                            out.data());
        const std::string what = isa + " nh=" + std::to_string(nh) + " nkv=" + std::to_string(nkv) +
                                 " hd=" + std::to_string(hd) + " T=" + std::to_string(T);
        expect_close(out, out_ref, kAttnAbs, kAttnRel, what);
        EXPECT_EQ(kc1, kc) << what;
        EXPECT_EQ(vc1, vc) << what;
      });
    }
  }
}

TEST(Fast, Conv1dSiluParallelAndRepeatedCalls) {
  // Enough work for the parallel region (T * Cc > 32768) on every thread's reused scratch, twice in a row
  // with different taps (the transposed taps are rebuilt per call, not cached across weights).
  const int64_t Cc = 301, Kc = 4, T = 150;
  for (uint64_t seed : {31u, 32u}) {
    const auto w = ds::test::randn(Cc * Kc, seed, 0.5f);
    const auto x = ds::test::randn(T * Cc, seed + 10, 1.0f);
    auto s_ref = ds::test::randn((Kc - 1) * Cc, seed + 20, 1.0f), s_fast = s_ref;
    std::vector<float> y_ref(T * Cc), y_fast(T * Cc);
    cpu::conv1d_silu({T, 1, Cc, Kc}, x.data(), w.data(), s_ref.data(), nullptr, nullptr, y_ref.data());
    cpu::conv1d_silu_fast({T, 1, Cc, Kc}, x.data(), w.data(), s_fast.data(), nullptr, nullptr, y_fast.data());
    expect_close(y_fast, y_ref, 1e-6, 1e-5, "conv out seed " + std::to_string(seed));
    expect_close(s_fast, s_ref, 0, 0, "conv window seed " + std::to_string(seed));
  }
}

TEST(Fast, SwigluAgainstReference) {
  // n not a multiple of the vector width or of the 1024-element pieces; 100k elements take the parallel
  // loop; y aliasing gate as the forward calls it.
  for_each_isa([&](const std::string& isa) {
    for (int64_t n_ff : {(int64_t)1003, (int64_t)25000}) {
      const int64_t T = 4, n = T * n_ff;
      const auto gate = ds::test::randn(n, 40 + n_ff, 3.0f), up = ds::test::randn(n, 41 + n_ff, 1.0f);
      std::vector<float> y_ref(n), y_fast(gate);
      cpu::swiglu({T, n_ff}, gate.data(), up.data(), y_ref.data());
      cpu::swiglu_fast({T, n_ff}, y_fast.data(), up.data(), y_fast.data());
      expect_close(y_fast, y_ref, 2e-5, 1e-6, isa + " swiglu n=" + std::to_string(n));
    }
  });
}

TEST(Fast, Conv1dSiluAgainstReference) {
  // Kc = 4 as in Qwen3.5; T = 1 and 7 take the reference inside the fast call, 8 / 65 / 200 the fast loop;
  // a packed batch mixes a short and a long sequence with state slots.
  const int64_t Cc = 77, Kc = 4;
  const auto w = ds::test::randn(Cc * Kc, 11, 0.5f);
  for (int64_t T : {1, 7, 8, 65, 200}) {
    const auto x = ds::test::randn(T * Cc, 12 + T, 1.0f);
    auto s_ref = ds::test::randn((Kc - 1) * Cc, 13, 1.0f), s_fast = s_ref;
    std::vector<float> y_ref(T * Cc), y_fast(T * Cc);
    cpu::conv1d_silu({T, 1, Cc, Kc}, x.data(), w.data(), s_ref.data(), nullptr, nullptr, y_ref.data());
    cpu::conv1d_silu_fast({T, 1, Cc, Kc}, x.data(), w.data(), s_fast.data(), nullptr, nullptr, y_fast.data());
    expect_close(y_fast, y_ref, 1e-6, 1e-5, "conv out T=" + std::to_string(T));
    expect_close(s_fast, s_ref, 0, 0, "conv window T=" + std::to_string(T));
  }
  const int32_t starts[3] = {0, 3, 103}, slots[2] = {1, 0};
  const auto x = ds::test::randn(103 * Cc, 21, 1.0f);
  auto s_ref = ds::test::randn(2 * (Kc - 1) * Cc, 22, 1.0f), s_fast = s_ref;
  std::vector<float> y_ref(103 * Cc), y_fast(103 * Cc);
  cpu::conv1d_silu({103, 2, Cc, Kc}, x.data(), w.data(), s_ref.data(), starts, slots, y_ref.data());
  cpu::conv1d_silu_fast({103, 2, Cc, Kc}, x.data(), w.data(), s_fast.data(), starts, slots, y_fast.data());
  expect_close(y_fast, y_ref, 1e-6, 1e-5, "packed conv out");
  expect_close(s_fast, s_ref, 0, 0, "packed conv windows");
}

// The GDN decode kernels of src/cuda/model/kernels_gdn.cu called directly (mk::gdn_step with the kernel forced):
// gdn_kernel (below 16 sequences; the reference here) and gdn_tma_out_kernel (gdn12, from 16 sequences: persistent,
// bulk copies, load slots refilled once read, stores through an out slot, 2 barriers per token; its kSIn form with
// the next item's inputs in shared memory by cp.async) must give the same bits (outputs, states, debug outputs) at
// d_k 64 and 128, for decode steps and multi-token steps, and gdn_kernel must match a float64 evaluation of the
// delta rule + gated RMSNorm (spec §4.4-§4.5). GdnBench.* (only with DS_GDN_BENCH=1): kernel times per batch at the
// 9B's and 27B's shapes and the state-copy rooflines (Time), one launch of each for Nsight Compute (Profile).
// ConvStep.*: conv_silu_l2 with 1, 2, 4 sequences per block gives the same bits, and matches float64.
// GdnConvStep.*: gdn_conv_step (cg18: the conv + SiLU + L2 norm inside the delta-rule kernel) gives the bits of
// conv_silu_l2 + gdn_step's gdn_kernel (outputs, states, windows).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/model/model_kernels.cuh"

using namespace ds;
namespace mk = ds::cuda::mk;

namespace {

#define GDN_SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                           \
    if (ds::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped";    \
  } while (0)
#define CU(x) ASSERT_EQ((x), cudaSuccess) << #x

// mk::gdn_force_kernel's numbers (gdn_split_kernel and gdn_tma_kernel were removed in sync13).
constexpr const char* kKernel[] = {"gdn_kernel", "tma-out", "tma-out-smem-in"};
constexpr int kKernels = 3;

// One GDN layer's step: S sequences with ntok[s] tokens each (packed by sequence), d_k = d_v = dk.
struct Problem {
  int dk = 128, nk = 16, nv = 32, S = 0, T = 0;
  int64_t Kd = 0, Vd = 0, Cc = 0;
  std::vector<int> start;
  std::vector<float> u, a, b, z, sa, dtb, nw, state0;  // state0: [S][nv][dk][dk] (M = S^T, key fastest)
  int64_t off = 0, stride = 0;                         // state_off and each sequence's allocation (bytes)
  int64_t extra = 0;  // bytes after the state in each allocation (cg18: the conv window there), 0xA5 by reset_state
  bool half = false;  // st20: f16 states (GdnArgs::state_half); init rounds state0 to f16 values
  float *du = nullptr, *da = nullptr, *db = nullptr, *dz = nullptr, *dsa = nullptr, *ddt = nullptr,
        *dnw = nullptr, *dout = nullptr, *dcore = nullptr, *dg = nullptr, *dbeta = nullptr;
  unsigned char* dstate = nullptr;
  mk::StepIO* dio = nullptr;

  int64_t head_floats() const { return (int64_t)dk * dk; }
  int64_t seq_floats() const { return nv * head_floats(); }
  int64_t seq_bytes() const { return seq_floats() * (half ? 2 : 4); }
  // Element i of sequence s's state in a copy of the allocations.
  float state_at(const std::vector<unsigned char>& all, int s, int64_t i) const {
    const unsigned char* base = &all[(size_t)perm(s) * stride + off];
    return half ? __half2float(reinterpret_cast<const __half*>(base)[i]) : reinterpret_cast<const float*>(base)[i];
  }
  int perm(int s) const { return S - 1 - s; }  // sequence s's allocation (reversed: base[] is used)

  void init(int dk_, int nk_, int nv_, const std::vector<int>& ntok, uint32_t seed) {
    dk = dk_, nk = nk_, nv = nv_, S = (int)ntok.size();
    Kd = (int64_t)nk * dk, Vd = (int64_t)nv * dk, Cc = 2 * Kd + Vd;
    start.assign(S + 1, 0);
    for (int s = 0; s < S; s++) start[s + 1] = start[s] + ntok[s];
    T = start[S];
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> U(-1.f, 1.f);
    const int Tn = std::max(T, 1);
    u.resize(Tn * Cc);
    for (auto& x : u) x = U(g);
    for (int t = 0; t < Tn; t++)  // q and k heads L2-normalized, as conv_silu_l2 leaves them
      for (int hh = 0; hh < 2 * nk; hh++) {
        float* p = &u[t * Cc + (int64_t)hh * dk];
        double ss = 0;
        for (int i = 0; i < dk; i++) ss += (double)p[i] * p[i];
        for (int i = 0; i < dk; i++) p[i] = (float)(p[i] / std::sqrt(ss + 1e-6));
      }
    a.resize(Tn * nv), b.resize(Tn * nv), z.resize(Tn * Vd);
    for (auto& x : a) x = 2.5f * U(g);
    for (auto& x : b) x = 3.f * U(g);
    for (auto& x : z) x = 3.f * U(g);
    sa.resize(nv), dtb.resize(nv), nw.resize(dk);
    for (auto& x : sa) x = -std::exp(U(g));
    for (auto& x : dtb) x = U(g);
    for (auto& x : nw) x = 1.f + 0.5f * U(g);
    state0.resize((size_t)S * seq_floats());
    for (auto& x : state0) x = 0.5f * U(g);
    if (half)
      for (auto& x : state0) x = __half2float(__float2half_rn(x));
  }

  bool upload() {
    auto up = [](float** d, const std::vector<float>& h) {
      return cudaMalloc(d, h.size() * 4) == cudaSuccess &&
             cudaMemcpy(*d, h.data(), h.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    };
    if (!up(&du, u) || !up(&da, a) || !up(&db, b) || !up(&dz, z) || !up(&dsa, sa) || !up(&ddt, dtb) || !up(&dnw, nw))
      return false;
    const int Tn = std::max(T, 1);
    if (cudaMalloc(&dout, (size_t)Tn * Vd * 4) != cudaSuccess ||
        cudaMalloc(&dcore, (size_t)Tn * Vd * 4) != cudaSuccess ||
        cudaMalloc(&dg, (size_t)Tn * nv * 4) != cudaSuccess || cudaMalloc(&dbeta, (size_t)Tn * nv * 4) != cudaSuccess)
      return false;
    off = 272;  // 16-byte aligned, not 128
    stride = (off + seq_bytes() + extra + 255) / 256 * 256;
    if (cudaMalloc(&dstate, (size_t)S * stride) != cudaSuccess) return false;
    mk::StepIO io{};
    for (int s = 0; s <= S; s++) io.start[s] = start[s];
    for (int s = 0; s < S; s++) io.base[s] = (unsigned long long)(uintptr_t)(dstate + (int64_t)perm(s) * stride);
    return cudaMalloc(&dio, sizeof(io)) == cudaSuccess &&
           cudaMemcpy(dio, &io, sizeof(io), cudaMemcpyHostToDevice) == cudaSuccess;
  }

  // The states into their allocations; every other byte of the allocations 0xA5.
  bool reset_state() {
    std::vector<unsigned char> h((size_t)S * stride, 0xA5);
    for (int s = 0; s < S; s++) {
      unsigned char* dst = &h[(size_t)perm(s) * stride + off];
      const float* src = &state0[(size_t)s * seq_floats()];
      if (!half) {
        std::memcpy(dst, src, seq_floats() * 4);
        continue;
      }
      for (int64_t i = 0; i < seq_floats(); i++) reinterpret_cast<__half*>(dst)[i] = __float2half_rn(src[i]);
    }
    return cudaMemcpy(dstate, h.data(), h.size(), cudaMemcpyHostToDevice) == cudaSuccess;
  }

  mk::GdnArgs args(bool dbg) const {
    mk::GdnArgs g;
    g.u = du, g.ldu = Cc, g.a = da, g.lda = nv, g.b = db, g.ldb = nv, g.z = dz, g.ldz = Vd;
    g.ssm_a = dsa, g.dt_bias = ddt, g.norm_w = dnw, g.state_off = off;
    g.n_k_heads = nk, g.n_v_heads = nv, g.d_k = dk;
    g.scale = 1.0f / std::sqrt((float)dk), g.eps = 1e-6f;
    g.out = dout, g.ldo = Vd;
    g.state_half = half;
    if (dbg) g.dbg_core = dcore, g.dbg_g = dg, g.dbg_beta = dbeta;
    return g;
  }

  void free_all() {
    for (float* p : {du, da, db, dz, dsa, ddt, dnw, dout, dcore, dg, dbeta}) cudaFree(p);
    cudaFree(dstate);
    cudaFree(dio);
  }
};

struct Outs {
  std::vector<float> out, core, g, beta;
  std::vector<unsigned char> state;  // every byte of the allocations
};

// One gdn_step with kernel k (outputs poisoned with NaN first).
void run_kernel(Problem& p, int k, bool dbg, Outs& r) {
  ASSERT_TRUE(p.reset_state());
  const int Tn = std::max(p.T, 1);
  CU(cudaMemset(p.dout, 0xFF, (size_t)Tn * p.Vd * 4));
  CU(cudaMemset(p.dcore, 0xFF, (size_t)Tn * p.Vd * 4));
  CU(cudaMemset(p.dg, 0xFF, (size_t)Tn * p.nv * 4));
  CU(cudaMemset(p.dbeta, 0xFF, (size_t)Tn * p.nv * 4));
  mk::gdn_force_kernel(k);
  const Status st = mk::gdn_step(p.args(dbg), p.dio, p.S, nullptr);
  mk::gdn_force_kernel(-1);
  ASSERT_TRUE(st.ok()) << kKernel[k] << ": " << st.error().message;
  CU(cudaDeviceSynchronize());
  r.out.resize((size_t)Tn * p.Vd), r.core.resize(r.out.size());
  r.g.resize((size_t)Tn * p.nv), r.beta.resize(r.g.size());
  r.state.resize((size_t)p.S * p.stride);
  CU(cudaMemcpy(r.out.data(), p.dout, r.out.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.core.data(), p.dcore, r.core.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.g.data(), p.dg, r.g.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.beta.data(), p.dbeta, r.beta.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.state.data(), p.dstate, r.state.size(), cudaMemcpyDeviceToHost));
}

double softplus_d(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// float64 delta rule + gated norm; out [T][Vd], state [S][nv][dk][dk].
void reference(const Problem& p, std::vector<double>& out, std::vector<double>& state) {
  const int dk = p.dk;
  out.assign((size_t)std::max(p.T, 1) * p.Vd, 0.0);
  state.assign(p.state0.begin(), p.state0.end());
  std::vector<double> o(dk);
  for (int s = 0; s < p.S; s++)
    for (int h = 0; h < p.nv; h++) {
      double* M = &state[((size_t)s * p.nv + h) * p.head_floats()];
      const int kh = h % p.nk;
      for (int t = p.start[s]; t < p.start[s + 1]; t++) {
        const float* q = &p.u[t * p.Cc + (int64_t)kh * dk];
        const float* k = &p.u[t * p.Cc + p.Kd + (int64_t)kh * dk];
        const float* v = &p.u[t * p.Cc + 2 * p.Kd + (int64_t)h * dk];
        const double decay = std::exp(p.sa[h] * softplus_d((double)p.a[t * p.nv + h] + p.dtb[h]));
        const double beta = 1.0 / (1.0 + std::exp(-(double)p.b[t * p.nv + h]));
        double ss = 0;
        for (int j = 0; j < dk; j++) {
          double* row = M + (int64_t)j * dk;
          double kv = 0;
          for (int i = 0; i < dk; i++) kv += (row[i] *= decay) * k[i];
          const double delta = (v[j] - kv) * beta;
          double oj = 0;
          for (int i = 0; i < dk; i++) oj += (row[i] += delta * k[i]) * q[i];
          o[j] = oj / std::sqrt((double)dk);
          ss += o[j] * o[j];
        }
        const double rs = 1.0 / std::sqrt(ss / dk + 1e-6);
        for (int j = 0; j < dk; j++) {
          const double zz = p.z[t * p.Vd + (int64_t)h * dk + j];
          out[t * p.Vd + (int64_t)h * dk + j] = o[j] * rs * p.nw[j] * (zz / (1.0 + std::exp(-zz)));
        }
      }
    }
}

// half (st20): f16 states; the float64 reference starts from the same (f16-exact) state, so out keeps the float
// bound and the state is off by its one f16 rounding at the end of the step (2^-11 relative).
void check_case(int dk, int nk, int nv, const std::vector<int>& ntok, uint32_t seed, bool half = false) {
  Problem p;
  p.half = half;
  p.init(dk, nk, nv, ntok, seed);
  ASSERT_TRUE(p.upload());
  const std::string what = std::string(half ? "f16 states " : "") + "dk " + std::to_string(dk) + " S " +
                           std::to_string(p.S) + " T " + std::to_string(p.T);
  Outs r[kKernels];
  for (int k = 0; k < kKernels; k++) {
    run_kernel(p, k, true, r[k]);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Kernel 0 against float64.
  std::vector<double> ro, rst;
  reference(p, ro, rst);
  double oerr = 0, omax = 0, serr = 0, smax = 0;
  for (int t = 0; t < p.T; t++)
    for (int64_t i = 0; i < p.Vd; i++) {
      const float x = r[0].out[t * p.Vd + i];
      ASSERT_TRUE(std::isfinite(x)) << what << ": out[" << t << "][" << i << "] not written / not finite";
      oerr = std::max(oerr, std::fabs(x - ro[t * p.Vd + i]));
      omax = std::max(omax, std::fabs(ro[t * p.Vd + i]));
    }
  for (int s = 0; s < p.S; s++) {
    const unsigned char* base = &r[0].state[(size_t)p.perm(s) * p.stride];
    for (int64_t i = 0; i < p.off; i++) ASSERT_EQ(base[i], 0xA5) << what << ": byte " << i << " before the state";
    for (int64_t i = p.off + p.seq_bytes(); i < p.stride; i++)
      ASSERT_EQ(base[i], 0xA5) << what << ": byte " << i << " after the state";
    for (int64_t i = 0; i < p.seq_floats(); i++) {
      serr = std::max(serr, std::fabs(p.state_at(r[0].state, s, i) - rst[(size_t)s * p.seq_floats() + i]));
      smax = std::max(smax, std::fabs(rst[(size_t)s * p.seq_floats() + i]));
    }
  }
  std::printf("[gdn11] %s: gdn_kernel vs float64: out max|diff| %.3g (max |ref| %.3g), state %.3g (%.3g)\n",
              what.c_str(), oerr, omax, serr, smax);
  EXPECT_LE(oerr, 2e-5 * std::max(1.0, omax)) << what;
  EXPECT_LE(serr, (half ? 6e-4 : 2e-5) * std::max(1.0, smax)) << what;
  // Every kernel: the same bits as gdn_kernel.
  const size_t nT = (size_t)p.T;
  for (int k = 1; k < kKernels; k++) {
    EXPECT_EQ(0, std::memcmp(r[k].out.data(), r[0].out.data(), nT * p.Vd * 4)) << what << ": out, " << kKernel[k];
    EXPECT_EQ(0, std::memcmp(r[k].core.data(), r[0].core.data(), nT * p.Vd * 4)) << what << ": core, " << kKernel[k];
    EXPECT_EQ(0, std::memcmp(r[k].g.data(), r[0].g.data(), nT * p.nv * 4)) << what << ": g, " << kKernel[k];
    EXPECT_EQ(0, std::memcmp(r[k].beta.data(), r[0].beta.data(), nT * p.nv * 4)) << what << ": beta, " << kKernel[k];
    EXPECT_EQ(0, std::memcmp(r[k].state.data(), r[0].state.data(), r[0].state.size())) << what << ": state, "
                                                                                          << kKernel[k];
  }
  // Without the debug outputs: the same out and states (the bulk-copy kernels against kernel 0 of the run above).
  for (int k = 1; k < kKernels; k++) {
    Outs nd;
    run_kernel(p, k, false, nd);
    EXPECT_EQ(0, std::memcmp(nd.out.data(), r[0].out.data(), nT * p.Vd * 4)) << what << ": out without dbg, "
                                                                             << kKernel[k];
    EXPECT_EQ(0, std::memcmp(nd.state.data(), r[0].state.data(), r[0].state.size())) << what
                                                                                      << ": state without dbg, "
                                                                                      << kKernel[k];
  }
  p.free_all();
}

}  // namespace

// Decode steps (one token per sequence) at the 9B's GDN shape and at the tiny fixtures' d_k 64, with fewer
// items than SMs (one per CTA) and more (several per persistent CTA, the load slots wrapping around).
TEST(GdnStep, KernelsGiveSameBitsDecode) {
  GDN_SKIP_WITHOUT_GPU();
  check_case(128, 16, 32, std::vector<int>(1, 1), 1);
  check_case(128, 16, 32, std::vector<int>(5, 1), 2);
  check_case(128, 16, 32, std::vector<int>(64, 1), 3);
  check_case(64, 4, 8, std::vector<int>(64, 1), 4);
  check_case(64, 2, 4, std::vector<int>(3, 1), 5);
  // gdn12: B = 16 and 37 at d_k 128 (on 132 SMs 3-4 / 8-9 items per CTA: tma-out's 2 load slots wrap; 512 and
  // 1184 items are not multiples of 132), d_k 64 with 2048 items (15-16 per CTA: its 12 load slots wrap).
  check_case(128, 16, 32, std::vector<int>(16, 1), 9);
  check_case(128, 16, 32, std::vector<int>(37, 1), 10);
  check_case(64, 16, 32, std::vector<int>(64, 1), 11);
  // gdn18: the 27B's 48 value heads, 24 sequences (1,152 items: 8-9 per CTA on 132 SMs).
  check_case(128, 16, 48, std::vector<int>(24, 1), 13);
}

// st20: f16 states (GdnArgs::state_half): every kernel the same bits (f16 states, outputs), gdn_kernel near float64;
// tma-out's 5 f16 load slots wrap at B = 64 (15-16 items per CTA), d_k 64's 12 at 2048 items, multi-token steps.
TEST(GdnStep, HalfStatesSameBitsAcrossKernels) {
  GDN_SKIP_WITHOUT_GPU();
  check_case(128, 16, 32, std::vector<int>(1, 1), 51, true);
  check_case(128, 16, 32, std::vector<int>(64, 1), 52, true);
  check_case(128, 16, 48, std::vector<int>(24, 1), 53, true);
  check_case(64, 16, 32, std::vector<int>(64, 1), 54, true);
  check_case(128, 16, 32, {3, 1, 0, 5, 2}, 55, true);
  std::vector<int> mixed(64);
  for (int s = 0; s < 64; s++) mixed[s] = s % 3;
  check_case(64, 16, 32, mixed, 56, true);
}

// Multi-token steps (the step-path prefill): several tokens per sequence, one with none.
TEST(GdnStep, KernelsGiveSameBitsMultiToken) {
  GDN_SKIP_WITHOUT_GPU();
  check_case(128, 16, 32, {3, 1, 0, 5, 2}, 6);
  check_case(64, 4, 8, {7, 0, 1, 16, 2, 9, 1, 1, 1, 4}, 7);
  std::vector<int> many(40, 1);
  many[3] = 4, many[39] = 2, many[20] = 0;
  check_case(128, 16, 32, many, 8);
  // gdn12: d_k 64, 64 sequences of 0-2 tokens (63 tokens, within a step's 64; 2048 items: tma-out's 12 load
  // slots wrap, empty items between).
  std::vector<int> mixed(64);
  for (int s = 0; s < 64; s++) mixed[s] = s % 3;
  check_case(64, 16, 32, mixed, 12);
}

namespace {

// lz23: the lazy delta rule (GdnArgs::lazy = T, kernels_gdn_lazy.cu) against gdn_kernel over several steps of the
// same sequences (at staggered positions, so lazy and state items mix in a step): the outputs within float
// rounding, the states bit for bit once the histories are flushed (f32: the same rule_row updates in the same
// order; f16 states: the lazy rule rounds once per state write, so near). ntoks: each step's tokens per sequence (a
// step of several tokens, or none, takes the state kernel).
void lazy_case(int dk, int nk, int nv, int lazy, const std::vector<std::vector<int>>& ntoks, uint32_t seed,
               bool half = false) {
  const int S = (int)ntoks[0].size();
  Problem p;  // owns the allocations and the initial states
  p.half = half;
  p.init(dk, nk, nv, std::vector<int>(S, 1), seed);
  const int64_t hist_bytes = nv * mk::gdn_hist_floats(dk, lazy) * 4;
  p.extra = (272 + p.seq_bytes() + 15) / 16 * 16 - 272 - p.seq_bytes() + hist_bytes;  // upload sets p.off = 272
  ASSERT_TRUE(p.upload());
  ASSERT_EQ(p.off, 272);
  const int64_t hist_off = (p.off + p.seq_bytes() + 15) / 16 * 16;
  std::vector<Problem> steps(ntoks.size());
  std::vector<int> pos(S);  // each sequence's next position (the lazy rule's schedule): 0, 3, 6, ...
  for (int s = 0; s < S; s++) pos[s] = 3 * s;
  for (size_t i = 0; i < ntoks.size(); i++) {  // each step's inputs, run on p's allocations
    ASSERT_EQ((int)ntoks[i].size(), S);
    steps[i].half = half;
    steps[i].init(dk, nk, nv, ntoks[i], seed + 1000 + (uint32_t)i);
    ASSERT_TRUE(steps[i].upload());
    mk::StepIO io{};
    for (int s = 0; s <= S; s++) io.start[s] = steps[i].start[s];
    for (int s = 0; s < S; s++)
      for (int t = io.start[s]; t < io.start[s + 1]; t++) io.pos[t] = pos[s]++;
    for (int s = 0; s < S; s++) io.base[s] = (unsigned long long)(uintptr_t)(p.dstate + (int64_t)p.perm(s) * p.stride);
    CU(cudaMemcpy(steps[i].dio, &io, sizeof(io), cudaMemcpyHostToDevice));
  }
  const std::string what = std::string(half ? "f16 states " : "") + "dk " + std::to_string(dk) + " S " +
                           std::to_string(S) + " lazy " + std::to_string(lazy);
  auto run = [&](int lz, std::vector<std::vector<float>>& outs, std::vector<unsigned char>& state) {
    ASSERT_TRUE(p.reset_state());
    for (int s = 0; s < S; s++) CU(cudaMemset(p.dstate + (int64_t)p.perm(s) * p.stride + hist_off, 0, hist_bytes));
    outs.assign(steps.size(), {});
    for (size_t i = 0; i < steps.size(); i++) {
      Problem& q = steps[i];
      mk::GdnArgs a = q.args(false);
      a.state_off = p.off;
      a.lazy = lz;
      a.hist_off = hist_off;
      mk::gdn_force_kernel(0);
      const Status st = mk::gdn_step(a, q.dio, S, nullptr);
      mk::gdn_force_kernel(-1);
      ASSERT_TRUE(st.ok()) << what << ": " << st.error().message;
      outs[i].resize((size_t)q.T * q.Vd);
      CU(cudaMemcpy(outs[i].data(), q.dout, outs[i].size() * 4, cudaMemcpyDeviceToHost));
    }
    if (lz) {
      mk::GdnArgs a = steps[0].args(false);
      a.state_off = p.off, a.lazy = lz, a.hist_off = hist_off;
      for (int s = 0; s < S; s++) {
        const Status st = mk::gdn_flush(a, p.dstate + (int64_t)p.perm(s) * p.stride, nullptr);
        ASSERT_TRUE(st.ok()) << what << ": " << st.error().message;
      }
    }
    CU(cudaDeviceSynchronize());
    state.resize((size_t)S * p.stride);
    CU(cudaMemcpy(state.data(), p.dstate, state.size(), cudaMemcpyDeviceToHost));
  };
  std::vector<std::vector<float>> o0, o1;
  std::vector<unsigned char> s0, s1;
  run(0, o0, s0);
  if (::testing::Test::HasFatalFailure()) return;
  run(lazy, o1, s1);
  if (::testing::Test::HasFatalFailure()) return;
  double oerr = 0, omax = 0, serr = 0, smax = 0;
  for (size_t i = 0; i < o0.size(); i++)
    for (size_t e = 0; e < o0[i].size(); e++) {
      ASSERT_TRUE(std::isfinite(o1[i][e])) << what << ": step " << i << " out[" << e << "] not written / not finite";
      oerr = std::max(oerr, (double)std::fabs(o1[i][e] - o0[i][e]));
      omax = std::max(omax, (double)std::fabs(o0[i][e]));
    }
  for (int s = 0; s < S; s++) {
    const unsigned char* base = &s1[(size_t)p.perm(s) * p.stride];
    for (int64_t b = 0; b < p.off; b++) ASSERT_EQ(base[b], 0xA5) << what << ": byte " << b << " before the state";
    for (int64_t b = p.off + p.seq_bytes(); b < hist_off; b++)
      ASSERT_EQ(base[b], 0xA5) << what << ": byte " << b << " between the state and the history";
    for (int64_t h = 0; h < nv; h++)
      ASSERT_EQ(0, reinterpret_cast<const int*>(base + hist_off)[h * mk::gdn_hist_floats(dk, lazy)])
          << what << ": history of head " << h << " not empty after gdn_flush";
    for (int64_t e = 0; e < p.seq_floats(); e++) {
      serr = std::max(serr, (double)std::fabs(p.state_at(s1, s, e) - p.state_at(s0, s, e)));
      smax = std::max(smax, (double)std::fabs(p.state_at(s0, s, e)));
    }
    if (!half)
      EXPECT_EQ(0, std::memcmp(base + p.off, &s0[(size_t)p.perm(s) * p.stride + p.off], p.seq_bytes()))
          << what << ": sequence " << s << "'s state is not gdn_kernel's";
  }
  std::printf("[lz23] %s, %zu steps: outputs max|diff| %.3g (max |out| %.3g), states %.3g (%.3g)\n", what.c_str(),
              o0.size(), oerr, omax, serr, smax);
  // f16 states: gdn_kernel rounds the state every token, the lazy rule every state write (fewer roundings), so the
  // two differ by f16 rounding, not float rounding.
  EXPECT_LE(oerr, (half ? 2e-3 : 2e-5) * std::max(1.0, omax)) << what;
  if (half) EXPECT_LE(serr, 4e-3 * std::max(1.0, smax)) << what;
  p.free_all();
  for (auto& q : steps) q.free_all();
}

}  // namespace

// Decode steps past several flushes (lengths 2, 4, 8, 16), sequences that take a prefill-like step of several
// tokens (or none) between decode steps, the 9B's and the 27B's head counts, d_k 64 and 128, f16 states.
TEST(GdnLazy, MatchesGdnKernel) {
  GDN_SKIP_WITHOUT_GPU();
  auto decode = [](int S, int n) { return std::vector<std::vector<int>>(n, std::vector<int>(S, 1)); };
  lazy_case(128, 16, 32, 4, decode(5, 11), 201);
  lazy_case(128, 16, 32, 8, decode(64, 10), 202);
  lazy_case(128, 16, 48, 2, decode(3, 5), 203);
  lazy_case(64, 4, 8, 16, decode(7, 20), 204);
  auto mixed = decode(6, 9);
  mixed[3] = {2, 1, 0, 3, 1, 1};  // history + tokens, no token (history kept), ...
  mixed[6] = {1, 4, 1, 1, 0, 2};
  lazy_case(128, 16, 32, 4, mixed, 205);
  lazy_case(64, 2, 4, 3, mixed, 206);
  lazy_case(128, 16, 32, 4, decode(9, 11), 207, true);
  lazy_case(128, 16, 32, 8, mixed, 208, true);
}

namespace {

// conv_silu_l2's step: S sequences with ntok[s] tokens (packed by sequence), Cc channels in heads of hd, the first
// n_norm channels L2-normalized per head, conv kernel kc; each sequence's window at base[s] + off.
struct ConvProblem {
  int S = 0, T = 0, hd = 128, kc = 4;
  int64_t Cc = 0, n_norm = 0, off = 48, stride = 0;
  std::vector<int> start;
  std::vector<float> x, w, win0;  // x [T][Cc], w [Cc][kc], win0 [S][kc-1][Cc]
  float *dx = nullptr, *dw = nullptr, *du = nullptr, *dpre = nullptr;
  unsigned char* dstate = nullptr;
  mk::StepIO* dio = nullptr;
  int64_t win_floats() const { return (int64_t)(kc - 1) * Cc; }

  bool init(int64_t Cc_, int64_t n_norm_, int hd_, const std::vector<int>& ntok, uint32_t seed) {
    Cc = Cc_, n_norm = n_norm_, hd = hd_, S = (int)ntok.size();
    start.assign(S + 1, 0);
    for (int s = 0; s < S; s++) start[s + 1] = start[s] + ntok[s];
    T = start[S];
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> U(-1.f, 1.f);
    const int Tn = std::max(T, 1);
    x.resize(Tn * Cc), w.resize(Cc * kc), win0.resize(S * win_floats());
    for (auto& v : x) v = 2.f * U(g);
    for (auto& v : w) v = U(g);
    for (auto& v : win0) v = 2.f * U(g);
    stride = (off + win_floats() * 4 + 255) / 256 * 256;
    if (cudaMalloc(&dx, x.size() * 4) != cudaSuccess || cudaMalloc(&dw, w.size() * 4) != cudaSuccess ||
        cudaMalloc(&du, (size_t)Tn * Cc * 4) != cudaSuccess || cudaMalloc(&dpre, (size_t)Tn * Cc * 4) != cudaSuccess ||
        cudaMalloc(&dstate, (size_t)S * stride) != cudaSuccess || cudaMalloc(&dio, sizeof(mk::StepIO)) != cudaSuccess)
      return false;
    mk::StepIO io{};
    for (int s = 0; s <= S; s++) io.start[s] = start[s];
    for (int s = 0; s < S; s++) io.base[s] = (unsigned long long)(uintptr_t)(dstate + (int64_t)(S - 1 - s) * stride);
    return cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemcpy(dio, &io, sizeof(io), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  bool reset() {
    std::vector<unsigned char> h((size_t)S * stride, 0x5A);
    for (int s = 0; s < S; s++)
      std::memcpy(&h[(size_t)(S - 1 - s) * stride + off], &win0[(size_t)s * win_floats()], win_floats() * 4);
    return cudaMemcpy(dstate, h.data(), h.size(), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  mk::ConvArgs args(bool dbg) const {
    mk::ConvArgs a;
    a.x = dx, a.ldx = Cc, a.w = dw, a.state_off = off, a.u = du, a.ldu = Cc, a.dbg_pre = dbg ? dpre : nullptr;
    a.n_channels = Cc, a.n_norm_channels = n_norm, a.head_dim = hd, a.kernel = kc, a.eps = 1e-6f;
    return a;
  }
  void free_all() {
    for (float* p : {dx, dw, du, dpre}) cudaFree(p);
    cudaFree(dstate);
    cudaFree(dio);
  }
};

void conv_case(int64_t Cc, int64_t n_norm, int hd, const std::vector<int>& ntok, uint32_t seed) {
  ConvProblem p;
  ASSERT_TRUE(p.init(Cc, n_norm, hd, ntok, seed));
  const std::string what = "conv Cc " + std::to_string(Cc) + " S " + std::to_string(p.S) + " T " + std::to_string(p.T);
  const size_t nu = (size_t)std::max(p.T, 1) * Cc;
  // Variants: conv_kernel with 1, 2, 4 sequences per block, conv_warp_kernel (conv14) with 1, 2, 4 per warp.
  constexpr int kV = 6;
  std::vector<float> u[kV], pre[kV];
  std::vector<unsigned char> st[kV];
  const int seqs[kV] = {1, 2, 4, 1, 2, 4}, warp[kV] = {0, 0, 0, 1, 2, 4};
  const char* kind[kV] = {"per block", "per block", "per block", "per warp", "per warp", "per warp"};
  for (int v = 0; v < kV; v++) {
    ASSERT_TRUE(p.reset());
    CU(cudaMemset(p.du, 0xFF, nu * 4));
    CU(cudaMemset(p.dpre, 0xFF, nu * 4));
    mk::conv_force_seqs(seqs[v]);
    mk::conv_force_warp(warp[v]);
    const Status s = mk::conv_silu_l2(p.args(true), p.dio, p.S, nullptr);
    mk::conv_force_seqs(0);
    mk::conv_force_warp(-1);
    ASSERT_TRUE(s.ok()) << s.error().message;
    CU(cudaDeviceSynchronize());
    u[v].resize(nu), pre[v].resize(nu), st[v].resize((size_t)p.S * p.stride);
    CU(cudaMemcpy(u[v].data(), p.du, nu * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(pre[v].data(), p.dpre, nu * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(st[v].data(), p.dstate, st[v].size(), cudaMemcpyDeviceToHost));
  }
  // 1 sequence per block against float64 (taps in order; q / k heads L2-normalized).
  const int W = p.kc - 1;
  double err = 0, ref_max = 0, werr = 0;
  for (int s = 0; s < p.S; s++) {
    const auto w0 = p.win0.begin() + (size_t)s * p.win_floats();
    std::vector<double> win(w0, w0 + p.win_floats());
    for (int t = p.start[s]; t < p.start[s + 1]; t++) {
      std::vector<double> y(Cc);
      for (int64_t c = 0; c < Cc; c++) {
        double sum = 0;
        for (int j = 0; j < W; j++) sum += (double)p.w[c * p.kc + j] * win[j * Cc + c];
        const double xv = p.x[t * Cc + c];
        sum += (double)p.w[c * p.kc + W] * xv;
        for (int j = 0; j + 1 < W; j++) win[j * Cc + c] = win[(j + 1) * Cc + c];
        if (W > 0) win[(W - 1) * Cc + c] = xv;
        y[c] = sum / (1.0 + std::exp(-sum));
      }
      for (int64_t h0 = 0; h0 < n_norm; h0 += hd) {
        double ss = 0;
        for (int i = 0; i < hd; i++) ss += y[h0 + i] * y[h0 + i];
        for (int i = 0; i < hd; i++) y[h0 + i] /= std::sqrt(ss + 1e-6);
      }
      for (int64_t c = 0; c < Cc; c++) {
        const float g = u[0][t * Cc + c];
        ASSERT_TRUE(std::isfinite(g)) << what << ": u[" << t << "][" << c << "] not written / not finite";
        err = std::max(err, std::fabs(g - y[c]));
        ref_max = std::max(ref_max, std::fabs(y[c]));
      }
    }
    const float* got = reinterpret_cast<const float*>(&st[0][(size_t)(p.S - 1 - s) * p.stride + p.off]);
    for (int64_t i = 0; i < p.win_floats(); i++) werr = std::max(werr, std::fabs(got[i] - win[i]));
  }
  std::printf("[gdn11] %s: conv vs float64: u max|diff| %.3g (max |ref| %.3g), window %.3g\n", what.c_str(), err,
              ref_max, werr);
  EXPECT_LE(err, 1e-5 * std::max(1.0, ref_max)) << what;
  EXPECT_EQ(werr, 0.0) << what << ": the window holds inputs, copied";
  for (int v = 1; v < kV; v++) {
    const size_t n = (size_t)p.T * Cc * 4;
    EXPECT_EQ(0, std::memcmp(u[v].data(), u[0].data(), n)) << what << ": u, " << seqs[v] << " " << kind[v];
    EXPECT_EQ(0, std::memcmp(pre[v].data(), pre[0].data(), n)) << what << ": dbg_pre, " << seqs[v] << " " << kind[v];
    EXPECT_EQ(0, std::memcmp(st[v].data(), st[0].data(), st[0].size()))
        << what << ": state, " << seqs[v] << " " << kind[v];
  }
  p.free_all();
}

}  // namespace

// conv_silu_l2 with 1, 2 and 4 sequences per block and per warp (conv_warp_kernel): the same bits; against float64.
// The 9B's shape at B = 64 and odd counts (blocks / warps with fewer sequences than their share), multi-token steps
// with a sequence of none, a grid whose last block has fewer warps (5 heads x 3 sequences).
TEST(ConvStep, SeqsPerBlockGiveSameBits) {
  GDN_SKIP_WITHOUT_GPU();
  conv_case(8192, 4096, 128, std::vector<int>(64, 1), 21);
  conv_case(8192, 4096, 128, std::vector<int>(7, 1), 22);
  conv_case(8192, 4096, 128, {2, 0, 1, 3, 1}, 25);
  conv_case(1024, 512, 64, {3, 1, 0, 5, 2}, 23);
  conv_case(768, 256, 64, {1, 4, 2}, 24);
  conv_case(320, 128, 64, {2, 1, 3}, 26);
}

// conv_silu_l2's variants at the 9B's shape (one token per sequence), B = 16 / 32 / 64, with DS_CONV_BENCH=1: median us
// per launch of 7 x 20 launches and the bytes moved (windows read + written, x, u) per second. "[conv14] ..." lines.
TEST(ConvStep, Bench) {
  GDN_SKIP_WITHOUT_GPU();
  const char* e = std::getenv("DS_CONV_BENCH");  // 1: B = 16, 32, 64; another number: that batch only (ncu)
  const int only = e ? std::atoi(e) : 0;
  if (only < 1 || only > 64) GTEST_SKIP() << "DS_CONV_BENCH=1 to run";
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  for (int S : {16, 32, 64}) {
    if (only != 1 && S != only) continue;
    ConvProblem cp;
    ASSERT_TRUE(cp.init(8192, 4096, 128, std::vector<int>(S, 1), 13));
    ASSERT_TRUE(cp.reset());
    const double bytes = 2.0 * S * cp.win_floats() * 4 + 2.0 * S * cp.Cc * 4;
    const int seqs[6] = {1, 2, 4, 1, 2, 4}, warp[6] = {0, 0, 0, 1, 2, 4};
    for (int v = 0; v < 6; v++) {
      auto launch = [&] {
        mk::conv_force_seqs(seqs[v]);
        mk::conv_force_warp(warp[v]);
        const bool ok = mk::conv_silu_l2(cp.args(false), cp.dio, S, nullptr).ok();
        mk::conv_force_seqs(0);
        mk::conv_force_warp(-1);
        return ok;
      };
      for (int i = 0; i < 5; i++) ASSERT_TRUE(launch());
      std::vector<float> t;
      for (int rep = 0; rep < 7; rep++) {
        CU(cudaEventRecord(e0));
        for (int i = 0; i < 20; i++) ASSERT_TRUE(launch());
        CU(cudaEventRecord(e1));
        CU(cudaEventSynchronize(e1));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 50.f);  // us per launch
      }
      std::sort(t.begin(), t.end());
      std::printf("[conv14] B %2d %d seq/%-5s %7.2f us (min %7.2f)  %5.2f TB/s\n", S, seqs[v], warp[v] ? "warp" : "block",
                  t[3], t[0], bytes / (t[3] * 1e6));
    }
    CU(cudaDeviceSynchronize());
    cp.free_all();
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

namespace {
bool bench_on() {
  const char* e = std::getenv("DS_GDN_BENCH");
  return e && e[0] == '1';
}
}  // namespace

// Median time per launch (us) of gdn_step with each kernel at B = 1 .. 64 (one token each) at the 9B's GDN shape
// (32 value heads) and at B = 16 / 32 / 64 at the 27B's (48); at B = 64 the state-copy rooflines (gdn_state_copy's
// modes, in place and out of place) and cudaMemcpy of the same bytes. Prints "[gdn18] 9B|27B ..." lines.
TEST(GdnBench, Time) {
  GDN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_GDN_BENCH=1 to run";
  cudaEvent_t e0, e1, e2;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  CU(cudaEventCreate(&e2));
  struct Shape {
    const char* name;
    int nv;
    std::vector<int> batches;
  };
  for (const Shape& sh : {Shape{"9B", 32, {1, 8, 16, 32, 64}}, Shape{"27B", 48, {16, 32, 64}}}) {
    for (int S : sh.batches) {
      Problem p;
      p.init(128, 16, sh.nv, std::vector<int>(S, 1), 11);
      ASSERT_TRUE(p.upload());
      ASSERT_TRUE(p.reset_state());
      const double bytes = 2.0 * S * p.seq_floats() * 4;
      auto time = [&](const char* name, double bytes, auto&& launch) {
        for (int i = 0; i < 3; i++) ASSERT_TRUE(launch());
        std::vector<float> v;
        for (int rep = 0; rep < 7; rep++) {
          CU(cudaEventRecord(e0));
          for (int i = 0; i < 10; i++) ASSERT_TRUE(launch());
          CU(cudaEventRecord(e1));
          CU(cudaEventSynchronize(e1));
          float ms = 0;
          CU(cudaEventElapsedTime(&ms, e0, e1));
          v.push_back(ms * 100.f);  // us per launch
        }
        std::sort(v.begin(), v.end());
        std::printf("[gdn18] %-3s B %2d %-22s %8.2f us (min %8.2f)  %5.2f TB/s\n", sh.name, S, name, v[3], v[0],
                    bytes / (v[3] * 1e6));
      };
      for (int k = 0; k < kKernels; k++)
          time(kKernel[k], bytes, [&] {
            mk::gdn_force_kernel(k);
            const bool ok = mk::gdn_step(p.args(false), p.dio, S, nullptr).ok();
            mk::gdn_force_kernel(-1);
            return ok;
          });
      {  // st20: the same kernels on f16 states (half the bytes)
        Problem ph;
        ph.half = true;
        ph.init(128, 16, sh.nv, std::vector<int>(S, 1), 11);
        ASSERT_TRUE(ph.upload());
        ASSERT_TRUE(ph.reset_state());
        const char* hname[] = {"f16 gdn_kernel", "f16 tma-out", "f16 tma-out-smem-in"};
        for (int k = 0; k < kKernels; k++)
          time(hname[k], bytes / 2, [&] {
            mk::gdn_force_kernel(k);
            const bool ok = mk::gdn_step(ph.args(false), ph.dio, S, nullptr).ok();
            mk::gdn_force_kernel(-1);
            return ok;
          });
        CU(cudaDeviceSynchronize());
        ph.free_all();
      }
      if (S >= 16) {  // lz24: the lazy rule at T = 8, one cycle = 7 lazy steps (positions 0..6) + 1 state step (7)
        constexpr int T = 8;
        Problem q;
        q.init(128, 16, sh.nv, std::vector<int>(S, 1), 11);
        const int64_t hist_bytes = sh.nv * mk::gdn_hist_floats(128, T) * 4;
        q.extra = (272 + q.seq_bytes() + 15) / 16 * 16 - 272 - q.seq_bytes() + hist_bytes;
        ASSERT_TRUE(q.upload());
        ASSERT_TRUE(q.reset_state());
        const int64_t hist_off = (q.off + q.seq_bytes() + 15) / 16 * 16;
        for (int s = 0; s < S; s++) CU(cudaMemset(q.dstate + (int64_t)q.perm(s) * q.stride + hist_off, 0, hist_bytes));
        std::vector<mk::StepIO*> ios(T, nullptr);  // one StepIO per position
        for (int c = 0; c < T; c++) {
          mk::StepIO io{};
          CU(cudaMemcpy(&io, q.dio, sizeof(io), cudaMemcpyDeviceToHost));
          for (int t = 0; t < S; t++) io.pos[t] = c;
          CU(cudaMalloc(&ios[c], sizeof(io)));
          CU(cudaMemcpy(ios[c], &io, sizeof(io), cudaMemcpyHostToDevice));
        }
        mk::GdnArgs a = q.args(false);
        a.lazy = T, a.hist_off = hist_off;
        auto cycle = [&](float* lazy_ms, float* state_ms) {
          CU(cudaEventRecord(e0));
          for (int c = 0; c < T - 1; c++) ASSERT_TRUE(mk::gdn_step(a, ios[c], S, nullptr).ok());
          CU(cudaEventRecord(e1));
          ASSERT_TRUE(mk::gdn_step(a, ios[T - 1], S, nullptr).ok());
          CU(cudaEventRecord(e2));
          CU(cudaEventSynchronize(e2));
          CU(cudaEventElapsedTime(lazy_ms, e0, e1));
          CU(cudaEventElapsedTime(state_ms, e1, e2));
        };
        float lz = 0, st = 0;
        cycle(&lz, &st);  // warm-up
        std::vector<float> vl, vs;
        for (int rep = 0; rep < 7; rep++) {
          cycle(&lz, &st);
          vl.push_back(lz * 1000.f / (T - 1));
          vs.push_back(st * 1000.f);
        }
        std::sort(vl.begin(), vl.end());
        std::sort(vs.begin(), vs.end());
        const double sb = (double)S * q.seq_floats() * 4;  // one read of every state
        std::printf("[lz24] %-3s B %2d lazy T 8 lazy step %7.2f us (%4.2f TB/s of state reads), state step "
                    "%7.2f us, cycle mean %7.2f us\n",
                    sh.name, S, vl[3], sb / (vl[3] * 1e6), vs[3],
                    ((T - 1) * vl[3] + vs[3]) / T);
        for (auto* d : ios) cudaFree(d);
        CU(cudaDeviceSynchronize());
        q.free_all();
      }
      if (S == 64) {
        // In place: 0 gdn_kernel's pattern, 1 coalesced quarter heads, 2 tma-out's data path, 6 / 7 a dense
        // grid-stride copy with 4 / 8 float4 per thread; out of place (permuting the states: after every kernel
        // line): 3 / 4 / 5 / 8 the same as 0 / 1 / 2 / 6.
        const char* names[] = {"copy gdn_kernel-pattern", "copy coalesced 128thr", "copy tma-out",
                               "oop gdn_kernel-pattern",  "oop coalesced 128thr",  "oop tma-out",
                               "copy dense in place",     "copy dense8 in place",  "oop dense"};
        for (int m = 0; m < 9; m++)
          time(names[m], bytes, [&] { return mk::gdn_state_copy(m, p.args(false), p.dio, S, nullptr).ok(); });
        void* d2 = nullptr;
        CU(cudaMalloc(&d2, (size_t)S * p.stride));
        time("cudaMemcpy d2d", bytes, [&] {
          return cudaMemcpyAsync(d2, p.dstate, (size_t)S * p.stride, cudaMemcpyDeviceToDevice) == cudaSuccess;
        });
        cudaFree(d2);
      }
      CU(cudaDeviceSynchronize());
      p.free_all();
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
}

// One launch of each kernel at B = 64 (9B shape) on float states with the rooflines, then on f16 states (s30), for
// `ncu -k regex:...`.
TEST(GdnBench, Profile) {
  GDN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_GDN_BENCH=1 to run";
  for (bool half : {false, true}) {
    Problem p;
    p.half = half;
    p.init(128, 16, 32, std::vector<int>(64, 1), 12);
    ASSERT_TRUE(p.upload());
    ASSERT_TRUE(p.reset_state());
    for (int k = 0; k < kKernels; k++) {
      mk::gdn_force_kernel(k);
      const Status st = mk::gdn_step(p.args(false), p.dio, 64, nullptr);
      mk::gdn_force_kernel(-1);
      ASSERT_TRUE(st.ok());
    }
    if (!half)  // the copy rooflines take float states
      for (int m = 0; m < 9; m++) ASSERT_TRUE(mk::gdn_state_copy(m, p.args(false), p.dio, 64, nullptr).ok());
    CU(cudaDeviceSynchronize());
    p.free_all();
  }
}

namespace {

// conv_silu_l2 + gdn_step (gdn_kernel) against gdn_conv_step on one layer's step: the Problem's inputs, x [T][Cc]
// and the taps random, each sequence's window [3][Cc] in its allocation after the state (at woff).
void conv_fuse_case(int dk, int nk, int nv, const std::vector<int>& ntok, uint32_t seed, bool half = false) {
  Problem p;
  p.half = half;
  p.init(dk, nk, nv, ntok, seed);
  const int kc = 4;
  const int64_t wbytes = (int64_t)(kc - 1) * p.Cc * 4;
  p.extra = 48 + wbytes;
  ASSERT_TRUE(p.upload());
  const int64_t woff = p.off + p.seq_bytes() + 48;  // 16-byte aligned
  const std::string what = std::string(half ? "f16 states " : "") + "fuse dk " + std::to_string(dk) + " nk " + std::to_string(nk) + " nv " +
                           std::to_string(nv) + " S " + std::to_string(p.S) + " T " + std::to_string(p.T);
  std::mt19937 g(seed + 1000);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  const int Tn = std::max(p.T, 1);
  std::vector<float> x((size_t)Tn * p.Cc), w((size_t)p.Cc * kc), win((size_t)p.S * (kc - 1) * p.Cc);
  for (auto& v : x) v = 2.f * U(g);
  for (auto& v : w) v = U(g);
  for (auto& v : win) v = 2.f * U(g);
  float *dx = nullptr, *dw = nullptr;
  CU(cudaMalloc(&dx, x.size() * 4));
  CU(cudaMalloc(&dw, w.size() * 4));
  CU(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  CU(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  mk::ConvArgs ca;
  ca.x = dx, ca.ldx = p.Cc, ca.w = dw, ca.state_off = woff, ca.u = p.du, ca.ldu = p.Cc;
  ca.n_channels = p.Cc, ca.n_norm_channels = 2 * p.Kd, ca.head_dim = dk, ca.kernel = kc, ca.eps = 1e-6f;
  const mk::GdnArgs ga = p.args(false);
  // v: 0 conv_silu_l2 + gdn_kernel, 1 gdn_conv_kernel<DK, 4, 1>, 2 / 3 gdn_conv_kernel<DK, 4, 2 / 4> with 2 / 4 CTAs
  // per head (gs18; kS 1 where the cluster would exceed 8 CTAs).
  constexpr int kV = 4;
  const int kSplit[kV] = {0, 0, 2, 4};
  std::vector<float> out[kV];
  std::vector<unsigned char> st[kV];
  for (int v = 0; v < kV; v++) {
    ASSERT_TRUE(p.reset_state());
    for (int s = 0; s < p.S; s++)
      CU(cudaMemcpy(p.dstate + (int64_t)p.perm(s) * p.stride + woff, &win[(size_t)s * (kc - 1) * p.Cc], wbytes,
                    cudaMemcpyHostToDevice));
    CU(cudaMemset(p.dout, 0xFF, (size_t)Tn * p.Vd * 4));
    CU(cudaMemset(p.du, 0xFF, (size_t)Tn * p.Cc * 4));
    mk::gdn_force_conv_fuse(v >= 1 ? 1 : 0);
    mk::gdn_force_split_b1(kSplit[v]);
    mk::gdn_force_kernel(0);
    const bool fused = mk::gdn_conv_fused(ca, ga, p.S);
    const int split = mk::gdn_conv_split(ca, ga, p.S);
    const Status r = [&]() -> Status {
      if (v >= 1) return mk::gdn_conv_step(ca, ga, p.dio, p.S, nullptr);
      DS_TRY(mk::conv_silu_l2(ca, p.dio, p.S, nullptr));
      return mk::gdn_step(ga, p.dio, p.S, nullptr);
    }();
    mk::gdn_force_kernel(-1);
    mk::gdn_force_split_b1(-1);
    mk::gdn_force_conv_fuse(-1);
    ASSERT_EQ(fused, v >= 1) << what;
    ASSERT_EQ(split, nv / nk * kSplit[v] <= 8 ? kSplit[v] : 0) << what << " v " << v;
    ASSERT_TRUE(r.ok()) << what << ": " << r.error().message;
    CU(cudaDeviceSynchronize());
    out[v].resize((size_t)Tn * p.Vd), st[v].resize((size_t)p.S * p.stride);
    CU(cudaMemcpy(out[v].data(), p.dout, out[v].size() * 4, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(st[v].data(), p.dstate, st[v].size(), cudaMemcpyDeviceToHost));
    if (v >= 1) {  // the fused kernels leave u alone
      std::vector<uint32_t> u((size_t)Tn * p.Cc);
      CU(cudaMemcpy(u.data(), p.du, u.size() * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < u.size(); i++) ASSERT_EQ(u[i], 0xFFFFFFFFu) << what << ": u[" << i << "] written";
    }
  }
  for (int t = 0; t < p.T; t++)
    for (int64_t i = 0; i < p.Vd; i++)
      ASSERT_TRUE(std::isfinite(out[0][t * p.Vd + i])) << what << ": out[" << t << "][" << i << "] not written";
  // The windows moved (the last input of each sequence with tokens is its window's newest row).
  const size_t nT = (size_t)p.T;
  for (int v = 1; v < kV; v++) {
    for (int s = 0; s < p.S; s++) {
      if (p.start[s + 1] == p.start[s]) continue;
      const float* got = reinterpret_cast<const float*>(&st[v][(size_t)p.perm(s) * p.stride + woff]);
      for (int64_t c = 0; c < p.Cc; c++)
        ASSERT_EQ(got[(kc - 2) * p.Cc + c], x[(size_t)(p.start[s + 1] - 1) * p.Cc + c])
            << what << " v " << v << ": window " << c;
    }
    EXPECT_EQ(0, std::memcmp(out[v].data(), out[0].data(), nT * p.Vd * 4)) << what << " v " << v << ": out";
    EXPECT_EQ(0, std::memcmp(st[v].data(), st[0].data(), st[0].size())) << what << " v " << v << ": states, windows";
  }
  std::printf("[cg18/gs18] %s: fused, split 2, split 4 vs conv_silu_l2 + gdn_kernel compared (out, states, "
              "windows)\n", what.c_str());
  cudaFree(dx);
  cudaFree(dw);
  p.free_all();
}

}  // namespace

// The 9B's shape (nk 16, nv 32: clusters of 2), the 0.8B's (16 / 16: no cluster), the 27B's nv = 3 nk and small d_k 64
// ones (nv = 3 nk, 4 nk), decode steps of 1 to 15 sequences and multi-token steps (one sequence without tokens);
// gs18: the split forms kS 2 / 4 too (clusters of 2, 4, 6, 8 CTAs; 12 falls back to kS 1).
TEST(GdnConvStep, FusedGivesSameBits) {
  GDN_SKIP_WITHOUT_GPU();
  conv_fuse_case(128, 16, 32, {1}, 31);
  conv_fuse_case(128, 16, 32, std::vector<int>(15, 1), 32);
  conv_fuse_case(128, 16, 32, {3, 1, 0, 5, 2}, 33);
  conv_fuse_case(128, 16, 16, {1}, 34);
  conv_fuse_case(128, 16, 16, std::vector<int>(4, 1), 35);
  conv_fuse_case(128, 16, 48, {1}, 36);
  conv_fuse_case(128, 16, 48, {2, 1, 4}, 37);
  conv_fuse_case(64, 2, 6, {1, 1, 3}, 38);
  conv_fuse_case(64, 4, 16, {7, 0, 1}, 39);
  conv_fuse_case(64, 4, 4, {1}, 40);
  // st20: f16 states through every form (the 9B's clusters of 2, the 0.8B's split 4, d_k 64, multi-token).
  conv_fuse_case(128, 16, 32, {1}, 41, true);
  conv_fuse_case(128, 16, 16, {1}, 42, true);
  conv_fuse_case(128, 16, 32, {3, 1, 0, 5, 2}, 43, true);
  conv_fuse_case(64, 4, 16, {7, 0, 1}, 44, true);
}

// gdn_conv_fused's conditions: on (DS_GDN_CONV_FUSE=1 or forced) below DS_GDN_TMA_MIN sequences, off from there and
// with debug outputs; off when forced off.
TEST(GdnConvStep, FusedOnlyWhereItApplies) {
  mk::ConvArgs ca;
  ca.n_channels = 3 * 16 * 128, ca.n_norm_channels = 2 * 16 * 128, ca.head_dim = 128, ca.kernel = 4;
  mk::GdnArgs ga;
  ga.n_k_heads = 16, ga.n_v_heads = 16, ga.d_k = 128;
  mk::gdn_force_conv_fuse(0);
  EXPECT_FALSE(mk::gdn_conv_fused(ca, ga, 1));
  mk::gdn_force_conv_fuse(1);
  EXPECT_TRUE(mk::gdn_conv_fused(ca, ga, 1));
  EXPECT_TRUE(mk::gdn_conv_fused(ca, ga, 15));
  EXPECT_FALSE(mk::gdn_conv_fused(ca, ga, 16));  // gdn_tma_out_kernel's batches (DS_GDN_TMA_MIN default)
  float dummy = 0;
  ca.dbg_pre = &dummy;
  EXPECT_FALSE(mk::gdn_conv_fused(ca, ga, 1));
  ca.dbg_pre = nullptr;
  ca.kernel = 3;
  EXPECT_FALSE(mk::gdn_conv_fused(ca, ga, 1));
  ca.kernel = 4;
  // gs18's split: by default (DS_GDN_SPLIT_B1 unset) 4 CTAs per head where nv = nk (the 0.8B), none where nv > nk (the
  // 9B, where it did not gain) or from 16 sequences; forced, wherever the cluster stays <= 8 CTAs.
  mk::GdnArgs g2 = ga;
  g2.n_v_heads = 32;
  mk::ConvArgs c2 = ca;
  c2.n_channels = 2 * 16 * 128 + 32 * 128;
  if (!std::getenv("DS_GDN_SPLIT_B1")) {
    EXPECT_EQ(mk::gdn_conv_split(ca, ga, 1), 4);
    EXPECT_EQ(mk::gdn_conv_split(ca, ga, 16), 0);
    EXPECT_EQ(mk::gdn_conv_split(c2, g2, 1), 0);
  }
  mk::gdn_force_split_b1(4);
  EXPECT_EQ(mk::gdn_conv_split(c2, g2, 1), 4);  // a cluster of 2 x 4
  mk::gdn_force_split_b1(0);
  EXPECT_EQ(mk::gdn_conv_split(ca, ga, 1), 0);
  mk::gdn_force_split_b1(-1);
  mk::gdn_force_conv_fuse(-1);
}

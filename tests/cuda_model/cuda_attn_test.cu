// The decode attention kernels of src/cuda/model/kernels_attn.cu called directly (mk::attention with the loader
// forced): the register loops (1 or 2 rows ahead) and attn13's cp.async ring (2 or 4 rows per warp), at fused
// levels 0 (partial + combine) and 1 (the combine in the last block), must give the same bits (outputs and the
// pre-gate core) at every head dim and group size the kernels take, with empty splits, one split, multi-token
// chunks and caches that are not 16-byte aligned (the ring's 4-byte copies); and match a float64 evaluation of
// softmax(q K^T * scale) V * sigmoid(gate). A sequence's rows are the same alone as in a batch of 64.
// attn16's form (scores in log2 units, ex2.approx, the group's dot products reduced together, one exponential per
// row) is checked against float64 also with keys that grow with the position (the running max moves often).
// AttnBench.* (only with DS_ATTN_BENCH=1, or 2 for the default loaders only): time per launch of each loader at
// the 9B's shape (Time), one launch of each for Nsight Compute (Profile); attn18: the ring's reads alone as a
// roofline in both cache layouts (Layout), the default loaders at the step's shape (StepShape). The "[attn18 bits]"
// lines (hashes of out and core per variant) let runs under other switches be compared bit for bit.
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

#define ATTN_SKIP_WITHOUT_GPU()                                                               \
  do {                                                                                        \
    if (ds::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)
#define CU(x) ASSERT_EQ((x), cudaSuccess) << #x

// A loader + fused level; `ring` 0 = the register loop with `pf` rows ahead.
struct Variant {
  int level, ring, pf;
  const char* name;
};
constexpr Variant kVariants[] = {
    {0, 0, 2, "partial pf2 + combine"}, {0, 0, 1, "partial pf1 + combine"}, {0, 2, 2, "ring2 + combine"},
    {0, 4, 2, "ring4 + combine"},       {1, 0, 2, "fused (register loop)"}, {1, 2, 2, "fused ring2"},
    {1, 4, 2, "fused ring4"},
};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

// Restores the attention switches a test changed.
struct Guard {
  int level = mk::attn_fused();
  ~Guard() {
    mk::set_attn_fused(level);
    mk::attn_force_ring(-1);
    mk::attn_force_prefetch(0);
    mk::attn_force_skip_empty(-1);
    mk::attn_force_evict(-1);
    mk::attn_force_mma(-1);
    mk::attn_force_mma_rows(-1);
  }
};

// One attention step: T tokens; token t of sequence seq[t] at position pos[t] reads cache rows 0 .. pos[t].
// half (kv19's f16 caches): the caches hold f16 rows; init rounds kc / vc to f16 values, so the float64 reference
// sees the values the kernels read.
struct Problem {
  int nh = 0, nkv = 0, hd = 0, max_ctx = 0, n_splits = 0, S = 0, T = 0;
  bool half = false;
  std::vector<int> pos, seq, start;
  std::vector<float> q, gate, kc, vc;  // q [T][nh][hd]; gate [T][nh][2 hd] (gate at + hd); kc / vc [S][max_ctx][nkv][hd]
  int64_t rec = 512, stride = 0;       // k_off = rec; each sequence's allocation (bytes)
  float *dq = nullptr, *dgate = nullptr, *dpart = nullptr, *dout = nullptr, *dcore = nullptr;
  unsigned* dcnt = nullptr;
  unsigned char* dstate = nullptr;
  mk::StepIO* dio = nullptr;

  int64_t cache_floats() const { return (int64_t)max_ctx * nkv * hd; }  // elements of one cache
  int64_t elem() const { return half ? 2 : 4; }
  int64_t k_off() const { return rec; }
  int64_t v_off() const { return rec + cache_floats() * elem(); }

  // seqs[s] = positions of sequence s's tokens (consecutive in a real step; any here).
  void init(int nh_, int nkv_, int hd_, int max_ctx_, int n_splits_, const std::vector<std::vector<int>>& seqs,
            int64_t rec_, uint32_t seed) {
    nh = nh_, nkv = nkv_, hd = hd_, max_ctx = max_ctx_, n_splits = n_splits_, rec = rec_;
    S = (int)seqs.size();
    pos.clear(), seq.clear(), start.assign(1, 0);
    for (int s = 0; s < S; s++) {
      for (int p : seqs[s]) pos.push_back(p), seq.push_back(s);
      start.push_back((int)pos.size());
    }
    T = (int)pos.size();
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> U(-1.f, 1.f);
    q.resize((size_t)T * nh * hd), gate.resize((size_t)T * nh * 2 * hd);
    for (auto& x : q) x = 2.f * U(g);
    for (auto& x : gate) x = 3.f * U(g);
    kc.resize((size_t)S * cache_floats()), vc.resize(kc.size());
    for (auto& x : kc) x = U(g);
    for (auto& x : vc) x = U(g);
    if (half) round_caches();
  }
  void round_caches() {
    for (auto* c : {&kc, &vc})
      for (auto& x : *c) x = __half2float(__float2half_rn(x));
  }

  // Key rows of position p scaled by 1 + p * per_row (scores grow with the position: the running max moves at
  // many rows, in both directions per head, and the exponentials span a wide range).
  void ramp_keys(float per_row) {
    for (int s = 0; s < S; s++)
      for (int p = 0; p < max_ctx; p++)
        for (int i = 0; i < nkv * hd; i++)
          kc[(size_t)s * cache_floats() + (size_t)p * nkv * hd + i] *= 1.f + p * per_row;
    if (half) round_caches();
  }

  bool upload() {
    auto up = [](float** d, const std::vector<float>& h) {
      return cudaMalloc(d, h.size() * 4) == cudaSuccess &&
             cudaMemcpy(*d, h.data(), h.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    };
    if (!up(&dq, q) || !up(&dgate, gate)) return false;
    const size_t no = (size_t)T * nh * hd;
    if (cudaMalloc(&dout, no * 4) != cudaSuccess || cudaMalloc(&dcore, no * 4) != cudaSuccess ||
        cudaMalloc(&dpart, (size_t)T * nh * n_splits * (hd + 2) * 4) != cudaSuccess ||
        cudaMalloc(&dcnt, (size_t)T * nkv * 4) != cudaSuccess || cudaMemset(dcnt, 0, (size_t)T * nkv * 4) != cudaSuccess)
      return false;
    stride = (rec + 2 * cache_floats() * elem() + 255) / 256 * 256;
    std::vector<unsigned char> h((size_t)S * stride, 0xA5);
    std::vector<__half> row(half ? cache_floats() : 0);
    auto put = [&](unsigned char* dst, const float* src) {
      if (!half) return (void)std::memcpy(dst, src, cache_floats() * 4);
      for (int64_t i = 0; i < cache_floats(); i++) row[i] = __float2half_rn(src[i]);
      std::memcpy(dst, row.data(), cache_floats() * 2);
    };
    for (int s = 0; s < S; s++) {  // allocations in reverse order: io.base is used
      unsigned char* b = &h[(size_t)(S - 1 - s) * stride];
      put(b + k_off(), &kc[(size_t)s * cache_floats()]);
      put(b + v_off(), &vc[(size_t)s * cache_floats()]);
    }
    if (cudaMalloc(&dstate, h.size()) != cudaSuccess ||
        cudaMemcpy(dstate, h.data(), h.size(), cudaMemcpyHostToDevice) != cudaSuccess)
      return false;
    mk::StepIO io{};
    for (int t = 0; t < T; t++) io.pos[t] = pos[t], io.seq[t] = seq[t];
    for (int s = 0; s <= S; s++) io.start[s] = start[s];
    for (int s = 0; s < S; s++) io.base[s] = (unsigned long long)(uintptr_t)(dstate + (int64_t)(S - 1 - s) * stride);
    return cudaMalloc(&dio, sizeof(io)) == cudaSuccess &&
           cudaMemcpy(dio, &io, sizeof(io), cudaMemcpyHostToDevice) == cudaSuccess;
  }

  mk::AttnArgs args(bool dbg) const {
    mk::AttnArgs a;
    a.q = dq, a.gate = dgate + hd, a.ld_gate = (int64_t)nh * 2 * hd;
    a.k_off = k_off(), a.v_off = v_off();
    a.n_head = nh, a.n_head_kv = nkv, a.head_dim = hd, a.n_splits = n_splits;
    a.scale = 1.0f / std::sqrt((float)hd);
    a.kv_half = half;
    a.part = dpart, a.out = dout, a.dbg_core = dbg ? dcore : nullptr, a.counters = dcnt;
    return a;
  }

  // float64: core[t][h][d] and the gated output.
  void reference(std::vector<double>& core, std::vector<double>& out) const {
    const int G = nh / nkv;
    const double scale = 1.0 / std::sqrt((double)hd);
    core.assign((size_t)T * nh * hd, 0.0), out.assign(core.size(), 0.0);
    std::vector<double> w, o;
    for (int t = 0; t < T; t++)
      for (int h = 0; h < nh; h++) {
        const int g = h / G, n = pos[t] + 1;
        const float* qh = &q[((size_t)t * nh + h) * hd];
        const float* K = &kc[(size_t)seq[t] * cache_floats()];
        const float* V = &vc[(size_t)seq[t] * cache_floats()];
        w.assign(n, 0.0);
        double m = -1e300, sum = 0;
        for (int p = 0; p < n; p++) {
          double d = 0;
          for (int i = 0; i < hd; i++) d += (double)qh[i] * K[((size_t)p * nkv + g) * hd + i];
          w[p] = d * scale;
          m = std::max(m, w[p]);
        }
        for (int p = 0; p < n; p++) sum += (w[p] = std::exp(w[p] - m));
        o.assign(hd, 0.0);
        for (int p = 0; p < n; p++)  // rows in memory order
          for (int i = 0; i < hd; i++) o[i] += w[p] * V[((size_t)p * nkv + g) * hd + i];
        for (int i = 0; i < hd; i++) {
          const size_t oi = ((size_t)t * nh + h) * hd + i;
          core[oi] = o[i] / sum;
          out[oi] = core[oi] / (1.0 + std::exp(-(double)gate[((size_t)t * nh + h) * 2 * hd + hd + i]));
        }
      }
  }

  void free_all() {
    for (float* p : {dq, dgate, dpart, dout, dcore}) cudaFree(p);
    cudaFree(dcnt);
    cudaFree(dstate);
    cudaFree(dio);
  }
};

void force(const Variant& v) {
  mk::set_attn_fused(v.level);
  mk::attn_force_ring(v.ring);
  mk::attn_force_prefetch(v.pf);
}

struct Outs {
  std::vector<float> out, core;
  std::vector<unsigned> cnt;
};

// One launch of variant v on the first n_tokens tokens (outputs and partials poisoned with NaN first).
void run_variant(Problem& p, const Variant& v, Outs& r, int n_tokens = -1) {
  const int T = n_tokens < 0 ? p.T : n_tokens;
  const size_t no = (size_t)p.T * p.nh * p.hd;
  CU(cudaMemset(p.dout, 0xFF, no * 4));  // NaN
  CU(cudaMemset(p.dcore, 0xFF, no * 4));
  CU(cudaMemset(p.dpart, 0xFF, (size_t)p.T * p.nh * p.n_splits * (p.hd + 2) * 4));
  force(v);
  const Status st = mk::attention(p.args(true), p.dio, T, nullptr);
  ASSERT_TRUE(st.ok()) << v.name << ": " << (st.ok() ? "" : st.error().message);
  CU(cudaDeviceSynchronize());
  r.out.resize((size_t)T * p.nh * p.hd), r.core.resize(r.out.size()), r.cnt.resize((size_t)p.T * p.nkv);
  CU(cudaMemcpy(r.out.data(), p.dout, r.out.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.core.data(), p.dcore, r.core.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.cnt.data(), p.dcnt, r.cnt.size() * 4, cudaMemcpyDeviceToHost));
}

uint64_t fnv(const std::vector<float>& x) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(x.data());
  for (size_t i = 0; i < x.size() * 4; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

double max_rel(const std::vector<float>& a, const std::vector<double>& ref) {
  double e = 0, m = 0;
  for (size_t i = 0; i < a.size(); i++) {
    if (!std::isfinite(a[i])) return INFINITY;
    e = std::max(e, std::fabs(a[i] - ref[i]));
    m = std::max(m, std::fabs(ref[i]));
  }
  return e / std::max(m, 1e-30);
}

// Every variant on problem p: the same bits as the register loop at the same level, level 1 within float
// rounding of level 0 (attn9's rule: the same arithmetic, FMA contraction may differ), all against float64.
void check_variants(Problem& p, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(p.upload());
  std::vector<double> core, out;
  p.reference(core, out);
  Outs base[2];
  for (int k = 0; k < kNumVariants; k++) {
    const Variant& v = kVariants[k];
    Outs r;
    run_variant(p, v, r);
    if (testing::Test::HasFatalFailure()) break;
    const double eo = max_rel(r.out, out), ec = max_rel(r.core, core);
    std::printf("[attn13] %s: %-22s vs float64: out %.3g core %.3g (max |err| / max |ref|)\n", what.c_str(), v.name,
                eo, ec);
    // attn18: the bits of out and core, to compare runs under other switches (same bits across processes).
    std::printf("[attn18 bits] %s: %-22s out %016llx core %016llx\n", what.c_str(), v.name,
                (unsigned long long)fnv(r.out), (unsigned long long)fnv(r.core));
    EXPECT_LE(eo, 2e-5) << v.name;
    EXPECT_LE(ec, 2e-5) << v.name;
    for (size_t i = 0; i < r.cnt.size(); i++) ASSERT_EQ(r.cnt[i], 0u) << v.name << ": counter " << i << " not reset";
    if (v.ring == 0 && v.pf == 2) {
      base[v.level] = r;
      continue;
    }
    const Outs& b = base[v.level];
    EXPECT_EQ(0, std::memcmp(r.out.data(), b.out.data(), r.out.size() * 4)) << v.name << ": out vs register loop";
    EXPECT_EQ(0, std::memcmp(r.core.data(), b.core.data(), r.core.size() * 4)) << v.name << ": core vs register loop";
  }
  double d = 0;
  for (size_t i = 0; i < base[0].out.size(); i++) d = std::max(d, (double)std::fabs(base[1].out[i] - base[0].out[i]));
  std::printf("[attn13] %s: level 1 vs 0: out max|diff| %.3g%s\n", what.c_str(), d, d == 0 ? " (same bits)" : "");
  p.free_all();
}

}  // namespace

// Small and awkward shapes (also the sanitizer's target): every head dim, G 1 .. 8, empty splits, one split,
// multi-token chunks, positions at split edges, caches 4-byte but not 16-byte aligned.
TEST(AttnRing, SameBitsSmallShapes) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  Problem p;
  p.init(8, 2, 256, 4096, 16, {{127}}, 512, 1);
  check_variants(p, "0.8B decode, 128 keys over 16 splits");
  p.init(24, 4, 256, 640, 16, {{0}, {1}, {31}, {639}, {40, 41}}, 512, 2);
  check_variants(p, "G 6, hd 256, positions 0 / 1 / 31 / 639, a 2-token chunk");
  p.init(8, 8, 128, 300, 10, {{0}, {17}, {299}}, 516, 3);
  check_variants(p, "G 1, hd 128, misaligned caches (4-byte copies)");
  p.init(6, 3, 64, 600, 5, {{119, 120}, {598}}, 512, 4);
  check_variants(p, "G 2, hd 64, 5 splits, a 2-token chunk");
  p.init(24, 8, 32, 100, 7, {{6}, {50}, {99}}, 516, 5);
  check_variants(p, "G 3, hd 32, 7 splits, misaligned");
  p.init(16, 4, 256, 256, 1, {{200}, {3}, {0}}, 512, 6);
  check_variants(p, "G 4, hd 256, one split");
  p.init(16, 2, 128, 2048, 16, {{63}, {64}, {65}, {1023}}, 512, 7);
  check_variants(p, "G 8, hd 128, split edges");
  p.init(16, 4, 256, 1024, 16, {{40}, {333}, {700}}, 512, 12);
  p.ramp_keys(0.02f);
  check_variants(p, "G 4, hd 256, keys growing with the position (scores up to ~15x)");
}

// The 9B's serving shape: 64 sequences at 512-600 positions of a 1024 context (16 splits); one sequence alone
// gives its rows of the batch bit for bit (the split plan depends on the context, not on the batch).
TEST(AttnRing, SameBitsNineBBatch) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  std::mt19937 g(9);
  std::vector<std::vector<int>> seqs(64);
  for (auto& s : seqs) s = {512 + (int)(g() % 89)};
  Problem p;
  p.init(16, 4, 256, 1024, 16, seqs, 512, 8);
  check_variants(p, "9B, B 64 at 512-600 positions");

  // Sequence 0 alone (token 0: the first T = 1 tokens of the same problem) vs in the batch; "default rule": the
  // loader the environment / default picks (without DS_ATTN_RING: the register loop alone, the ring at 64).
  ASSERT_TRUE(p.upload());
  const Variant def{0, -1, 0, "default rule"};
  force(def);
  std::printf("[attn13] default rule: ring rows %d at 1 token, %d at 64\n", mk::attn_ring(1), mk::attn_ring(64));
  for (const Variant& v : {kVariants[0], kVariants[3], kVariants[6], def}) {
    Outs all, one;
    run_variant(p, v, all);
    run_variant(p, v, one, 1);
    if (HasFatalFailure()) break;
    EXPECT_EQ(0, std::memcmp(one.out.data(), all.out.data(), one.out.size() * 4)) << v.name << ": alone vs batch";
  }
  p.free_all();
}

// kv19's f16 caches through every loader (s33; their ring slots are sized by the element) and through tca33's
// tensor-core kernel: the same bits as the register loop, within 2e-5 of float64 on the f16 values; the 9B's serving
// shape, misaligned caches (4-byte copies), split and tile edges, moving maxima, G 1-8 (G > 4: the scalar loaders).
TEST(AttnRing, SameBitsF16Caches) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  std::mt19937 g(33);
  std::vector<std::vector<int>> nine(64);
  for (auto& s : nine) s = {512 + (int)(g() % 128)};
  Problem p;
  p.half = true;
  for (int mma : {1, 0}) {  // tca33's tensor-core kernel (every loader then runs it), then the scalar loaders
    mk::attn_force_mma(mma);
    const std::string k = mma ? "f16 caches (mma): " : "f16 caches (scalar): ";
    p.init(16, 4, 256, 1024, 16, nine, 512, 33);
    check_variants(p, k + "9B, B 64 at 512-639 positions");
    p.init(24, 8, 32, 100, 7, {{6}, {50}, {99}}, 516, 34);
    check_variants(p, k + "G 3, hd 32, 7 splits, misaligned");
    p.init(24, 8, 32, 100, 7, {{6}, {50}, {99}}, 512, 39);
    check_variants(p, k + "G 3, hd 32, 7 splits");
    p.init(16, 2, 128, 2048, 16, {{63}, {64}, {65}, {1023}}, 512, 35);
    check_variants(p, k + "G 8, hd 128, split edges");
    p.init(16, 4, 256, 1024, 16, {{40}, {333}, {700}}, 512, 36);
    p.ramp_keys(0.02f);
    check_variants(p, k + "G 4, hd 256, keys growing with the position");
    p.init(8, 4, 64, 300, 5, {{0}, {15}, {16}, {17}, {299}, {100, 101}}, 512, 37);
    check_variants(p, k + "G 2, hd 64, 5 splits, tile edges, a 2-token chunk");
  }
  // The tensor-core kernel is really the one run (its bits differ from the scalar loaders'), and a sequence alone
  // gives its rows of the batch bit for bit.
  p.init(16, 4, 256, 1024, 16, nine, 512, 38);
  ASSERT_TRUE(p.upload());
  const Variant def{0, -1, 0, "default rule"};
  Outs mma_all, mma_one, scalar_all;
  mk::attn_force_mma(1);
  run_variant(p, def, mma_all);
  run_variant(p, def, mma_one, 1);
  mk::attn_force_mma(0);
  run_variant(p, def, scalar_all);
  if (HasFatalFailure()) return;
  EXPECT_EQ(0, std::memcmp(mma_one.out.data(), mma_all.out.data(), mma_one.out.size() * 4)) << "mma: alone vs batch";
  EXPECT_NE(0, std::memcmp(mma_all.out.data(), scalar_all.out.data(), mma_all.out.size() * 4))
      << "mma and scalar gave the same bits: is the tensor-core kernel dispatched?";
  p.free_all();
}

// The mma kernel (two warps per (token, kv head, split) item) with split_range's chunks (rows 0) and the splits
// rounded up to whole tiles of at least 16 / 64 rows: within 2e-5 of float64, the same bits run twice, a sequence
// alone == its rows of the batch. (Through s36 this test also memcmp'd walk34's one-warp forms against it: equal
// on the H100 in s37 before they were removed.)
TEST(AttnRing, MmaRowsMatchFloat64) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  mk::attn_force_mma(1);
  std::mt19937 g(34);
  std::vector<std::vector<int>> nine(64);
  for (auto& s : nine) s = {512 + (int)(g() % 128)};
  struct Shape {
    int nh, nkv, hd, ctx, ns;
    std::vector<std::vector<int>> seqs;
    const char* what;
  };
  const std::vector<Shape> shapes = {
      {16, 4, 256, 1024, 16, nine, "9B, B 64 at 512-639 positions"},
      {8, 4, 64, 300, 5, {{0}, {15}, {16}, {17}, {299}, {100, 101}}, "G 2, hd 64, 5 splits, empty splits, 2 tokens"},
      {24, 8, 32, 100, 7, {{6}, {50}, {99}}, "G 3, hd 32, 7 splits"},
      {16, 4, 256, 256, 1, {{200}, {3}, {0}}, "G 4, hd 256, one split"},
  };
  const Variant def{0, -1, 0, "default rule"};
  for (int rows : {0, 16, 64}) {
    mk::attn_force_mma_rows(rows);
    for (const Shape& sh : shapes) {
      SCOPED_TRACE(std::string(sh.what) + " rows " + std::to_string(rows));
      Problem p;
      p.half = true;
      p.init(sh.nh, sh.nkv, sh.hd, sh.ctx, sh.ns, sh.seqs, 512, 340 + rows);
      ASSERT_TRUE(p.upload());
      std::vector<double> core, out;
      p.reference(core, out);
      Outs batch;
      run_variant(p, def, batch);
      if (HasFatalFailure()) return;
      const double eo = max_rel(batch.out, out), ec = max_rel(batch.core, core);
      std::printf("[mma] %s, rows %d: vs float64 out %.3g core %.3g\n", sh.what, rows, eo, ec);
      EXPECT_LE(eo, 2e-5);
      EXPECT_LE(ec, 2e-5);
      Outs again, alone;
      run_variant(p, def, again);
      if (HasFatalFailure()) return;
      EXPECT_EQ(0, std::memcmp(again.out.data(), batch.out.data(), again.out.size() * 4)) << "run twice: out";
      EXPECT_EQ(0, std::memcmp(again.core.data(), batch.core.data(), again.core.size() * 4)) << "run twice: core";
      run_variant(p, def, alone, 1);
      if (HasFatalFailure()) return;
      EXPECT_EQ(0, std::memcmp(alone.out.data(), batch.out.data(), alone.out.size() * 4)) << "alone vs batch";
      p.free_all();
    }
  }
}

namespace {
bool bench_on() {
  const char* e = std::getenv("DS_ATTN_BENCH");
  return e && (e[0] == '1' || e[0] == '2');
}
// DS_ATTN_BENCH=2: only the loaders the default rule picks (register loop pf2, ring 4; level 0), no split plans.
bool bench_short() {
  const char* e = std::getenv("DS_ATTN_BENCH");
  return e && e[0] == '2';
}

// Median and min time per launch (us) of variant v over 7 runs of 10 back-to-back launches.
void time_variant(Problem& p, const Variant& v, cudaEvent_t e0, cudaEvent_t e1, float& med, float& mn) {
  force(v);
  auto launch = [&] { return mk::attention(p.args(false), p.dio, p.T, nullptr).ok(); };
  for (int i = 0; i < 3; i++) ASSERT_TRUE(launch()) << v.name;
  std::vector<float> t;
  for (int rep = 0; rep < 7; rep++) {
    CU(cudaEventRecord(e0));
    for (int i = 0; i < 10; i++) ASSERT_TRUE(launch()) << v.name;
    CU(cudaEventRecord(e1));
    CU(cudaEventSynchronize(e1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 100.f);
  }
  std::sort(t.begin(), t.end());
  med = t[3], mn = t[0];
}
}  // namespace

// Median time per launch (us) of each variant at the 9B's shape; K/V TB/s = the rows read / time.
TEST(AttnBench, Time) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  struct Shape {
    int B, pos, max_ctx, nh;  // pos < 0: positions 512 .. 639 (a serving batch's spread)
  };
  for (const Shape sh : {Shape{64, 528, 1024, 16}, Shape{64, -1, 1024, 16}, Shape{64, 1000, 1024, 16},
                         Shape{64, 16, 1024, 16}, Shape{64, 100, 1024, 16}, Shape{1, 16, 4096, 16}, Shape{56, 528, 1024, 16}, Shape{48, 528, 1024, 16},
                         Shape{32, 528, 1024, 16}, Shape{8, 528, 1024, 16}, Shape{1, 528, 1024, 16},
                         Shape{1, 128, 4096, 16}, Shape{64, 528, 1024, 24}}) {
    std::vector<std::vector<int>> seqs(sh.B, {sh.pos});
    for (int s = 0; s < sh.B && sh.pos < 0; s++) seqs[s] = {512 + (s * 37) % 128};
    Problem p;
    p.init(sh.nh, 4, 256, sh.max_ctx, std::min(16, (sh.max_ctx + 31) / 32), seqs, 512, 10);
    ASSERT_TRUE(p.upload());
    double bytes = 0;
    for (int t = 0; t < p.T; t++) bytes += 2.0 * (p.pos[t] + 1) * p.nkv * p.hd * 4;
    for (int skip : {1, 0})  // attn17: empty splits skipped (the default) or not (DS_ATTN_SKIP_EMPTY=0)
      for (const Variant& v : kVariants) {
        if (bench_short() && !(v.level == 0 && v.pf == 2 && (v.ring == 0 || v.ring == 4))) continue;
        if (!skip && v.level != 0) continue;  // level 1 writes every split whole either way
        mk::attn_force_skip_empty(skip);
        float med = 0, mn = 0;
        time_variant(p, v, e0, e1, med, mn);
        if (HasFatalFailure()) return;
        std::printf("[attn17] B %2d pos %4d ctx %4d nh %d %-6s %-22s %8.2f us (min %8.2f)  K/V %5.2f TB/s\n", sh.B,
                    sh.pos, sh.max_ctx, sh.nh, skip ? "skip" : "noskip", v.name, med, mn, bytes / (med * 1e6));
      }
    mk::attn_force_skip_empty(-1);
    CU(cudaDeviceSynchronize());
    p.free_all();
  }
  // Fewer splits at B = 64, 528 positions (other bits: the split plan; A/B of the plan only).
  for (int ns : {8, 4}) {
    if (bench_short()) break;
    Problem p;
    p.init(16, 4, 256, 1024, ns, std::vector<std::vector<int>>(64, {528}), 512, 10);
    ASSERT_TRUE(p.upload());
    const double bytes = 2.0 * 64 * 529 * p.nkv * p.hd * 4;
    for (const Variant& v : {kVariants[3], kVariants[6]}) {
      float med = 0, mn = 0;
      time_variant(p, v, e0, e1, med, mn);
      if (HasFatalFailure()) return;
      std::printf("[attn13] B 64 pos  528 ctx 1024 %2d splits %-22s %8.2f us (min %8.2f)  K/V %5.2f TB/s\n", ns,
                  v.name, med, mn, bytes / (med * 1e6));
    }
    CU(cudaDeviceSynchronize());
    p.free_all();
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// The tensor-core kernel (f16 caches) per launch (partial + combine): split_range's chunks vs >= 64-row tiles, at
// B = 64 (528 positions; 512 .. 639) and B = 1.
TEST(AttnBench, Mma) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  mk::attn_force_mma(1);
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  const Variant def{0, -1, 0, "default rule"};
  for (const int B : {64, -64, 1}) {
    std::vector<std::vector<int>> seqs(std::abs(B), {528});
    for (int s = 0; s < -B; s++) seqs[s] = {512 + (s * 37) % 128};
    Problem p;
    p.half = true;
    p.init(16, 4, 256, 1024, 16, seqs, 512, 10);
    ASSERT_TRUE(p.upload());
    double bytes = 0;
    for (int t = 0; t < p.T; t++) bytes += 2.0 * (p.pos[t] + 1) * p.nkv * p.hd * 2;
    for (int rows : {0, 64}) {
      mk::attn_force_mma_rows(rows);
      float med = 0, mn = 0;
      time_variant(p, def, e0, e1, med, mn);
      if (HasFatalFailure()) return;
      std::printf("[mma] B %3d %s rows %2d %8.2f us (min %8.2f)  K/V %5.2f TB/s\n", std::abs(B),
                  B < 0 ? "512-639" : "pos 528", rows, med, mn, bytes / (med * 1e6));
    }
    p.free_all();
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// One launch of the mma kernel, B = 64 at 528 positions, for `ncu -k regex:attn_mma`.
TEST(AttnBench, MmaProfile) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  mk::attn_force_mma(1);
  Problem p;
  p.half = true;
  p.init(16, 4, 256, 1024, 16, std::vector<std::vector<int>>(64, {528}), 512, 11);
  ASSERT_TRUE(p.upload());
  ASSERT_TRUE(mk::attention(p.args(false), p.dio, p.T, nullptr).ok());
  CU(cudaDeviceSynchronize());
  p.free_all();
}

// One launch of each variant at B = 64, 528 positions of a 1024 context, for `ncu -k regex:attn`.
TEST(AttnBench, Profile) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  Problem p;
  p.init(16, 4, 256, 1024, 16, std::vector<std::vector<int>>(64, {528}), 512, 11);
  ASSERT_TRUE(p.upload());
  for (const Variant& v : kVariants) {
    force(v);
    ASSERT_TRUE(mk::attention(p.args(false), p.dio, p.T, nullptr).ok());
  }
  CU(cudaDeviceSynchronize());
  p.free_all();
}

// attn17: blocks of empty splits write only (M, L) = (-inf, 0) and the combine loads no A of a split of weight 0
// (DS_ATTN_SKIP_EMPTY): every variant gives the same bits with the skip as without, at contexts where most
// splits are empty (partials poisoned with NaN first: an A the combine read unwritten would show).
TEST(AttnRing, EmptySplitsSkipped) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  Problem p;
  p.init(16, 4, 256, 4096, 16, {{0}, {1}, {5}, {15}, {16}, {17}, {100}, {127}, {255}, {1023}}, 512, 31);
  ASSERT_TRUE(p.upload());
  std::vector<double> core, out;
  p.reference(core, out);
  for (const Variant& v : kVariants) {
    Outs on, off;
    mk::attn_force_skip_empty(1);
    run_variant(p, v, on);
    mk::attn_force_skip_empty(0);
    run_variant(p, v, off);
    if (HasFatalFailure()) break;
    const double eo = max_rel(on.out, out);
    std::printf("[attn17] empty splits skipped, %-22s vs float64: out %.3g\n", v.name, eo);
    EXPECT_LE(eo, 2e-5) << v.name;
    EXPECT_EQ(0, std::memcmp(on.out.data(), off.out.data(), on.out.size() * 4)) << v.name << ": out, skip vs not";
    EXPECT_EQ(0, std::memcmp(on.core.data(), off.core.data(), on.core.size() * 4)) << v.name << ": core, skip vs not";
  }
  p.free_all();
}

namespace {
// attn18's roofline: the ring kernel's reads without its arithmetic. Grid (ns, nkv, T), 4 warps; warp w of block
// (sp, g, t) copies rows k0 + w, + 4, ... < k1 of kv head g (K row | V row, hd 256) through a cp.async ring of kS
// slots as ring_rows does, and sums its lane's values (written once, so the copies are used). Row (p, g) of
// sequence t at kv + t * seq_floats + p * ps + g * hs (V at + v_floats).
template <int kS>
__global__ void __launch_bounds__(128) read_rows_kernel(const float* kv, int64_t seq_floats, int64_t v_floats,
                                                        int64_t ps, int64_t hs, int ns, const int* pos, float* out) {
  constexpr int HD = 256;
  extern __shared__ __align__(16) float rr_smem[];
  const int sp = blockIdx.x, g = blockIdx.y, t = blockIdx.z, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = pos[t] + 1, chunk = (n + ns - 1) / ns, k0 = sp * chunk, k1 = min(k0 + chunk, n);
  const float* K = kv + t * seq_floats + g * hs;
  const float* V = K + v_floats;
  float* ring = rr_smem + warp * kS * 2 * HD;
  auto issue = [&](int p, float* slot) {
    if (p < k1) {
#pragma unroll
      for (int c = lane; c < HD / 2; c += 32) {
        const float* src = c < HD / 4 ? K + p * ps + 4 * c : V + p * ps + 4 * c - HD;
        const unsigned d = (unsigned)__cvta_generic_to_shared(slot + 4 * c);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  const int p0 = k0 + warp, n_rows = p0 < k1 ? (k1 - p0 + 3) / 4 : 0;
#pragma unroll
  for (int j = 0; j < kS; j++) issue(p0 + 4 * j, ring + j * 2 * HD);
  float sum = 0.f;
  for (int j = 0; j < n_rows; j++) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kS - 1) : "memory");
    __syncwarp();
    float* slot = ring + (j % kS) * 2 * HD;
#pragma unroll
    for (int i = 0; i < 16; i++) sum += slot[lane + 32 * i];
    __syncwarp();
    issue(p0 + 4 * (j + kS), slot);
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  out[(((int64_t)t * gridDim.y + g) * gridDim.x + sp) * 128 + threadIdx.x] = sum;
}

// The same bytes read as one contiguous stream (float4 per thread, 4 in flight): the read ceiling.
__global__ void __launch_bounds__(256) read_flat_kernel(const float4* x, int64_t n4, float* out) {
  float sum = 0.f;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * step < n4; i += 4 * step) {
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = __ldcs(x + i + u * step);
#pragma unroll
    for (int u = 0; u < 4; u++) sum += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < n4; i += step) sum += x[i].x;
  out[(int64_t)blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Median us per launch over 7 x 10 launches of f.
template <class F>
float time_launches(F f, cudaEvent_t e0, cudaEvent_t e1) {
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int rep = 0; rep < 7; rep++) {
    cudaEventRecord(e0);
    for (int i = 0; i < 10; i++) f();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 100.f);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}
}  // namespace

// attn18 step 1: does the 4 KB stride between a kv head's rows cost bandwidth? At the 9B's shape (nkv 4, hd 256,
// 1024 context, 16 splits): the real kernels (register loop pf2 and ring 4, + combine; the caches as the model
// keeps them, [position][kv head][dim]), the copy-only ring (read_rows_kernel: 16 / 4 / 1 splits, ring 4 / 8, 4
// blocks per SM as the ring kernel runs, or as many as fit) with both layouts, and one contiguous stream of the same
// bytes. (H200, attn18 call 1: the real kernels with [kv head][position][dim] caches too, through layout strides
// removed since: ring 4 + combine 93.4 vs 92.0 us at 512-639 positions; copy-only 72.6 vs 72.3 us.)
TEST(AttnBench, Layout) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  constexpr int kB = 64, kNkv = 4, kHd = 256, kCtx = 1024;
  for (int shape : {-1, 528, 1000}) {
    std::vector<std::vector<int>> seqs(kB, {shape});
    for (int s = 0; s < kB && shape < 0; s++) seqs[s] = {512 + (s * 37) % 128};
    double bytes = 0;
    for (const auto& s : seqs) bytes += 2.0 * (s[0] + 1) * kNkv * kHd * 4;
    Problem p;
    p.init(16, kNkv, kHd, kCtx, 16, seqs, 512, 10);
    ASSERT_TRUE(p.upload());
    for (const Variant& v : {kVariants[0], kVariants[3]}) {
      float med = 0, mn = 0;
      time_variant(p, v, e0, e1, med, mn);
      if (HasFatalFailure()) return;
      std::printf("[attn18] pos %4d %-10s %-22s %8.2f us  K/V %5.2f TB/s\n", shape, "pos-major", v.name, med,
                  bytes / (med * 1e6));
    }
    CU(cudaDeviceSynchronize());
    p.free_all();
    // Copy-only: a buffer of 64 sequences [K | V], each [max_ctx][nkv][hd] or [nkv][max_ctx][hd].
    const int64_t cache = (int64_t)kCtx * kNkv * kHd, seq_floats = 2 * cache;
    float *kv = nullptr, *out = nullptr;
    int* dpos = nullptr;
    CU(cudaMalloc(&kv, kB * seq_floats * 4));
    CU(cudaMemset(kv, 0x3F, kB * seq_floats * 4));
    CU(cudaMalloc(&out, (size_t)16 * kNkv * kB * 128 * 4));
    std::vector<int> hpos(kB);
    for (int s = 0; s < kB; s++) hpos[s] = seqs[s][0];
    CU(cudaMalloc(&dpos, kB * 4));
    CU(cudaMemcpy(dpos, hpos.data(), kB * 4, cudaMemcpyHostToDevice));
    struct Form {
      int ns, ring, smem;  // smem 0: the ring only (as many blocks per SM as fit)
    };
    for (int rep = 0; rep < 2; rep++)
      for (const Form f : {Form{16, 4, 52 << 10}, Form{16, 4, 0}, Form{16, 8, 0}, Form{4, 4, 52 << 10},
                           Form{1, 4, 52 << 10}})
        for (int hmaj : {0, 1}) {
          const int64_t ps = hmaj ? kHd : kNkv * kHd, hs = hmaj ? (int64_t)kCtx * kHd : kHd;
          const int smem = std::max(f.smem, 4 * f.ring * 2 * kHd * 4);
          auto k = f.ring == 4 ? read_rows_kernel<4> : read_rows_kernel<8>;
          CU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
          const float us = time_launches(
              [&] { k<<<dim3(f.ns, kNkv, kB), 128, smem>>>(kv, seq_floats, cache, ps, hs, f.ns, dpos, out); }, e0, e1);
          CU(cudaGetLastError());
          std::printf("[attn18] pos %4d %-10s copy-only %2d splits ring %d smem %3d KB %8.2f us  K/V %5.2f TB/s\n",
                      shape, hmaj ? "head-major" : "pos-major", f.ns, f.ring, smem >> 10, us, bytes / (us * 1e6));
        }
    const int64_t n4 = (int64_t)(bytes / 16);
    const float us = time_launches([&] { read_flat_kernel<<<132 * 8, 256>>>((const float4*)kv, n4, out); }, e0, e1);
    CU(cudaGetLastError());
    std::printf("[attn18] pos %4d contiguous stream of the same bytes %8.2f us  %5.2f TB/s\n", shape, us,
                bytes / (us * 1e6));
    CU(cudaDeviceSynchronize());
    cudaFree(kv);
    cudaFree(out);
    cudaFree(dpos);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// attn18: ring 4 + combine and the register loop pf2 + combine at the step's shape (B = 64 at 512-639 positions of
// a 1024 context), median us per launch, ring 4 also with the rows L2 evict_first (attn_force_evict), then one
// launch of each with the environment's switches (for `ncu -k regex:attn`).
TEST(AttnBench, StepShape) {
  ATTN_SKIP_WITHOUT_GPU();
  if (!bench_on()) GTEST_SKIP() << "DS_ATTN_BENCH=1 to run";
  Guard guard;
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  std::vector<std::vector<int>> seqs(64);
  for (int s = 0; s < 64; s++) seqs[s] = {512 + (s * 37) % 128};
  Problem p;
  p.init(16, 4, 256, 1024, 16, seqs, 512, 11);
  ASSERT_TRUE(p.upload());
  for (int rep = 0; rep < 2; rep++)
    for (int ef : {0, 1, -1}) {
      const Variant& v = kVariants[ef < 0 ? 0 : 3];
      mk::attn_force_evict(ef);
      float med = 0, mn = 0;
      time_variant(p, v, e0, e1, med, mn);
      if (HasFatalFailure()) return;
      std::printf("[attn18] step shape %-22s%s %8.2f us (min %8.2f)\n", v.name, ef == 1 ? " evict_first" : "", med, mn);
    }
  mk::attn_force_evict(-1);
  for (const Variant& v : {kVariants[3], kVariants[0]}) {
    force(v);
    ASSERT_TRUE(mk::attention(p.args(false), p.dio, p.T, nullptr).ok());
  }
  CU(cudaDeviceSynchronize());
  p.free_all();
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// attn18: the ring kernel's rows with L2 evict_first (DS_ATTN_EVICT) give the same bits as without (only a cache
// policy changes), at the 9B's batch shape and at a misaligned one (4-byte copies: no policy).
TEST(AttnRing, EvictSameBits) {
  ATTN_SKIP_WITHOUT_GPU();
  Guard guard;
  std::mt19937 g(18);
  std::vector<std::vector<int>> nine(64);
  for (auto& s : nine) s = {512 + (int)(g() % 89)};
  Problem p;
  for (int c = 0; c < 2; c++) {
    if (c == 0) p.init(16, 4, 256, 1024, 16, nine, 512, 18);
    else p.init(24, 8, 32, 100, 7, {{6}, {50}, {99}}, 516, 19);
    ASSERT_TRUE(p.upload());
    for (const Variant& v : kVariants) {
      if (v.ring == 0 || v.level != 0) continue;  // the ring kernel only
      Outs on, off;
      mk::attn_force_evict(1);
      run_variant(p, v, on);
      mk::attn_force_evict(0);
      run_variant(p, v, off);
      if (HasFatalFailure()) return;
      EXPECT_EQ(0, std::memcmp(on.out.data(), off.out.data(), on.out.size() * 4)) << v.name << ": out, evict vs not";
      EXPECT_EQ(0, std::memcmp(on.core.data(), off.core.data(), on.core.size() * 4)) << v.name << ": core";
    }
    p.free_all();
  }
}

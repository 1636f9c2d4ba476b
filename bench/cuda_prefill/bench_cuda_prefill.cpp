// bench_cuda_prefill: the prefill kernels at the real Qwen3.5 0.8B / 9B / 27B shapes (qwen35-spec.md §7), for
// T = 512 and 4096 tokens. One JSON line per measurement on stdout (progress on stderr):
//   ceiling      device-to-device copy GB/s and a 8192³ bf16 cuBLAS product TFLOP/s (the two roofs)
//   gemm         one layer's projections (Q4_K weights: dequantize + convert + cuBLAS; BF16 weights: cuBLAS
//                alone) per input kind: µs and TFLOP/s
//   gdn          gdn_chunked per layer, and each stage alone
//   attention    causal prefill attention per layer (no prefix), fast and precise: µs and TFLOP/s
//   estimate     pp<T> tok/s of a whole model from the per-layer times above: an ESTIMATE that leaves out the
//                elementwise ops (norms, conv, gates, rope), the embedding lookup and the last token's logits;
//                the real number comes from `deltaserve bench` once the kernels are in the model forward.
// Timing: CUDA events around each call, 2 warm-ups, median of --reps (default 5) runs. Q4_K stands in for the
// whole Q4_K_M mix (its Q6_K tensors dequantize at about the same cost).
// Usage: bench_cuda_prefill [--quick] [--reps N] [--models 0.8B,9B,27B] [--tokens 512,4096]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "cuda/cuda_util.h"
#include "cuda/prefill/prefill.cuh"

using namespace ds;
using namespace ds::cuda;
using namespace ds::cuda::prefill;

namespace {

#define BENCH_CHECK(expr)                                                              \
  do {                                                                                 \
    auto&& _r = (expr);                                                                \
    if (!_r.ok()) {                                                                    \
      std::fprintf(stderr, "bench_cuda_prefill: %s: %s\n", #expr, _r.error().message.c_str()); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CU_CHECK(expr)                                                                             \
  do {                                                                                             \
    cudaError_t _e = (expr);                                                                       \
    if (_e != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "bench_cuda_prefill: %s: %s\n", #expr, cudaGetErrorString(_e));        \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct Model {
  const char* name;
  int64_t H, I, L, nh, nkv, hd, nk, nv, dk;
  int64_t n_attn() const { return L / 4; }
  int64_t n_gdn() const { return L - L / 4; }
  int64_t Kd() const { return nk * dk; }
  int64_t Vd() const { return nv * dk; }
  int64_t Cc() const { return 2 * Kd() + Vd(); }
};
const Model kModels[] = {
    {"0.8B", 1024, 3584, 24, 8, 2, 256, 16, 16, 128},
    {"9B", 4096, 12288, 32, 16, 4, 256, 16, 32, 128},
    {"27B", 5120, 17408, 64, 24, 4, 256, 16, 48, 128},
};

int g_reps = 5;
cudaStream_t g_stream = nullptr;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median µs of f() over g_reps runs after 2 warm-ups.
double time_us(const std::function<void()>& f) {
  cudaEvent_t a, b;
  CU_CHECK(cudaEventCreate(&a));
  CU_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2; i++) f();
  std::vector<double> ts;
  for (int i = 0; i < g_reps; i++) {
    CU_CHECK(cudaEventRecord(a, g_stream));
    f();
    CU_CHECK(cudaEventRecord(b, g_stream));
    CU_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CU_CHECK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms * 1e3);
  }
  CU_CHECK(cudaEventDestroy(a));
  CU_CHECK(cudaEventDestroy(b));
  return median(ts);
}

uint64_t g_rng = 0x9E3779B97F4A7C15ull;
uint64_t next_u64() {  // splitmix64
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float next_normal() {  // sum of uniforms: cheap, roughly N(0, 1)
  float s = 0;
  for (int i = 0; i < 4; i++) s += (float)(next_u64() >> 40) * (1.0f / 16777216.0f);
  return (s - 2.0f) * 1.7320508f;
}

DeviceBuffer upload(const void* p, size_t bytes) {
  auto b = DeviceBuffer::from_host(p, bytes);
  BENCH_CHECK(b);
  return std::move(b).value();
}

DeviceBuffer random_floats(int64_t n, float scale = 1.f) {
  std::vector<float> h(n);
  for (auto& x : h) x = next_normal() * scale;
  return upload(h.data(), n * 4);
}

// n elements of random Q4_K blocks with small positive/negative f16 scales (no NaN or Inf anywhere).
DeviceBuffer random_q4k(int64_t n) {
  const int64_t nb = n / 256;
  std::vector<uint8_t> h(nb * 144);
  for (size_t i = 0; i + 8 <= h.size(); i += 8) {
    const uint64_t r = next_u64();
    std::memcpy(&h[i], &r, 8);
  }
  for (int64_t b = 0; b < nb; b++) {
    const uint16_t d = f32_to_f16((next_u64() & 1 ? 1.f : -1.f) * 0.004f), dm = f32_to_f16(0.002f);
    std::memcpy(&h[b * 144], &d, 2);
    std::memcpy(&h[b * 144 + 2], &dm, 2);
  }
  return upload(h.data(), h.size());
}

DeviceBuffer random_bf16(int64_t n) {
  std::vector<uint16_t> h(n);
  for (auto& x : h) x = f32_to_bf16(next_normal() * 0.05f);
  return upload(h.data(), n * 2);
}

void ceilings() {
  const size_t bytes = (size_t)2 << 30;
  auto a = DeviceBuffer::alloc(bytes), b = DeviceBuffer::alloc(bytes);
  BENCH_CHECK(a);
  BENCH_CHECK(b);
  CU_CHECK(cudaMemsetAsync(a->data(), 1, bytes, g_stream));
  const double us = time_us([&] { CU_CHECK(cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, g_stream)); });
  std::printf("{\"op\":\"ceiling\",\"what\":\"d2d copy\",\"bytes\":%zu,\"us\":%.1f,\"gb_s\":%.1f}\n", bytes, us,
              2.0 * bytes / us * 1e-3);
  a->reset();
  b->reset();
  const int n = 8192;
  auto w = random_bf16((int64_t)n * n), x = random_bf16((int64_t)n * n);
  auto y = DeviceBuffer::alloc((size_t)n * n * 4);
  BENCH_CHECK(y);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  cublasSetStream(h, g_stream);
  const float alpha = 1, beta = 0;
  const double us2 = time_us([&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, w.data(), CUDA_R_16BF, n, x.data(), CUDA_R_16BF, n,
                 &beta, y->data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  cublasDestroy(h);
  std::printf("{\"op\":\"ceiling\",\"what\":\"bf16 gemm 8192^3 (random data)\",\"us\":%.1f,\"tflops\":%.1f}\n", us2,
              2.0 * n * n * n / us2 * 1e-6);
  std::fflush(stdout);
}

struct LayerTimes {  // µs per layer of one kind, default (fast) and precise
  double gdn_fast = 0, gdn_precise = 0, attn_fast = 0, attn_precise = 0;
};

struct Shapes {
  struct M { const char* name; int64_t N, K; int per_gdn, per_attn; };
  std::vector<M> mats;
};

Shapes layer_mats(const Model& m) {
  // Same-input projections are concatenated (one product each), as the model forward groups them.
  return {{{"gdn_in (qkv|z|b|a)", m.Cc() + m.Vd() + 2 * m.nv, m.H, 1, 0},
           {"ssm_out", m.H, m.Vd(), 1, 0},
           {"attn_in (q|gate|k|v)", 2 * m.nh * m.hd + 2 * m.nkv * m.hd, m.H, 0, 1},
           {"attn_out", m.H, m.nh * m.hd, 0, 1},
           {"ffn_gate_up", 2 * m.I, m.H, 1, 1},
           {"ffn_down", m.H, m.I, 1, 1}}};
}

void bench_model(const Model& m, int64_t T, PrefillGemm& gemm) {
  std::fprintf(stderr, "bench_cuda_prefill: %s T=%lld\n", m.name, (long long)T);
  const auto shapes = layer_mats(m).mats;
  int64_t max_w = 0, max_k = 0, max_n = 0;
  for (const auto& s : shapes) {
    max_w = std::max(max_w, s.N * s.K);
    max_k = std::max(max_k, s.K);
    max_n = std::max(max_n, s.N);
  }
  DeviceBuffer wq = random_q4k(max_w), wb = random_bf16(max_w), x = random_floats(T * max_k);
  auto y = DeviceBuffer::alloc((size_t)(T * max_n) * 4);
  BENCH_CHECK(y);
  const std::vector<GemmInputs> kinds = {GemmInputs::kBf16, GemmInputs::kF16, GemmInputs::kTf32, GemmInputs::kF32};
  // Per kind: µs of the GDN layer's and the attention layer's products (Q4_K weights).
  std::vector<double> gdn_gemm(kinds.size(), 0), attn_gemm(kinds.size(), 0);
  std::vector<float> ref_y;
  for (const auto& s : shapes) {
    const double flop = 2.0 * s.N * s.K * T;
    for (size_t ki = 0; ki < kinds.size(); ki++) {
      const GemmInputs in = kinds[ki];
      const ops::MatmulParams p{GgmlType::Q4_K, s.N, s.K, T};
      const double us = time_us([&] { BENCH_CHECK(gemm.matmul(p, wq.data(), x.as<float>(), 0, y->as<float>(), 0, in, false, g_stream)); });
      double rel = -1;  // relative RMS error of this input kind against the f32 product (T = 512 only)
      if (T == 512) {
        std::vector<float> got(T * s.N);
        CU_CHECK(cudaStreamSynchronize(g_stream));
        CU_CHECK(cudaMemcpy(got.data(), y->data(), got.size() * 4, cudaMemcpyDeviceToHost));
        if (in == GemmInputs::kBf16) {  // the first kind: compute the f32 reference once per matrix
          BENCH_CHECK(gemm.matmul(p, wq.data(), x.as<float>(), 0, y->as<float>(), 0, GemmInputs::kF32, false, g_stream));
          CU_CHECK(cudaStreamSynchronize(g_stream));
          ref_y.resize(got.size());
          CU_CHECK(cudaMemcpy(ref_y.data(), y->data(), ref_y.size() * 4, cudaMemcpyDeviceToHost));
        }
        double num = 0, den = 0;
        for (size_t i = 0; i < got.size(); i++) {
          num += ((double)got[i] - ref_y[i]) * ((double)got[i] - ref_y[i]);
          den += (double)ref_y[i] * ref_y[i];
        }
        rel = den > 0 ? std::sqrt(num / den) : 0;
      }
      double us_b = 0;
      if (in == GemmInputs::kBf16) {  // the product alone: BF16 weights are used in place
        const ops::MatmulParams pb{GgmlType::BF16, s.N, s.K, T};
        us_b = time_us([&] { BENCH_CHECK(gemm.matmul(pb, wb.data(), x.as<float>(), 0, y->as<float>(), 0, in, false, g_stream)); });
      }
      gdn_gemm[ki] += s.per_gdn * us;
      attn_gemm[ki] += s.per_attn * us;
      std::printf("{\"op\":\"gemm\",\"model\":\"%s\",\"T\":%lld,\"matrix\":\"%s\",\"N\":%lld,\"K\":%lld,\"inputs\":\"%s\","
                  "\"us_q4k\":%.1f,\"tflops_q4k\":%.1f",
                  m.name, (long long)T, s.name, (long long)s.N, (long long)s.K, gemm_inputs_name(in), us,
                  flop / us * 1e-6);
      if (us_b > 0) std::printf(",\"us_bf16_weights\":%.1f,\"tflops_bf16_weights\":%.1f", us_b, flop / us_b * 1e-6);
      if (rel >= 0) std::printf(",\"rel_rms_vs_f32\":%.2e", rel);
      std::printf("}\n");
      std::fflush(stdout);
    }
  }
  wq.reset();
  wb.reset();
  x.reset();
  y->reset();

  // Gated delta rule, one layer: q, k L2-normalized heads of U [T, Cc]; gates in the model's ranges.
  LayerTimes lt;
  {
    const int64_t Cc = m.Cc(), Kd = m.Kd();
    std::vector<float> U(T * Cc), g(T * m.nv), beta(T * m.nv);
    for (auto& v : U) v = next_normal();
    for (int64_t t = 0; t < T; t++)
      for (int64_t hh = 0; hh < 2 * m.nk; hh++) {
        float* r = &U[t * Cc + hh * m.dk];
        double s = 0;
        for (int64_t i = 0; i < m.dk; i++) s += (double)r[i] * r[i];
        const float inv = (float)(1.0 / std::sqrt(s + 1e-6));
        for (int64_t i = 0; i < m.dk; i++) r[i] *= inv;
      }
    for (auto& v : g) v = -0.05f - 2.0f * (float)(next_u64() >> 40) / 16777216.0f;
    for (auto& v : beta) v = (float)(next_u64() >> 40) / 16777216.0f;
    DeviceBuffer dU = upload(U.data(), U.size() * 4), dg = upload(g.data(), g.size() * 4),
                 db = upload(beta.data(), beta.size() * 4);
    auto st = DeviceBuffer::alloc((size_t)m.nv * m.dk * m.dk * 4), out = DeviceBuffer::alloc((size_t)(T * m.Vd()) * 4);
    BENCH_CHECK(st);
    BENCH_CHECK(out);
    const ops::GdnParams p{T, 1, m.nk, m.nv, m.dk, m.dk, Cc, Cc, Cc, 1.0f / std::sqrt((float)m.dk)};
    const size_t wsb = gdn_chunked_workspace_bytes(p);
    auto ws = DeviceBuffer::alloc(wsb);
    BENCH_CHECK(ws);
    const float* u = dU.as<float>();
    auto run = [&] {
      CU_CHECK(cudaMemsetAsync(st->data(), 0, st->size(), g_stream));
      BENCH_CHECK(gdn_chunked(p, u, u + Kd, u + 2 * Kd, dg.as<float>(), db.as<float>(), st->as<float>(), nullptr,
                              nullptr, out->as<float>(), ws->data(), wsb, g_stream));
    };
    lt.gdn_fast = lt.gdn_precise = time_us(run);
    const double flop_tok_head = 2.0 * (2 * 64 * m.dk + 64.0 * 64 / 3 + 2 * 64 * m.dk + 3 * m.dk * m.dk + 64 * m.dk);
    std::printf("{\"op\":\"gdn\",\"model\":\"%s\",\"T\":%lld,\"nk\":%lld,\"nv\":%lld,\"d\":%lld,\"us\":%.1f,"
                "\"approx_tflops\":%.2f,\"workspace_mb\":%.1f",
                m.name, (long long)T, (long long)m.nk, (long long)m.nv, (long long)m.dk, lt.gdn_fast,
                flop_tok_head * T * m.nv / lt.gdn_fast * 1e-6, wsb / 1e6);
    GdnStages S{p, u, u + Kd, u + 2 * Kd, dg.as<float>(), db.as<float>(), st->as<float>(), nullptr, nullptr,
                out->as<float>(), ws->as<uint8_t>(), GdnLayout::make(p), g_stream};
    const std::pair<const char*, Status (GdnStages::*)() const> stages[] = {
        {"table", &GdnStages::table}, {"cumsum", &GdnStages::cumsum}, {"kkt", &GdnStages::kkt},
        {"solve", &GdnStages::solve}, {"wu", &GdnStages::wu},         {"recur", &GdnStages::recur},
        {"output", &GdnStages::output}};
    for (const auto& [name, fn] : stages) {
      const double us = time_us([&] { BENCH_CHECK((S.*fn)()); });
      std::printf(",\"us_%s\":%.1f", name, us);
    }
    std::printf("}\n");
    std::fflush(stdout);
  }

  // Attention, one layer, T new tokens and no prefix.
  {
    const int64_t row = m.nkv * m.hd;
    DeviceBuffer q = random_floats(T * m.nh * m.hd), k = random_floats(T * row), v = random_floats(T * row);
    auto kc = DeviceBuffer::alloc((size_t)(T * row) * 4), vc = DeviceBuffer::alloc((size_t)(T * row) * 4),
         out = DeviceBuffer::alloc((size_t)(T * m.nh * m.hd) * 4);
    BENCH_CHECK(kc);
    BENCH_CHECK(vc);
    BENCH_CHECK(out);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)t;
    DeviceBuffer dpos = upload(pos.data(), T * 4);
    const ops::AttentionParams p{T, 1, m.nh, m.nkv, m.hd, T, 1.0f / std::sqrt((float)m.hd)};
    const size_t wsb = attention_prefill_workspace_bytes(p);
    auto ws = DeviceBuffer::alloc(wsb);
    BENCH_CHECK(ws);
    const double flop = 4.0 * m.nh * m.hd * (double)T * (T + 1) / 2;  // causal: QKᵀ and PV over T(T+1)/2 pairs
    for (Mode mode : {Mode::kFast, Mode::kPrecise}) {
      const double us = time_us([&] {
        BENCH_CHECK(attention_prefill(p, q.as<float>(), k.as<float>(), v.as<float>(), kc->as<float>(), vc->as<float>(),
                                      dpos.as<int32_t>(), nullptr, nullptr, out->as<float>(), ws->data(), wsb, g_stream,
                                      mode));
      });
      (mode == Mode::kFast ? lt.attn_fast : lt.attn_precise) = us;
      std::printf("{\"op\":\"attention\",\"model\":\"%s\",\"T\":%lld,\"nh\":%lld,\"nkv\":%lld,\"hd\":%lld,\"mode\":\"%s\","
                  "\"us\":%.1f,\"tflops\":%.1f}\n",
                  m.name, (long long)T, (long long)m.nh, (long long)m.nkv, (long long)m.hd,
                  mode == Mode::kFast ? "fast" : "precise", us, flop / us * 1e-6);
      std::fflush(stdout);
    }
  }

  // Whole-model estimates: default = bf16 products + fast attention; precise = f32 products + fp32 attention.
  for (size_t ki = 0; ki < kinds.size(); ki++) {
    const bool precise = kinds[ki] == GemmInputs::kF32;
    const double gdn_layer = gdn_gemm[ki] + (precise ? lt.gdn_precise : lt.gdn_fast);
    const double attn_layer = attn_gemm[ki] + (precise ? lt.attn_precise : lt.attn_fast);
    const double total = m.n_gdn() * gdn_layer + m.n_attn() * attn_layer;
    std::printf("{\"op\":\"estimate\",\"model\":\"%s\",\"test\":\"pp%lld\",\"gemm_inputs\":\"%s\",\"attention\":\"%s\","
                "\"gdn_layer_us\":%.1f,\"attn_layer_us\":%.1f,\"total_ms\":%.2f,\"est_tok_s\":%.0f,"
                "\"note\":\"estimate from per-layer kernel times; elementwise ops, embedding and logits left out\"}\n",
                m.name, (long long)T, gemm_inputs_name(kinds[ki]), precise ? "precise" : "fast", gdn_layer, attn_layer,
                total * 1e-3, T / (total * 1e-6));
  }
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = s.find(',', a);
    v.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"0.8B", "9B", "27B"};
  std::vector<int64_t> tokens = {512, 4096};
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--quick") g_reps = 3;
    else if (a == "--reps" && i + 1 < argc) g_reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--models" && i + 1 < argc) models = split(argv[++i]);
    else if (a == "--tokens" && i + 1 < argc) {
      tokens.clear();
      for (const auto& t : split(argv[++i])) tokens.push_back(std::atoll(t.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: bench_cuda_prefill [--quick] [--reps N] [--models 0.8B,9B,27B] [--tokens 512,4096]\n"
                   "Times the prefill GEMMs, chunked delta rule and prefill attention at real shapes; one JSON line\n"
                   "per measurement on stdout, and an estimated pp<T> tok/s per model (kernels only).\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_prefill: no CUDA device\n");
    return 1;
  }
  auto info = device_info();
  BENCH_CHECK(info);
  std::printf("{\"op\":\"device\",\"name\":\"%s\",\"sm\":%d,\"cc\":\"%d.%d\",\"l2_mb\":%.0f,\"mem_gb\":%.1f}\n",
              info->name.c_str(), info->sm_count, info->cc_major, info->cc_minor, info->l2_bytes / 1e6,
              info->total_mem / 1e9);
  CU_CHECK(cudaStreamCreate(&g_stream));
  ceilings();
  auto gemm = PrefillGemm::create();
  BENCH_CHECK(gemm);
  for (const auto& name : models) {
    const Model* m = nullptr;
    for (const auto& mm : kModels)
      if (name == mm.name) m = &mm;
    if (!m) {
      std::fprintf(stderr, "bench_cuda_prefill: unknown model %s (0.8B, 9B, 27B)\n", name.c_str());
      return 2;
    }
    for (int64_t T : tokens) bench_model(*m, T, **gemm);
  }
  CU_CHECK(cudaStreamSynchronize(g_stream));
  return 0;
}

// bench_cuda_ops: times the CUDA decode kernels at the real Qwen3.5 shapes (qwen35-spec.md §7) and
// prints one JSON line per measurement: time per call, bytes moved (each input read once, each output
// written once), GB/s and % of the 4.29 TB/s device-to-device copy ceiling (performance.md).
// Method: warm-up, then 5 trials of `reps` calls timed with CUDA events, median reported; weights
// rotate among enough copies (>= 512 MB in all) that L2 (60 MB on H200) cannot hold them.
// Usage: bench_cuda_ops [--quick] [--filter SUBSTRING]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "cuda/cuda_util.h"
#include "cuda/matvec.h"
#include "cuda/ops.h"
#include "quant/random_blocks.h"

namespace {
using namespace ds;

constexpr double kCeiling = 4.29e12;  // bytes/s, H200 device-to-device copy (performance.md)
bool g_quick = false;
std::string g_filter;
std::string g_gpu;

#define BENCH_CHECK(expr)                                                               \
  do {                                                                                  \
    auto&& _s = (expr);                                                                 \
    if (!_s.ok()) {                                                                     \
      std::fprintf(stderr, "bench_cuda_ops: %s\n", _s.error().message.c_str());         \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define BENCH_CU(expr) BENCH_CHECK([&]() -> Status { CUDA_TRY(expr); return {}; }())

// Device buffer of `bytes` filled by tiling a 16 MB random pattern of whole blocks.
cuda::DeviceBuffer device_weights(GgmlType t, uint64_t bytes, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  const int64_t pat_elems = (int64_t)(16 << 20) / info.type_size * info.block_size;
  const auto pat = random_blocks(t, pat_elems, seed);
  auto b = cuda::DeviceBuffer::alloc(bytes);
  BENCH_CHECK(b);
  for (uint64_t off = 0; off < bytes; off += pat.size())
    BENCH_CHECK(b->upload(pat.data(), std::min<uint64_t>(pat.size(), bytes - off), off));
  return std::move(b).value();
}

// Median over 5 trials of the mean time per call (seconds). fn(i) enqueues call i.
double time_calls(const std::function<void(int)>& fn, int reps) {
  cudaEvent_t e0, e1;
  BENCH_CU(cudaEventCreate(&e0));
  BENCH_CU(cudaEventCreate(&e1));
  for (int i = 0; i < std::max(3, reps / 4); i++) fn(i);
  BENCH_CU(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int trial = 0; trial < 5; trial++) {
    BENCH_CU(cudaEventRecord(e0));
    for (int i = 0; i < reps; i++) fn(i);
    BENCH_CU(cudaEventRecord(e1));
    BENCH_CU(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CU(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e-3 / reps);
  }
  BENCH_CU(cudaEventDestroy(e0));
  BENCH_CU(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void emit(const char* op, const std::string& model, const std::string& tensor, GgmlType t, int64_t rows,
          int64_t cols, int batch, double sec, double bytes) {
  std::printf(
      "{\"op\":\"%s\",\"gpu\":\"%s\",\"model\":\"%s\",\"tensor\":\"%s\",\"type\":\"%s\",\"rows\":%lld,"
      "\"cols\":%lld,\"batch\":%d,\"us\":%.3f,\"bytes\":%.0f,\"gb_s\":%.1f,\"pct_of_4.29TB/s\":%.1f}\n",
      op, g_gpu.c_str(), model.c_str(), tensor.c_str(), std::string(ggml_type_name(t)).c_str(), (long long)rows,
      (long long)cols, batch, sec * 1e6, bytes, bytes / sec / 1e9, 100.0 * bytes / sec / kCeiling);
  std::fflush(stdout);
}

void bench_copy() {
  const size_t bytes = size_t(1) << 31;
  auto a = cuda::DeviceBuffer::alloc(bytes);
  auto b = cuda::DeviceBuffer::alloc(bytes);
  BENCH_CHECK(a);
  BENCH_CHECK(b);
  BENCH_CHECK(a->fill_zero());
  const double s = time_calls([&](int) { cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice); }, 5);
  std::printf("{\"op\":\"d2d_copy\",\"gpu\":\"%s\",\"bytes\":%.0f,\"us\":%.1f,\"gb_s\":%.1f}\n", g_gpu.c_str(),
              2.0 * bytes, s * 1e6, 2.0 * bytes / s / 1e9);
}

void bench_matvec(const std::string& model, const std::string& tensor, GgmlType t, int64_t rows, int64_t cols,
                  int batch = 1) {
  const std::string key = model + " " + tensor + " " + std::string(ggml_type_name(t)) + " b" + std::to_string(batch);
  if (!g_filter.empty() && key.find(g_filter) == std::string::npos) return;
  const auto info = *ggml_type_info(t);
  const uint64_t mbytes = ggml_row_bytes(info, cols) * rows;
  const uint64_t stride = (mbytes + 255) / 256 * 256;
  const int copies = (int)std::clamp<uint64_t>((512ull << 20) / stride + 1, 1, 64);
  auto w = device_weights(t, stride * copies, 1234);
  auto x = cuda::DeviceBuffer::alloc((size_t)batch * cols * 4);
  auto y = cuda::DeviceBuffer::alloc((size_t)batch * rows * 4);
  BENCH_CHECK(x);
  BENCH_CHECK(y);
  std::vector<float> xh((size_t)batch * cols);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (auto& v : xh) v = nd(rng);
  BENCH_CHECK(x->upload(xh.data(), xh.size() * 4));
  const int reps = g_quick ? 20 : std::clamp<int>((int)(4e9 / (double)mbytes), 20, 2000);
  const double s = time_calls(
      [&](int i) {
        const uint8_t* wi = w.as<uint8_t>() + (uint64_t)(i % copies) * stride;
        auto st = batch == 1 ? cuda::matvec(t, wi, rows, cols, x->as<float>(), y->as<float>(), nullptr)
                             : cuda::matvec_batched(t, wi, rows, cols, x->as<float>(), y->as<float>(), batch, nullptr);
        BENCH_CHECK(st);
      },
      reps);
  emit("matvec", model, tensor, t, rows, cols, batch, s, (double)mbytes + 4.0 * batch * (cols + rows));
}

void emit_op(const char* op, const std::string& model, const std::string& shape, double sec, double bytes) {
  std::printf("{\"op\":\"%s\",\"gpu\":\"%s\",\"model\":\"%s\",\"shape\":\"%s\",\"us\":%.3f,\"bytes\":%.0f,"
              "\"gb_s\":%.1f,\"pct_of_4.29TB/s\":%.1f}\n",
              op, g_gpu.c_str(), model.c_str(), shape.c_str(), sec * 1e6, bytes, bytes / sec / 1e9,
              100.0 * bytes / sec / kCeiling);
  std::fflush(stdout);
}

cuda::DeviceBuffer device_floats(size_t n, float scale, uint64_t seed) {
  std::vector<float> h(n);
  std::mt19937 rng((unsigned)seed);
  std::normal_distribution<float> nd(0.f, scale);
  for (auto& v : h) v = nd(rng);
  auto b = cuda::DeviceBuffer::from_host(h.data(), n * 4);
  BENCH_CHECK(b);
  return std::move(b).value();
}

// One decode step of the gated delta rule for n_seqs sequences: every state read and written once.
void bench_gdn(const std::string& model, int64_t nk, int64_t nv, int64_t dk, int n_seqs) {
  if (!g_filter.empty() && ("gdn " + model).find(g_filter) == std::string::npos) return;
  const int64_t Kd = nk * dk, Cc = 2 * Kd + nv * dk;
  ops::GdnParams p{n_seqs, n_seqs, nk, nv, dk, dk, Cc, Cc, Cc, 1.0f / std::sqrt((float)dk)};
  auto U = device_floats((size_t)n_seqs * Cc, 0.1f, 1);
  auto g = device_floats((size_t)n_seqs * nv, 0.1f, 2);
  auto beta = device_floats((size_t)n_seqs * nv, 0.1f, 3);
  // Rotate state pools so the states come from HBM, not L2.
  const size_t pool = (size_t)n_seqs * p.state_floats();
  const int copies = (int)std::clamp<size_t>((512ull << 20) / (pool * 4) + 1, 1, 16);
  auto state = device_floats(pool * copies, 0.1f, 4);
  auto out = cuda::DeviceBuffer::alloc((size_t)n_seqs * nv * dk * 4);
  BENCH_CHECK(out);
  std::vector<int32_t> starts(n_seqs + 1);
  for (int i = 0; i <= n_seqs; i++) starts[i] = i;
  auto dst = cuda::DeviceBuffer::from_host(starts.data(), starts.size() * 4);
  BENCH_CHECK(dst);
  const float* u = U.as<float>();
  const double s = time_calls(
      [&](int i) {
        BENCH_CHECK(cuda::gdn_recurrent(p, u, u + Kd, u + 2 * Kd, g.as<float>(), beta.as<float>(),
                                        state.as<float>() + (size_t)(i % copies) * pool, dst->as<int32_t>(), nullptr,
                                        out->as<float>(), nullptr));
      },
      g_quick ? 20 : 200);
  const double bytes = 2.0 * pool * 4 + 4.0 * n_seqs * (Cc + 2 * nv + nv * dk);
  emit_op("gdn_recurrent", model, "nk " + std::to_string(nk) + " nv " + std::to_string(nv) + " seqs " +
          std::to_string(n_seqs), s, bytes);
}

// Decode attention of one token per sequence at context length ctx (KV cache fp32).
void bench_attention(const std::string& model, int64_t nh, int64_t nkv, int64_t hd, int64_t ctx, int n_seqs) {
  if (!g_filter.empty() && ("attention " + model).find(g_filter) == std::string::npos) return;
  ops::AttentionParams p{n_seqs, n_seqs, nh, nkv, hd, ctx, 1.0f / std::sqrt((float)hd)};
  auto q = device_floats((size_t)n_seqs * nh * hd, 1.f, 5);
  auto k = device_floats((size_t)n_seqs * nkv * hd, 1.f, 6);
  auto v = device_floats((size_t)n_seqs * nkv * hd, 1.f, 7);
  auto kc = device_floats((size_t)n_seqs * p.cache_floats(), 1.f, 8);
  auto vc = device_floats((size_t)n_seqs * p.cache_floats(), 1.f, 9);
  auto out = cuda::DeviceBuffer::alloc((size_t)n_seqs * nh * hd * 4);
  BENCH_CHECK(out);
  std::vector<int32_t> starts(n_seqs + 1), pos(n_seqs, (int32_t)ctx - 1);
  for (int i = 0; i <= n_seqs; i++) starts[i] = i;
  auto dst = cuda::DeviceBuffer::from_host(starts.data(), starts.size() * 4);
  auto dpos = cuda::DeviceBuffer::from_host(pos.data(), pos.size() * 4);
  BENCH_CHECK(dst);
  BENCH_CHECK(dpos);
  const double s = time_calls(
      [&](int) {
        BENCH_CHECK(cuda::attention(p, q.as<float>(), k.as<float>(), v.as<float>(), kc.as<float>(), vc.as<float>(),
                                    dpos->as<int32_t>(), dst->as<int32_t>(), nullptr, out->as<float>(), nullptr));
      },
      g_quick ? 10 : 50);
  const double bytes = 2.0 * n_seqs * ctx * nkv * hd * 4;
  emit_op("attention", model, "ctx " + std::to_string(ctx) + " seqs " + std::to_string(n_seqs), s, bytes);
}

struct ModelShape {
  const char* name;
  int64_t H, I, nh, nkv, hd, nk, nv, dk;
};

void bench_model(const ModelShape& m, const std::vector<GgmlType>& types, bool output) {
  const int64_t kd = m.nk * m.dk, vd = m.nv * m.dk, cc = 2 * kd + vd;
  for (GgmlType t : types) {
    bench_matvec(m.name, "attn_qkv", t, cc, m.H);
    bench_matvec(m.name, "attn_gate", t, vd, m.H);
    bench_matvec(m.name, "ssm_out", t, m.H, vd);
    bench_matvec(m.name, "attn_q", t, 2 * m.nh * m.hd, m.H);
    bench_matvec(m.name, "attn_k", t, m.nkv * m.hd, m.H);
    bench_matvec(m.name, "attn_output", t, m.H, m.nh * m.hd);
    bench_matvec(m.name, "ffn_up", t, m.I, m.H);
    bench_matvec(m.name, "ffn_down", t, m.H, m.I);
    if (output) bench_matvec(m.name, "output", t, 248320, m.H);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--quick")) g_quick = true;
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_cuda_ops [--quick] [--filter SUBSTRING]\n");
      return 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_cuda_ops: no CUDA device\n");
    return 1;
  }
  auto d = cuda::device_info();
  BENCH_CHECK(d);
  g_gpu = d->name;
  std::printf("{\"op\":\"device\",\"gpu\":\"%s\",\"cc\":\"%d.%d\",\"sms\":%d,\"mem_gib\":%.1f,\"l2_mib\":%.0f,"
              "\"peak_tb_s\":%.2f}\n",
              d->name.c_str(), d->cc_major, d->cc_minor, d->sm_count, d->total_mem / 1073741824.0,
              d->l2_bytes / 1048576.0, d->peak_bw / 1e12);
  bench_copy();
  const ModelShape m08{"0.8B", 1024, 3584, 8, 2, 256, 16, 16, 128};
  const ModelShape m9{"9B", 4096, 12288, 16, 4, 256, 16, 32, 128};
  const ModelShape m27{"27B", 5120, 17408, 24, 4, 256, 16, 48, 128};
  using G = GgmlType;
  bench_model(m08, {G::Q4_K, G::Q6_K}, true);
  bench_model(m9, {G::Q4_K, G::Q6_K, G::Q8_0, G::BF16}, true);
  bench_model(m27, {G::Q4_K, G::Q6_K}, false);
  for (G t : {G::F32, G::F16, G::Q4_0, G::Q5_0, G::IQ4_NL, G::Q5_K, G::IQ4_XS}) {
    bench_matvec("9B", "ffn_up", t, 12288, 4096);
    bench_matvec("9B", "ffn_down", t, 4096, 12288);
  }
  for (int b : {2, 4, 8, 16, 32, 64}) bench_matvec("9B", "ffn_up", G::Q4_K, 12288, 4096, b);
  for (int n : {1, 8, 64}) {
    bench_gdn("0.8B", 16, 16, 128, n);
    bench_gdn("9B", 16, 32, 128, n);
    bench_gdn("27B", 16, 48, 128, n);
  }
  for (int64_t ctx : {1024, 8192, 32768}) bench_attention("9B", 16, 4, 256, ctx, 1);
  bench_attention("27B", 24, 4, 256, 8192, 1);
  bench_attention("9B", 16, 4, 256, 4096, 8);
  return 0;
}

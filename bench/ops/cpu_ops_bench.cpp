// CPU reference ops at real Qwen3.5 shapes (0.8B: H 1024, I 3584, nv 16, dk = dv 128; 9B: H 4096, I 12288,
// nv 32): the products report weight bytes per second, the delta rule the state bytes read + written.
// Run: build/bench/ops/bench_cpu_ops [--benchmark_filter=matmul]
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/cpu.h"
#include "quant/quant.h"

using namespace ds;

namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Weights {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
};

Weights make_weights(GgmlType t, int64_t rows, int64_t cols) {
  const auto info = *ggml_type_info(t);
  const uint64_t rb = ggml_row_bytes(info, cols);
  Weights w{t, rows, cols, std::vector<uint8_t>(rows * rb)};
  const auto f = randn(cols, 1, 0.05f);
  for (int64_t r = 0; r < rows; r++) quant::quantize_row(t, f.data(), &w.bytes[r * rb], cols);
  return w;
}

// args: type, rows (N), cols (K), tokens (T)
void BM_matmul(benchmark::State& st) {
  const auto t = (GgmlType)st.range(0);
  const int64_t N = st.range(1), K = st.range(2), T = st.range(3);
  const Weights w = make_weights(t, N, K);
  const auto x = randn(T * K, 2);
  std::vector<float> y(T * N);
  for (auto _ : st) {
    cpu::matmul({t, N, K, T}, w.bytes.data(), x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(st.iterations() * (int64_t)w.bytes.size());
  st.SetItemsProcessed(st.iterations() * T);
  st.SetLabel(std::string(ggml_type_name(t)));
}

// args: T, nv, chunked
void BM_gdn(benchmark::State& st) {
  const int64_t T = st.range(0), nv = st.range(1), nk = 16, dk = 128, dv = 128;
  const bool chunked = st.range(2);
  auto q = randn(T * nk * dk, 1), k = randn(T * nk * dk, 2), v = randn(T * nv * dv, 3);
  cpu::l2_norm({T * nk, 1, dk, dk, 0, dk, 0, 1e-6f}, q.data(), q.data());
  cpu::l2_norm({T * nk, 1, dk, dk, 0, dk, 0, 1e-6f}, k.data(), k.data());
  std::vector<float> g(T * nv, -0.1f), beta(T * nv, 0.5f), state(nv * dv * dk, 0.0f), out(T * nv * dv);
  const ops::GdnParams p{T, 1, nk, nv, dk, dv, nk * dk, nk * dk, nv * dv, 1.0f / std::sqrt(128.0f)};
  for (auto _ : st) {
    (chunked ? cpu::gdn_chunked : cpu::gdn_recurrent)(p, q.data(), k.data(), v.data(), g.data(), beta.data(),
                                                      state.data(), nullptr, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * (int64_t)state.size() * 4);
  st.SetItemsProcessed(st.iterations() * T);
}

// args: n_past (decode one token at that position), nh, nkv
void BM_attention_decode(benchmark::State& st) {
  const int64_t ctx = st.range(0), nh = st.range(1), nkv = st.range(2), hd = 256;
  const ops::AttentionParams p{1, 1, nh, nkv, hd, ctx + 1, 1.0f / 16};
  auto kc = randn(p.cache_floats(), 1), vc = randn(p.cache_floats(), 2);
  auto q = randn(nh * hd, 3), k = randn(nkv * hd, 4), v = randn(nkv * hd, 5);
  std::vector<float> out(nh * hd);
  const int32_t pos = (int32_t)ctx;
  for (auto _ : st) {
    cpu::attention(p, q.data(), k.data(), v.data(), kc.data(), vc.data(), &pos, nullptr, nullptr, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(st.iterations() * 2 * (ctx + 1) * nkv * hd * 4);
}

}  // namespace

// 0.8B ffn_up (3584 x 1024) in the types of the Q4_K_M / Q8_0 / BF16 files, decode and a 64-token prefill.
BENCHMARK(BM_matmul)
    ->Args({(int)GgmlType::Q4_K, 3584, 1024, 1})
    ->Args({(int)GgmlType::Q6_K, 3584, 1024, 1})
    ->Args({(int)GgmlType::Q8_0, 3584, 1024, 1})
    ->Args({(int)GgmlType::BF16, 3584, 1024, 1})
    ->Args({(int)GgmlType::Q4_K, 3584, 1024, 64})
    ->Args({(int)GgmlType::BF16, 3584, 1024, 64})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_gdn)->Args({1, 16, 0})->Args({1, 32, 0})->Args({256, 16, 0})->Args({256, 16, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_attention_decode)->Args({1024, 8, 2})->Args({4096, 16, 4})->Unit(benchmark::kMicrosecond)->UseRealTime();

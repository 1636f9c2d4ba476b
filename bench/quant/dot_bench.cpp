// Throughput of the CPU matrix-vector building blocks: dot_row (fast path and scalar reference)
// and dequantize_row, reported as GB/s of weight bytes read (bytes_per_second).
// Each case runs a matrix-vector product over a weight matrix of `rows` rows of n elements:
//   cache:  ~1 MiB of weights (stays in L2: the kernel's compute speed),
//   stream: ~256 MiB of weights (from DRAM: what a decode step sees), 1 and 2 threads.
// Weights are random valid blocks (finite scales). Run: bench_quant --benchmark_filter=Q4_K
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "quant/quant.h"

namespace {

using ds::GgmlType;

// Random bytes with every f16 scale field finite and small (the same idea as the golden fixtures).
std::vector<uint8_t> make_weights(GgmlType t, int64_t n_blocks) {
  const auto ti = *ds::ggml_type_info(t);
  std::vector<uint8_t> buf(n_blocks * ti.type_size);
  std::mt19937 rng(42);
  for (auto& b : buf) b = (uint8_t)rng();
  std::vector<int> f16_at;
  switch (t) {
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: f16_at = {0, 2}; break;
    case GgmlType::Q2_K: f16_at = {80, 82}; break;
    case GgmlType::Q3_K: f16_at = {108}; break;
    case GgmlType::Q6_K: f16_at = {208}; break;
    case GgmlType::TQ1_0: f16_at = {52}; break;
    case GgmlType::TQ2_0: f16_at = {64}; break;
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::MXFP4: break;
    default: f16_at = {0}; break;
  }
  for (int64_t i = 0; i < n_blocks; i++) {
    uint8_t* b = buf.data() + i * ti.type_size;
    for (int off : f16_at) {
      const uint16_t h = ds::f32_to_f16(0.001f);
      std::memcpy(b + off, &h, 2);
    }
    if (t == GgmlType::F32) { float v = (float)(rng() % 1000) * 1e-3f; std::memcpy(b, &v, 4); }
    if (t == GgmlType::F16) { uint16_t h = ds::f32_to_f16((float)(rng() % 1000) * 1e-3f); std::memcpy(b, &h, 2); }
    if (t == GgmlType::BF16) { uint16_t h = ds::f32_to_bf16((float)(rng() % 1000) * 1e-3f); std::memcpy(b, &h, 2); }
    if (t == GgmlType::MXFP4) b[0] = 120;
  }
  return buf;
}

enum class Mode { kDot, kDotRows, kDotRef, kDequant };

void run_case(benchmark::State& state, GgmlType t, int64_t n, int64_t target_bytes, int threads, Mode mode) {
  const auto ti = *ds::ggml_type_info(t);
  const int64_t row_bytes = n / ti.block_size * ti.type_size;
  const int64_t rows = std::max<int64_t>(threads * 16, target_bytes / row_bytes);
  const auto w = make_weights(t, rows * (n / ti.block_size));
  std::vector<float> x(n), y(rows), tile(threads * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : state) {
    if (mode == Mode::kDotRows) {
      // Each thread takes a contiguous slice of rows, as the CPU matrix-vector product does.
#pragma omp parallel num_threads(threads)
      {
        const int64_t per = (rows + threads - 1) / threads, r0 = omp_get_thread_num() * per;
        const int64_t r1 = std::min(rows, r0 + per);
        if (r1 > r0) ds::quant::dot_rows(t, w.data() + r0 * row_bytes, row_bytes, r1 - r0, x.data(), n, y.data() + r0);
      }
      benchmark::ClobberMemory();
      continue;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
      const uint8_t* row = w.data() + r * row_bytes;
      if (mode == Mode::kDot) y[r] = ds::quant::dot_row(t, row, x.data(), n);
      else if (mode == Mode::kDotRef) y[r] = ds::quant::dot_row_ref(t, row, x.data(), n);
      else ds::quant::dequantize_row(t, row, tile.data() + omp_get_thread_num() * n, n);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(tile.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * rows * row_bytes);
  state.counters["rows"] = (double)rows;
}

constexpr int64_t kCacheBytes = 1 << 20;
constexpr int64_t kStreamBytes = 256 << 20;

void register_all() {
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::BF16,
                            GgmlType::F16,  GgmlType::F32,  GgmlType::IQ4_XS, GgmlType::Q4_0, GgmlType::Q5_K,
                            GgmlType::IQ4_NL, GgmlType::Q3_K, GgmlType::Q2_K};
  for (GgmlType t : types) {
    const std::string name(ds::ggml_type_name(t));
    for (int64_t n : {1024, 3584, 4096}) {
      const std::string sn = std::to_string(n);
      benchmark::RegisterBenchmark(("dot/" + name + "/n" + sn + "/cache").c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, n, kCacheBytes, 1, Mode::kDot); });
      benchmark::RegisterBenchmark(("dot_rows/" + name + "/n" + sn + "/cache").c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, n, kCacheBytes, 1, Mode::kDotRows); });
      benchmark::RegisterBenchmark(("dot_ref/" + name + "/n" + sn + "/cache").c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, n, kCacheBytes, 1, Mode::kDotRef); });
      benchmark::RegisterBenchmark(("dequant/" + name + "/n" + sn + "/cache").c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, n, kCacheBytes, 1, Mode::kDequant); });
    }
    for (int th : {1, 2}) {
      benchmark::RegisterBenchmark(("dot/" + name + "/n4096/stream/t" + std::to_string(th)).c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, 4096, kStreamBytes, th, Mode::kDot); })
          ->UseRealTime();
      benchmark::RegisterBenchmark(("dot_rows/" + name + "/n4096/stream/t" + std::to_string(th)).c_str(),
                                   [=](benchmark::State& s) { run_case(s, t, 4096, kStreamBytes, th, Mode::kDotRows); })
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

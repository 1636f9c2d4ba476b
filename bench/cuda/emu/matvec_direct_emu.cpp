// Host SIMT emulation of src/cuda/matvec_direct.cuh (kernel + launcher); built and run by run_emu.sh,
// which explains the method. Checks y against dot_row for many shapes and every launch choice.
#include <cuda_runtime_api.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>
#include "core/fp16.h"
#include "cuda/cuda_util.h"
#undef CUDA_TRY_LAUNCH
#define CUDA_TRY_LAUNCH(a, b)
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __restrict__
#define __shared__ static
template <class T> T __ldg(const T* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  uint8_t b[8]; std::memcpy(b, &x, 4); std::memcpy(b + 4, &y, 4);
  uint32_t r = 0; for (int i = 0; i < 4; i++) r |= (uint32_t)b[(s >> (4 * i)) & 7] << (8 * i); return r; }
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, int sh) { sh &= 31; uint64_t v = ((uint64_t)hi << 32) | lo; return (uint32_t)(v >> sh); }
inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
struct half_ { uint16_t h; };
inline half_ __ushort_as_half(unsigned short h) { return {h}; }
inline float __half2float(half_ h) { return ds::f16_to_f32(h.h); }
using std::min;
struct Dim { unsigned x; };
thread_local Dim threadIdx, blockIdx, gridDim;
std::barrier<>* g_bar;
float g_slots[1024];
inline float __shfl_xor_sync(unsigned, float v, int o) {
  g_slots[threadIdx.x] = v; g_bar->arrive_and_wait();
  const float r = g_slots[threadIdx.x ^ o]; g_bar->arrive_and_wait(); return r; }
inline void __syncthreads() { g_bar->arrive_and_wait(); }
template <class K, class A>
void emu_launch(K k, unsigned grid, int threads, const A& a) {
  for (unsigned b = 0; b < grid; b++) {
    std::barrier<> bar(threads);
    g_bar = &bar;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
      ts.emplace_back([&, t] { threadIdx.x = t; blockIdx.x = b; gridDim.x = grid; k(a); bar.arrive_and_drop(); });
    for (auto& t : ts) t.join();
  }
}
// Dynamic shared memory of the emulated block (blocks run one after another).
std::vector<float4> g_dyn(227 * 1024 / 16);
inline float4* emu_dyn_smem() { return g_dyn.data(); }
#define cuda_fp16_h_dummy
#include "hdr.inc"
#include "hdr_smem.inc"
#include "quant/quant.h"
using namespace ds;
int g_fail = 0;
// S = void: the direct-load kernel under tune tn; else the shared-memory kernel S.
// stages: the shared-memory kernel's cp.async ring depth (0: register pipeline); pre: 0 plain x,
// 1 RMSNorm prologue, 2 SwiGLU prologue (reference: the same float formulas on the host).
template <class D, class S = void>
void run(GgmlType t, int64_t rows, int64_t cols, cuda::mvd::Tune tn, bool acc, uint64_t seed, int stages = 0,
         int pre = 0) {
  const auto info = *ggml_type_info(t);
  std::mt19937_64 rng(seed);
  const int64_t rb = cols / info.block_size * info.type_size;
  std::vector<uint8_t> w(rows * rb + 64);
  uint8_t* base = w.data() + (16 - ((uintptr_t)w.data() & 15)) % 16;
  for (int64_t i = 0; i < rows * rb; i++) base[i] = (uint8_t)rng();
  for (int64_t b = 0; b < rows * rb; b += info.type_size) {
    const uint16_t d = ds::f32_to_f16(0.01f * ((rng() & 1) ? 1 : -1));
    std::memcpy(base + b + (t == GgmlType::Q6_K ? 208 : 0), &d, 2);
    if (t == GgmlType::Q4_K) std::memcpy(base + b + 2, &d, 2);
  }
  std::vector<float> xv(cols + 4), y(rows, NAN), y0(rows);
  float* x = xv.data() + (16 - ((uintptr_t)xv.data() & 15)) % 16 / 4;
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < cols; i++) x[i] = nd(rng);
  for (auto& f : y0) f = nd(rng);
  if (acc) y = y0;
  cuda::mvd::tune() = tn;
  cuda::mvs::tune().async_stages = stages;
  cuda::mvs::tune().pdl = false;
  std::vector<float> auxv(cols + 4), xt(cols);
  float* aux = auxv.data() + (16 - ((uintptr_t)auxv.data() & 15)) % 16 / 4;
  for (int64_t i = 0; i < cols; i++) aux[i] = nd(rng);
  cuda::mvs::Pre pr;
  if (pre == 1) {
    pr.norm_w = aux; pr.eps = 1e-6f;
    double ss = 0; for (int64_t i = 0; i < cols; i++) ss += (double)x[i] * x[i];
    const float sc = 1.0f / std::sqrt((float)(ss / cols) + 1e-6f);
    for (int64_t i = 0; i < cols; i++) xt[i] = x[i] * sc * aux[i];
  } else if (pre == 2) {
    pr.gate = aux;
    for (int64_t i = 0; i < cols; i++) xt[i] = aux[i] / (1.0f + std::exp(-aux[i])) * x[i];
  }
  Status st;
  if constexpr (std::is_same_v<S, void>) st = cuda::mvd::launch<D>(base, rows, cols, x, y.data(), acc, nullptr);
  else st = cuda::mvs::launch<S>(base, rows, cols, x, y.data(), acc, nullptr, pr);
  if (pre) std::memcpy(x, xt.data(), cols * 4);  // the reference multiplies by x'
  cuda::mvs::tune().async_stages = 0;
  if (!st.ok()) { std::printf("launch error %s\n", st.error().message.c_str()); g_fail++; return; }
  double worst = 0;
  std::vector<float> deq(cols);
  for (int64_t r = 0; r < rows; r++) {
    const uint8_t* row = base + r * rb;
    quant::dequantize_row(t, row, deq.data(), cols);
    double mag = 0; for (int64_t k = 0; k < cols; k++) mag += std::fabs((double)deq[k] * x[k]);
    double ref = quant::dot_row(t, row, x, cols) + (acc ? y0[r] : 0.0);
    const double e = std::fabs(y[r] - ref) / mag;
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
  }
  const bool ok = worst <= 1e-5;
  if (!ok) g_fail++;
  if constexpr (!std::is_same_v<S, void>) std::printf("smem async%d pre%d ", stages, pre);
  std::printf("%s %lldx%lld r%d ks%d w%d pipe%d acc%d: worst %.3g %s\n", std::string(ggml_type_name(t)).c_str(),
              (long long)rows, (long long)cols, tn.rows_per_group, tn.ks_max, tn.warps_per_sm, (int)tn.pipe, (int)acc,
              worst, ok ? "ok" : "FAIL");
}
int main(int argc, char** argv) {
  using G = GgmlType;
  if (argc > 1 && !std::strcmp(argv[1], "--prologue")) {  // quick: the fused prologues on both smem kernels
    uint64_t seed = 1000;
    const cuda::mvd::Tune tn{4, 4, 32, true};
    for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{9, 256}, {37, 512}, {5, 3584}})
      for (int stages : {0, 2})
        for (int pre : {1, 2}) {
          run<cuda::mvd::Q4K, cuda::mvs::Q4KS>(G::Q4_K, r, c, tn, seed & 1, seed, stages, pre); seed++;
          run<cuda::mvd::Q6K, cuda::mvs::Q6KS>(G::Q6_K, r, c, tn, seed & 1, seed, stages, pre); seed++;
        }
    std::printf("failures %d\n", g_fail);
    return g_fail != 0;
  }
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 256}, {9, 256}, {37, 512}, {21, 17408}, {5, 3584}, {67, 1024}, {3, 4096}};
  const std::vector<cuda::mvd::Tune> tunes = {{4, 4, 32, true}, {2, 4, 32, true}, {4, 1, 32, false}, {2, 2, 32, false}};
  uint64_t seed = 1;
  for (auto [r, c] : shapes)
    for (const auto& tn : tunes) {
      const bool acc = (seed & 1);
      run<cuda::mvd::Q4K>(G::Q4_K, r, c, tn, acc, seed++);
      run<cuda::mvd::Q6K>(G::Q6_K, r, c, tn, acc, seed++);
      run<cuda::mvd::Q80>(G::Q8_0, r, c, tn, acc, seed++);
    }
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {9, 256}, {37, 512}, {21, 17408},
                                                              {5, 3584}, {67, 1024}, {3, 4096}, {301, 2048}, {4, 25600}, {4501, 512}})
    for (bool acc : {false, true}) {
      run<cuda::mvd::Q4K, cuda::mvs::Q4KS>(G::Q4_K, r, c, tunes[0], acc, seed++);
      run<cuda::mvd::Q6K, cuda::mvs::Q6KS>(G::Q6_K, r, c, tunes[0], acc, seed++);
    }
  // cp.async ring kernel at every depth, and the fused prologues.
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 256}, {9, 256}, {37, 512}, {21, 17408},
                                                              {5, 3584}, {67, 1024}, {301, 2048}, {4, 25600}, {4501, 512}})
    for (int stages : {2, 3, 4})
      for (int pre : {0, 1, 2}) {
        const bool acc = (seed & 1);
        run<cuda::mvd::Q4K, cuda::mvs::Q4KS>(G::Q4_K, r, c, tunes[0], acc, seed++, stages, pre);
        run<cuda::mvd::Q6K, cuda::mvs::Q6KS>(G::Q6_K, r, c, tunes[0], acc, seed++, stages, pre);
      }
  run<cuda::mvd::Q4K, cuda::mvs::Q4KS>(G::Q4_K, 301, 2048, tunes[0], true, seed++, 0, 1);
  run<cuda::mvd::Q6K, cuda::mvs::Q6KS>(G::Q6_K, 301, 2048, tunes[0], false, seed++, 0, 2);
  run<cuda::mvd::Q80>(G::Q8_0, 13, 96, tunes[0], false, 99);
  run<cuda::mvd::Q80>(G::Q8_0, 3, 32, tunes[1], true, 98);
  std::printf("failures %d\n", g_fail);
  return g_fail != 0;
}

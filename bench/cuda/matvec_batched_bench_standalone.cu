// Standalone checker + benchmark for cuda::matvec_batched (no gtest/json/cli deps, so it builds with
// nvcc alone on the GPU machine). Build (repo root):
//   nvcc -O3 -std=c++20 -arch=sm_90a -DDS_HAVE_SM90A=1 --expt-relaxed-constexpr -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -I src \
//     bench/cuda/matvec_batched_bench_standalone.cu src/cuda/matvec_batched.cu src/cuda/matvec.cu \
//     src/cuda/cuda_util.cpp src/core/ggml_type.cpp src/quant/*.cpp -Xcompiler -mavx2,-mfma,-mf16c,-fopenmp \
//     -lfmt -o mvb_bench
// Part 1 (check): per type, every B in {2, 7, 8, 33, 64}, awkward shapes, accumulate on/off: max over
//   rows and batch columns of |y - dot_row| / sum_k |w_k x_k| (the metric of tests/cuda/matvec_test.cpp).
// Usage: mvb_bench [check | checkfold | checkwg | checkwg6 | checkdef | checkdef6 | time | timeq | timedef [type]]
//   (no argument: check, then time; checkdef / checkdef6: Q4_K / Q6_K under the current settings and environment)
// Part 1 runs for the current path/terms (DS_MVB_PATH = gemm | mma, DS_MVB_TERMS = 2 | 3).
// Part 2 (time): the 9B shapes at B = 1, 8, 32, 64: us per call, effective TFLOP/s and weight GB/s, for the
//   GEMM kernel with 3 and 2 terms and the per-warp mma kernel (3 terms); `time` adds the FMA tile kernel.
//   Weights smaller than L2 (50 MB) stay in it across the repeated calls: those rows are optimistic.
#include <cuda_runtime.h>
#include <execinfo.h>
#include <csignal>
#include <strings.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"
#include "cuda/matvec.h"
#include "cuda/matvec_batched_fold.h"
#include "cuda/matvec_kernel.cuh"
#include "quant/quant.h"

using namespace ds;

static std::vector<float> rnd_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

static std::vector<uint8_t> rnd_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  std::mt19937_64 rng(seed);
  const int64_t n_blocks = n_elems / info.block_size;
  std::vector<uint8_t> out(n_blocks * info.type_size);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const auto f = rnd_floats(n_elems, seed);
    for (int64_t i = 0; i < n_elems; i++) {
      if (t == GgmlType::F32) std::memcpy(&out[4 * i], &f[i], 4);
      else {
        const uint16_t h = t == GgmlType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        std::memcpy(&out[2 * i], &h, 2);
      }
    }
    return out;
  }
  for (auto& b : out) b = (uint8_t)rng();
  std::uniform_real_distribution<float> mag(-9.f, -6.f);
  auto put_f16 = [&](uint8_t* p, bool positive) {
    float v = std::exp2(mag(rng));
    if (!positive && (rng() & 1)) v = -v;
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t b = 0; b < n_blocks; b++) {
    uint8_t* p = &out[b * info.type_size];
    switch (t) {
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: put_f16(p, false); put_f16(p + 2, true); break;
      case GgmlType::Q6_K: put_f16(p + 208, false); break;
      default: put_f16(p, false); break;
    }
  }
  return out;
}

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } \
  } while (0)
#define ST(x)                                                              \
  do {                                                                     \
    auto s_ = (x);                                                         \
    if (!s_.ok()) { printf("ERR %s at %d\n", s_.error().message.c_str(), __LINE__); exit(1); } \
  } while (0)

static const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                  GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::IQ4_NL, GgmlType::Q4_K,
                                  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

// Returns the worst error metric for one (type, shape, batch, accumulate) case.
static double check_case(GgmlType t, int64_t rows, int64_t cols, int B, bool acc, uint64_t seed, double& rms) {
  const auto w = rnd_weights(t, rows * cols, seed);
  const auto x = rnd_floats(B * cols, seed + 1);
  const auto y0 = rnd_floats(B * rows, seed + 2);
  void *dw, *dx, *dy;
  CK(cudaMalloc(&dw, w.size()));
  CK(cudaMalloc(&dx, x.size() * 4));
  CK(cudaMalloc(&dy, y0.size() * 4));
  CK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  if (acc) CK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
  else CK(cudaMemset(dy, 0xFF, y0.size() * 4));  // NaN poison
  ST(cuda::matvec_batched(t, dw, rows, cols, (const float*)dx, (float*)dy, B, nullptr, acc));
  CK(cudaDeviceSynchronize());
  std::vector<float> y(B * rows);
  CK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
  const uint64_t rb = ggml_row_bytes(*ggml_type_info(t), cols);
  std::vector<float> deq(cols);
  double worst = 0, sq = 0;
  int64_t n = 0;
  const int64_t stride = rows > 3000 ? 13 : 1;
  for (int64_t r = 0; r < rows; r += (r + stride < rows) ? stride : std::max<int64_t>(1, rows - 1 - r)) {
    quant::dequantize_row(t, w.data() + r * rb, deq.data(), cols);
    for (int b = 0; b < B; b++) {
      const float* xb = x.data() + (int64_t)b * cols;
      double mag = 0;
      for (int64_t k = 0; k < cols; k++) mag += std::fabs((double)deq[k] * xb[k]);
      double ref = 0;
      for (int64_t k = 0; k < cols; k++) ref += (double)deq[k] * xb[k];
      if (acc) ref += y0[(int64_t)b * rows + r];
      const double e = std::fabs(y[(int64_t)b * rows + r] - ref) / std::max(mag, 1e-30);
      if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
      sq += e * e;
      n++;
    }
    if (r == rows - 1) break;
  }
  rms = std::sqrt(sq / std::max<int64_t>(n, 1));
  cudaFree(dw); cudaFree(dx); cudaFree(dy);
  return worst;
}

static void run_checks(GgmlType only = GgmlType::F32) {  // F32: every type
  printf("checks: path %s, %d terms, fold mode %d, wgmma %d\n",
         cuda::matvec_batched_path() == cuda::MatvecBatchedPath::Gemm ? "gemm" : "mma", cuda::matvec_batched_terms(),
         cuda::matvec_batched_fold_mode(), cuda::matvec_batched_wgmma());
  printf("        wgmma Q6_K %d\n", cuda::matvec_batched_wgmma_q6k());
  struct S { int64_t rows, cols; };
  const S shapes[] = {{77, 256}, {1027, 512}, {333, 1280}, {21, 17408}, {515, 4096}, {300, 12288}};
  const int Bs[] = {2, 7, 8, 33, 64};
  uint64_t seed = 1;
  for (GgmlType t : kTypes) {
    if (only != GgmlType::F32 && t != only) continue;
    double worst = 0, worst_rms = 0;
    for (const S& s : shapes)
      for (int B : Bs)
        for (bool acc : {false, true}) {
          if (acc && B != 7 && B != 64) continue;
          double rms;
          const double e = check_case(t, s.rows, s.cols, B, acc, seed += 3, rms);
          if (e > (cuda::matvec_batched_terms() == 2 ? 4e-5 : 1e-5)) printf("  BAD %s rows %lld cols %lld B %d acc %d: %.3g\n", std::string(ggml_type_name(t)).c_str(),
                               (long long)s.rows, (long long)s.cols, B, acc, e);
          worst = std::max(worst, e);
          worst_rms = std::max(worst_rms, rms);
        }
    printf("check %-7s max err %.3g  (max rms %.3g)\n", std::string(ggml_type_name(t)).c_str(), worst, worst_rms);
  }
}

static const char* g_only = nullptr;  // argv[2]: time this type only (e.g. q4_k)
static void run_timing(bool with_fma) {
  struct S { const char* name; int64_t rows, cols; };
  const S shapes[] = {{"ffn_gate_up", 24576, 4096}, {"ffn_down", 4096, 12288}, {"attn_qkv", 8192, 4096},
                      {"ssm_out", 4096, 4096}, {"z_ba", 4160, 4096}, {"output", 248320, 4096}};
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0};
  const int Bs[] = {1, 8, 32, 64};
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float* dx;
  float* dy;
  CK(cudaMalloc(&dx, 64 * 12288 * 4));
  CK(cudaMalloc(&dy, (size_t)64 * 248320 * 4));
  {
    const auto x = rnd_floats(64 * 12288, 5);
    CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  }
  for (GgmlType t : types)
    for (const S& s : shapes) {
      if (g_only && strcasecmp(g_only, std::string(ggml_type_name(t)).c_str()) != 0) continue;
      if (s.rows == 248320 && t != GgmlType::Q6_K && t != GgmlType::Q8_0 && t != GgmlType::Q4_K) continue;
      const size_t bytes = ggml_row_bytes(*ggml_type_info(t), s.cols) * s.rows;
      void* dw;
      CK(cudaMalloc(&dw, bytes));
      CK(cudaMemset(dw, 0x11, bytes));  // finite scales for every type
      for (int B : Bs) {
        for (int path = 0; path < 14; path++) {
          if (path >= 7 && path < 10 && (t != GgmlType::Q4_K || B < 25)) continue;  // wgmma: Q4_K at 25 <= B <= 64
          if (path >= 10 && path < 14 && (t != GgmlType::Q6_K || B < 25)) continue;  // wgmma Q6_K, likewise
          if (path == 3 && (!with_fma || B == 1 || (B == 64 && s.rows == 248320))) continue;
          if (B == 1 && path != 0) continue;
          if (path >= 4 && path < 6 && t != GgmlType::Q4_K) continue;  // fold2: Q6_K / Q8_0 with fp16 x
          if (path == 2 && !with_fma && s.rows == 248320) continue;
          static const char* kNames[] = {"gemm3", "gemm2", "mma3", "fma", "fold0", "fold1", "fold2", "wgauto", "wg2", "wg3",
                                         "wg6a", "wg6_2", "wg6_3", "wg6p"};
          if (path != 3) {
            cuda::set_matvec_batched_path(path != 2 ? cuda::MatvecBatchedPath::Gemm : cuda::MatvecBatchedPath::Mma);
            cuda::set_matvec_batched_terms(path == 1 ? 2 : 3);
            cuda::set_matvec_batched_fold_mode(path >= 7 ? 2 : path >= 4 ? path - 4 : -1);
            // wgauto 1, wg2 2, wg3 3 (the ring forms wgr 4 .. 7 were removed in session 42)
            cuda::set_matvec_batched_wgmma(path >= 7 && path < 10 ? path - 6 : 0);
            cuda::set_matvec_batched_wgmma_q6k(path >= 10 && path < 14 ? path - 9 : 0);  // wg6a 1, wg6_2 2, wg6_3 3, wg6p 4
          }
          auto call = [&] {
            if (path != 3) return cuda::matvec_batched(t, dw, s.rows, s.cols, dx, dy, B, nullptr, false);
            const cuda::mv::MvArgs a{(const uint8_t*)dw, 0, s.rows, s.cols, dx, dy, B, 0, 0, false};
            switch (t) {
#define DS_CASE(T) \
  case GgmlType::T: return cuda::mv::launch<cuda::qt::QuantTraits<GgmlType::T>, true>(t, a, nullptr);
              DS_CUDA_FOR_EACH_TYPE(DS_CASE)
#undef DS_CASE
              default: return cuda::mv::launch<cuda::qt::QuantTraits<GgmlType::F32>, true>(t, a, nullptr);
            }
          };
          ST(call());
          CK(cudaDeviceSynchronize());
          const int iters = B >= 32 && s.rows == 248320 ? 3 : 20;
          CK(cudaEventRecord(e0));
          for (int i = 0; i < iters; i++) ST(call());
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          const double us = 1e3 * ms / iters;
          const double flop = 2.0 * B * s.rows * s.cols;
          printf("time %-6s %-11s B %2d %-5s %9.1f us  %7.1f TFLOP/s  %7.0f GB/s\n", std::string(ggml_type_name(t)).c_str(), s.name, B,
                 kNames[path], us, flop / us * 1e-6, bytes / us * 1e-3);
          fflush(stdout);
        }
      }
      CK(cudaFree(dw));
    }
}

// The 9B shapes at B = 32 and 64 under the current settings (library defaults + DS_MVB_* environment): one line per
// shape and B, for A/B runs of kernel variants chosen by environment (timedef [type]).
static void run_timing_default() {
  struct S { const char* name; int64_t rows, cols; };
  const S shapes[] = {{"ffn_gate_up", 24576, 4096}, {"ffn_down", 4096, 12288}, {"attn_qkv", 8192, 4096},
                      {"ssm_out", 4096, 4096}, {"z_ba", 4160, 4096}, {"output", 248320, 4096}};
  const char* tag = getenv("TAG") ? getenv("TAG") : "def";
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float *dx, *dy;
  CK(cudaMalloc(&dx, 64 * 12288 * 4));
  CK(cudaMalloc(&dy, (size_t)64 * 248320 * 4));
  {
    const auto x = rnd_floats(64 * 12288, 5);
    CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  }
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
    if (g_only && strcasecmp(g_only, std::string(ggml_type_name(t)).c_str()) != 0) continue;
    for (const S& s : shapes) {
      const size_t bytes = ggml_row_bytes(*ggml_type_info(t), s.cols) * s.rows;
      void* dw;
      CK(cudaMalloc(&dw, bytes));
      CK(cudaMemset(dw, 0x11, bytes));
      for (int B : {32, 64}) {
        auto call = [&] { return cuda::matvec_batched(t, dw, s.rows, s.cols, dx, dy, B, nullptr, false); };
        ST(call());
        CK(cudaDeviceSynchronize());
        const int iters = s.rows == 248320 ? 5 : 30;
        CK(cudaEventRecord(e0));
        for (int i = 0; i < iters; i++) ST(call());
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = 1e3 * ms / iters;
        printf("timedef %-8s %-6s %-11s B %2d %9.1f us  %7.1f TFLOP/s\n", tag, std::string(ggml_type_name(t)).c_str(),
               s.name, B, us, 2.0 * B * s.rows * s.cols / us * 1e-6);
      }
      CK(cudaFree(dw));
    }
  }
}

static void on_segv(int) {
  void* bt[64];
  const int n = backtrace(bt, 64);
  backtrace_symbols_fd(bt, n, 2);
  _exit(139);
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  setenv("DS_MVB_WG_Q6K_MIN", "25", 0);  // the wgmma Q6_K paths at every B >= 25 (the library's default too)
  signal(SIGSEGV, on_segv);
  // no argument: check + time (with the FMA kernel); "check"; "time"; "timeq" (tensor-core path only).
  const char* mode = argc < 2 ? "all" : argv[1];
  g_only = argc > 2 ? argv[2] : nullptr;
  if (!std::strcmp(mode, "all") || !std::strcmp(mode, "check")) run_checks();
  if (!std::strcmp(mode, "checkfold"))  // Q4_K: the 3-term GEMM kernel, then the fold kernel's modes
    for (int m = -1; m <= 2; m++) {
      cuda::set_matvec_batched_fold_mode(m);
      run_checks(GgmlType::Q4_K);
    }
  if (!std::strcmp(mode, "checkwg"))  // Q4_K: the wgmma kernel with 2 and 3 warpgroups (B 33 and 64 cases)
    for (int n_wg : {2, 3}) {
      cuda::set_matvec_batched_fold_mode(2);
      cuda::set_matvec_batched_wgmma(n_wg);
      run_checks(GgmlType::Q4_K);
    }
  if (!std::strcmp(mode, "checkwg6"))  // Q6_K: the gemm kernel (fp16 x), then the wgmma Q6_K kernel: 2, 3, 2 pipelined
    for (int n_wg : {0, 2, 3, 4}) {
      cuda::set_matvec_batched_fold_mode(2);
      cuda::set_matvec_batched_wgmma_q6k(n_wg);
      run_checks(GgmlType::Q6_K);
    }
  if (!std::strcmp(mode, "all") || !std::strcmp(mode, "time")) run_timing(true);
  if (!std::strcmp(mode, "timeq")) run_timing(false);
  if (!std::strcmp(mode, "timedef")) run_timing_default();
  if (!std::strcmp(mode, "checkdef")) run_checks(GgmlType::Q4_K);  // Q4_K under the current settings (DS_MVB_WG ...)
  if (!std::strcmp(mode, "checkdef6")) run_checks(GgmlType::Q6_K);  // Q6_K likewise (DS_MVB_WG_Q6K ...)
  return 0;
}

// matvec_bench_standalone: batch-1 matvec timing + correctness on the GPU machine, with no CMake and no
// third-party libraries beyond fmt's headers (the device machine has nvcc but not the project's full
// dependency set). For every (type, shape) it checks cuda::matvec against ds::quant::dot_row on sampled
// rows, times the current dispatch, the shared-memory tile kernel (the previous batch-1 path,
// mv::launch<QT, false>) and, for Q4_K/Q6_K/Q8_0, the direct-load kernel under several launch choices
// (mvd::Tune). One JSON line per measurement; "pct" = share of the 4.29 TB/s copy ceiling
// (performance.md); bytes = weights + x + y, each once. Weights rotate among copies totalling
// >= 512 MB, so L2 (60 MB) holds none of them between calls.
//
// Build (from the repository root; ~2 min on 2 cores):
//   nvcc -O3 -std=c++20 -arch=sm_90 --expt-relaxed-constexpr -DFMT_HEADER_ONLY -DFMT_USE_CONSTEXPR=1 \
//     -DFMT_CONSTEVAL= -DNDEBUG -Xcompiler -O3 -I src -o mvbench bench/cuda/matvec_bench_standalone.cu \
//     src/cuda/matvec.cu src/cuda/matvec_batched.cu src/cuda/cuda_util.cpp src/core/ggml_type.cpp \
//     src/quant/*.cpp
// -DNDEBUG matters: without it every launch synchronizes the stream (cuda_util.cpp launch_status) and
// every timing includes ~10 us of sync.
// Run: ./mvbench [--quick] [--filter SUBSTRING[,SUBSTRING...]]   (exit status 1 if any check fails)
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
#include "cuda/matvec.h"
#include "cuda/matvec_direct.cuh"
#include "cuda/matvec_kernel.cuh"
#include "cuda/matvec_smem.cuh"
#include "cuda/matvec_stream.cuh"
#include "cuda/matvec_stream_q6.cuh"
#include "cuda/matvec_tc.cuh"
#include "quant/quant.h"

using namespace ds;
namespace {

constexpr double kCeiling = 4.29e12;
bool g_quick = false;
bool g_q4k = false;  // --q4k: Q4_K only (checks and timings)
bool g_q6k = false;  // --q6k: Q6_K only (checks and timings; decode5)
bool g_stream = false;  // --stream: Q4_K streamed kernel vs tc and the read probes (decode6)
bool g_stream6 = false;  // --stream6: Q6_K streamed kernel vs the previous choice (decode7)
bool g_lean_ab = false;  // --stream-lean: only the Q4_K stream kernel's lean form against the default, interleaved (b1q420)
std::string g_filter;
int g_fail = 0;

#define CK(expr)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (expr);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

// Random blocks; every f16 scale field a finite value of either sign (dmin positive).
std::vector<uint8_t> random_weights(GgmlType t, int64_t n_elems, uint64_t seed) {
  const auto info = *ggml_type_info(t);
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n_elems / info.block_size * info.type_size);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    std::normal_distribution<float> nd;
    for (int64_t i = 0; i < n_elems; i++) {
      const float f = nd(rng);
      if (t == GgmlType::F32) std::memcpy(&out[4 * i], &f, 4);
      else {
        const uint16_t h = t == GgmlType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::memcpy(&out[2 * i], &h, 2);
      }
    }
    return out;
  }
  for (auto& b : out) b = (uint8_t)rng();
  for (size_t b = 0; b < out.size(); b += info.type_size) {
    const float dv = std::ldexp(1.0f, -6 - (int)(rng() % 4)) * ((rng() & 1) ? 1.f : -1.f);
    const uint16_t d = f32_to_f16(dv), dm = f32_to_f16(std::fabs(dv));
    const size_t off = t == GgmlType::Q6_K ? 208 : 0;
    std::memcpy(&out[b + off], &d, 2);
    if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) std::memcpy(&out[b + 2], &dm, 2);
  }
  return out;
}

double median_time(const std::function<void(int)>& fn, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) fn(i);
  CK(cudaDeviceSynchronize());
  std::vector<double> v;
  for (int trial = 0; trial < 5; trial++) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) fn(i);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    v.push_back(ms * 1e-3 / reps);
  }
  CK(cudaGetLastError());
  std::sort(v.begin(), v.end());
  return v[2];
}

// Worst |y - ref| / sum |w x| over sampled rows (ref = dot_row, + y0 when accumulating).
double check(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols, const std::vector<float>& x,
             const std::vector<float>& y, const float* y0, int64_t* worst_row) {
  const uint64_t rb = ggml_row_bytes(*ggml_type_info(t), cols);
  std::vector<float> deq(cols);
  double worst = 0;
  const int64_t step = std::max<int64_t>(1, rows / 97);
  for (int64_t r = 0;; r = std::min(r + step, rows - 1)) {
    const uint8_t* row = w.data() + r * rb;
    quant::dequantize_row(t, row, deq.data(), cols);
    double mag = 0;
    for (int64_t k = 0; k < cols; k++) mag += std::fabs((double)deq[k] * x[k]);
    double ref = quant::dot_row(t, row, x.data(), cols);
    if (y0) ref += y0[r];
    const double e = std::fabs(y[r] - ref) / std::max(mag, 1e-30);
    if (!(e <= worst)) { worst = std::isnan(e) ? INFINITY : e; *worst_row = r; }
    if (r == rows - 1) break;
  }
  return worst;
}

using LaunchFn = std::function<Status(const void* w, const float* x, float* y, bool acc)>;

// Correctness of one launch path on one (type, shape): plain and accumulate.
void verify(const char* path, GgmlType t, int64_t rows, int64_t cols, const LaunchFn& fn, uint64_t seed) {
  const auto w = random_weights(t, rows * cols, seed);
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<float> nd;
  std::vector<float> x(cols), y0(rows);
  for (auto& f : x) f = nd(rng);
  for (auto& f : y0) f = nd(rng);
  void *dw, *dx, *dy;
  CK(cudaMalloc(&dw, w.size() + 16));
  CK(cudaMalloc(&dx, cols * 4));
  CK(cudaMalloc(&dy, rows * 4));
  CK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x.data(), cols * 4, cudaMemcpyHostToDevice));
  for (bool acc : {false, true}) {
    if (acc) CK(cudaMemcpy(dy, y0.data(), rows * 4, cudaMemcpyHostToDevice));
    else CK(cudaMemset(dy, 0xFF, rows * 4));  // NaN: every output must be written
    auto st = fn(dw, (const float*)dx, (float*)dy, acc);
    if (!st.ok()) {
      std::printf("{\"check\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"error\":\"%s\"}\n", path,
                  std::string(ggml_type_name(t)).c_str(), (long long)rows, (long long)cols, st.error().message.c_str());
      g_fail++;
      continue;
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> y(rows);
    CK(cudaMemcpy(y.data(), dy, rows * 4, cudaMemcpyDeviceToHost));
    int64_t wr = -1;
    const double e = check(t, w, rows, cols, x, y, acc ? y0.data() : nullptr, &wr);
    const bool ok = e <= 1e-5;
    if (!ok) g_fail++;
    std::printf("{\"check\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"accumulate\":%d,\"worst\":%.3g,"
                "\"worst_row\":%lld,\"ok\":%s}\n",
                path, std::string(ggml_type_name(t)).c_str(), (long long)rows, (long long)cols, (int)acc, e, (long long)wr,
                ok ? "true" : "false");
  }
  CK(cudaFree(dw));
  CK(cudaFree(dx));
  CK(cudaFree(dy));
}

struct Weights {
  std::vector<void*> copies;
  size_t bytes = 0;
  ~Weights() {
    for (void* p : copies) cudaFree(p);
  }
};

void fill_weights(Weights& W, GgmlType t, int64_t rows, int64_t cols) {
  const auto info = *ggml_type_info(t);
  W.bytes = ggml_row_bytes(info, cols) * rows;
  const int64_t pat_elems = std::min<int64_t>(rows * cols, (int64_t)(16 << 20) / info.type_size * info.block_size);
  const auto pat = random_weights(t, pat_elems, 7);
  const size_t n = std::max<size_t>(1, (512u << 20) / W.bytes);
  for (size_t c = 0; c < n; c++) {
    void* p;
    CK(cudaMalloc(&p, W.bytes + 16));
    for (size_t off = 0; off < W.bytes; off += pat.size())
      CK(cudaMemcpy((uint8_t*)p + off, pat.data(), std::min(pat.size(), W.bytes - off), cudaMemcpyHostToDevice));
    W.copies.push_back(p);
  }
}

void time_path(const char* model, const char* tensor, const char* path, GgmlType t, int64_t rows, int64_t cols,
               const Weights& W, const float* x, float* y, const LaunchFn& fn) {
  const int reps = (g_stream || g_stream6) ? 20 : g_quick ? 10 : std::max(20, (int)std::min<int64_t>(200, (int64_t)(2e9 / W.bytes)));
  bool bad = false;
  const double s = median_time([&](int i) {
    auto st = fn(W.copies[i % W.copies.size()], x, y, false);
    if (!st.ok()) bad = true;
  }, reps);
  if (bad) {
    std::printf("{\"op\":\"matvec\",\"path\":\"%s\",\"error\":true}\n", path);
    g_fail++;
    return;
  }
  const double bytes = (double)W.bytes + 4.0 * (rows + cols);
  std::printf("{\"op\":\"matvec\",\"model\":\"%s\",\"tensor\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,"
              "\"path\":\"%s\",\"us\":%.2f,\"gb_s\":%.1f,\"pct\":%.1f}\n",
              model, tensor, std::string(ggml_type_name(t)).c_str(), (long long)rows, (long long)cols, path, s * 1e6,
              bytes / s / 1e9, 100.0 * bytes / s / kCeiling);
  std::fflush(stdout);
}

template <GgmlType T>
LaunchFn tile_path(int64_t rows, int64_t cols) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mv::MvArgs a{static_cast<const uint8_t*>(w), 0, rows, cols, x, y, 1, 0, 0, acc};
    return cuda::mv::launch<cuda::qt::QuantTraits<T>, false>(T, a, nullptr);
  };
}
LaunchFn dispatch_path(GgmlType t, int64_t rows, int64_t cols) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    return cuda::matvec(t, w, rows, cols, x, y, nullptr, acc);
  };
}
// async_stages: cp.async ring kernel with up to that many slots (types that have it), 0: register pipeline.
template <class S>
LaunchFn smem_path(int64_t rows, int64_t cols, int grid_cap = cuda::mvs::kCtasPerSm, int async_stages = 0) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mvs::Tune keep = cuda::mvs::tune();
    cuda::mvs::tune().grid_ctas_per_sm = grid_cap;
    cuda::mvs::tune().async_stages = async_stages;
    cuda::mvs::tune().async_max_elems = -1;  // the ring kernel at every size when asked for
    auto st = cuda::mvs::launch<S>(static_cast<const uint8_t*>(w), rows, cols, x, y, acc, nullptr);
    cuda::mvs::tune() = keep;
    return st;
  };
}
// The tensor-core Q4_K kernel (matvec_tc.cuh) with `terms` fp16 terms of x, ks warps per row group (0: by
// shape), grid cap in CTAs per SM.
LaunchFn tc_path(int64_t rows, int64_t cols, int terms, int ks = 0, int grid_cap = 2, bool q6 = false) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mvt::Tune keep = cuda::mvt::tune();
    cuda::mvt::tune().terms = terms;
    cuda::mvt::tune().ks = ks;
    cuda::mvt::tune().grid_ctas_per_sm = grid_cap;
    auto st = cuda::mvt::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, acc, nullptr, {}, q6);
    cuda::mvt::tune() = keep;
    return st;
  };
}
// The streamed Q4_K kernel (matvec_stream.cuh): kc super-blocks per stage, stages / CTAs per SM (0: auto),
// math false: the bulk-copy ring alone (probe: y = 0, not checkable).
// lean: Tune::lean (b1q420; the variants without _lean run the previous form).
LaunchFn stream_path(int64_t rows, int64_t cols, int kc, int stages = 0, int ctas = 0, bool math = true, int terms = 3,
                     bool i8 = true, bool lean = false) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mvq::Tune keep = cuda::mvq::tune();
    const cuda::mvt::Tune keep_t = cuda::mvt::tune();
    cuda::mvq::tune().lean = lean;
    cuda::mvq::tune().kc = kc;
    cuda::mvq::tune().stages = stages;
    cuda::mvq::tune().ctas_per_sm = ctas;
    cuda::mvq::tune().math = math;
    cuda::mvq::tune().i8 = i8;
    cuda::mvt::tune().terms = terms;
    auto st = cuda::mvq::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, acc, nullptr);
    cuda::mvq::tune() = keep;
    cuda::mvt::tune() = keep_t;
    return st;
  };
}

// The streamed Q6_K kernel (matvec_stream_q6.cuh, decode7), called directly: kc super-blocks per stage (0: 8),
// stages / CTAs per SM (0: auto); math false: the ring alone (y = 0, not checkable); wide: Tune::wide (false: 8
// consumer warps where the plan has one CTA per SM).
LaunchFn stream6_path(int64_t rows, int64_t cols, int kc, int stages = 0, int ctas = 0, bool math = true,
                      bool wide = true, bool lean = false) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mvq6::Tune keep = cuda::mvq6::tune();
    cuda::mvq6::tune().lean = lean;  // q6i19: the variants without _lean run the previous form (Tune::lean false)
    cuda::mvq6::tune().kc = kc;
    cuda::mvq6::tune().stages = stages;
    cuda::mvq6::tune().ctas_per_sm = ctas;
    cuda::mvq6::tune().math = math;
    cuda::mvq6::tune().wide = wide;
    auto st = cuda::mvq6::launch(static_cast<const uint8_t*>(w), rows, cols, x, y, acc, nullptr);
    cuda::mvq6::tune() = keep;
    return st;
  };
}
// fn with x staged as before b1x16 in the stream kernels (DS_MATVEC_STREAM_XONE=0; the stage2 form went in b1x16).
LaunchFn with_xone0(LaunchFn fn) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const int keep = cuda::mvq::tune().xone;
    cuda::mvq::tune().xone = 0;
    auto st = fn(w, x, y, acc);
    cuda::mvq::tune().xone = keep;
    return st;
  };
}
// matvec_fused (SwiGLU when swiglu, else RMSNorm; x doubles as gate / norm weights) with the Q6_K stream
// kernel's mode forced (-1: by shape, 0: off, 1: on).
LaunchFn fused6_path(GgmlType t, int64_t rows, int64_t cols, float* scratch, bool swiglu, int mode) {
  return [=](const void* w, const float* xx, float* yy, bool acc) {
    const cuda::mvq6::Tune keep = cuda::mvq6::tune();
    cuda::mvq6::tune().mode = mode;
    cuda::MatvecInput in{xx};
    if (swiglu) in.gate = xx;
    else { in.norm_w = xx; in.eps = 1e-6f; }
    auto st = cuda::matvec_fused(t, w, rows, cols, in, yy, scratch, nullptr, acc);
    cuda::mvq6::tune() = keep;
    return st;
  };
}

// Probe (decode6): the tc kernel's exact weight access pattern (grid, ks, items, one item loaded ahead)
// without its math: the words are only XORed. Tells whether matvec_tc is bound by its loads.
__global__ void __launch_bounds__(256, 2) tc_read_probe(const cuda::mvt::Args a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int ks = a.ks, sub = warp % ks, slot = warp / ks, spc = 8 / ks;
  const int nrg = (a.rows + 15) / 16, rgstride = gridDim.x * spc;
  int rg = blockIdx.x * spc + slot, kb = sub;
  if (rg >= nrg) return;
  cuda::mvt::Raw cur, nxt;
  cuda::mvt::load(a, rg, kb, g, t, cur);
  uint32_t acc = 0;
  for (;;) {
    int rgn = rg, kbn = kb + ks;
    if (kbn >= a.nb) { kbn = sub; rgn += rgstride; }
    if (rgn < nrg) cuda::mvt::load(a, rgn, kbn, g, t, nxt);
#pragma unroll
    for (int k = 0; k < 2; k++) {
      acc ^= cur.h[k].x ^ cur.h[k].y ^ cur.h[k].z ^ cur.h[k].w;
#pragma unroll
      for (int i = 0; i < 2; i++) acc ^= cur.q[k][i].x ^ cur.q[k][i].y ^ cur.q[k][i].z ^ cur.q[k][i].w;
    }
    if (rgn >= nrg) break;
    cur = nxt;
    rg = rgn;
    kb = kbn;
  }
  if (acc == 0x9E3779B9u) a.y[threadIdx.x] = 1.f;  // keeps the loads
}
LaunchFn tc_read_path(int64_t rows, int64_t cols) {
  return [=](const void* w, const float* x, float* y, bool acc) -> Status {
    const int nb = (int)(cols / 256);
    const int64_t nrg = (rows + 15) / 16, cap = 2 * (int64_t)cuda::sm_count();
    const int ks = cuda::mvt::pick_ks(nrg, nb, cap);
    const cuda::mvt::Args a{static_cast<const uint8_t*>(w), (int64_t)nb * 144, (int)rows, nb, ks, x, y, acc, {}, (int)cols};
    const int64_t spc = 8 / ks;
    const unsigned grid = (unsigned)std::min<int64_t>((nrg + spc - 1) / spc, cap);
    tc_read_probe<<<grid, 256>>>(a);
    if (cudaGetLastError() != cudaSuccess) return cuda::cu_err("tc_read_probe launch");
    return {};
  };
}

template <class D>
LaunchFn direct_path(int64_t rows, int64_t cols, cuda::mvd::Tune tn) {
  return [=](const void* w, const float* x, float* y, bool acc) {
    const cuda::mvd::Tune keep = cuda::mvd::tune();
    cuda::mvd::tune() = tn;
    auto st = cuda::mvd::launch<D>(static_cast<const uint8_t*>(w), rows, cols, x, y, acc, nullptr);
    cuda::mvd::tune() = keep;
    return st;
  };
}

const std::vector<cuda::mvd::Tune> kTunes = {
    {4, 4, 32, true},  {2, 4, 32, true},  {4, 1, 32, true}, {2, 1, 32, true}, {4, 4, 32, false},
    {2, 4, 32, false}, {4, 1, 32, false}, {2, 4, 64, true}, {4, 4, 64, true}, {2, 2, 32, true}};
std::string tune_name(const cuda::mvd::Tune& t) {
  return "direct_r" + std::to_string(t.rows_per_group) + "_ks" + std::to_string(t.ks_max) + "_w" +
         std::to_string(t.warps_per_sm) + (t.pipe ? "_pipe" : "_nopipe");
}

// --filter: comma-separated substrings, any of which selects a shape key (empty: all).
bool filter_takes(const std::string& key) {
  if (g_filter.empty()) return true;
  for (size_t b = 0; b <= g_filter.size();) {
    const size_t e = std::min(g_filter.find(',', b), g_filter.size());
    if (e > b && key.find(g_filter.substr(b, e - b)) != std::string::npos) return true;
    b = e + 1;
  }
  return false;
}

template <GgmlType T, class D, class S = void>
void bench_shape(const char* model, const char* tensor, int64_t rows, int64_t cols, bool sweep) {
  const std::string key = std::string(model) + " " + tensor + " " + std::string(ggml_type_name(T));
  if (!filter_takes(key)) return;
  Weights W;
  fill_weights(W, T, rows, cols);
  float *x, *y;
  CK(cudaMalloc(&x, cols * 4));
  CK(cudaMalloc(&y, rows * 4));
  std::vector<float> hx(cols, 0.5f);
  CK(cudaMemcpy(x, hx.data(), cols * 4, cudaMemcpyHostToDevice));
  if (!g_quick) time_path(model, tensor, "tile_old", T, rows, cols, W, x, y, tile_path<T>(rows, cols));
  time_path(model, tensor, "dispatch", T, rows, cols, W, x, y, dispatch_path(T, rows, cols));
  {  // the decode's RMSNorm-fused product (matvec_fused; x doubles as the norm weights)
    float* scratch;
    CK(cudaMalloc(&scratch, cols * 4));
    time_path(model, tensor, "fused_rms", T, rows, cols, W, x, y, [=](const void* w, const float* xx, float* yy, bool acc) {
      cuda::MatvecInput in{xx};
      in.norm_w = xx;
      in.eps = 1e-6f;
      return cuda::matvec_fused(T, w, rows, cols, in, yy, scratch, nullptr, acc);
    });
    CK(cudaFree(scratch));
  }
  if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q6_K) {
    constexpr bool q6 = T == GgmlType::Q6_K;
    if (!q6 && g_lean_ab) {
      // b1q420: the lean form against the default, interleaved, three times (default plan, kc 8 as the model).
      for (int r = 0; r < 3; r++) {
        time_path(model, tensor, "stream", T, rows, cols, W, x, y, stream_path(rows, cols, 8));
        time_path(model, tensor, "stream_lean", T, rows, cols, W, x, y,
                  stream_path(rows, cols, 8, 0, 0, true, 3, true, true));
      }
    } else if (!q6 && g_stream) {
      time_path(model, tensor, "tc3", T, rows, cols, W, x, y, tc_path(rows, cols, 3, 0, 2, false));
      time_path(model, tensor, "tcread", T, rows, cols, W, x, y, tc_read_path(rows, cols));
      struct V { const char* name; int kc, stages, ctas; bool math; int terms; bool i8; };
      const V vs[] = {{"stream", 8, 0, 0, true, 3, true},           {"stream_kc16", 16, 0, 0, true, 3, true},
                      {"stream_kc4", 4, 0, 0, true, 3, true},       {"stream_c1", 8, 0, 1, true, 3, true},
                      {"stream_c2", 8, 0, 2, true, 3, true},        {"stream_c1_kc16", 16, 0, 1, true, 3, true},
                      {"stream_s3", 8, 3, 0, true, 3, true},        {"stream_s4", 8, 4, 0, true, 3, true},
                      {"stream_nomath", 8, 0, 0, false, 3, true},   {"stream_f16", 8, 0, 0, true, 3, false},
                      {"stream_f16_s3", 8, 3, 0, true, 3, false}};
      for (const V& v : vs) {
        cuda::mvq::Plan pl;
        cuda::mvq::Tune tn;
        tn.kc = v.kc; tn.stages = v.stages; tn.ctas_per_sm = v.ctas; tn.i8 = v.i8;
        if (!cuda::mvq::plan(v.terms, (int)(cols / 256), tn, pl)) continue;
        time_path(model, tensor, v.name, T, rows, cols, W, x, y, stream_path(rows, cols, v.kc, v.stages, v.ctas, v.math, v.terms, v.i8));
      }
      time_path(model, tensor, "stream_xone0", T, rows, cols, W, x, y, with_xone0(stream_path(rows, cols, 8)));
    } else if (q6 && g_stream6) {
      float* scratch;
      CK(cudaMalloc(&scratch, cols * 4));
      time_path(model, tensor, "swiglu_q6stream_off", T, rows, cols, W, x, y, fused6_path(T, rows, cols, scratch, true, 0));
      time_path(model, tensor, "swiglu_q6stream_on", T, rows, cols, W, x, y, fused6_path(T, rows, cols, scratch, true, 1));
      time_path(model, tensor, "swiglu_q6stream_on_xone0", T, rows, cols, W, x, y,
                with_xone0(fused6_path(T, rows, cols, scratch, true, 1)));
      time_path(model, tensor, "rms_q6stream_off", T, rows, cols, W, x, y, fused6_path(T, rows, cols, scratch, false, 0));
      CK(cudaFree(scratch));
      time_path(model, tensor, "tc3", T, rows, cols, W, x, y, tc_path(rows, cols, 3, 0, 2, q6));
      struct V { const char* name; int kc, stages, ctas; bool math, wide = true, lean = false; };
      const V vs[] = {{"stream6", 0, 0, 0, true},      {"stream6_kc4", 4, 0, 0, true},   {"stream6_kc16", 16, 0, 0, true},
                      {"stream6_c1", 8, 0, 1, true},   {"stream6_c2_kc4", 4, 0, 2, true}, {"stream6_c1_kc16", 16, 0, 1, true},
                      {"stream6_s3", 8, 3, 0, true},   {"stream6_s4", 8, 4, 0, true},    {"stream6_s5", 8, 5, 0, true},
                      {"stream6_w8", 0, 0, 0, true, false},                 {"stream6_nomath", 0, 0, 0, false},
                      // q6i19, interleaved: the lean form (same bits) against the default, twice, 16 and 8 warps
                      {"stream6_lean", 0, 0, 0, true, true, true},          {"stream6", 0, 0, 0, true},
                      {"stream6_lean", 0, 0, 0, true, true, true},          {"stream6_w8_lean", 0, 0, 0, true, false, true},
                      {"stream6_w8", 0, 0, 0, true, false},                 {"stream6_s3_lean", 8, 3, 0, true, true, true}};
      time_path(model, tensor, "stream6_xone0", T, rows, cols, W, x, y, with_xone0(stream6_path(rows, cols, 0)));
      for (const V& v : vs) {
        cuda::mvq6::Plan pl;
        cuda::mvq6::Tune tn;
        tn.kc = v.kc; tn.stages = v.stages; tn.ctas_per_sm = v.ctas; tn.wide = v.wide;
        if (!cuda::mvq6::plan((int)(cols / 256), tn, pl)) continue;
        time_path(model, tensor, v.name, T, rows, cols, W, x, y,
                  stream6_path(rows, cols, v.kc, v.stages, v.ctas, v.math, v.wide, v.lean));
      }
    } else if (cuda::mvt::fits(3, cols)) {
      time_path(model, tensor, "tc3", T, rows, cols, W, x, y, tc_path(rows, cols, 3, 0, 2, q6));
      time_path(model, tensor, "tc2", T, rows, cols, W, x, y, tc_path(rows, cols, 2, 0, 2, q6));
      time_path(model, tensor, "tc3_g1", T, rows, cols, W, x, y, tc_path(rows, cols, 3, 0, 1, q6));
      time_path(model, tensor, "tc3_g0", T, rows, cols, W, x, y, tc_path(rows, cols, 3, 0, 0, q6));
      for (int ks : {1, 2, 4, 8})
        if (ks * 256 <= cols)
          time_path(model, tensor, ("tc3_ks" + std::to_string(ks)).c_str(), T, rows, cols, W, x, y,
                    tc_path(rows, cols, 3, ks, 2, q6));
    }
  }
  if (g_stream || g_stream6) {
    CK(cudaFree(x));
    CK(cudaFree(y));
    return;
  }
  if constexpr (!std::is_same_v<D, void>)
    time_path(model, tensor, "direct", T, rows, cols, W, x, y, direct_path<D>(rows, cols, cuda::mvd::Tune{}));
  if constexpr (!std::is_same_v<S, void>) {
    if (cuda::mvs::fits(cols)) {
      time_path(model, tensor, "smem", T, rows, cols, W, x, y, smem_path<S>(rows, cols));
      if (S::kAsync) {
        time_path(model, tensor, "smem_async2", T, rows, cols, W, x, y, smem_path<S>(rows, cols, 2, 2));
        time_path(model, tensor, "smem_async3", T, rows, cols, W, x, y, smem_path<S>(rows, cols, 2, 3));
        time_path(model, tensor, "smem_async4", T, rows, cols, W, x, y, smem_path<S>(rows, cols, 2, 4));
      }
      if (!g_quick) {
        time_path(model, tensor, "smem_grid4", T, rows, cols, W, x, y, smem_path<S>(rows, cols, 4));
        time_path(model, tensor, "smem_nocap", T, rows, cols, W, x, y, smem_path<S>(rows, cols, 0));
      }
    }
  }
  if constexpr (!std::is_same_v<D, void>) {
    if (sweep)
      for (const auto& tn : kTunes)
        time_path(model, tensor, tune_name(tn).c_str(), T, rows, cols, W, x, y, direct_path<D>(rows, cols, tn));
  }
  CK(cudaFree(x));
  CK(cudaFree(y));
}

struct Shape {
  const char* model;
  const char* tensor;
  int64_t rows, cols;
};
const std::vector<Shape> kShapes = {
    {"9B", "ffn_gate_up", 24576, 4096}, {"9B", "ffn_up", 12288, 4096}, {"9B", "ffn_down", 4096, 12288}, {"9B", "attn_qkv", 8192, 4096},
    {"9B", "ssm_out", 4096, 4096},      {"9B", "output", 248320, 4096},  {"0.8B", "attn_qkv", 6144, 1024},
    {"0.8B", "ffn_up", 3584, 1024},     {"0.8B", "ffn_down", 1024, 3584}, {"0.8B", "ssm_out", 1024, 2048},
    {"0.8B", "output", 248320, 1024}, {"27B", "ffn_gate_up", 34816, 5120}, {"27B", "ffn_down", 5120, 17408},
    {"probe", "41MB", 17920, 4096},
};

template <GgmlType T, class D, class S = void>
void bench_type(bool sweep) {
  for (const Shape& s : kShapes) bench_shape<T, D, S>(s.model, s.tensor, s.rows, s.cols, sweep);
}

template <GgmlType T, class D, class S = void>
void verify_type(uint64_t& seed) {
  const int64_t blk = ggml_type_info(T)->block_size;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1027, 256}, {515, 512}, {333, 1280}, {21, 17408}, {1, 256}, {7, 2048}, {2048, 1024}, {1024, 3584},
      {4096, 4096}, {130, 12288}, {77, 96}, {5, 32}, {3, 64}};
  for (auto [rows, cols] : shapes) {
    if (cols % blk) continue;
    verify("dispatch", T, rows, cols, dispatch_path(T, rows, cols), seed++);
    if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q6_K) {
      constexpr bool q6 = T == GgmlType::Q6_K;
      if (!g_stream6) {
        verify("tc2", T, rows, cols, tc_path(rows, cols, 2, 0, 2, q6), seed++);
        for (int ks : {1, 2, 8})
          verify(("tc3_ks" + std::to_string(ks)).c_str(), T, rows, cols, tc_path(rows, cols, 3, ks, 2, q6), seed++);
        verify("tc3_g0", T, rows, cols, tc_path(rows, cols, 3, 0, 0, q6), seed++);
      }
      if (!q6) {
        cuda::mvq::Plan pl;
        if (cuda::mvq::plan(3, (int)(cols / 256), cuda::mvq::Tune{}, pl)) {
          verify("stream", T, rows, cols, stream_path(rows, cols, 8), seed++);
          verify("stream_kc4_s2", T, rows, cols, stream_path(rows, cols, 4, 2), seed++);
          verify("stream_kc16_c1", T, rows, cols, stream_path(rows, cols, 16, 0, 1), seed++);
          verify("stream_kc3_c2", T, rows, cols, stream_path(rows, cols, 3, 0, 2), seed++);
          verify("stream_xone0", T, rows, cols, with_xone0(stream_path(rows, cols, 8)), seed++);
          verify("stream_lean", T, rows, cols, stream_path(rows, cols, 8, 0, 0, true, 3, true, true), seed++);
          verify("stream_lean_kc3_c2", T, rows, cols, stream_path(rows, cols, 3, 0, 2, true, 3, true, true), seed++);
          verify("stream_lean_kc16_c1", T, rows, cols, stream_path(rows, cols, 16, 0, 1, true, 3, true, true), seed++);
          verify("stream_f16", T, rows, cols, stream_path(rows, cols, 8, 0, 0, true, 3, false), seed++);
          verify("stream_f16_kc3_c2_t2", T, rows, cols, stream_path(rows, cols, 3, 0, 2, true, 2, false), seed++);
        }
      }
      if (q6) {
        cuda::mvq6::Plan pl;
        struct V6 { const char* name; int kc, stages, ctas; };
        for (const V6& v : {V6{"stream6", 0, 0, 0}, V6{"stream6_kc2_s2", 2, 2, 0}, V6{"stream6_kc6_s3", 6, 3, 0},
                            V6{"stream6_kc16_c1", 16, 0, 1}, V6{"stream6_kc4_c2", 4, 0, 2}}) {
          cuda::mvq6::Tune tn;
          tn.kc = v.kc; tn.stages = v.stages; tn.ctas_per_sm = v.ctas;
          if (cuda::mvq6::plan((int)(cols / 256), tn, pl))
            verify(v.name, T, rows, cols, stream6_path(rows, cols, v.kc, v.stages, v.ctas), seed++);
        }
        if (cuda::mvq6::plan((int)(cols / 256), cuda::mvq6::Tune{}, pl))
        {
          verify("stream6_xone0", T, rows, cols, with_xone0(stream6_path(rows, cols, 0)), seed++);
          verify("stream6_lean", T, rows, cols, stream6_path(rows, cols, 0, 0, 0, true, true, true), seed++);
          verify("stream6_lean_c1_s3", T, rows, cols, stream6_path(rows, cols, 0, 3, 1, true, true, true), seed++);
        }
      }
      if (g_stream || g_stream6) continue;
    }
    if constexpr (!std::is_same_v<S, void>) {
      verify("smem", T, rows, cols, smem_path<S>(rows, cols), seed++);
      verify("smem_nocap", T, rows, cols, smem_path<S>(rows, cols, 0), seed++);
      if (S::kAsync)
        for (int n : {2, 3, 4}) verify(("smem_async" + std::to_string(n)).c_str(), T, rows, cols, smem_path<S>(rows, cols, 2, n), seed++);
    }
    if constexpr (!std::is_same_v<D, void>) {
      verify("direct", T, rows, cols, direct_path<D>(rows, cols, cuda::mvd::Tune{}), seed++);
      if (g_quick) continue;
      for (const auto& tn : {kTunes[1], kTunes[2], kTunes[4]})
        verify(tune_name(tn).c_str(), T, rows, cols, direct_path<D>(rows, cols, tn), seed++);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool do_time = true, do_check = true;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--quick")) g_quick = true;
    else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) g_filter = argv[++i];
    else if (!std::strcmp(argv[i], "--check-only")) do_time = false;
    else if (!std::strcmp(argv[i], "--q4k")) g_q4k = true;
    else if (!std::strcmp(argv[i], "--q6k")) g_q6k = true;  // Q6_K only
    else if (!std::strcmp(argv[i], "--stream")) g_stream = g_q4k = g_quick = true;  // decode6
    else if (!std::strcmp(argv[i], "--stream6")) g_stream6 = g_q6k = g_quick = true;  // decode7
    else if (!std::strcmp(argv[i], "--stream-lean")) g_lean_ab = g_stream = g_q4k = g_quick = true;  // b1q420
    else if (!std::strcmp(argv[i], "--time-only")) do_check = false;
    else {
      std::fprintf(stderr, "usage: mvbench [--quick] [--filter S] [--check-only|--time-only]\n");
      return 2;
    }
  }
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("{\"device\":\"%s\",\"sms\":%d}\n", p.name, p.multiProcessorCount);
  using G = GgmlType;
  namespace D = cuda::mvd;
  if (do_check) {
    uint64_t seed = 1;
    if (!g_q6k) verify_type<G::Q4_K, D::Q4K, cuda::mvs::Q4KS>(seed);
    if (!g_q4k) verify_type<G::Q6_K, D::Q6K, cuda::mvs::Q6KS>(seed);
    if (!g_q4k && !g_q6k) {
    verify_type<G::Q8_0, D::Q80>(seed);
    verify_type<G::F32, void>(seed);
    verify_type<G::F16, void>(seed);
    verify_type<G::BF16, void>(seed);
    verify_type<G::Q4_0, void>(seed);
    verify_type<G::Q5_0, void>(seed);
    verify_type<G::IQ4_NL, void>(seed);
    verify_type<G::Q5_K, void>(seed);
    verify_type<G::IQ4_XS, void>(seed);
    }
    // Misaligned x must be an error, not a fault.
    void* buf;
    CK(cudaMalloc(&buf, 1 << 20));
    const float* xb = (const float*)buf + 1024 + 1;
    for (G t : {G::Q4_K, G::Q6_K, G::Q8_0}) {
      const bool rejected = !cuda::matvec(t, buf, 4, 256, xb, (float*)buf + 4096, nullptr).ok();
      std::printf("{\"check\":\"misaligned_x\",\"type\":\"%s\",\"ok\":%s}\n", std::string(ggml_type_name(t)).c_str(),
                  rejected ? "true" : "false");
      if (!rejected) g_fail++;
    }
    CK(cudaFree(buf));
  }
  if (do_time) {
    // d2d copy ceiling, re-measured.
    void *a, *b;
    const size_t n = 1ull << 30;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    const double s = median_time([&](int) { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 5);
    std::printf("{\"op\":\"d2d_copy\",\"gb_s\":%.1f}\n", 2.0 * n / s / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
    if (!g_q6k) bench_type<G::Q4_K, D::Q4K, cuda::mvs::Q4KS>(!g_quick);
    if (!g_q4k) bench_type<G::Q6_K, D::Q6K, cuda::mvs::Q6KS>(!g_quick);
    if (g_quick || g_q4k || g_q6k) {
      std::printf("{\"failures\":%d}\n", g_fail);
      return g_fail ? 1 : 0;
    }
    bench_type<G::Q8_0, D::Q80>(true);
    for (const Shape& s : kShapes) {
      if (std::strcmp(s.model, "9B") || std::strcmp(s.tensor, "output") == 0) continue;
      bench_shape<G::BF16, void>(s.model, s.tensor, s.rows, s.cols, false);
      bench_shape<G::F32, void>(s.model, s.tensor, s.rows, s.cols, false);
    }
  }
  std::printf("{\"failures\":%d}\n", g_fail);
  return g_fail ? 1 : 0;
}

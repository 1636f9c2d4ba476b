// CUDA matvec / batched matvec vs the CPU oracle ds::quant::dot_row, per type, at real shapes and at
// awkward ones (rows not a multiple of the row group, rows shorter than one 32-unit tile, a partial
// last tile, long rows split over several warps, cols = one block, rows only 2- or 4-byte aligned for
// the odd block sizes, accumulate = true for every type). Error metric per output:
//   |y_cuda - y_ref| / sum_k |w_k x_k|      (summation-order error relative to the row's magnitude)
// Both sides are float32 sums of exactly decoded weights, so the bound is a few float32 ulps times
// sqrt(cols); the table holds one bound per type.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu.h"
#include "cuda/matvec.h"
#include "cuda/matvec_batched_fold.h"
#include "cuda_test_util.h"
#include "quant/quant.h"

namespace ds {
namespace {

// Tolerance table: max |Δ| / sum|w x| per row.
const std::map<GgmlType, double> kTol = {
    {GgmlType::F32, 1e-5},  {GgmlType::F16, 1e-5},  {GgmlType::BF16, 1e-5},   {GgmlType::Q8_0, 1e-5},
    {GgmlType::Q4_0, 1e-5}, {GgmlType::Q5_0, 1e-5}, {GgmlType::IQ4_NL, 1e-5}, {GgmlType::Q4_K, 1e-5},
    {GgmlType::Q5_K, 1e-5}, {GgmlType::Q6_K, 1e-5}, {GgmlType::IQ4_XS, 1e-5}, {GgmlType::Q4_1, 1e-5},
    {GgmlType::Q5_1, 1e-5}, {GgmlType::Q2_K, 1e-5}, {GgmlType::Q3_K, 1e-5}, {GgmlType::IQ3_XXS, 1e-5},
    {GgmlType::IQ3_S, 1e-5},
};

struct Shape {
  int64_t rows, cols;
  const char* what;
};

// Reference for one row: (dot_row, sum |w x|).
std::pair<double, double> ref_row(GgmlType t, const uint8_t* row, const float* x, int64_t cols,
                                  std::vector<float>& scratch) {
  scratch.resize(cols);
  quant::dequantize_row(t, row, scratch.data(), cols);
  double mag = 0;
  for (int64_t k = 0; k < cols; k++) mag += std::fabs((double)scratch[k] * x[k]);
  return {quant::dot_row(t, row, x, cols), mag};
}

// The largest error check_rows saw since the last reset (printed by the tensor-core test).
double g_worst_seen = 0;

// Checks y (rows outputs for activations x, plus y0 when accumulating) on every `stride`-th row.
void check_rows(GgmlType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols, const float* x,
                const float* y, const float* y0, int64_t stride, const std::string& what) {
  const auto info = *ggml_type_info(t);
  const uint64_t rb = ggml_row_bytes(info, cols);
  std::vector<float> scratch;
  double worst = 0;
  int64_t worst_row = -1;
  for (int64_t r = 0; r < rows; r += (r + stride < rows || r == rows - 1) ? stride : rows - 1 - r) {
    auto [ref, mag] = ref_row(t, w.data() + r * rb, x, cols, scratch);
    if (y0) ref += y0[r];
    const double e = std::fabs(y[r] - ref) / std::max(mag, 1e-30);
    if (!(e <= worst)) { worst = std::isnan(e) ? INFINITY : e; worst_row = r; }
    if (r == rows - 1) break;
  }
  g_worst_seen = std::max(g_worst_seen, worst);
  EXPECT_LE(worst, kTol.at(t)) << ggml_type_name(t) << " " << what << " [" << rows << " x " << cols
                               << "]: worst row " << worst_row;
}

// The CUDA kernels' column granule: the block size, 8 for the unquantized types (matvec.h).
int64_t cuda_block(GgmlType t) {
  const int64_t blk = ggml_type_info(t)->block_size;
  return (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) ? std::max<int64_t>(blk, 8) : blk;
}

std::vector<Shape> shapes_for(GgmlType t) {
  const int64_t blk = cuda_block(t);
  std::vector<Shape> v = {
      {1027, 256, "8 units per row (lpr 8), rows % 4 = 3"},
      {515, 512, "lpr 16"},
      {333, 1280, "two tiles, the second partial"},
      {21, 17408, "long rows, few of them: columns split over warps"},
      {2048, 1024, "0.8B attn_qkv-like"},
      {1024, 3584, "0.8B ffn_down"},
      {4096, 4096, "9B square"},
  };
  v.push_back({9, blk, "cols = one block"});
  v.push_back({1, 2 * blk, "a single row"});
  v.push_back({130, 12288, "long rows (9B ffn_down width)"});
  v.push_back({6, 3584, "0.8B ffn width, few rows (Q6_K/Q8_0 rows only 4-byte aligned)"});
  if (blk < 256) v.push_back({77, 96, "3 units per row"});
  return v;
}

// One matvec of random weights against the CPU oracle (y poisoned with NaN, or random when accumulating).
void run_case(GgmlType t, const Shape& s, uint64_t seed, bool accumulate, const std::string& what) {
  const auto w = test::random_weights(t, s.rows * s.cols, seed);
  const auto x = test::random_floats(s.cols, seed + 1);
  const auto y0 = test::random_floats(s.rows, seed + 2);
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto dy = cuda::DeviceBuffer::alloc(s.rows * 4);
  ASSERT_TRUE(dy.ok());
  std::vector<float> init = accumulate ? y0 : std::vector<float>(s.rows, NAN);
  ASSERT_TRUE(dy->upload(init.data(), init.size() * 4).ok());
  auto st = cuda::matvec(t, dw.data(), s.rows, s.cols, dx.as<float>(), dy->as<float>(), nullptr, accumulate);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = test::to_host<float>(*dy, s.rows);
  check_rows(t, w, s.rows, s.cols, x.data(), y.data(), accumulate ? y0.data() : nullptr, s.rows > 2000 ? 7 : 1,
             what + " " + s.what);
}

// The matvec settings the kernel-variant tests change: the path and the tc / stream / stream Q6_K tunes, saved when
// made and put back when destroyed (also when an ASSERT leaves the test early). It sets the path to Auto and turns
// the tc kernel on (the stream kernels are its streamed forms).
struct KeepMatvecSettings {
  const cuda::MatvecPath path = cuda::matvec_path();
  const cuda::MatvecTcTune tc = cuda::matvec_tc_tune();
  const cuda::MatvecStreamTune q4 = cuda::matvec_stream_tune();
  const cuda::MatvecStreamQ6Tune q6 = cuda::matvec_stream_q6_tune();
  KeepMatvecSettings() {
    cuda::set_matvec_path(cuda::MatvecPath::Auto);
    cuda::MatvecTcTune t = tc;
    t.on = true;
    cuda::set_matvec_tc_tune(t);
  }
  ~KeepMatvecSettings() {
    cuda::set_matvec_stream_tune(q4);
    cuda::set_matvec_stream_q6_tune(q6);
    cuda::set_matvec_tc_tune(tc);
    cuda::set_matvec_path(path);
  }
};

// A Q4_K stream ring variant forced on (mode 1): chunk size, stages, CTAs per SM, 16 consumer warps; every other
// field (the prepared x's thresholds, prefetch, ...) from `base` (the settings outside the test: session 9's
// repro set its tune from a short brace list, which reset xprep to the struct's default and so never ran the
// prepared x).
cuda::MatvecStreamTune q4_ring(const cuda::MatvecStreamTune& base, int kc, int stages, int ctas, bool wide) {
  cuda::MatvecStreamTune t = base;
  t.mode = 1;
  t.kc = kc;
  t.stages = stages;
  t.ctas_per_sm = ctas;
  t.wide = wide;
  return t;
}

// The stream tests' shapes; with DS_TEST_STREAM_SMALL=1 (compute-sanitizer runs: racecheck slows every shared-memory
// access) only those of at most 1M weights, or the smallest where none is.
std::vector<Shape> stream_shapes(std::vector<Shape> v) {
  const char* e = std::getenv("DS_TEST_STREAM_SMALL");
  if (!e || e[0] != '1' || v.empty()) return v;
  const auto weights = [](const Shape& s) { return s.rows * s.cols; };
  const Shape least = *std::min_element(v.begin(), v.end(), [&](const Shape& a, const Shape& b) {
    return weights(a) < weights(b);
  });
  v.erase(std::remove_if(v.begin(), v.end(), [&](const Shape& s) { return weights(s) > (1 << 20); }), v.end());
  if (v.empty()) v.push_back(least);
  return v;
}

// DS_TEST_STREAM_PART=k/n: only the variants i with i % n == k of StreamQ4KVariants / StreamQ6KVariants, so that a
// device run can spread the two long tests over n processes (dec15); unset: every variant.
bool stream_part_takes(int i) {
  const char* e = std::getenv("DS_TEST_STREAM_PART");
  int k = 0, n = 1;
  if (!e || std::sscanf(e, "%d/%d", &k, &n) != 2 || n < 1) return true;
  return i % n == k;
}

TEST(CudaMatvec, MatchesCpuDotRow) {
  DS_REQUIRE_GPU();
  uint64_t seed = 100;
  for (GgmlType t : test::cuda_types()) {
    for (const Shape& s : shapes_for(t)) {
      const auto w = test::random_weights(t, s.rows * s.cols, seed++);
      const auto x = test::random_floats(s.cols, seed++);
      auto dw = test::to_device(w);
      auto dx = test::to_device(x);
      auto dy = cuda::DeviceBuffer::alloc(s.rows * 4);
      ASSERT_TRUE(dy.ok());
      // Poison y: every output must be written.
      std::vector<float> nan(s.rows, NAN);
      ASSERT_TRUE(dy->upload(nan.data(), nan.size() * 4).ok());
      auto st = cuda::matvec(t, dw.data(), s.rows, s.cols, dx.as<float>(), dy->as<float>(), nullptr);
      ASSERT_TRUE(st.ok()) << st.error().message;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto y = test::to_host<float>(*dy, s.rows);
      check_rows(t, w, s.rows, s.cols, x.data(), y.data(), nullptr, s.rows > 2000 ? 7 : 1, s.what);
    }
  }
}

// Q4_K / Q6_K have two batch-1 kernels (x in shared memory, direct loads); each must match on every
// shape, plain and accumulating. Odd row counts leave the shared-memory kernel a half row pair.
TEST(CudaMatvec, BothKernelPathsMatchCpu) {
  DS_REQUIRE_GPU();
  const cuda::MatvecPath keep = cuda::matvec_path();
  uint64_t seed = 500;
  for (cuda::MatvecPath p : {cuda::MatvecPath::Smem, cuda::MatvecPath::Direct, cuda::MatvecPath::Auto}) {
    cuda::set_matvec_path(p);
    const std::string name = p == cuda::MatvecPath::Smem ? "smem" : p == cuda::MatvecPath::Direct ? "direct" : "auto";
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K}) {
      auto shapes = shapes_for(t);
      shapes.push_back({4097, 4096, "odd rows, 9B width"});
      shapes.push_back({3, 25600, "widest x the shared-memory kernel takes"});
      shapes.push_back({5, 25856, "x one block too wide for shared memory: direct fallback"});
      for (const Shape& s : shapes)
        for (bool acc : {false, true}) run_case(t, s, seed += 3, acc, name + (acc ? " accumulate" : ""));
    }
  }
  cuda::set_matvec_path(keep);
}

// Q3_K / Q5_K with the direct-load decoders (mvd::Q3K / Q5K behind DS_MATVEC_DIRECT_KQ, kq21) on and off (the tile
// kernel): both must match on every shape, plain and accumulating. The shapes cover Q3_K blocks at every 8-byte
// misalignment (110-byte blocks: cols = 256 rows start 2-byte aligned, and blocks inside a row step by 6 mod 8),
// rows not a multiple of the row group, rows of fewer tasks than lanes (one block: 4 Q5_K tasks), few long rows
// whose columns ks warps split, and 9B shapes (4096 x 4096 in shapes_for, ffn_down). DS_TEST_STREAM_SMALL=1 (memcheck runs): only
// the shapes of at most 1M weights (stream_shapes), which keep every case above but the 9B ones.
TEST(CudaMatvec, DirectKQuantMatchesCpu) {
  DS_REQUIRE_GPU();
  struct Keep {
    const int mode = cuda::matvec_direct_kq();
    ~Keep() { cuda::set_matvec_direct_kq(mode); }
  } keep;
  uint64_t seed = 900;
  for (bool on : {true, false}) {
    cuda::set_matvec_direct_kq(on ? 1 : 0);
    ASSERT_EQ(cuda::matvec_direct_kq(), on ? 1 : 0);
    const std::string name = on ? "direct kq" : "tile";
    for (GgmlType t : {GgmlType::Q3_K, GgmlType::Q5_K}) {
      auto shapes = shapes_for(t);
      shapes.push_back({4097, 4096, "odd rows, 9B width"});
      shapes.push_back({5, 25856, "few rows of 101 blocks"});
      shapes.push_back({3, 768, "three blocks a row"});
      shapes.push_back({4096, 12288, "9B ffn_down"});
      for (const Shape& s : stream_shapes(shapes))
        for (bool acc : {false, true}) run_case(t, s, seed += 3, acc, name + (acc ? " accumulate" : ""));
    }
  }
}

TEST(CudaMatvec, VocabSizedOutput) {  // 0.8B tied output matrix: 248320 rows of Q6_K
  DS_REQUIRE_GPU();
  const GgmlType t = GgmlType::Q6_K;
  const int64_t rows = 248320, cols = 1024;
  const auto w = test::random_weights(t, rows * cols, 77);
  const auto x = test::random_floats(cols, 78);
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto dy = cuda::DeviceBuffer::alloc(rows * 4);
  ASSERT_TRUE(dy.ok());
  auto st = cuda::matvec(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), nullptr);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const auto y = test::to_host<float>(*dy, rows);
  check_rows(t, w, rows, cols, x.data(), y.data(), nullptr, 97, "vocab rows");
}

TEST(CudaMatvec, Accumulate) {
  DS_REQUIRE_GPU();
  for (GgmlType t : test::cuda_types()) {
    const int64_t rows = 301, cols = 2048;
    const auto w = test::random_weights(t, rows * cols, 5);
    const auto x = test::random_floats(cols, 6);
    const auto y0 = test::random_floats(rows, 7);
    auto dw = test::to_device(w);
    auto dx = test::to_device(x);
    auto dy = test::to_device(y0);
    auto st = cuda::matvec(t, dw.data(), rows, cols, dx.as<float>(), dy.as<float>(), nullptr, true);
    ASSERT_TRUE(st.ok()) << st.error().message;
    const auto y = test::to_host<float>(dy, rows);
    check_rows(t, w, rows, cols, x.data(), y.data(), y0.data(), 1, "accumulate");
  }
}

TEST(CudaMatvec, BatchedMatchesCpu) {
  DS_REQUIRE_GPU();
  uint64_t seed = 900;
  for (GgmlType t : test::cuda_types()) {
    const int64_t rows = 259, cols = 1280;
    const auto w = test::random_weights(t, rows * cols, seed++);
    auto dw = test::to_device(w);
    for (int batch : {1, 2, 7, 8, 9, 33, 64}) {
      const auto x = test::random_floats(batch * cols, seed++);
      auto dx = test::to_device(x);
      auto dy = cuda::DeviceBuffer::alloc(batch * rows * 4);
      ASSERT_TRUE(dy.ok());
      std::vector<float> nan(batch * rows, NAN);
      ASSERT_TRUE(dy->upload(nan.data(), nan.size() * 4).ok());
      auto st = cuda::matvec_batched(t, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), batch, nullptr);
      ASSERT_TRUE(st.ok()) << st.error().message;
      const auto y = test::to_host<float>(*dy, batch * rows);
      for (int b = 0; b < batch; b += (batch > 9 ? 8 : 1))
        check_rows(t, w, rows, cols, x.data() + b * cols, y.data() + b * rows, nullptr, 1,
                   "batch " + std::to_string(batch) + " column " + std::to_string(b));
      check_rows(t, w, rows, cols, x.data() + (batch - 1) * cols, y.data() + (batch - 1) * rows, nullptr, 1,
                 "batch " + std::to_string(batch) + " last column");
    }
  }
}

// matvec_fused: the RMSNorm / SwiGLU input transform in the matvec prologue (Q4_K, Q6_K in shared
// memory) or as a separate kernel (every other type, the direct path, x too wide), against the CPU
// reference transform (cpu::rms_norm / cpu::swiglu) followed by dot_row. The fused kernel's x' differs
// from the CPU's by the rounding of the norm scale (float vs double sum of squares) and of expf, far
// under the matvec bound.
void run_fused_case(GgmlType t, const Shape& s, uint64_t seed, bool swiglu, bool accumulate, const std::string& what) {
  const auto w = test::random_weights(t, s.rows * s.cols, seed);
  // x with a large common scale (RMSNorm must remove it) / gate values across silu's range.
  const auto x = test::random_floats(s.cols, seed + 1, swiglu ? 1.f : 37.f);
  const auto aux = test::random_floats(s.cols, seed + 2, swiglu ? 4.f : 1.f);  // gate, or norm weights
  const auto y0 = test::random_floats(s.rows, seed + 3);
  std::vector<float> xt(s.cols);
  const float eps = 1e-6f;
  if (swiglu) {
    ops::SwigluParams p{1, s.cols};
    cpu::swiglu(p, aux.data(), x.data(), xt.data());
  } else {
    cpu::rms_norm(ops::RmsNormParams::packed(1, s.cols, eps), x.data(), aux.data(), xt.data());
  }
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto daux = test::to_device(aux);
  auto dscratch = cuda::DeviceBuffer::alloc(s.cols * 4);
  auto dy = cuda::DeviceBuffer::alloc(s.rows * 4);
  ASSERT_TRUE(dy.ok() && dscratch.ok());
  std::vector<float> init = accumulate ? y0 : std::vector<float>(s.rows, NAN);
  ASSERT_TRUE(dy->upload(init.data(), init.size() * 4).ok());
  cuda::MatvecInput in{dx.as<float>()};
  if (swiglu) in.gate = daux.as<float>();
  else { in.norm_w = daux.as<float>(); in.eps = eps; }
  auto st = cuda::matvec_fused(t, dw.data(), s.rows, s.cols, in, dy->as<float>(), dscratch->as<float>(), nullptr,
                               accumulate);
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = test::to_host<float>(*dy, s.rows);
  check_rows(t, w, s.rows, s.cols, xt.data(), y.data(), accumulate ? y0.data() : nullptr, s.rows > 2000 ? 7 : 1,
             what + (swiglu ? " swiglu" : " rms_norm") + (accumulate ? " accumulate " : " ") + s.what);
}

// At shape s with accumulate acc: run_case, then run_fused_case with RMSNorm and with SwiGLU (seeds advanced by 3,
// then 5 each), the variant tests' sweep.
void run_plain_and_fused(GgmlType t, const Shape& s, uint64_t& seed, bool acc, const std::string& name) {
  run_case(t, s, seed += 3, acc, name + (acc ? " accumulate" : ""));
  for (bool sw : {false, true}) run_fused_case(t, s, seed += 5, sw, acc, name);
}

TEST(CudaMatvec, FusedInputMatchesCpu) {
  DS_REQUIRE_GPU();
  const cuda::MatvecPath keep = cuda::matvec_path();
  const int keep_stages = cuda::matvec_async_stages();
  uint64_t seed = 7000;
  // Smem twice: the default kernel choice (cp.async ring kernel for Q6_K and small Q4_K), and with the
  // ring kernel off (the register-pipeline kernel with the same prologue).
  for (int variant = 0; variant < 4; variant++) {
    const cuda::MatvecPath p = variant == 0 ? cuda::MatvecPath::Auto
                               : variant == 3 ? cuda::MatvecPath::Direct
                                              : cuda::MatvecPath::Smem;
    cuda::set_matvec_path(p);
    cuda::set_matvec_async_stages(variant == 2 ? 0 : keep_stages);
    const std::string name = p == cuda::MatvecPath::Smem ? (variant == 2 ? "smem (no ring)" : "smem")
                             : p == cuda::MatvecPath::Direct ? "direct" : "auto";
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::BF16}) {
      if (p != cuda::MatvecPath::Auto && t != GgmlType::Q4_K && t != GgmlType::Q6_K) continue;
      std::vector<Shape> shapes = {
          {1027, 256, "one block per row, rows % 16 = 3"},
          {333, 1280, "5 blocks"},
          {4097, 4096, "odd rows, 9B width"},
          {21, 17408, "27B ffn width"},
          {2, 12288, "9B ffn width, one row pair"},
          {3, 25600, "widest x in shared memory"},
          {5, 25856, "x too wide: two-launch fallback"},
      };
      for (const Shape& s : shapes)
        for (bool sw : {false, true})
          for (bool acc : {false, true}) run_fused_case(t, s, seed += 5, sw, acc, name);
    }
  }
  cuda::set_matvec_path(keep);
  cuda::set_matvec_async_stages(keep_stages);
  // What the model relies on: the fused kernel is taken for Q4_K at every layer width, not silently the fallback.
  if (keep == cuda::MatvecPath::Auto) {
    EXPECT_TRUE(cuda::matvec_fuses(GgmlType::Q4_K, 12288, 4096));
    EXPECT_TRUE(cuda::matvec_fuses(GgmlType::Q4_K, 5120, 17408));
    EXPECT_TRUE(cuda::matvec_fuses(GgmlType::Q6_K, 4096, 12288));
    // 9B output head: direct kernel + norm, unless the tensor-core Q6_K path (DS_MATVEC_TC_Q6K=1) takes it.
    const cuda::MatvecTcTune tc = cuda::matvec_tc_tune();
    // With the streamed Q6_K kernel (decode7) by shape it is fused there too.
    EXPECT_EQ(cuda::matvec_fuses(GgmlType::Q6_K, 248320, 4096),
              (tc.on && tc.q6k) || cuda::matvec_stream_q6_takes(248320, 4096));
    EXPECT_FALSE(cuda::matvec_fuses(GgmlType::Q8_0, 4096, 4096));
  }
}

// The tensor-core Q4_K kernel (matvec_tc.cuh) under each tuning: 2 / 3 fp16 terms of x, warps per row
// group forced to 1 / 2 / 8 (8 on rows of fewer super-blocks falls back to a smaller power of two), plain,
// accumulating and fused. Prints the worst error per variant (the kernel's accuracy, relative to sum |w x|).
TEST(CudaMatvec, TensorCoreQ4KVariants) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  cuda::set_matvec_stream_tune({0});  // the register-fed tc kernel itself (StreamQ4KVariants: the streamed one)
  cuda::set_matvec_stream_q6_tune({0});  // and for Q6_K (StreamQ6KVariants: the streamed one)
  const std::vector<Shape> shapes = {
      {1027, 256, "one super-block, rows % 16 = 3"}, {333, 1280, "5 super-blocks"},
      {77, 3584, "0.8B ffn width"},                  {4097, 4096, "odd rows, 9B width"},
      {21, 17408, "27B ffn width"},                  {3, 25856, "wider than the older kernels take"},
  };
  uint64_t seed = 9100;
  // Q6_K (decode5): an odd number of super-blocks per row puts every other row's blocks at 2 mod 4
  // (the misaligned-load path, mixed within a warp); 4096 cols flips the alignment per super-block.
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
    for (int v = 0; v < 5; v++) {
      const cuda::MatvecTcTune tn{true, v == 1 ? 2 : 3, v == 2 ? 1 : v == 3 ? 2 : v == 4 ? 8 : 0, true};
      cuda::set_matvec_tc_tune(tn);
      const std::string name = std::string(cuda::type_cstr(type)) + " tc terms " + std::to_string(tn.terms) + " ks " +
                               std::to_string(tn.ks);
      g_worst_seen = 0;
      for (const Shape& s : shapes)
        for (bool acc : {false, true}) run_plain_and_fused(type, s, seed, acc, name);
      std::printf("[tc] %s: worst |y - ref| / sum|w x| = %.3g\n", name.c_str(), g_worst_seen);
    }
}

// s29: the stream kernels with 16 consumer warps (two groups taking alternate stages) must get an even stage count
// (mvq::even_stages; with an odd count a group could pass its parity wait on a stage still in flight and the producer
// hang: session 29's hangs of the Q6_K kB 2 kernel at 3 stages). Host only (the plans need no GPU): every row width up
// to 128 super-blocks, 1 / 2 / 4 x regions, the default tuning and odd stage counts asked for.
TEST(CudaMatvec, StreamPlanEvenStagesWith16Warps) {
  const cuda::MatvecStreamTune saved = cuda::matvec_stream_tune();
  const cuda::MatvecStreamQ6Tune saved6 = cuda::matvec_stream_q6_tune();
  int wide = 0;
  for (int asked : {0, 3, 5, 7}) {
    cuda::MatvecStreamTune tq = saved;
    cuda::MatvecStreamQ6Tune t6 = saved6;
    tq.stages = t6.stages = asked;
    cuda::set_matvec_stream_tune(tq);
    cuda::set_matvec_stream_q6_tune(t6);
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})
      for (int nb = 1; nb <= 128; nb++)
        for (int kB : {1, 2, 4}) {
          const cuda::MatvecStreamPlan p = cuda::matvec_stream_plan(t, 256 * nb, kB);
          if (p.warps != 16) continue;
          wide++;
          EXPECT_EQ(p.stages % 2, 0) << ggml_type_name(t) << " nb " << nb << " kB " << kB << " stages asked " << asked
                                     << ": " << p.stages << " stages for 16 consumer warps";
          EXPECT_GE(p.stages, 2);
        }
  }
  cuda::set_matvec_stream_tune(saved);
  cuda::set_matvec_stream_q6_tune(saved6);
  EXPECT_GT(wide, 100) << "16-warp plans exist at the default tuning (wide rows, 2 / 4 x regions)";
}

// The streamed Q4_K kernel (matvec_stream.cuh, decode6) forced on every shape it fits: rows not a multiple
// of 16, one / five / odd super-block counts, x wider than 2 CTAs per SM allow, plain / accumulate /
// RMSNorm / SwiGLU; integer and fp16 forms; ring variants that wrap the stages many times (kc 3, 2
// stages), one super-block per stage, 16 per stage on one CTA per SM, 2 fp16 terms of x, and one CTA per SM
// in half its shared memory (ctas -1, decode8; the full SM where x and 2 stages need more).
TEST(CudaMatvec, StreamQ4KVariants) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({
      {1027, 256, "one super-block, rows % 16 = 3"}, {333, 1280, "5 super-blocks"},
      {77, 3584, "0.8B ffn width"},                  {4097, 4096, "odd rows, 9B width"},
      {21, 17408, "27B ffn width"},                  {3, 25856, "101 super-blocks"},
      {2500, 12288, "9B ffn_down width"},
  });
  // wide (decode9, default): 16 consumer warps where the plan has one CTA per SM in the full SM (the int8 form:
  // 101 / 68 super-blocks by default, every shape with ctas 1); wide false: 8 there.
  // xoff: the staging of x before b1x16 (DS_MATVEC_STREAM_XONE=0; xone, the default, stages rows of <= 24 / 48
  // super-blocks in one round).
  struct V { int kc, stages, ctas, terms; bool i8, xoff = false, wide = true; };
  const V vs[] = {{8, 0, 0, 3, true},  {3, 2, 0, 3, true},  {1, 3, 2, 3, true}, {16, 0, 1, 3, true},
                  {8, 0, 0, 3, false}, {3, 2, 0, 2, false}, {16, 0, 1, 3, false},
                  {8, 0, 0, 3, true, true}, {3, 2, 0, 3, true, true},  // x staged as before xone
                  {8, 0, -1, 3, true}, {3, 2, -1, 3, true},  // one CTA per SM in half its shared memory
                  {16, 0, 1, 3, true, false, false}, {8, 0, 0, 3, true, false, false},  // 8 consumer warps
                  {3, 2, 1, 3, true}, {1, 3, 1, 3, true, true}};  // 16 warps: odd stage counts, kc 1, xoff
  uint64_t seed = 9700;
  int vi = 0;
  for (const V& v : vs) {
    if (!stream_part_takes(vi++)) continue;
    cuda::MatvecTcTune tc = keep.tc;
    tc.on = true;
    tc.terms = v.terms;
    cuda::set_matvec_tc_tune(tc);
    // one_cta_nb / xprep as set outside (default or env: the prepared x on the >= 32-super-block shapes)
    cuda::MatvecStreamTune q4 = q4_ring(keep.q4, v.kc, v.stages, v.ctas, v.wide);
    q4.i8 = v.i8;
    if (v.xoff) q4.xone = 0;
    cuda::set_matvec_stream_tune(q4);
    const std::string name = std::string(v.i8 ? "stream int8" : "stream fp16") + (v.xoff ? " xone off" : "") +
                             (v.wide ? "" : " 8 warps") +
                             " kc " + std::to_string(v.kc) +
                             " stages " + std::to_string(v.stages) + " ctas " + std::to_string(v.ctas) +
                             (v.i8 ? "" : " terms " + std::to_string(v.terms));
    g_worst_seen = 0;
    for (const Shape& s : shapes)
      for (bool acc : {false, true}) run_plain_and_fused(GgmlType::Q4_K, s, seed, acc, name);
    std::printf("[stream] %s: worst |y - ref| / sum|w x| = %.3g\n", name.c_str(), g_worst_seen);
  }
}

// The streamed Q6_K kernel (matvec_stream_q6.cuh, decode7) forced on every shape it fits: rows not a multiple
// of 16, 2 .. 100 super-blocks per row (rows whose 16-byte windows start at 0 / 4 / 8 / 12 mod 16: nb 14, 20,
// 68; blocks at 2 mod 4 in shared memory for odd kb), plain / accumulate / RMSNorm / SwiGLU; ring variants
// that wrap the stages many times (kc 2, 2 stages), chunks that are not a multiple of 8 super-blocks (kc 6,
// the warp map crossing chunk borders), 16 per stage on one CTA per SM, 2 CTAs per SM. Shapes with an odd
// number of super-blocks per row are not taken (the other kernels run them; checked here too).
TEST(CudaMatvec, StreamQ6KVariants) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({
      {1027, 512, "two super-blocks, rows % 16 = 3"}, {333, 1024, "0.8B width"},
      {77, 3584, "0.8B ffn width (rows 12 mod 16 bytes)"}, {4097, 4096, "odd rows, 9B width"},
      {21, 17408, "27B ffn width"},                   {515, 5120, "27B width"},
      {3, 25600, "100 super-blocks"},                 {2500, 12288, "9B ffn_down width"},
  });
  // wide (decode9, default): 16 consumer warps where the plan has one CTA per SM in the full SM (by default the
  // 12288 / 17408 / 25600-wide rows; every shape with ctas 1); wide false: 8 there.
  struct V { int kc, stages, ctas; bool xoff = false, wide = true; };  // xoff: DS_MATVEC_STREAM_XONE=0's staging
  const V vs[] = {{0, 0, 0}, {2, 2, 0}, {6, 3, 0}, {16, 0, 1}, {4, 0, 2}, {0, 0, 0, true}, {2, 2, 0, true},
                  {0, 0, -1}, {2, 2, -1},  // ctas -1: one CTA per SM in half its shared memory (decode8)
                  {0, 0, 0, false, false}, {16, 0, 1, false, false},  // 8 consumer warps
                  {2, 3, 1}, {6, 0, 1, true}, {0, 0, 1}};  // 16 warps: odd stage count, kc 6, xoff
  uint64_t seed = 9900;
  int vi = 0;
  for (const V& v : vs) {
    if (!stream_part_takes(vi++)) continue;
    cuda::MatvecStreamTune q4 = keep.q4;
    if (v.xoff) q4.xone = 0;  // the staging switch is shared with the Q4_K stream kernel
    cuda::set_matvec_stream_tune(q4);
    cuda::MatvecStreamQ6Tune q6{1, v.kc, v.stages, v.ctas, v.wide};
    q6.lean = keep.q6.lean;  // DS_MATVEC_STREAM_Q6K_LEAN (q6i19)
    cuda::set_matvec_stream_q6_tune(q6);
    const std::string name = std::string("stream Q6_K") + (v.xoff ? " xone off" : "") + (v.wide ? "" : " 8 warps") + " kc " +
                             std::to_string(v.kc) + " stages " + std::to_string(v.stages) + " ctas " +
                             std::to_string(v.ctas);
    g_worst_seen = 0;
    for (const Shape& s : shapes) {
      if (!cuda::matvec_stream_q6_takes(s.rows, s.cols)) {
        // Only a forced CTA count / chunk size may refuse (x + the stages do not fit); the default takes all.
        EXPECT_TRUE(v.kc != 0 || v.ctas != 0) << name << " does not take [" << s.rows << " x " << s.cols << "]";
        continue;
      }
      for (bool acc : {false, true}) run_plain_and_fused(GgmlType::Q6_K, s, seed, acc, name);
    }
    std::printf("[stream q6] %s: worst |y - ref| / sum|w x| = %.3g\n", name.c_str(), g_worst_seen);
    EXPECT_LE(g_worst_seen, 1e-6) << name << ": the int8-digit split of x is exact, only fp32 rounding remains";
    EXPECT_FALSE(cuda::matvec_stream_q6_takes(333, 1280)) << "odd super-blocks per row";
    run_case(GgmlType::Q6_K, {333, 1280, "5 super-blocks (not taken)"}, seed += 3, true, name);
  }
  cuda::set_matvec_stream_q6_tune({0});
  EXPECT_FALSE(cuda::matvec_stream_q6_takes(4096, 12288)) << "DS_MATVEC_STREAM_Q6K=0";
}

// The L2 prefetch hint (set_matvec_next, decode8): with prefetch on, the streamed Q4_K / Q6_K kernels prefetch
// the start of another buffer at their end; results must not change, for hints larger and smaller than the
// prefetch size and one too small to give every CTA a piece (no prefetch then).
TEST(CudaMatvec, StreamPrefetchHint) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  cuda::set_matvec_stream_q6_tune({1});
  auto next = cuda::DeviceBuffer::alloc(24u << 20);
  ASSERT_TRUE(next.ok());
  const std::vector<Shape> shapes =
      stream_shapes({{4097, 4096, "odd rows, 9B width"}, {2500, 12288, "9B ffn_down width"}});
  uint64_t seed = 12100;
  for (int kb : {4096, 16384})
    for (size_t hint : {(size_t)24 << 20, (size_t)1 << 20, (size_t)4096}) {
      cuda::MatvecStreamTune q4 = keep.q4;
      q4.mode = 1;
      q4.prefetch_kb = kb;
      cuda::set_matvec_stream_tune(q4);
      const std::string name = "prefetch " + std::to_string(kb) + " KB of a " + std::to_string(hint) + "-byte hint";
      for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
        for (const Shape& s : shapes) {
          cuda::set_matvec_next(next->data(), hint);
          run_case(type, s, seed += 3, true, name);
          cuda::set_matvec_next(next->data(), hint);
          run_fused_case(type, s, seed += 5, true, false, name);
        }
    }
  cuda::set_matvec_next(nullptr, 0);
}

// The 16-consumer-warp form of both streamed kernels (decode9) on a few small shapes, one CTA per SM forced
// (kept small for compute-sanitizer memcheck): plain / accumulate / RMSNorm / SwiGLU, rows % 16 != 0, fewer row
// groups than SMs, the 9B / 27B ffn_down widths, odd stage counts.
TEST(CudaMatvec, StreamWideSmall) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({{77, 12288, "9B ffn_down width"}, {21, 17408, "27B ffn_down width"},
                                     {300, 4096, "9B width"}});
  uint64_t seed = 12900;
  for (int stages : {0, 3}) {
    cuda::MatvecStreamTune q4 = q4_ring(keep.q4, 8, stages, 1, true);
    q4.i8 = true;
    cuda::set_matvec_stream_tune(q4);
    cuda::set_matvec_stream_q6_tune({1, 0, stages, 1, true});
    const std::string name = "16 warps, stages " + std::to_string(stages);
    g_worst_seen = 0;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
      for (const Shape& s : shapes) {
        run_case(type, s, seed += 3, stages == 0, name);
        run_fused_case(type, s, seed += 5, stages == 0, stages != 0, name);
      }
    std::printf("[stream wide] %s: worst |y - ref| / sum|w x| = %.3g\n", name.c_str(), g_worst_seen);
    EXPECT_LE(g_worst_seen, 1e-6) << name;
  }
}

// Activations with outliers and a zero super-block (per-super-block scaling must neither overflow nor lose the
// small values): x = random * 10^(-6 .. 4) per element, super-block 1 all zero, one 3e4 and one -1e-30. Runs
// cuda::matvec on [515 x 4096] of `type` under the current tuning, checks every row against the CPU (check_rows)
// and returns the worst error relative to sum|w x|; with nan_check, a NaN put into x must then reach every row.
namespace {
double wide_range_case(GgmlType type, uint64_t seed, const std::string& what, bool nan_check = false) {
  const int64_t rows = 515, cols = 4096;
  const auto w = test::random_weights(type, rows * cols, seed);
  auto x = test::random_floats(cols, seed + 1);
  for (int64_t i = 0; i < cols; i++) x[i] *= std::pow(10.f, (float)((i * 7919) % 11) - 6.f);
  for (int64_t i = 256; i < 512; i++) x[i] = 0.f;
  x[1000] = 3.0e4f;
  x[2000] = -1.0e-30f;
  auto dw = test::to_device(w);
  auto dx = test::to_device(x);
  auto dy = cuda::DeviceBuffer::alloc(rows * 4);
  EXPECT_TRUE(dy.ok());
  if (!dy.ok()) return 1.0;
  auto st = cuda::matvec(type, dw.data(), rows, cols, dx.as<float>(), dy->as<float>(), nullptr);
  EXPECT_TRUE(st.ok()) << what << ": " << (st.ok() ? "" : st.error().message);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const auto y = test::to_host<float>(*dy, rows);
  g_worst_seen = 0;
  check_rows(type, w, rows, cols, x.data(), y.data(), nullptr, 1, what);
  if (nan_check) {  // as in fp32: not a finite value
    x[3000] = NAN;
    auto dx2 = test::to_device(x);
    EXPECT_TRUE(cuda::matvec(type, dw.data(), rows, cols, dx2.as<float>(), dy->as<float>(), nullptr).ok()) << what;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const auto yn = test::to_host<float>(*dy, rows);
    for (int64_t r = 0; r < rows; r += 57) EXPECT_TRUE(std::isnan(yn[r])) << what << ": NaN in x, row " << r;
  }
  return g_worst_seen;
}

}  // namespace

TEST(CudaMatvec, TensorCoreQ4KWideRangeX) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
    for (int terms : {2, 3}) {
      cuda::set_matvec_tc_tune({true, terms, 0, true});
      const double e = wide_range_case(type, 77 + terms, "wide-range x, terms " + std::to_string(terms));
      std::printf("[tc] %s wide-range x, terms %d: worst %.3g\n", cuda::type_cstr(type), terms, e);
    }
  cuda::set_matvec_tc_tune(keep.tc);
  {  // the streamed kernel's integer form (4 int8 digits of x per super-block)
    cuda::set_matvec_stream_tune({1});
    const double e = wide_range_case(GgmlType::Q4_K, 79, "wide-range x, stream int8");
    std::printf("[stream] Q4_K wide-range x, int8 digits: worst %.3g\n", e);
    cuda::set_matvec_stream_tune(keep.q4);
  }
  {  // the streamed Q6_K kernel (4 int8 digits of x per super-block; odd super-blocks at 2 mod 4)
    cuda::set_matvec_stream_q6_tune({1});
    EXPECT_TRUE(cuda::matvec_stream_q6_takes(515, 4096));
    const double e = wide_range_case(GgmlType::Q6_K, 81, "wide-range x, stream Q6_K", true);
    std::printf("[stream q6] Q6_K wide-range x, int8 digits: worst %.3g\n", e);
    EXPECT_LE(e, 1e-6) << "the int8-digit split of x is exact";
  }
}

// decode10: x prepared once per product in global memory (xprep_kernel) and copied by each CTA of both streamed
// kernels (DS_MATVEC_STREAM_XPREP): plain / accumulate / RMSNorm / SwiGLU at awkward shapes (1, 2, 10, 16, 48,
// 68 super-blocks: one or several prep CTAs, partial last CTA), with the default plans (2 CTAs x 8 warps, one CTA x
// 16) and one CTA x 16 forced, and the wide-range x case (zero super-block, outliers, NaN) of both kernels.
TEST(CudaMatvec, StreamXprep) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({{77, 12288, "9B ffn_down width"}, {21, 17408, "27B ffn_down width"},
                                     {4097, 4096, "4096 + 1 rows"},   {300, 2560, "10 super-blocks"},
                                     {35, 512, "2 super-blocks"},     {19, 256, "1 super-block"}});
  uint64_t seed = 13100;
  for (int forced : {0, 1}) {
    cuda::MatvecStreamTune q4 = q4_ring(keep.q4, 0, 0, forced, true);
    q4.i8 = true;
    q4.xprep = 1;
    cuda::set_matvec_stream_tune(q4);
    cuda::set_matvec_stream_q6_tune({1, 0, 0, forced, true});
    const std::string name = std::string("xprep, ") + (forced ? "one CTA x 16 forced" : "default plans");
    g_worst_seen = 0;
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
      for (const Shape& s : shapes) {
        run_case(type, s, seed += 3, false, name);
        run_case(type, s, seed += 3, true, name);
        run_fused_case(type, s, seed += 5, false, false, name);
        run_fused_case(type, s, seed += 5, true, true, name);
      }
    std::printf("[stream xprep] %s: worst |y - ref| / sum|w x| = %.3g\n", name.c_str(), g_worst_seen);
    EXPECT_LE(g_worst_seen, 1e-6) << name;
    if (!forced) {
      for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
        const double e = wide_range_case(type, 83, "wide-range x, xprep", true);
        std::printf("[stream xprep] %s wide-range x: worst %.3g\n", cuda::type_cstr(type), e);
        EXPECT_LE(e, 1e-6) << "the int8-digit split of x is exact";
      }
    }
  }
}

// The inputs of the stream same-bits tests (StreamQ6KLeanSameBits, StreamXoneSameBits) at shape s: random weights of
// `type` (seed), x, RMSNorm weights, SwiGLU gate, the accumulate start y0 (seed + 1 .. + 4), the CPU's RMSNorm / SwiGLU
// x for the references, their device copies and a y buffer (empty when not allocated).
struct StreamInputs {
  static constexpr float kEps = 1e-6f;
  GgmlType type;
  Shape s;
  std::vector<uint8_t> w;
  std::vector<float> x, norm_w, gate, y0, xn, xg, nans;
  cuda::DeviceBuffer dw, dx, dn, dg, dy;

  StreamInputs(GgmlType t, const Shape& shape, uint64_t seed)
      : type(t), s(shape), w(test::random_weights(t, shape.rows * shape.cols, seed)),
        x(test::random_floats(shape.cols, seed + 1, 5.f)), norm_w(test::random_floats(shape.cols, seed + 2)),
        gate(test::random_floats(shape.cols, seed + 3, 4.f)), y0(test::random_floats(shape.rows, seed + 4)),
        xn(shape.cols), xg(shape.cols), nans(shape.rows, NAN) {
    cpu::rms_norm(ops::RmsNormParams::packed(1, s.cols, kEps), x.data(), norm_w.data(), xn.data());
    cpu::swiglu(ops::SwigluParams{1, s.cols}, gate.data(), x.data(), xg.data());
    dw = test::to_device(w);
    dx = test::to_device(x);
    dn = test::to_device(norm_w);
    dg = test::to_device(gate);
    auto y = cuda::DeviceBuffer::alloc(s.rows * 4);
    EXPECT_TRUE(y.ok());
    if (y.ok()) dy = std::move(*y);
  }
  // The x that product `pro` (0 plain, 1 RMSNorm, 2 SwiGLU) multiplies, for the CPU reference.
  const float* ref_x(int pro) const { return pro == 1 ? xn.data() : pro == 2 ? xg.data() : x.data(); }
  // One cuda::matvec_fused product under the current tuning: y = W x' (+ y0 with acc; y starts as NaN without).
  void product(int pro, bool acc, std::vector<float>& y) {
    ASSERT_TRUE(dy.upload(acc ? y0.data() : nans.data(), s.rows * 4).ok());
    cuda::MatvecInput in{dx.as<float>()};
    if (pro == 1) { in.norm_w = dn.as<float>(); in.eps = kEps; }
    if (pro == 2) in.gate = dg.as<float>();
    const Status st = cuda::matvec_fused(type, dw.data(), s.rows, s.cols, in, dy.as<float>(), nullptr, nullptr, acc);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    y = test::to_host<float>(dy, s.rows);
  }
  // y of product (pro, acc) against the CPU (check_rows; every 7th row of the large shapes).
  void check(int pro, bool acc, const std::vector<float>& y, const std::string& what) const {
    check_rows(type, w, s.rows, s.cols, ref_x(pro), y.data(), acc ? y0.data() : nullptr, s.rows > 2000 ? 7 : 1, what);
  }
  // " rms_norm accumulate <shape>" and the like.
  std::string what(int pro, bool acc) const {
    return std::string(pro == 1 ? " rms_norm" : pro == 2 ? " swiglu" : " plain") + (acc ? " accumulate " : " ") +
           s.what;
  }
};

// q6i19: the Q6_K stream kernel's lean form (Tune::lean, the default since q6i19; DS_MATVEC_STREAM_Q6K_LEAN=0 off: ring
// slot / phase counters, 32-bit window offsets) against the form it replaced (lean false): bit-identical y in every
// product, and the lean y against the CPU. The 9B / 27B ffn_down shapes and smaller / odd ones (1, 5, 14, 16, 68, 100
// super-blocks; rows % 16 != 0; odd blocks at 2 mod 4 where the rows' byte counts are odd multiples of 2), plain /
// RMSNorm / SwiGLU (the prepared x at >= 32 super-blocks), accumulate; the default plan, one CTA x 16 warps forced, 3 and
// 2 stages (the counters wrap many times), 8 warps (wide off), two CTAs per SM. DS_TEST_STREAM_PART shards the shapes.
TEST(CudaMatvec, StreamQ6KLeanSameBits) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({{4096, 12288, "9B ffn_down (48 super-blocks)"},
                                                   {5120, 17408, "27B ffn_down (68)"},
                                                   {1027, 256, "one super-block, rows % 16 = 3"},
                                                   {333, 1280, "5 super-blocks"},
                                                   {77, 3584, "0.8B ffn width"},
                                                   {4097, 4096, "odd rows, 9B width"},
                                                   {3, 25600, "100 super-blocks"},
                                                   {515, 17408, "27B ffn width, rows % 16 = 3"}});
  struct V { int stages, ctas; bool wide; };
  const V vs[] = {{0, 0, true}, {0, 1, true}, {3, 1, true}, {2, 1, true}, {0, 0, false}, {2, 2, true}};
  uint64_t seed = 19600;
  size_t products = 0, differ = 0;
  g_worst_seen = 0;
  int part = 0;
  for (const Shape& s : shapes) {
    if (!stream_part_takes(part++)) continue;
    StreamInputs in(GgmlType::Q6_K, s, seed += 7);
    ASSERT_FALSE(in.dy.empty());
    for (const V& v : vs)
      for (int pro = 0; pro < 3; pro++)
        for (bool acc : {false, true}) {
          std::vector<float> ys[2];
          bool ran = true;
          for (int lean = 0; lean < 2 && ran; lean++) {
            cuda::MatvecStreamQ6Tune q6{1, 0, v.stages, v.ctas, v.wide};
            q6.lean = lean == 1;
            cuda::set_matvec_stream_q6_tune(q6);
            ran = cuda::matvec_stream_q6_takes(s.rows, s.cols);  // e.g. two CTAs per SM: not for the widest rows
            if (!ran) break;
            ASSERT_NO_FATAL_FAILURE(in.product(pro, acc, ys[lean]));
          }
          if (!ran) continue;
          const std::string what = std::string("stages ") + std::to_string(v.stages) + " ctas " +
                                   std::to_string(v.ctas) + (v.wide ? "" : " 8 warps") + in.what(pro, acc);
          products++;
          const bool same = std::memcmp(ys[0].data(), ys[1].data(), s.rows * 4) == 0;
          differ += !same;
          EXPECT_TRUE(same) << what << ": lean and non-lean differ";
          in.check(pro, acc, ys[1], what + " lean");
        }
  }
  EXPECT_GT(products, 0u);
  std::printf("[stream q6 lean] %zu lean products compared with the non-lean form, %zu not bit-identical; "
              "worst |y - ref| / sum|w x| = %.3g\n", products, differ, g_worst_seen);
}

// b1x16: the one-round staging of x (DS_MATVEC_STREAM_XONE, both stream kernels: norm weights loaded before
// griddepcontrol.wait, x / gate / x^2 loads issued together, Q4_K digits by PRMT) against the staging it replaces:
// every product with xone 0, 1 and 2; xone 1 must give the same bits, xone 2 too except with RMSNorm (its factor from
// the staging's own loads, another summation order: the largest |y2 - y0| / sum|w x| is printed); xone 1 and 2 against
// the CPU. 1 .. 48 super-blocks per row (1, 2 and 3 per consumer warp; 48 on 16 warps with the prepared x off),
// plain / RMSNorm / SwiGLU, accumulate, the default plans and one CTA x 16 warps forced; the wide-range x case (zero
// super-block, outliers, NaN) under xone 1 and 2. DS_TEST_STREAM_PART shards the (type, shape) pairs and the two
// wide-range runs.
TEST(CudaMatvec, StreamXoneSameBits) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({{1027, 256, "1 super-block"}, {333, 1024, "4 super-blocks"},
                                                   {77, 2560, "10 super-blocks"}, {250, 3584, "14 super-blocks"},
                                                   {60, 4096, "16 super-blocks"}, {4097, 4096, "odd rows, 9B width"},
                                                   {100, 5120, "20 super-blocks"}, {130, 6144, "24 super-blocks"},
                                                   {77, 12288, "48 super-blocks"}});
  const auto set_xone = [&](int mode, int ctas) {
    cuda::MatvecStreamTune q4 = q4_ring(keep.q4, 0, 0, ctas, true);
    q4.i8 = true;
    q4.xprep = 0;  // x staged in the kernel at every width
    q4.xone = mode;
    cuda::set_matvec_stream_tune(q4);
    cuda::set_matvec_stream_q6_tune({1, 0, 0, ctas, true});
  };
  uint64_t seed = 16100;
  size_t products = 0, differ = 0;
  double worst_rms2 = 0;  // xone 2 with RMSNorm: the largest |y2 - y0| / sum|w x|
  int part = 0;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
    for (const Shape& s : shapes) {
      if (!stream_part_takes(part++)) continue;
      set_xone(0, 0);
      if (type == GgmlType::Q6_K && !cuda::matvec_stream_q6_takes(s.rows, s.cols)) continue;  // odd super-blocks
      StreamInputs in(type, s, seed += 7);
      std::vector<double> mag(s.rows);  // sum |w x'| per row with RMSNorm
      {
        std::vector<float> scratch;
        const uint64_t rb = ggml_row_bytes(*ggml_type_info(type), s.cols);
        for (int64_t r = 0; r < s.rows; r++)
          mag[r] = ref_row(type, in.w.data() + r * rb, in.xn.data(), s.cols, scratch).second;
      }
      ASSERT_FALSE(in.dy.empty());
      for (int ctas : {0, 1})
        for (int pro = 0; pro < 3; pro++)
          for (bool acc : {false, true}) {
            std::vector<float> ys[3];
            for (int mode = 0; mode < 3; mode++) {
              set_xone(mode, ctas);
              ASSERT_NO_FATAL_FAILURE(in.product(pro, acc, ys[mode]));
            }
            const std::string what =
                std::string(cuda::type_cstr(type)) + " ctas " + std::to_string(ctas) + in.what(pro, acc);
            for (int mode = 1; mode < 3; mode++) {
              products++;
              const bool same = std::memcmp(ys[0].data(), ys[mode].data(), s.rows * 4) == 0;
              differ += !same;
              if (mode == 1 || pro != 1) {
                EXPECT_TRUE(same) << what << ": xone " << mode << " and 0 differ";
              }
              if (mode == 2 && pro == 1)
                for (int64_t r = 0; r < s.rows; r++)
                  worst_rms2 = std::max(worst_rms2, std::fabs((double)ys[2][r] - ys[0][r]) / std::max(mag[r], 1e-30));
              in.check(pro, acc, ys[mode], what + " xone " + std::to_string(mode));
            }
          }
    }
  std::printf("[stream xone] %zu products (xone 1 and 2), %zu not bit-identical to xone 0; xone 2 with RMSNorm: "
              "worst |y2 - y0| / sum|w x| = %.3g\n", products, differ, worst_rms2);
  for (int mode = 1; mode < 3; mode++) {
    if (!stream_part_takes(part++)) continue;
    cuda::MatvecStreamTune q4 = keep.q4;
    q4.mode = 1;
    q4.xone = mode;
    cuda::set_matvec_stream_tune(q4);
    cuda::set_matvec_stream_q6_tune({1});
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K}) {
      const double e = wide_range_case(type, 85, "wide-range x, xone " + std::to_string(mode), true);
      std::printf("[stream xone] %s xone %d wide-range x: worst %.3g\n", cuda::type_cstr(type), mode, e);
      EXPECT_LE(e, 1e-6) << "the int8-digit split of x is exact";
    }
  }
}

// decode11: the ordering of the prepared x (xprep_kernel's stores, then the stream kernel's bulk copies of them)
// in the pattern that failed on the H200 in session 9: a product WITH a prepared x right after one WITHOUT (the
// prep kernel's code and x cold, so the stream kernel reaches griddepcontrol.wait long before the prep is done),
// on the 27B / 9B ffn_down widths, Q4_K and Q6_K, in the ring variants that failed then. Each product gets a fresh
// x buffer with one of 3 vectors per shape, so stale data of an earlier product (in either buffer) differs from
// the right one; references computed once. Iterations: DS_TEST_XPREP_ITERS (default 6 rounds), or
// DS_TEST_XPREP_SECONDS of rounds (device repro runs); DS_TEST_XPREP_SMALL=1: [21 x 17408] Q4_K only (sanitizers;
// the other stream tests take DS_TEST_STREAM_SMALL=1, stream_shapes).
// Counts the products over the tolerance and prints them; expects none.
TEST(CudaMatvec, StreamXprepOrdering) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const char* small_env = std::getenv("DS_TEST_XPREP_SMALL");
  const bool small = small_env && small_env[0] == '1';
  struct Case {
    GgmlType type;
    Shape s;
    std::vector<uint8_t> w;
    cuda::DeviceBuffer dw;
    std::vector<int64_t> rows;                 // the checked rows
    std::vector<std::vector<double>> ref, mag;  // per x vector, per checked row
    std::vector<std::vector<float>> xs;
  };
  std::vector<Case> cases;
  std::vector<std::pair<GgmlType, Shape>> list = {{GgmlType::Q4_K, {21, 17408, "27B ffn_down width"}}};
  if (!small) {
    list.push_back({GgmlType::Q4_K, {2500, 12288, "9B ffn_down width"}});
    list.push_back({GgmlType::Q6_K, {21, 17408, "27B ffn_down width"}});
    list.push_back({GgmlType::Q6_K, {2500, 12288, "9B ffn_down width"}});
  }
  uint64_t seed = 14100;
  for (auto& [type, s] : list) {
    Case c{type, s, test::random_weights(type, s.rows * s.cols, seed += 7), {}, {}, {}, {}, {}};
    c.dw = test::to_device(c.w);
    const uint64_t rb = ggml_row_bytes(*ggml_type_info(type), s.cols);
    for (int64_t r = 0; r < s.rows; r += s.rows > 2000 ? 7 : 1) c.rows.push_back(r);
    std::vector<float> scratch;
    for (int k = 0; k < 3; k++) {
      c.xs.push_back(test::random_floats(s.cols, seed += 7));
      c.ref.emplace_back();
      c.mag.emplace_back();
      for (int64_t r : c.rows) {
        auto [ref, mag] = ref_row(type, c.w.data() + r * rb, c.xs[k].data(), s.cols, scratch);
        c.ref[k].push_back(ref);
        c.mag[k].push_back(mag);
      }
    }
    cases.push_back(std::move(c));
  }
  // A product without a prepared x before each one with it: Q4_K / Q6_K [300 x 4096] (16 super-blocks).
  const Shape spacer{300, 4096, "spacer"};
  std::vector<cuda::DeviceBuffer> spacer_w;
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K})
    spacer_w.push_back(test::to_device(test::random_weights(type, spacer.rows * spacer.cols, seed += 7)));
  auto spacer_x = test::to_device(test::random_floats(spacer.cols, seed += 7));
  auto spacer_y = cuda::DeviceBuffer::alloc(spacer.rows * 4);
  ASSERT_TRUE(spacer_y.ok());
  // Q4_K ring variants {kc, stages, ctas, wide} (session 9's failures: kc 3 / 2 stages, kc 1 / 3 stages, 8 warps).
  struct V { int kc, stages, ctas; bool wide; };
  const V v4[] = {{3, 2, 0, true}, {1, 3, 2, true}, {8, 0, 0, false}, {0, 0, 0, true}};
  const V v6[] = {{0, 0, 0, true}, {2, 2, 0, true}};
  const char* it_env = std::getenv("DS_TEST_XPREP_ITERS");
  const char* sec_env = std::getenv("DS_TEST_XPREP_SECONDS");
  const int64_t iters = it_env ? std::max(1, std::atoi(it_env)) : 6;
  const double seconds = sec_env ? std::atof(sec_env) : 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t products = 0, bad = 0;
  double worst = 0;
  std::map<std::string, int64_t> bad_by;
  for (int64_t it = 0;; it++) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (seconds > 0 ? el >= seconds : it >= iters) break;
    for (Case& c : cases) {
      const bool q6 = c.type == GgmlType::Q6_K;
      const V v = q6 ? v6[it % 2] : v4[it % 4];
      cuda::MatvecStreamTune q4 = q6 ? keep.q4 : q4_ring(keep.q4, v.kc, v.stages, v.ctas, v.wide);
      q4.mode = 1;
      q4.i8 = true;
      q4.xprep = 32;
      q4.xprep_q6k = -1;
      cuda::set_matvec_stream_tune(q4);
      cuda::set_matvec_stream_q6_tune(q6 ? cuda::MatvecStreamQ6Tune{1, v.kc, v.stages, v.ctas, v.wide}
                                         : cuda::MatvecStreamQ6Tune{1});
      // The spacer (no prepared x: 16 super-blocks < 32), then a fresh x and y, then the product.
      ASSERT_TRUE(cuda::matvec(c.type, spacer_w[q6 ? 1 : 0].data(), spacer.rows, spacer.cols, spacer_x.as<float>(),
                               spacer_y->as<float>(), nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const int k = (int)(it % 3);
      auto dx = test::to_device(c.xs[k]);
      auto dy = cuda::DeviceBuffer::alloc(c.s.rows * 4);
      ASSERT_TRUE(dy.ok());
      const std::vector<float> nan(c.s.rows, NAN);
      ASSERT_TRUE(dy->upload(nan.data(), nan.size() * 4).ok());
      auto st = cuda::matvec(c.type, c.dw.data(), c.s.rows, c.s.cols, dx.as<float>(), dy->as<float>(), nullptr);
      ASSERT_TRUE(st.ok()) << st.error().message;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto y = test::to_host<float>(*dy, c.s.rows);
      double e = 0;
      for (size_t i = 0; i < c.rows.size(); i++) {
        const double ei = std::fabs(y[c.rows[i]] - c.ref[k][i]) / std::max(c.mag[k][i], 1e-30);
        e = std::isnan(ei) ? INFINITY : std::max(e, ei);
      }
      products++;
      worst = std::max(worst, e);
      if (e > kTol.at(c.type)) {
        bad++;
        const std::string key = std::string(cuda::type_cstr(c.type)) + " [" + std::to_string(c.s.rows) + " x " +
                                std::to_string(c.s.cols) + "] kc " + std::to_string(v.kc) + " stages " +
                                std::to_string(v.stages) + " ctas " + std::to_string(v.ctas) +
                                (v.wide ? "" : " 8 warps");
        if (bad_by[key]++ < 3) std::printf("[xprep ordering] over tolerance: %s: %.3g\n", key.c_str(), e);
      }
    }
  }
  std::printf("[xprep ordering] %lld products, %lld over tolerance, worst %.3g\n", (long long)products,
              (long long)bad, worst);
  for (const auto& [key, n] : bad_by) std::printf("[xprep ordering]   %s: %lld\n", key.c_str(), (long long)n);
  EXPECT_EQ(bad, 0) << "prepared-x products over the tolerance (stale prepared x?)";
}

// dec15: where the time of the short batch-1 products goes. Two 9B layers' products (in_proj [8192 x 4096] RMSNorm,
// ssm_out [4096 x 4096], ffn_gate_up [24576 x 4096] RMSNorm, ffn_down [4096 x 12288] SwiGLU, Q6_K in the first layer
// and Q4_K in the second; 239 MB of weights, past L2) in the forward's launch order with its prefetch hints, captured
// into a graph with the launches' PDL edges, replayed; set_matvec_probe's stamps of the last replay give per product
// (medians over CTAs, us): the CTAs' start relative to the previous product's last store, griddepcontrol.wait, x
// staging, the first / last stage's landing, the tail (last landing to the store), and the span at TB/s. The stamps
// must be complete and ordered, and every product must match the CPU reference. DS_TEST_TIMELINE_REPS: replays (20).
// b1x18: each ffn_down's input is its ffn_gate_up's output (gate = y, x = y + 12288, read from L2 as in the model).
TEST(CudaMatvec, StreamTimeline) {
  DS_REQUIRE_GPU();
  struct P { GgmlType type; Shape s; int pro; };  // pro 0 plain, 1 RMSNorm, 2 SwiGLU
  const P ps[] = {{GgmlType::Q4_K, {8192, 4096, "in_proj"}, 1},     {GgmlType::Q4_K, {4096, 4096, "ssm_out"}, 0},
                  {GgmlType::Q4_K, {24576, 4096, "ffn_gate_up"}, 1}, {GgmlType::Q6_K, {4096, 12288, "ffn_down q6"}, 2},
                  {GgmlType::Q4_K, {8192, 4096, "in_proj"}, 1},     {GgmlType::Q4_K, {4096, 4096, "ssm_out"}, 0},
                  {GgmlType::Q4_K, {24576, 4096, "ffn_gate_up"}, 1}, {GgmlType::Q4_K, {4096, 12288, "ffn_down q4"}, 2}};
  constexpr int kN = 8;
  const float eps = 1e-6f;
  std::vector<std::vector<uint8_t>> w(kN);
  std::vector<std::vector<float>> xt(kN);  // the transformed input (reference)
  std::vector<cuda::DeviceBuffer> dw, dx, daux, dy;
  auto scratch_r = cuda::DeviceBuffer::alloc(12288 * 4);
  ASSERT_TRUE(scratch_r.ok());
  cuda::DeviceBuffer scratch = std::move(*scratch_r);
  double bytes_all = 0;
  uint64_t seed = 15100;
  for (int i = 0; i < kN; i++) {
    const P& p = ps[i];
    w[i] = test::random_weights(p.type, p.s.rows * p.s.cols, seed += 7);
    bytes_all += (double)w[i].size();
    const auto x = test::random_floats(p.s.cols, seed + 1, p.pro == 2 ? 1.f : 5.f);
    const auto aux = test::random_floats(p.s.cols, seed + 2, p.pro == 2 ? 4.f : 1.f);
    xt[i].resize(p.s.cols);
    if (p.pro == 2) cpu::swiglu(ops::SwigluParams{1, p.s.cols}, aux.data(), x.data(), xt[i].data());
    else if (p.pro == 1) cpu::rms_norm(ops::RmsNormParams::packed(1, p.s.cols, eps), x.data(), aux.data(), xt[i].data());
    else xt[i] = x;
    dw.push_back(test::to_device(w[i]));
    dx.push_back(test::to_device(x));
    daux.push_back(test::to_device(aux));
    auto y = cuda::DeviceBuffer::alloc(p.s.rows * 4);
    ASSERT_TRUE(y.ok());
    dy.push_back(std::move(*y));
  }
  const size_t stamps = 8u << 20;
  auto probe = cuda::DeviceBuffer::alloc(stamps * 8);
  ASSERT_TRUE(probe.ok());
  ASSERT_EQ(cudaMemset(probe->data(), 0, stamps * 8), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const auto launch_all = [&]() -> Status {
    for (int i = 0; i < kN; i++) {
      const int n = (i + 1) % kN;
      cuda::set_matvec_next(dw[n].data(), w[n].size());
      cuda::MatvecInput in{dx[i].as<float>()};
      if (ps[i].pro == 2) {  // SwiGLU of the gate/up product before
        in.gate = dy[i - 1].as<float>();
        in.x = in.gate + ps[i].s.cols;
      }
      if (ps[i].pro == 1) { in.norm_w = daux[i].as<float>(); in.eps = eps; }
      Status r = cuda::matvec_fused(ps[i].type, dw[i].data(), ps[i].s.rows, ps[i].s.cols, in, dy[i].as<float>(),
                                    scratch.as<float>(), st, false);
      cuda::set_matvec_next(nullptr, 0);
      if (!r.ok()) return r;
    }
    return {};
  };
  ASSERT_TRUE(launch_all().ok());  // warm-up (module load, attributes) outside the capture
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cuda::set_matvec_probe(probe->as<uint64_t>(), stamps);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status cap = launch_all();
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  ASSERT_TRUE(cap.ok()) << cap.error().message;
  const auto log = cuda::matvec_probe_log();
  cuda::set_matvec_probe(nullptr, 0);
  ASSERT_EQ(log.size(), (size_t)kN) << "every product on a streamed kernel";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const char* re = std::getenv("DS_TEST_TIMELINE_REPS");
  const int reps = re ? std::max(2, std::atoi(re)) : 20;
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e0, st), cudaSuccess);
  for (int r = 1; r < reps; r++) ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e1, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
  const double us_rep = 1e3 * ms / (reps - 1);
  std::printf("[timeline] %d products, %.1f MB: %.2f us per replay = %.2f TB/s (graph, %d replays)\n", kN,
              bytes_all / 1e6, us_rep, bytes_all / (us_rep * 1e-6) / 1e12, reps - 1);
  const auto stv = test::to_host<uint64_t>(*probe, stamps);
  const auto med = [](std::vector<double> v) {
    if (v.empty()) return (double)NAN;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // A stamp multiple of 1000 ns everywhere: the timer ticks in microseconds (then single stamps mean little).
  size_t whole_us = 0, n_st = 0;
  uint64_t prev_end = 0, t0 = 0;
  std::printf("[timeline] us; medians over CTAs unless said; start = first CTA entry - previous product's last store;"
              " wait/x/first/last/done relative to each CTA's entry; tail = done - last landing; span = first entry .. last"
              " store\n");
  for (int i = 0; i < kN; i++) {
    const auto& L = log[i];
    std::vector<double> waited, xst, first, last, done, tail, copy0;
    uint64_t kmin = UINT64_MAX, kmax = 0, emax = 0;
    for (int c = 0; c < L.grid; c++) {
      const uint64_t* q = stv.data() + L.offset + (size_t)c * 8;
      for (int k = 0; k < 8; k++) {
        ASSERT_NE(q[k], 0u) << "stamp " << k << " of CTA " << c << " of product " << i;
        n_st++;
        whole_us += q[k] % 1000 == 0;
      }
      EXPECT_LE(q[0], q[3]);
      EXPECT_LE(q[3], q[4]);
      EXPECT_LE(q[5], q[6]);
      EXPECT_LE(q[6], q[7]);
      kmin = std::min(kmin, q[0]);
      emax = std::max(emax, q[0]);
      kmax = std::max(kmax, q[7]);
      copy0.push_back(1e-3 * (double)(q[1] - q[0]));
      waited.push_back(1e-3 * (double)(q[3] - q[0]));
      xst.push_back(1e-3 * (double)(q[4] - q[3]));
      first.push_back(1e-3 * (double)(q[5] - q[0]));
      last.push_back(1e-3 * (double)(q[6] - q[0]));
      done.push_back(1e-3 * (double)(q[7] - q[0]));
      tail.push_back(1e-3 * (double)(q[7] - q[6]));
    }
    if (i == 0) t0 = kmin;
    const double span = 1e-3 * (double)(kmax - kmin);
    std::vector<double> ends;
    for (int c = 0; c < L.grid; c++) ends.push_back(1e-3 * (double)(stv[L.offset + (size_t)c * 8 + 7] - kmin));
    std::sort(ends.begin(), ends.end());
    std::printf("[timeline] %-12s %s [%5lld x %5lld] grid %3d at %7.2f: start %+6.2f (entries spread %5.2f) copy0 %5.2f"
                " wait %5.2f x %5.2f first %5.2f last %6.2f done %6.2f tail %5.2f | ends min %6.2f med %6.2f max %6.2f"
                " | span %6.2f = %.2f TB/s\n",
                ps[i].s.what, cuda::type_cstr(L.type), (long long)L.rows, (long long)L.cols, L.grid,
                1e-3 * (double)(kmin - t0), i ? 1e-3 * ((double)kmin - (double)prev_end) : 0.0,
                1e-3 * (double)(emax - kmin), med(copy0), med(waited), med(xst), med(first), med(last), med(done),
                med(tail), ends.front(), ends[ends.size() / 2], ends.back(), span, (double)w[i].size() / (span * 1e-6) / 1e12);
    prev_end = kmax;
  }
  std::printf("[timeline] stamps that are whole microseconds: %zu of %zu\n", whole_us, n_st);
  for (int i = 0; i < kN; i++) {
    const auto y = test::to_host<float>(dy[i], ps[i].s.rows);
    if (ps[i].pro == 2) {  // the SwiGLU of the device's gate / up
      const auto gu = test::to_host<float>(dy[i - 1], 2 * ps[i].s.cols);
      cpu::swiglu(ops::SwigluParams{1, ps[i].s.cols}, gu.data(), gu.data() + ps[i].s.cols, xt[i].data());
    }
    check_rows(ps[i].type, w[i], ps[i].s.rows, ps[i].s.cols, xt[i].data(), y.data(), nullptr, 7,
               std::string("timeline ") + ps[i].s.what);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(st);
}

TEST(CudaMatvec, FusedOutputHeadVocabRows) {  // 0.8B output after the final norm: 248320 x 1024 Q6_K
  DS_REQUIRE_GPU();
  run_fused_case(GgmlType::Q6_K, {248320, 1024, "vocab rows"}, 91, false, false, "auto");
}

TEST(CudaMatvec, FusedRejectsBothTransforms) {
  DS_REQUIRE_GPU();
  auto buf = cuda::DeviceBuffer::alloc(1 << 20);
  ASSERT_TRUE(buf.ok());
  float* x = buf->as<float>() + 1024;
  cuda::MatvecInput in{x};
  in.norm_w = x;
  in.gate = x;
  EXPECT_FALSE(cuda::matvec_fused(GgmlType::Q4_K, buf->data(), 4, 256, in, x + 4096, x + 8192, nullptr).ok());
}

TEST(CudaMatvec, RejectsBadInput) {
  DS_REQUIRE_GPU();
  auto buf = cuda::DeviceBuffer::alloc(1 << 20);
  ASSERT_TRUE(buf.ok());
  auto* base = buf->as<uint8_t>();
  float* x = buf->as<float>() + 1024;
  float* y = buf->as<float>() + 4096;
  auto s = cuda::matvec(GgmlType::IQ1_S, base, 4, 256, x, y, nullptr);  // a type without CUDA kernels
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("IQ1_S"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("matvec"), std::string::npos) << s.error().message;
  EXPECT_FALSE(cuda::matvec(GgmlType::Q4_K, base, 4, 300, x, y, nullptr).ok());      // cols % 256
  EXPECT_FALSE(cuda::matvec(GgmlType::Q4_K, base + 2, 4, 256, x, y, nullptr).ok());  // W misaligned
  for (GgmlType t : test::cuda_types())  // x misaligned: an error on every path, not a fault
    EXPECT_FALSE(cuda::matvec(t, base, 4, 256, x + 1, y, nullptr).ok()) << ggml_type_name(t);
  EXPECT_FALSE(cuda::matvec(GgmlType::Q6_K, base + 8, 4, 256, x, y, nullptr).ok());  // W not 16-aligned
  EXPECT_FALSE(cuda::matvec(GgmlType::F32, base, 4, 12, x, y, nullptr).ok());        // cols % 8
  EXPECT_FALSE(cuda::matvec(GgmlType::Q8_0, base, 0, 32, x, y, nullptr).ok());       // empty
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q8_0, base, 4, 32, x, y, 65, nullptr).ok());
  EXPECT_FALSE(cuda::matvec_batched(GgmlType::Q8_0, base, 4, 32, x, y, 0, nullptr).ok());
}

// b1q420: the Q4_K stream kernel's lean form (MatvecStreamTune::lean, DS_MATVEC_STREAM_Q4K_LEAN: ring slot / phase
// counters instead of divisions by the stage count, the producer's row addresses per row group, the scales and mins
// by whole-word masks and byte picks) against the form it replaces (lean false): bit-identical y in every product, and
// the lean y against the CPU. The 9B in_proj (16 super-blocks, 8 warps x 2 CTAs), 9B ffn_down (48: 16 warps, the
// prepared x), 27B ffn_down (68: kc 16) and small / odd shapes (1, 5, 14, 101 super-blocks; rows % 16 != 0);
// plain / RMSNorm / SwiGLU, accumulate; ring variants: the default plan, kc 3 x 2 stages and kc 1 x 3 stages (the
// counters wrap many times, chunks not a multiple of the 8 warps), kc 16 on one CTA x 16 warps, 8 warps (wide off),
// 16 warps with 3 stages (odd: the two groups' stages alternate in the slots). DS_TEST_STREAM_PART shards the shapes.
TEST(CudaMatvec, StreamQ4KLeanSameBits) {
  DS_REQUIRE_GPU();
  const KeepMatvecSettings keep;
  const std::vector<Shape> shapes = stream_shapes({{8192, 4096, "9B in_proj (16 super-blocks)"},
                                                   {4096, 12288, "9B ffn_down (48)"},
                                                   {5120, 17408, "27B ffn_down (68)"},
                                                   {1027, 256, "one super-block, rows % 16 = 3"},
                                                   {333, 1280, "5 super-blocks"},
                                                   {77, 3584, "14 super-blocks"},
                                                   {3, 25856, "101 super-blocks"}});
  struct V { int kc, stages, ctas; bool wide; };
  const V vs[] = {{0, 0, 0, true}, {3, 2, 0, true}, {1, 3, 2, true}, {16, 0, 1, true}, {8, 0, 0, false}, {8, 3, 1, true}};
  uint64_t seed = 42000;
  size_t products = 0, differ = 0, untaken = 0;
  g_worst_seen = 0;
  int part = 0;
  for (const Shape& s : shapes) {
    if (!stream_part_takes(part++)) continue;
    StreamInputs in(GgmlType::Q4_K, s, seed += 11);
    ASSERT_FALSE(in.dy.empty());
    for (const V& v : vs) {
      // A ring that does not fit the shape (e.g. 101 super-blocks of x on 2 CTAs per SM) falls back to another
      // kernel for both forms: nothing to compare there.
      cuda::set_matvec_stream_tune(q4_ring(keep.q4, v.kc, v.stages, v.ctas, v.wide));
      if (!cuda::matvec_stream_takes(s.rows, s.cols)) {
        untaken++;
        continue;
      }
      for (int pro = 0; pro < 3; pro++)
        for (bool acc : {false, true}) {
          std::vector<float> ys[2];
          for (int lean = 0; lean < 2; lean++) {
            cuda::MatvecStreamTune q4 = q4_ring(keep.q4, v.kc, v.stages, v.ctas, v.wide);
            q4.lean = lean == 1;
            cuda::set_matvec_stream_tune(q4);
            ASSERT_NO_FATAL_FAILURE(in.product(pro, acc, ys[lean]));
          }
          const std::string what = "kc " + std::to_string(v.kc) + " stages " + std::to_string(v.stages) + " ctas " +
                                   std::to_string(v.ctas) + (v.wide ? "" : " 8 warps") + in.what(pro, acc);
          products++;
          const bool same = std::memcmp(ys[0].data(), ys[1].data(), s.rows * 4) == 0;
          differ += !same;
          EXPECT_TRUE(same) << what << ": lean and non-lean differ";
          in.check(pro, acc, ys[1], what + " lean");
        }
    }
  }
  EXPECT_GT(products, 0u);
  std::printf("[stream q4 lean] %zu lean products compared with the non-lean form, %zu not bit-identical "
              "(%zu shape / ring pairs not taken by the stream kernel, skipped); worst |y - ref| / sum|w x| = %.3g\n",
              products, differ, untaken, g_worst_seen);
}

}  // namespace
}  // namespace ds

// Matrix products on GGUF weights. Decode (one token): one quant::dot_row per weight row, rows split over
// threads. Prefill (T tokens): each thread dequantizes a tile of rows once into fp32 and multiplies it with
// all T activation rows, so every weight byte is decoded once per call rather than T times.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/cpu.h"
#include "quant/quant.h"

namespace ds::cpu {
namespace {

// fp32 dot with 8 independent partial sums (vectorizable, order fixed by n alone).
inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

constexpr int64_t kRowTile = 16;    // weight rows dequantized together
constexpr int64_t kTokenTile = 64;  // activation rows kept hot while a tile is applied
// Below this many multiply-adds a product runs on one thread: forking costs more than it saves, and idle
// OpenMP threads spinning at barriers hurt badly on a shared, oversubscribed machine.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

}  // namespace

void matmul(const ops::MatmulParams& p, const void* w, const float* x, float* y) {
  const auto info = ggml_type_info(p.type);
  DS_CHECK(info.has_value() && p.n_cols % info->block_size == 0, "matmul: type {} with {} columns",
           ggml_type_name(p.type), p.n_cols);
  const uint64_t row_bytes = ggml_row_bytes(*info, p.n_cols);
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t N = p.n_rows, K = p.n_cols, T = p.n_tokens;
  if (T == 1) {
#pragma omp parallel for schedule(static) if (N * K >= kParallelMacs)
    for (int64_t n = 0; n < N; n++) y[n] = quant::dot_row(p.type, wb + n * row_bytes, x, K);
    return;
  }
  const int64_t n_tiles = (N + kRowTile - 1) / kRowTile;
#pragma omp parallel if (N * K * T >= kParallelMacs)
  {
    std::vector<float> tile(kRowTile * K);
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < n_tiles; it++) {
      const int64_t n0 = it * kRowTile, nr = std::min(kRowTile, N - n0);
      for (int64_t r = 0; r < nr; r++) quant::dequantize_row(p.type, wb + (n0 + r) * row_bytes, &tile[r * K], K);
      for (int64_t t0 = 0; t0 < T; t0 += kTokenTile) {
        const int64_t t1 = std::min(T, t0 + kTokenTile);
        for (int64_t r = 0; r < nr; r++)
          for (int64_t t = t0; t < t1; t++) y[t * N + n0 + r] = dot_f32(&tile[r * K], x + t * K, K);
      }
    }
  }
}

}  // namespace ds::cpu

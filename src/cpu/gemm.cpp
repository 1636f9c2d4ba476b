// matmul_fast (fast.h): the quantized products of the model, several weights with one input per call.
// Decode (T = 1): rows are cut into ~64 KiB slices; the threads of one parallel region take slices
// dynamically and run quant::dot_rows on each (x's partial sums shared across the slice's rows).
// Prefill (T > 1): work items are (panel of NR weight rows, block of up to kTokenBlock tokens). A thread
// dequantizes its panel once into an fp32 buffer laid out [K][NR] (transposed, ~L2-sized) and sweeps it
// over the token block, M tokens at a time, with a register-blocked micro-kernel: per k, NR/16 (or NR/8)
// vector loads of the panel, M broadcasts of x[t][k], and M*NR/width FMAs into M*NR/width accumulators
// (AVX-512: NR 32, M 8 -> 16 zmm; AVX2: NR 16, M 6 -> 12 ymm). Every output is one fp32 sum over k in
// order, so results differ from the reference only by rounding. Precision::Bf16 packs the panel and x as
// bf16 pairs and uses vdpbf16ps (two products per lane and instruction).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "cpu/fast.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "quant/quant.h"

namespace ds::cpu {
namespace {

constexpr int64_t kTokenBlock = 512;        // tokens per prefill work item (x block stays in L2/L3)
constexpr int64_t kDecodeSliceBytes = 65536;  // weight bytes per decode work item
// Below this many multiply-adds a group runs on the calling thread (a fork costs more than it saves).
constexpr int64_t kParallelMacs = int64_t(1) << 18;

struct Item {
  int32_t job;
  int64_t r0, r1;  // weight rows
  int64_t t0, t1;  // tokens (prefill)
};

// Per-thread buffers, grown on demand and kept: no allocation per call once warm.
struct Scratch {
  std::vector<float> panel, row, rows;
  std::vector<uint16_t> panel16;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Dequantizes rows [r0, r0 + nr) of job j into panel [K][NR] (rows nr..NR-1 zero): the rows first, one
// after another into `rows` [nr][K] (F32 weights are read in place), then the register-tile transpose
// (a scalar scatter with stride NR took ~7% of a 0.8B prefill, perf).
void pack_f32(const MatmulJob& j, uint64_t row_bytes, int64_t r0, int nr, const VecOps& kn, float* panel,
              float* rows) {
  const int64_t K = j.p.n_cols;
  const auto* wb = static_cast<const uint8_t*>(j.w);
  if (j.p.type == GgmlType::F32) {
    kn.pack_panel(reinterpret_cast<const float*>(wb + r0 * row_bytes), (int64_t)(row_bytes / sizeof(float)), nr, K,
                  panel);
    return;
  }
  for (int r = 0; r < nr; r++) quant::dequantize_row(j.p.type, wb + (r0 + r) * row_bytes, rows + r * K, K);
  kn.pack_panel(rows, K, nr, K, panel);
}

// As pack_f32, as bf16 pairs: panel16[(k/2)][n][k%2].
void pack_bf16(const MatmulJob& j, uint64_t row_bytes, int64_t r0, int nr, int NR, uint16_t* panel, float* row) {
  const int64_t K = j.p.n_cols;
  const auto* wb = static_cast<const uint8_t*>(j.w);
  for (int r = 0; r < NR; r++) {
    const float* src = row;
    if (r >= nr) {
      std::fill(row, row + K, 0.0f);
    } else if (j.p.type == GgmlType::F32) {
      src = reinterpret_cast<const float*>(wb + (r0 + r) * row_bytes);
    } else {
      quant::dequantize_row(j.p.type, wb + (r0 + r) * row_bytes, row, K);
    }
    for (int64_t k = 0; k < K; k += 2) {
      panel[k * NR + 2 * r] = f32_to_bf16(src[k]);
      panel[k * NR + 2 * r + 1] = f32_to_bf16(src[k + 1]);
    }
  }
}

void run_decode_item(const MatmulJob& j, const Item& it, const float* x) {
  const uint64_t rb = ggml_row_bytes(*ggml_type_info(j.p.type), j.p.n_cols);
  quant::dot_rows(j.p.type, static_cast<const uint8_t*>(j.w) + it.r0 * rb, rb, it.r1 - it.r0, x, j.p.n_cols,
                  j.y + it.r0);
}

void run_prefill_item(const MatmulJob& j, const Item& it, const float* x, const uint16_t* xb, const VecOps& kn) {
  const int64_t K = j.p.n_cols, N = j.p.n_rows;
  const uint64_t rb = ggml_row_bytes(*ggml_type_info(j.p.type), K);
  const int NR = kn.gemm_nr, nr = (int)(it.r1 - it.r0);
  Scratch& s = scratch();
  if ((int64_t)s.row.size() < K) s.row.resize(K);
  if (xb) {
    if ((int64_t)s.panel16.size() < K * NR + 32) s.panel16.resize(K * NR + 32);
    uint16_t* panel = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(s.panel16.data()) + 63) & ~uintptr_t(63));
    pack_bf16(j, rb, it.r0, nr, NR, panel, s.row.data());
    for (int64_t t0 = it.t0; t0 < it.t1; t0 += kn.gemm_mr) {
      const int m = (int)std::min<int64_t>(kn.gemm_mr, it.t1 - t0);
      kn.gemm_bf16[m - 1](K, panel, xb + t0 * K, K, j.y + t0 * N + it.r0, N, nr);
    }
    return;
  }
  if ((int64_t)s.panel.size() < K * NR + 16) s.panel.resize(K * NR + 16);
  if ((int64_t)s.rows.size() < K * NR) s.rows.resize(K * NR);
  float* panel = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(s.panel.data()) + 63) & ~uintptr_t(63));
  pack_f32(j, rb, it.r0, nr, kn, panel, s.rows.data());
  for (int64_t t0 = it.t0; t0 < it.t1; t0 += kn.gemm_mr) {
    const int m = (int)std::min<int64_t>(kn.gemm_mr, it.t1 - t0);
    kn.gemm_f32[m - 1](K, panel, x + t0 * K, K, j.y + t0 * N + it.r0, N, nr);
  }
}

}  // namespace

void matmul_fast(std::span<const MatmulJob> jobs, const float* x, Precision prec) {
  if (jobs.empty()) return;
  const int64_t T = jobs[0].p.n_tokens, K = jobs[0].p.n_cols;
  int64_t macs = 0;
  for (const MatmulJob& j : jobs) {
    DS_CHECK(j.p.n_tokens == T && j.p.n_cols == K, "matmul_fast: jobs disagree on shape ({}x{} vs {}x{})",
             j.p.n_tokens, j.p.n_cols, T, K);
    const auto info = ggml_type_info(j.p.type);
    DS_CHECK(info.has_value() && K % info->block_size == 0, "matmul_fast: type {} with {} columns",
             ggml_type_name(j.p.type), K);
    macs += j.p.n_rows * K * T;
  }
  const VecOps* ops = vec_ops();
  if (T > 1 && !ops) {  // no vector kernels on this CPU: the reference
    for (const MatmulJob& j : jobs) matmul(j.p, j.w, x, j.y);
    return;
  }
  const bool bf16 = T > 1 && prec == Precision::Bf16 && has_avx512_bf16() && K % 2 == 0 && ops->gemm_bf16;

  // Work items (kept per calling thread; rebuilt every call, allocated once).
  thread_local std::vector<Item> items;
  items.clear();
  const int nt = macs >= kParallelMacs ? omp_get_max_threads() : 1;
  if (T == 1) {
    for (int32_t ji = 0; ji < (int32_t)jobs.size(); ji++) {
      const auto& p = jobs[ji].p;
      const uint64_t rb = ggml_row_bytes(*ggml_type_info(p.type), K);
      const uint64_t total = rb * p.n_rows;
      const uint64_t target = std::max<uint64_t>(1, std::min<uint64_t>(kDecodeSliceBytes, total / (4 * nt)));
      int64_t step = std::max<int64_t>(1, (int64_t)(target / rb));
      if (step > 4) step -= step % 4;  // whole groups of the 4-row AVX-512 dot kernels
      for (int64_t r = 0; r < p.n_rows; r += step) items.push_back({ji, r, std::min(p.n_rows, r + step), 0, 1});
    }
  } else {
    // Token blocks of at most kTokenBlock, split evenly (T = 300 -> 150 + 150, not 256 + 44).
    const int64_t nb = (T + kTokenBlock - 1) / kTokenBlock;
    for (int64_t b = 0; b < nb; b++) {
      const int64_t b0 = T * b / nb, b1 = T * (b + 1) / nb;
      for (int32_t ji = 0; ji < (int32_t)jobs.size(); ji++)
        for (int64_t r = 0; r < jobs[ji].p.n_rows; r += ops->gemm_nr)
          items.push_back({ji, r, std::min(jobs[ji].p.n_rows, r + ops->gemm_nr), b0, b1});
    }
  }

  thread_local std::vector<uint16_t> xb;  // x as bf16 (Precision::Bf16)
  if (bf16 && (int64_t)xb.size() < T * K) xb.resize(T * K);
  const int64_t n_items = (int64_t)items.size();
  const Item* it = items.data();
  uint16_t* xbp = bf16 ? xb.data() : nullptr;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    if (xbp) {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; t++) ops->to_bf16(x + t * K, K, xbp + t * K);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n_items; i++) {
      if (T == 1)
        run_decode_item(jobs[it[i].job], it[i], x);
      else
        run_prefill_item(jobs[it[i].job], it[i], x, xbp, *ops);
    }
  }
}

}  // namespace ds::cpu

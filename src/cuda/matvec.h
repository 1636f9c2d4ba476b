// Matrix-vector products with GGML-typed weights, the decode hot path (formats.md §5 block layouts):
//   matvec:          y[rows]     = W[rows, cols] · x[cols]          (+ y when accumulate)
//   matvec_batched:  Y[B, rows]  = X[B, cols] · Wᵀ, 1 <= B <= 64    (+ Y when accumulate)
// W is row-major in its GGUF type (row r = cols/block_size consecutive blocks), read from device memory
// exactly once per call (for the whole batch too). Which kernel runs: matvec.cu (batch 1) and
// matvec_batched.cu (B > 1) say, type by type. Activations are float32; where a tensor-core kernel needs
// them in another form it splits x into terms after a power-of-two scale (4 int8 digits: 31 bits; 2-3 fp16
// or bf16 terms: 22-33 bits), not an 8-bit activation quantization; accumulation is float32. The CPU
// oracle is ds::quant::dot_row; results differ from it by summation order and that split (tests: 1e-7 to
// 3e-7 of sum|w x|).
// Requirements (else an Error): W 16-byte aligned with its allocation padded to 16 bytes (cudaMalloc
// and DeviceBuffer are); x, y 16-byte aligned (x) / 4-byte (y); cols a multiple of the block size
// (8 for F32/F16/BF16).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/ggml_type.h"

namespace ds::cuda {

constexpr int kMatvecMaxBatch = 64;

// Kernel choice for Q4_K / Q6_K at batch 1 (a comparison hook for tests and benchmarks):
//   Auto:   Q4_K: the x-in-shared-memory kernel (matvec_smem.cuh) where x fits (cols <= 25600);
//           Q6_K: the direct-load kernel (matvec_direct.cuh), except vocab-sized short rows
//           (rows >= 65536, cols <= 2048) in shared memory (choices measured, bench/cuda/NOTES.md);
//   Direct: always the direct-load kernel;  Smem: the shared-memory kernel wherever x fits.
// The initial value comes from the environment variable DS_MATVEC_PATH (auto | direct | smem).
enum class MatvecPath { Auto, Direct, Smem };
MatvecPath matvec_path();
void set_matvec_path(MatvecPath p);
// Q3_K / Q5_K at batch 1 on the direct-load kernels (matvec_direct.cuh mvd::Q3K / Q5K, kq21) or the generic
// shared-memory tile kernel (matvec_kernel.cuh). Mode -1 (the default): Q3_K direct, Q5_K tile (measured, session
// 22, H100, tg128 of the 9B synths: Q3_K_M 247.0-247.2 tok/s direct vs 235.9-236.0 tile; Q5_K_M 167.8-167.9 direct vs
// 190.5-190.8 tile); 0: both tile; 1: both direct. Initial value from DS_MATVEC_DIRECT_KQ (0 / 1; unset: -1); a hook
// for tests and A/B runs, not thread-safe against concurrent launches.
int matvec_direct_kq();
void set_matvec_direct_kq(int mode);
// The shared-memory path's cp.async ring depth (matvec_smem.cuh kernel_async; 0: the register-pipeline
// kernel only). Default 4, or DS_MATVEC_ASYNC; a hook for tests and A/B runs.
int matvec_async_stages();
void set_matvec_async_stages(int n);

// The tensor-core Q4_K kernel (matvec_tc.cuh), taken on the Auto path wherever x fits its shared memory
// (cols <= ~36k): on (DS_MATVEC_TC, default 1), fp16 terms per activation (DS_MATVEC_TC_TERMS 2 | 3,
// default 3), warps per 16-row group (DS_MATVEC_TC_KS 1 | 2 | 4 | 8; 0 = by shape). Hooks for tests and
// A/B runs; not thread-safe against concurrent launches.
struct MatvecTcTune {
  bool on = true;
  int terms = 3;
  int ks = 0;
  bool q6k = false;  // Q6_K on the same kernel too (DS_MATVEC_TC_Q6K=1; default off until measured; decode5)
};
MatvecTcTune matvec_tc_tune();
void set_matvec_tc_tune(const MatvecTcTune& t);

// The streamed tensor-core Q4_K kernel (matvec_stream.cuh, decode6: weights copied into a shared-memory
// ring by bulk async copies, math of the tc kernel). mode -1: by shape (default), 0: off
// (DS_MATVEC_STREAM=0), 1: wherever it fits; kc super-blocks per stage, stages (0: as many as fit),
// CTAs per SM (0: by size). Hooks for tests and A/B runs; not thread-safe against concurrent launches.
struct MatvecStreamTune {
  int mode = -1;
  int kc = 8;
  int stages = 0;
  int ctas_per_sm = 0;
  bool i8 = true;  // integer form (x in 4 int8 digits, m16n8k32 u8 x s8); false: matvec_tc's fp16 form
  // L2 prefetch by the streamed kernels (Q4_K and Q6_K) of the first prefetch_kb KB of the weights named by
  // set_matvec_next (DS_MATVEC_PREFETCH_KB; decode8; default 8 MB). 0: off.
  int prefetch_kb = 8192;
  // 16 consumer warps in one CTA per SM where the plan has one CTA in the full SM (integer form; the Q6_K
  // kernel's switch is MatvecStreamQ6Tune::wide). DS_MATVEC_STREAM_WIDE=0: 8 (decode9).
  bool wide = true;
  // With wide and ctas_per_sm 0: one CTA of 16 warps also for rows of >= one_cta_nb super-blocks (0: off;
  // DS_MATVEC_STREAM_ONE_NB; decode9).
  int one_cta_nb = 32;
  // x prepared once per product into global memory by a small kernel and copied by each CTA of both stream
  // kernels with bulk copies, for rows of >= xprep super-blocks (0: off, x staged by every CTA;
  // DS_MATVEC_STREAM_XPREP; decode10; 32 = the 9B / 27B ffn_down, +2-3% tg128; back on in decode11 after the
  // fix of session 9's failure (Sx overlapped the zero super-block), see matvec_stream.cuh). Two buffers per
  // device: products on two streams of one process at the same time would share them.
  int xprep = 32;
  // The Q6_K stream kernel's threshold (-1: xprep; DS_MATVEC_STREAM_XPREP_Q6K; decode11).
  int xprep_q6k = -1;
  // x staged in one dependent round of loads after griddepcontrol.wait (the RMSNorm weights loaded before it), both
  // stream kernels, rows of <= 3 x the consumer warps super-blocks without a prepared x (b1x16; DS_MATVEC_STREAM_XONE=0:
  // the staging before it). 2 (default, b1x17): the RMSNorm factor from the staging's own loads of x (one load of x;
  // not the same bits as 0, within fp32 rounding of the factor); 1: mvt::rms_scale's loads (the same bits as 0).
  int xone = 2;
  // b1q420 (DS_MATVEC_STREAM_Q4K_LEAN=0: off; same bits): the integer form's ring bookkeeping without divisions and its
  // scales / mins by whole-word masks and byte picks (matvec_stream.cuh, kernel<, , , true>); default since session 18.
  bool lean = true;
};
MatvecStreamTune matvec_stream_tune();
void set_matvec_stream_tune(const MatvecStreamTune& t);

// The streamed Q6_K kernel (matvec_stream_q6.cuh, decode7: the same ring, x in 4 int8 digits, the codes as
// u8 with the -32 offset in the mma's C operand). mode -1: by shape (default), 0: off
// (DS_MATVEC_STREAM_Q6K=0), 1: wherever it fits (even super-blocks per row and x + 2 stages in shared
// memory); kc super-blocks per stage (even; 0: 8), stages (0: as many as fit), CTAs per SM (0: by size).
// DS_MATVEC_TC=0 turns it off too. Hooks for tests and A/B runs; not thread-safe against concurrent launches.
struct MatvecStreamQ6Tune {
  int mode = -1;
  int kc = 0;
  int stages = 0;
  int ctas_per_sm = 0;
  bool wide = true;  // 16 consumer warps where one CTA per SM; DS_MATVEC_STREAM_Q6K_WIDE=0: 8 (decode9)
  bool lean = true;  // q6i19 (DS_MATVEC_STREAM_Q6K_LEAN=0: off; same bits): the ring bookkeeping without divisions
};
// Names the weights of the product that will run after the next batch-1 matvec / matvec_fused (decode8): a
// streamed kernel launched while this is set prefetches the start of them into L2 at its end (prefetch_kb of
// MatvecStreamTune). A hint only, results do not depend on it; (nullptr, 0) clears it. Per host thread: it
// applies to launches from the thread that set it.
void set_matvec_next(const void* w, size_t bytes);

// Measurement (dec15; CudaMatvec.StreamTimeline): while a buffer of `stamps` uint64 is set, every launch of the two
// streamed kernels takes grid x 8 of them (in launch order, until full) for per-CTA %globaltimer stamps (ns), in the
// order of mvq::ProbeEvent (matvec_stream.cuh): CTA entry, first / last stage's copies issued, past
// griddepcontrol.wait, x staged, first / last stage landed, last row group stored. The log names each launch's
// region (offset in stamps). (nullptr, 0) turns it off and clears the log. Not for concurrent launches.
struct MatvecProbeLaunch {
  GgmlType type;
  int64_t rows, cols;
  int grid;
  size_t offset;
};
void set_matvec_probe(uint64_t* buf, size_t stamps);
std::vector<MatvecProbeLaunch> matvec_probe_log();

MatvecStreamQ6Tune matvec_stream_q6_tune();
void set_matvec_stream_q6_tune(const MatvecStreamQ6Tune& t);
// Whether matvec / matvec_fused run Q6_K [rows, cols] on that kernel with the current settings.
bool matvec_stream_q6_takes(int64_t rows, int64_t cols);
// The same for the Q4_K stream kernel (matvec_stream.cuh) under the current MatvecStreamTune.
bool matvec_stream_takes(int64_t rows, int64_t cols);

Status matvec(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
              cudaStream_t stream, bool accumulate = false);

// Batch-1 matvec whose input is a transform of x, computed in the kernel's prologue (no separate launch,
// no materialised input) where a fused kernel exists (Q4_K, Q6_K through matvec_smem.cuh when x fits):
//   norm_w set: x' = x * (1 / sqrt(mean(x^2) + eps)) * norm_w  (cpu::rms_norm of one row)
//   gate set:   x' = silu(gate) * x                            (cpu::swiglu with up = x)
//   neither:    x' = x (plain matvec)
// Every other type / path runs the transform as its own kernel into `scratch` (cols floats, 16-byte
// aligned) and then the plain matvec, so callers may use it for any weight type. gate and norm_w must
// not both be set; gate and x 16-byte aligned.
struct MatvecInput {
  const float* x = nullptr;
  const float* norm_w = nullptr;
  float eps = 0.f;
  const float* gate = nullptr;
};
Status matvec_fused(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecInput& in, float* y,
                    float* scratch, cudaStream_t stream, bool accumulate = false);
// Whether matvec_fused runs the transform inside the matvec kernel for this type / shape (else: two launches).
bool matvec_fuses(GgmlType type, int64_t rows, int64_t cols);
// Batched path for 2 <= B <= 64 (matvec_batched.cu), a comparison hook for tests and benchmarks:
//   Gemm: Q4_K / Q6_K / Q8_0 through the GEMM-structured tensor-core kernel (matvec_gemm.cuh), other types
//         through matvec_mma.cuh;  Mma: every block type through matvec_mma.cuh.
// Terms: bf16 terms per activation in the tensor-core paths (3: 24 significant bits, as fp32; 2: 16 bits).
// Initial values from the environment: DS_MVB_PATH (gemm | mma, default gemm), DS_MVB_TERMS (2 | 3, default 3);
// DS_MVB_MT (1 | 2) forces the GEMM kernel's warp shape (default: by batch size, matvec_gemm.cuh).
// Not thread-safe against concurrent matvec_batched calls (set them before launching work).
enum class MatvecBatchedPath { Gemm, Mma };
MatvecBatchedPath matvec_batched_path();
void set_matvec_batched_path(MatvecBatchedPath p);
int matvec_batched_terms();
void set_matvec_batched_terms(int terms);  // 2 or 3 (other values: 3)

// x: [batch][cols] floats (row stride cols), y: [batch][rows] floats (row stride rows).
Status matvec_batched(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y,
                      int batch, cudaStream_t stream, bool accumulate = false);
// cg38: the Q6_K product's hi-only bound form (matvec_wgmma_q6k_ring.cuh kHi: A·hi alone, one wgmma per k-step
// instead of three), for the certified greedy head only (src/cuda/model/kernels_certify.cu): not W x but within
// ||w_r||_1 · max|x_b| · 2^-10 (+ fp32 rounding) of it for every row r and column b. Where matvec_batched takes Q6_K's
// scaled-A ring (sm_90a, 25 <= B <= 64, cols / 256 a multiple of 8); elsewhere an Error.
bool matvec_batched_hi_supported(GgmlType type, int64_t rows, int64_t cols, int batch);
Status matvec_batched_hi(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int batch,
                         cudaStream_t stream);
// fold17: the batched product of rms_norm(x) · norm_w (per row: x / sqrt(mean(x^2) + eps) · norm_w) with the norm made
// inside the product's x preparation (no kernel of its own, no materialised input), where matvec_batched_folds says so
// (Q4_K on the wgmma block form with its sub-block sums, DS_MVB_WG=13, DS_MVB_PREP_REG on; 25 <= B <= 64; sm_90a; cols
// <= 8192); elsewhere an Error (run mk::rms_norm, then matvec_batched). The output bits are those of that pair; the
// normalised x is also written to xn ([batch][cols], when set) for other products of the same input. Rows of x are ldx
// floats (a multiple of 4); x, norm_w, xn 16-byte aligned.
// fold29: also Q4_K at 2 <= B <= 6 (DS_MVB_MULTI_NORM; within matvec_batched_multi's 8) where every group of matvec_batched's
// small-batch split takes the norm (matvec_multi_norm_takes; ldx == cols): the multi-sequence stream kernels then
// normalise each sequence's x in their staging (batch 1's factor and prologue; not the bits of the rms_norm kernel
// followed by matvec_batched, within fp32 rounding of them). DS_MVB_MULTI_NORM=0 turns this off.
struct MatvecBatchedInput {
  const float* x = nullptr;
  int64_t ldx = 0;
  const float* norm_w = nullptr;
  float eps = 0.f;
  float* xn = nullptr;
};
bool matvec_batched_folds(GgmlType type, int64_t rows, int64_t cols, int batch, const MatvecBatchedInput& in);
Status matvec_batched_in(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecBatchedInput& in,
                         float* y, int batch, cudaStream_t stream, bool accumulate = false);
}  // namespace ds::cuda

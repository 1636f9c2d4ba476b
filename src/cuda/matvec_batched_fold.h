// Switch for the fp16 batched kernels, on by default on the GEMM path: Q6_K and Q8_0 with x as 2 fp16 terms
// of the column-scaled x (matvec_gemm.cuh DecQ6KQuarterH / DecQ8_0H), and the scale-folding Q4_K kernel
// (matvec_fold.cuh) in mode 2
// with 3 terms (the default; max error 9.7e-8 of sum|w x| on the H200, vs 1.3e-7 for the 3-term GEMM
// kernel), mode 0 with DS_MVB_TERMS=2 (4e-7, the fastest). DS_MVB_FOLD=0 turns it off (Q4_K then uses
// matvec_gemm.cuh), DS_MVB_FOLD_MODE=0|1|2 picks the mode of the 3-term setting. Used by tests and benches.
#pragma once

#include "core/ggml_type.h"
#include "cuda/matvec.h"

namespace ds::cuda {

bool matvec_batched_fold();
void set_matvec_batched_fold(bool on);
// Where the fold kernel applies d (matvec_fold.cuh kMode 0, 1, 2); -1: off.
int matvec_batched_fold_mode();
void set_matvec_batched_fold_mode(int mode);
// Q4_K at 25 <= B <= 64 through the wgmma kernel (matvec_wgmma.cuh, sm_90a builds on compute capability 9.0
// only; the fold kernel otherwise): 1 on (warpgroups per CTA chosen per shape), 2 or 3 warpgroups
// forced, 0 off; its block form (matvec_wgmma_block.cuh, by shape): 9 n64, 12 n128, 13 n128 with the mins on
// sub-block sums (one mma.sync per n-tile instead of two; other bits, float64 tolerance; the default); 4 .. 8, 10, 11
// (removed ring and x-cluster forms) are refused (0). The getter says 0 where the kernel is unavailable.
int matvec_batched_wgmma();
void set_matvec_batched_wgmma(int n_wg);
// Q6_K at 25 <= B <= 64 (DS_MVB_WG_Q6K_MIN) through the wgmma Q6_K kernel (matvec_wgmma_q6k.cuh; same availability; with the
// fp16 x terms only, i.e. fold on): 1 on, 2 or 3 warpgroups forced, 4 = 2 warpgroups pipelined, 0 off
// (matvec_gemm.cuh); 11 its ring form's scaled-A product (matvec_wgmma_q6k_ring.cuh, by shape; the default). Other values
// (5 .. 10: removed forms) are refused (0).
int matvec_batched_wgmma_q6k();
void set_matvec_batched_wgmma_q6k(int variant);
// The wgmma kernels' split-K reduction in the tile's last CTA (DS_MVB_RED; matvec_wgmma.cuh store_acc): 1 =
// reduce_splits (every load of a pass issued first; the default), 0 = the serial loop, 2 = reduce_splits with one
// acq_rel fence by thread 0 instead of __threadfence in every thread. The same bits in every mode. (3, split-K
// clusters through distributed shared memory, was removed in q6k13: no step gain.)
// The Q4_K wgmma kernels' x preparation (DS_MVB_PREP_REG; matvec_wgmma.cuh): true = wg::prep_reg_kernel (each thread's
// loads issued at once, kept in registers across the column maximum; the default), false = wg::prep_kernel. The same
// bits either way.
bool matvec_batched_prep_reg();
void set_matvec_batched_prep_reg(bool on);
// The Q4_K block kernel's A build (DS_MVB_BUILD; matvec_wgmma_block.cuh wgb::build_setting), the same bits either way:
// 1 = one LOP3 per half2, the x descriptors from one base per block, the scale terms once per half block (the default),
// 0 = the form before build17.
int matvec_batched_block_build();
void set_matvec_batched_block_build(int form);
// The Q4_K block kernel's kLean form (DS_MVB_LEAN; matvec_wgmma_block.cuh wgb::lean_setting), the same bits either
// way: 1 = the producer's state in shared memory and the epilogue's indices re-read (no spill in the <3> kernel) for
// every kFast kernel, 0 = the form before sp19, 2 (the default) = kLean for the 3-warpgroup kernels only.
int matvec_batched_block_lean();
void set_matvec_batched_block_lean(int on);
// The 2-warpgroup Q4_K block kernel's mins (DS_MVB_MINW; matvec_wgmma.cuh wg::minw_setting): true (the default) = one
// m64n64k16 wgmma per block on sums prepared in its B layout, false = 8 mma.sync per warp and block. Another
// summation order inside the tensor pipe: within float64 tolerance, not the same bits.
bool matvec_batched_mins_wgmma();
void set_matvec_batched_mins_wgmma(bool on);
int matvec_batched_split_reduce();
void set_matvec_batched_split_reduce(int mode);
// The smallest batch that the current settings send to a wgmma kernel for this weight type (Q4_K: 25; Q6_K:
// 25 or DS_MVB_WG_Q6K_MIN), 65 where none is used (switched off, unavailable, other types; the gemm path).
int matvec_batched_wgmma_min_batch(GgmlType type);
// cols27: batches of <= N of this type run as N batch-1 products (matvec: the weights read N times at the batch-1
// kernels' ~3.5 TB/s instead of once at the batched kernels' ~750 GB/s below B = 25), so their columns have batch 1's
// bits. N from DS_MVB_COLUMNS (default 2 since session 28: H100, 9B step at B = 2 5.18 vs 5.88 ms; at B = 3 / 4 with
// N = 4 7.42 / 9.69 vs 6.05 / 6.15: slower; 0: off); Q4_K and Q6_K only; B = 2 of the shapes that matvec_pair takes
// goes there first. A hook for tests and A/B runs; not thread-safe against concurrent launches.
int matvec_batched_columns(GgmlType type);
void set_matvec_batched_columns(int n);
// pair28 / quad28: Y[nseq, rows] = X[nseq, cols] · Wᵀ (+ Y) for nseq <= 4 sequences in one pass over the weights by
// the batch-1 stream kernel's multi-sequence form (matvec_stream.cuh, kernel<..., kB = 2 / 4>: the x digits of two
// sequences per n8 tile of the mma, one tile for kB 2 (batch 1's mma count), two for kB 4); Q4_K only, where the
// stream kernel takes the shape and kB x regions fit its shared memory (the 9B's ffn_down [4096 x 12288] takes kB 2,
// not 4). q6m28: Q6_K likewise (matvec_stream_q6.cuh, kernel<..., kB = 2 / 4>: the 6-bit codes built once, one mma per
// group and sequence; DS_MVB_Q6K_QUAD=0: pairs only). DS_MVB_PAIR=0: neither. matvec_batched runs batches of <=
// matvec_batched_multi(type) sequences (DS_MVB_MULTI, default 8; Q6_K at most 4) as groups of 4 / 3 / 2 (and a last
// single one) through it where it takes them; the bits are neither batch 1's nor the batched kernels', and depend on
// the group's kB. H100, 9B step: Q4_K alone (session 28 call 2) B = 2 3.852 ms (5.164 as two batch-1 products, 5.907
// by the batched kernels), 3 4.424 (6.071), 4 4.434 (6.171), in groups up to 8: 6 6.170 (6.492), 8 6.741 (6.816);
// with Q6_K too (call 3) B = 2 3.137, 3 4.028, 4 4.154 (4.458 with Q6_K in pairs), 8 7.800 with Q6_K in two groups
// of 4 (6.775 without any: hence Q6_K's limit of 4).
bool matvec_multi_takes(GgmlType type, int64_t rows, int64_t cols, int nseq);
Status matvec_multi(GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, float* y, int nseq,
                    cudaStream_t stream, bool accumulate = false);
int matvec_batched_multi(GgmlType type);
void set_matvec_batched_multi(int n);
// fold29: matvec_multi of rms_norm(x) · norm_w (in.x, in.norm_w, in.eps; in.gate not taken; Q4_K only: the Q6_K kernel's
// spills grew with it), the norm made per sequence
// inside the kernel's staging of x; xn (not null): the normalised x written there too ([nseq][cols]), which the kernel
// does only where it stages x in one round (matvec_multi_norm_takes with xn = true). x, norm_w, xn 16-byte aligned.
bool matvec_multi_norm_takes(GgmlType type, int64_t rows, int64_t cols, int nseq, bool xn);
Status matvec_multi_norm(GgmlType type, const void* w, int64_t rows, int64_t cols, const MatvecInput& in, float* y,
                         int nseq, float* xn, cudaStream_t stream, bool accumulate = false);
// s29: the stream kernels' plan (matvec_stream.cuh / matvec_stream_q6.cuh) for Q4_K / Q6_K rows of cols with kB x
// regions (1, 2 or 4) under the current tuning: consumer warps and ring stages ({0, 0} where it does not fit). Host
// only (no device call); the tests check that 16 consumer warps always get an even stage count (mvq::even_stages).
struct MatvecStreamPlan {
  int warps = 0, stages = 0;
};
MatvecStreamPlan matvec_stream_plan(GgmlType type, int64_t cols, int kB);
// fold29's switch (DS_MVB_MULTI_NORM = N, default 6; 8 at most): matvec_batched_folds / matvec_batched_in take the
// multi-sequence kernels' norm at 2 <= B <= N (0: never).
int matvec_batched_multi_norm();
void set_matvec_batched_multi_norm(int max_batch);

}  // namespace ds::cuda

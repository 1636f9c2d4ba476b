// Switch for the scale-folding Q4_K batched kernel (matvec_fold.cuh): on by default for the GEMM path with
// 3 terms (its accuracy class; the 2-term setting keeps matvec_gemm.cuh's faster, less accurate kernel).
// DS_MVB_FOLD=0 turns it off (Q4_K then uses matvec_gemm.cuh's 3-term kernel). Used by tests and benches.
#pragma once

namespace ds::cuda {

bool matvec_batched_fold();
void set_matvec_batched_fold(bool on);
// Where the fold kernel applies d (matvec_fold.cuh kMode 0, 1, 2); -1: off.
int matvec_batched_fold_mode();
void set_matvec_batched_fold_mode(int mode);

}  // namespace ds::cuda

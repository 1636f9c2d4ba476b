#!/bin/bash
# types20 call 1 (H200 or H100): the CUDA kernels of Q4_1, Q5_1, Q2_K, Q3_K, IQ3_XXS, IQ3_S (branch types20), never
# run on a GPU. Every per-op GPU test that loops over the CUDA types (they now include the six), the whole-model check
# (tiny-sym with its matrices in each new type: CUDA vs CPU intermediate by intermediate), the fixture models' own
# checks (the same-bits refactor of the dump test; the old types must be unchanged), memcheck of the new types' dequant /
# matvec / embedding / prefill tests, and the register counts of the new instantiations.
# Lives in devwork-types20/ as go.sh beside b.tar.xz (tools/gpu_bundle.sh of branch types20; see README.md here).
# Run as: cd devwork-types20 && OUT=$OUT timeout 400 bash go.sh   (timeout_s 420; ~150-250 s expected + cold start)
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
TC=$B/test_cuda; TM=$B/test_cuda_model; TP=$B/test_cuda_prefill
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$B/deltaserve" --version | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
t() { local name=$1 lim=$2; shift 2
  echo "==== $name $*" > "$OUT/t_$name.log"; timeout "$lim" "$@" >> "$OUT/t_$name.log" 2>&1 < /dev/null
  local rc=$?; echo "rc=$rc" >> "$OUT/t_$name.log"; say "$name rc=$rc"; }
# Phase A (at once): the per-op tests over every CUDA type, the prefill GEMM, the model tests.
OPS='CudaQuantTraits.*:CudaInfra.*:CudaDequant.*:CudaOps.GetRows:CudaMatvec.MatchesCpuDotRow:CudaMatvec.Accumulate'
OPS="$OPS:CudaMatvec.BatchedMatchesCpu:CudaMatvec.RejectsBadInput:CudaMatvecBatched.MatchesFloat64PerBatchRow"
OPS="$OPS:CudaMatvecBatched.Accumulate:CudaMatvecBatched.BatchOneIsMatvec:CudaMatvecBatched.RunToRunIdentical"
P=()
for k in 0 1 2; do GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$k t ops$k 200 "$TC" --gtest_filter="$OPS" & P+=($!); done
t gemm 200 "$TP" --gtest_filter='PrefillGemm.*' & P+=($!)
t types 200 "$TM" --gtest_filter='Types/CudaVsCpuDumpsTypes.*:Models/CudaVsCpuDumps.*:CudaLoad.*' & P+=($!)
t model 200 "$TM" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
grep -hE "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran|^\[ dump" "$OUT"/t_*.log | tee -a "$OUT/steps.log"
# Phase B: memcheck of the new types' kernels (dequant, tile matvec, batched fma path, embeddings, prefill GEMM).
t mem_ops 90 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TC" --gtest_filter='CudaDequant.*:CudaOps.GetRows:CudaMatvec.MatchesCpuDotRow'
t mem_model 90 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='Types/CudaVsCpuDumpsTypes.*Q3_K*:Types/CudaVsCpuDumpsTypes.*IQ3_S*'
grep -hE "ERROR SUMMARY|rc=" "$OUT"/t_mem_*.log | tee -a "$OUT/steps.log"
# Registers / spills of every kernel instantiated for the new types (GgmlType ids 3 Q4_1, 7 Q5_1, 10 Q2_K, 11 Q3_K,
# 18 IQ3_XXS, 21 IQ3_S) beside the old ones (12 Q4_K, 14 Q6_K) in the binary's resource usage.
"$CO" --dump-resource-usage "$TC" 2>/dev/null | grep -E "GgmlTypeE(3|7|10|11|12|14|18|21)E" | \
  sed -E 's/^.*Function ([^:]*):.*REG:([0-9]+) STACK:([0-9]+).*LOCAL:([0-9]+).*$/REG \2 STACK \3 LOCAL \4 \1/' | \
  sort -u > "$OUT/regs.txt"; wc -l "$OUT/regs.txt" | tee -a "$OUT/steps.log"
say "done"

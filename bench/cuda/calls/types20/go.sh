#!/bin/bash
# types20 call 1 (H200 or H100): the CUDA kernels of Q4_1, Q5_1, Q2_K, Q3_K, IQ3_XXS, IQ3_S (branch types20), never
# run on a GPU. Every per-op GPU test that loops over the CUDA types (they now include the six), the whole-model check
# (tiny-sym with its matrices in each new type: CUDA vs CPU intermediate by intermediate), the fixture models' own
# checks (the same-bits refactor of the dump test; the old types must be unchanged), memcheck of the new types' dequant /
# matvec / embedding / prefill tests, and the register counts of the new instantiations.
# Lives in devwork-types20/ as go.sh beside b.tar.xz (tools/gpu_bundle.sh of branch types20; see README.md here).
# Run as: cd devwork-types20 && OUT=$OUT timeout 585 bash go.sh   (timeout_s 595; ~450-550 s expected + cold start)
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
# Phase C's models, written in the background while the tests run (CPU work): 9B and 0.8B as Q3_K_M and Q4_K_M.
W=/tmp/dsv; mkdir -p "$W"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for m in 0.8B:Q3_K_M 0.8B:Q4_K_M 9B:Q3_K_M 9B:Q4_K_M; do s=${m%%:*} ty=${m##*:}
    "$DS_BIN" synth --size $s --type $ty --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s-$ty.gguf" > /dev/null 2>&1 && touch "$W/m$s-$ty.ok"
  done ) &
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
t mem_ops 90 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TC" --gtest_filter='CudaDequant.*:CudaOps.GetRows:CudaMatvec.MatchesCpuDotRow' &
t mem_model 90 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='Types/CudaVsCpuDumpsTypes.*Q3_K*:Types/CudaVsCpuDumpsTypes.*IQ3_S*' &
wait
grep -hE "ERROR SUMMARY|rc=" "$OUT"/t_mem_*.log | tee -a "$OUT/steps.log"
# Registers / spills of every kernel instantiated for the new types (GgmlType ids 3 Q4_1, 7 Q5_1, 10 Q2_K, 11 Q3_K,
# 18 IQ3_XXS, 21 IQ3_S) beside the old ones (12 Q4_K, 14 Q6_K) in the binary's resource usage.
"$CO" --dump-resource-usage "$TC" 2>/dev/null | grep -E "GgmlTypeE(3|7|10|11|12|14|18|21)E" | \
  sed -E 's/^.*Function ([^:]*):.*REG:([0-9]+) STACK:([0-9]+).*LOCAL:([0-9]+).*$/REG \2 STACK \3 LOCAL \4 \1/' | \
  sort -u > "$OUT/regs.txt"; wc -l "$OUT/regs.txt" | tee -a "$OUT/steps.log"
# Phase C: speed of the new types (the generic tile matvec; no stream / direct decoders): tg128 of the Q3_K_M synths
# beside the Q4_K_M ones (bench/results/cuda.jsonl's lines), and the 9B Q3_K_M step kernel by kernel.
for m in 0.8B-Q3_K_M 0.8B-Q4_K_M 9B-Q3_K_M 9B-Q4_K_M; do
  while [ ! -e "$W/m$m.ok" ] && [ $(el) -lt 380 ]; do sleep 1; done
  [ -e "$W/m$m.ok" ] || { say "no $m"; continue; }
  timeout 40 "$DS_BIN" bench -m "$W/m$m.gguf" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 $m: $(tail -1 "$OUT/bench.jsonl" | cut -c1-300)"
  [ $m = 9B-Q3_K_M ] && timeout 30 "$DS_BIN" cuda-bench -m "$W/m$m.gguf" --tg 16 --breakdown --top 12 > "$OUT/breakdown_q3.log" 2>&1
done
# Phase D (issue 7): serving at 64 clients with the throughput setting --prefill-budget 4096, f32 and f16 K / V
# caches (kv19), on the 9B Q4_K_M synth of phase C.
if [ -e "$W/m9B-Q4_K_M.ok" ]; then for e in DS_DEFAULT=1 DS_KV_F16=1; do [ $(el) -lt 470 ] || { say "skip serve $e"; continue; }
  env $e DS_SERVE_BENCH_OUT="$OUT/serve_b4096.jsonl" timeout 60 bash "$D/../tools/serve_bench.sh" "$W/m9B-Q4_K_M.gguf" \
    --levels 64 --budget-s 50 --server-args "--prefill-budget 4096" --label "budget 4096 $e" >> "$OUT/serve_b4096.log" 2>&1
  say "serve 64 budget 4096 $e rc=$?: $(tail -1 "$OUT/serve_b4096.jsonl" | cut -c1-200)"; done; fi
say "done"

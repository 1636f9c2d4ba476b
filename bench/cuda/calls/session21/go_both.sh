#!/bin/bash
# Session 21: kv19 (f16 K / V caches) and types20 (six more CUDA weight types) checked in ONE call, for when the
# device time left allows one call only (each of calls/session19_kv and calls/types20 needs ~600 s of its own).
# Lives in devwork21/ as go_both.sh beside b.tar.xz (tools/gpu_bundle.sh of main + kv19 + types20).
# Run as: cd devwork21 && OUT=$OUT timeout 585 bash go_both.sh   (timeout_s 595)
# Phase A (~200 s, everything at once): the types' per-op tests, prefill GEMM and whole-model type cases; the whole
# test_cuda_model / test_cuda_prefill with f32 and with f16 caches; test_engine's GPU tests; memcheck / racecheck of
# both changes. Phase B: 64 sequences after 512-token prompts, f32 vs f16 interleaved three times; tg128 9B f32 / f16;
# tg128 of 0.8B / 9B Q3_K_M. Phase C: serving with f16 caches at 1 / 8 / 32 / 64 clients, and at 64 with the
# throughput setting --prefill-budget 4096.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; TM=$B/test_cuda_model; TP=$B/test_cuda_prefill; TE=$B/test_engine
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
t() { local name=$1 lim=$2; shift 2
  echo "==== $name $*" > "$OUT/t_$name.log"; timeout "$lim" "$@" >> "$OUT/t_$name.log" 2>&1 < /dev/null
  local rc=$?; echo "rc=$rc" >> "$OUT/t_$name.log"; say "$name rc=$rc"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for m in 9B:Q4_K_M 0.8B:Q3_K_M 0.8B:Q4_K_M 9B:Q3_K_M; do s=${m%%:*} ty=${m##*:}
    "$X" synth --size $s --type $ty --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$s-$ty.gguf" > /dev/null 2>&1 && touch "$W/m$s-$ty.ok"
  done ) &
# ---- Phase A
OPS='CudaQuantTraits.*:CudaInfra.*:CudaDequant.*:CudaOps.GetRows:CudaMatvec.MatchesCpuDotRow:CudaMatvec.Accumulate'
OPS="$OPS:CudaMatvec.BatchedMatchesCpu:CudaMatvec.RejectsBadInput:CudaMatvecBatched.MatchesFloat64PerBatchRow"
OPS="$OPS:CudaMatvecBatched.Accumulate:CudaMatvecBatched.BatchOneIsMatvec:CudaMatvecBatched.RunToRunIdentical:CudaOps.*"
P=()
for k in 0 1 2; do GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$k t ops$k 200 "$TC" --gtest_brief=1 --gtest_filter="$OPS" & P+=($!); done
t gemm 200 "$TP" --gtest_filter='PrefillGemm.*' & P+=($!)
t types 200 "$TM" --gtest_filter='Types/CudaVsCpuDumpsTypes.*:Models/CudaVsCpuDumps.*:CudaLoad.*' & P+=($!)
t model 200 "$TM" --gtest_brief=1 & P+=($!)
t model_f16 200 env DS_KV_F16=1 "$TM" --gtest_brief=1 & P+=($!)
t prefill 200 "$TP" --gtest_brief=1 & P+=($!)
t prefill_f16 200 env DS_KV_F16=1 "$TP" --gtest_brief=1 & P+=($!)
t engine 200 "$TE" --gtest_filter='EngineOnModel.*:CudaBackendServing.*' & P+=($!)
t mem_kv 200 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='CudaState.F16KvCacheNearF32' & P+=($!)
t race_kv 200 env DS_KV_F16=1 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='Models/CudaAttnFused.LevelsGiveTheThreeKernelsLogits/tiny_gqa_q4_k_m' & P+=($!)
t mem_ops 200 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TC" --gtest_filter='CudaDequant.*:CudaOps.GetRows:CudaMatvec.MatchesCpuDotRow' & P+=($!)
t mem_model 200 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='Types/CudaVsCpuDumpsTypes.*Q3_K*:Types/CudaVsCpuDumpsTypes.*IQ3_S*' & P+=($!)
wait "${P[@]}"
grep -HE "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran|ERROR SUMMARY|RACECHECK SUMMARY|^rc=|F16|f16" "$OUT"/t_*.log | cut -c1-300 | tee -a "$OUT/steps.log"
# ---- Phase B
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt 420 ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
M9=$W/m9B-Q4_K_M.gguf
if waitm 9B-Q4_K_M; then
  for r in 1 2 3; do for e in DS_DEFAULT=1 DS_KV_F16=1; do [ $(el) -lt 400 ] || continue
    timeout 40 env $e "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 --prompt 512 --ctx 1024 --breakdown --top 3 >> "$OUT/cb.log" 2>&1
    say "batch 64 x 512 $e: $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-200)"; done; done
  for e in DS_DEFAULT=1 DS_KV_F16=1; do [ $(el) -lt 420 ] || continue
    timeout 40 env $e "$X" bench -m "$M9" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
    grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 9B $e: $(tail -1 "$OUT/bench.jsonl" | grep -o '"tokens_per_s": [0-9.]*')"; done
fi
for m in 0.8B-Q3_K_M 0.8B-Q4_K_M 9B-Q3_K_M; do [ $(el) -lt 430 ] || continue; waitm $m || { say "no $m"; continue; }
  timeout 40 "$X" bench -m "$W/m$m.gguf" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 >> "$OUT/bench.jsonl"; say "tg128 $m: $(tail -1 "$OUT/bench.jsonl" | grep -o '"tokens_per_s": [0-9.]*')"
done
[ -e "$W/m9B-Q3_K_M.ok" ] && [ $(el) -lt 440 ] && timeout 30 "$X" cuda-bench -m "$W/m9B-Q3_K_M.gguf" --tg 16 --breakdown --top 12 > "$OUT/breakdown_q3.log" 2>&1
# ---- Phase C
if [ -e "$W/m9B-Q4_K_M.ok" ]; then
  [ $(el) -lt 450 ] && DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 75 bash "$D/../tools/serve_bench.sh" "$M9" \
    --levels 1,8,32,64 --budget-s 65 --label "f16 K/V" >> "$OUT/serve.log" 2>&1; say "serve f16 rc=$?"
  [ $(el) -lt 530 ] && DS_KV_F16=1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" \
    --levels 64 --budget-s 40 --server-args "--prefill-budget 4096" --label "f16 K/V, budget 4096" >> "$OUT/serve.log" 2>&1; say "serve f16 4096 rc=$?"
  python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'])" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
fi
say done

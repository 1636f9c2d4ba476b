#!/bin/bash
# kq21: the direct-load Q3_K / Q5_K batch-1 decoders (mvd::Q3K / Q5K behind DS_MATVEC_DIRECT_KQ, default off) on a
# GPU for the first time. Lives in devkq21/ as go.sh beside b.tar.xz (tools/gpu_bundle.sh of main + kq21; README.md).
# Run as: cd devkq21 && OUT=$OUT timeout 420 bash go.sh   (timeout_s 450; target under 400 s)
# Phase A (at once, while the 9B synths are written): test_cuda's CudaMatvec.* batch-1 / batched cases (the
# Stream* / TensorCore* ones touch neither type nor the switch) with DS_MATVEC_DIRECT_KQ=1 and =0 (the new
# DirectKQuantMatchesCpu sets the switch both ways itself); memcheck of DirectKQuantMatchesCpu at its small shapes
# and of Accumulate (every type, 301 x 2048) with the switch on. Phase B: tg128 of the 9B Q3_K_M / Q5_K_M / Q4_K_M
# synths, DS_MATVEC_DIRECT_KQ=0 / =1 interleaved, two rounds (Q4_K_M has neither type: the control); after round 1
# the per-kernel breakdown of the 9B Q3_K_M step with the switch on.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
t() { local name=$1 lim=$2; shift 2
  echo "==== $name $*" > "$OUT/t_$name.log"; timeout "$lim" "$@" >> "$OUT/t_$name.log" 2>&1 < /dev/null
  local rc=$?; echo "rc=$rc" >> "$OUT/t_$name.log"; say "$name rc=$rc"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
for ty in Q3_K_M Q5_K_M Q4_K_M; do
  ( "$X" synth --size 9B --type $ty --vocab "$W/vocab.gguf" --threads 4 -o "$W/m9B-$ty.gguf" > "$OUT/synth_$ty.log" 2>&1 &&
    touch "$W/m9B-$ty.ok" ) &
done
# ---- Phase A
KQ='CudaMatvec.*-CudaMatvec.Stream*:CudaMatvec.TensorCore*'
P=()
# Two shards a switch setting (the new test is one shard's whole share).
for k in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$k t kq_on$k 170 env DS_MATVEC_DIRECT_KQ=1 "$TC" --gtest_brief=1 --gtest_filter="$KQ" & P+=($!)
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$k t kq_off$k 170 env DS_MATVEC_DIRECT_KQ=0 "$TC" --gtest_brief=1 --gtest_filter="$KQ" & P+=($!)
done
t mem_kq 170 env DS_TEST_STREAM_SMALL=1 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TC" \
  --gtest_filter='CudaMatvec.DirectKQuantMatchesCpu' & P+=($!)
t mem_on 170 env DS_MATVEC_DIRECT_KQ=1 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TC" \
  --gtest_filter='CudaMatvec.Accumulate' & P+=($!)
wait "${P[@]}"
grep -HE "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran|ERROR SUMMARY|^rc=|Failure|worst row" "$OUT"/t_*.log | cut -c1-300 |
  tee -a "$OUT/steps.log"
# ---- Phase B
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt 330 ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
tg() { local ty=$1 on=$2; [ $(el) -lt 370 ] || return; waitm 9B-$ty || return
  DS_MATVEC_DIRECT_KQ=$on timeout 40 "$X" bench -m "$W/m9B-$ty.gguf" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/bench.log" 2>&1
  grep '^{' "$OUT/bench.log" | tail -1 | sed "s/^{/{\"kq\": $on, \"mix\": \"$ty\", /" >> "$OUT/bench.jsonl"
  say "tg128 9B $ty DS_MATVEC_DIRECT_KQ=$on: $(tail -1 "$OUT/bench.jsonl" | grep -oE '"tokens_per_s": ?[0-9.]+')"; }
for r in 1 2; do
  for ty in Q3_K_M Q5_K_M Q4_K_M; do tg $ty 0; tg $ty 1; done
  if [ $r = 1 ] && [ $(el) -lt 330 ] && waitm 9B-Q3_K_M; then
    DS_MATVEC_DIRECT_KQ=1 timeout 40 "$X" cuda-bench -m "$W/m9B-Q3_K_M.gguf" --tg 16 --breakdown --top 12 > "$OUT/breakdown_q3.log" 2>&1
    say "breakdown 9B Q3_K_M kq=1 rc=$?"; grep -E "^decode|Q3_K|Q5_K|matvec" "$OUT/breakdown_q3.log" | head -16 | tee -a "$OUT/steps.log"
  fi
done
say done

#!/bin/bash
# gdn11 device call 1: the GDN kernels' bit-equality tests (GdnStep.*), kernel times per batch and the state-copy
# rooflines (GdnBench.Time, 3 and 2 stages), Nsight Compute on one launch of each kernel / roofline at B = 64
# (GdnBench.Profile), test_cuda_model (default = tma from 16 sequences; DS_GDN_TMA_MIN=1 = tma at every batch;
# DS_GDN_TMA=0 = the split / gdn_kernel paths), test_cuda_prefill, 9B logits bit-compare (gdn_kernel vs tma at
# batch 1), cuda-bench 9B B = 64 / 16 / 1, memcheck + racecheck. Run from an ignored devwork-gdn11/ in /work/main
# (b.tar.xz = tools/gpu_bundle.sh output + this file as go.sh) as OUT=$OUT bash devwork-gdn11/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsg11; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model
END=${END:-170}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
left() { local l=$1 rem=$((END - $(el))); [ $rem -lt $l ] && l=$rem; echo $l; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version 2>&1 | head -1 | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
# 1. bits of the three kernels (+ float64), then the model tests two at a time while the 9B is made
timeout 60 "$TM" --gtest_filter='GdnStep.*' > "$OUT/gdn.log" 2>&1 < /dev/null; say "GdnStep rc=$?"
grep -E "^\[gdn11\]|FAILED|PASSED|Failure|Expected|Which is" "$OUT/gdn.log" | head -30 | tee -a "$OUT/steps.log"
t() { local name=$1; shift; echo "==== $name" > "$W/t_$name.log"; env "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log"; }
t model_default timeout 60 "$TM" --gtest_brief=1 & P1=$!
t model_tma_min1 DS_GDN_TMA_MIN=1 timeout 60 "$TM" --gtest_brief=1 & P2=$!
wait $P1 $P2
t model_tma0 DS_GDN_TMA=0 timeout 60 "$TM" --gtest_brief=1 --gtest_filter='-CudaCli.*:Gdn*' & P1=$!
t prefill timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 & P2=$!
t prefill_tma_min1 DS_GDN_TMA_MIN=1 timeout 60 "$B/test_cuda_prefill" --gtest_brief=1 & P3=$!
wait $P1 $P2 $P3
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do say "$(head -1 $f) $(grep -E '^rc|tests ran|PASSED|FAILED' $f | tr '\n' ' ' | cut -c1-300)"; done
# 2. kernel times (nothing else on the GPU)
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 60 ]; do sleep 1; done
DS_GDN_BENCH=1 timeout 40 "$TM" --gtest_filter='GdnBench.Time' >> "$OUT/gdn.log" 2>&1 < /dev/null; say "bench rc=$?"
grep -E "^\[gdn11\] B" "$OUT/gdn.log" | tee -a "$OUT/steps.log"
echo "==== DS_GDN_TMA_STAGES=2" >> "$OUT/gdn.log"
DS_GDN_TMA_STAGES=2 DS_GDN_BENCH=1 timeout 30 "$TM" --gtest_filter='GdnBench.Time' >> "$OUT/gdn.log" 2>&1 < /dev/null; say "bench stages 2 rc=$?"
grep -A40 "DS_GDN_TMA_STAGES=2" "$OUT/gdn.log" | grep -E "^\[gdn11\] B .* (tma|copy tma)" | sed 's/^/stages2 /' | tee -a "$OUT/steps.log"
# 3. the 9B
M=$W/m9B.gguf
python3 -c "print(' '.join(str(1000 + 37 * i) for i in range(40)))" > "$W/ids.txt"
cb() { local name=$1 e=$2 b=$3; local l=$(left 25); [ $l -gt 5 ] || { say "skip $name"; return; }
  echo "==== $name ($e, batch $b)" >> "$OUT/cb.log"; env $e timeout $l "$X" cuda-bench -m "$M" --batch $b --tg 32 --reps 2 --select 0 --breakdown --top 8 >> "$OUT/cb.log" 2>&1 < /dev/null
  say "cb $name rc=$? | $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-80) | $(grep -E '^gdn rule' $OUT/cb.log | tail -1)"; }
cb "B64 tma" DS_DEFAULT=1 64
cb "B64 old" DS_GDN_TMA=0 64
cb "B64 tma st2" DS_GDN_TMA_STAGES=2 64
cb "B16 tma" DS_DEFAULT=1 16
cb "B16 old" DS_GDN_TMA=0 16
cb "B1 default" DS_DEFAULT=1 1
cb "B1 tma" DS_GDN_TMA_MIN=1 1
cb "B64 tma again" DS_DEFAULT=1 64
cb "B64 old again" DS_GDN_TMA=0 64
i=0; for v in "DS_GDN_TMA=0 DS_GDN_SPLIT=0" "DS_GDN_TMA_MIN=1"; do
  env $v timeout 20 "$X" logits --backend cuda -m "$M" --tokens-file "$W/ids.txt" --out "$W/l$i.f32" --decode-from 8 >> "$OUT/cb.log" 2>&1 < /dev/null
  say "logits $v rc=$?"; i=$((i + 1)); done
cmp "$W/l0.f32" "$W/l1.f32" && say "9B logits: tma (every batch) bit-equal to gdn_kernel" || say "9B logits: tma DIFFERENT from gdn_kernel"
# 4. Nsight Compute: one launch of each kernel and roofline at B = 64
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
l=$(left 45); if [ $l -gt 15 ]; then
  DS_GDN_BENCH=1 timeout $l "$NCU" --clock-control none -k regex:"gdn_|copy_rows" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum \
    -o "$OUT/rep" -f "$TM" --gtest_filter='GdnBench.Profile' > "$OUT/ncu.txt" 2>&1 < /dev/null
  say "ncu rc=$?"
  timeout 20 "$NCU" -i "$OUT/rep.ncu-rep" --page raw --csv --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_long_scoreboard,smsp__average_warp_latency_issue_stalled_barrier,launch__registers_per_thread > "$W/raw.csv" 2>&1
  python3 - "$W/raw.csv" <<'EOF' | tee -a "$OUT/steps.log"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = next((i for i, r in enumerate(rows) if 'Kernel Name' in r), None)
if h is None: print(open(sys.argv[1]).read()[:2000]); sys.exit()
hd = rows[h]
for r in rows[h + 2:]:
    d = dict(zip(hd, r))
    print('ncu', d.get('Kernel Name', '')[:40], '|', ' '.join(f"{k.split('__')[1][:28]}={v}" for k, v in d.items() if '__' in k))
EOF
  timeout 20 "$NCU" -i "$OUT/rep.ncu-rep" --page details >> "$OUT/ncu.txt" 2>&1
fi
# 5. sanitizers (tma at every batch: decode at B = 3 / 2 and the prefills through the step kernels)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() { local name=$1; shift; local l=$(left 40); [ $l -gt 5 ] || { say "skip $name"; return; }
  echo "==== $name" >> "$OUT/san.log"; env "$@" >> "$OUT/san.log" 2>&1 < /dev/null; say "$name rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/san.log | tail -2 | tr '\n' ' ')"; }
san "memcheck tma_min1" DS_GDN_TMA_MIN=1 timeout $(left 40) "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone:*TeacherForcedStepsMatchReference*q8*:GdnStep.KernelsGiveSameBitsMultiToken'
san "racecheck tma_min1 q8" DS_GDN_TMA_MIN=1 timeout $(left 40) "$CS" --tool racecheck --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='*TeacherForcedStepsMatchReference*q8*'
san "racecheck tma_min1 batched" DS_GDN_TMA_MIN=1 timeout $(left 60) "$CS" --tool racecheck --error-exitcode 1 "$TM" --gtest_brief=1 --gtest_filter='CudaState.BatchedDecodeEqualsEachAlone'
say done

#!/bin/bash
# Next-session profiling call (written in session 8, not yet run): Nsight Compute on the kernels that hold the
# remaining gaps, so the next change is chosen from counters rather than guesses:
#   1. batched Q4_K block kernel (wgb::block_kernel) and Q6_K ring (wg6r::) at B = 64: tensor-pipe utilisation vs
#      issue slots / stall reasons (is it dequant issue, the wgmma waits, or shared-memory bandwidth?);
#   2. the GDN split kernel at B = 64: DRAM throughput and stall reasons (per-block latency vs bandwidth);
#   3. batch-1 Q6_K / Q4_K stream kernels (mvq6:: / mvq::) on the 9B: DRAM throughput, stalls, tail.
# Carried as devwork-X/ holding b.tar.xz (tools/gpu_bundle.sh output, as run_merged_main_device.sh) and this script
# as go.sh; run `OUT=$OUT bash devwork-X/go.sh` (~150-250 s + the cold start). ncu needs --clock-control none here
# (device/H200.md). Output: one text report per target under $OUT (ncu --print-summary none, sections below).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64"
X=$B/deltaserve
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
"$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" > /dev/null 2>&1
say "synth done; ncu = $NCU"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
prof() {  # name, kernel regex (demangled), launches to skip, batch
  say "== $1"
  timeout 120 "$NCU" --clock-control none --kernel-name-base demangled -k "regex:$2" --launch-skip "$3" --launch-count 2 \
    $SECTIONS --graph-profiling node "$X" cuda-bench -m "$W/m9B.gguf" --tg 2 --reps 1 --batch "$4" --select 0 \
    > "$OUT/ncu_$1.txt" 2>&1
  say "== $1 rc=$?"; grep -E "Duration|Throughput|Tensor|Issue Slots|Stall|Achieved Occupancy|Registers" "$OUT/ncu_$1.txt" | head -30 | tee -a "$OUT/steps.log"
}
prof q4k_block_b64 'wgb::block_kernel' 20 64
prof q6k_ring_b64 'wg6r::' 4 64
prof gdn_split_b64 'gdn_split_kernel' 4 64
prof q6k_stream_b1 'mvq6::' 8 1
prof q4k_stream_b1 'mvq::' 30 1
say done

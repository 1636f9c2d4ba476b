#!/usr/bin/env bash
# GPU check of the CUDA model (issue 5), in one run on a machine with an NVIDIA GPU; everything is logged to
# $OUT (default ./out). Steps, each under its own time limit, each reported PASS/FAIL/SKIP in the summary:
#   1. the GPU model tests (test_cuda_model: fixture logits within 2e-3, CPU vs CUDA per intermediate, batching,
#      snapshots, CLI) and, if present, the kernel tests (test_cuda)
#   2. decode benchmarks on synthetic models (deltaserve synth, real shapes, Q4_K_M, the Qwen3 vocabulary padded
#      to 248,320): tg128 at batch 1 for 0.8B, 9B, 27B (targets 3000 / 570 / 195 tok/s), the 9B at batch 8, and a
#      per-kernel breakdown of one decode step of each
#   3. compute-sanitizer memcheck and racecheck on the fixture models
# $OUT gets four files (the device tool brings back at most eight): gpu_model_check.log (progress, the tail
# of each step), steps.log (every step's full output), bench.jsonl (one JSON line per benchmark), summary.txt.
# Binaries come prebuilt (no Debian dev packages on the GPU machine): BIN_DIR holds deltaserve, test_cuda_model
# and optionally test_cuda, with lib/ beside them for the shared libraries (tools/gpu_bundle.sh makes that
# folder here); or BUILD points at a build tree. Fixtures: $DS_FIXTURES, else BIN_DIR/fixtures, else
# shared/fixtures or ../shared/fixtures.
# Usage: OUT=/path BIN_DIR=gpu-bundle tools/gpu_model_check.sh [--quick] [--no-synth] [--no-sanitizer]
set -u
QUICK=0; SYNTH=1; SAN=1
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    --no-synth) SYNTH=0 ;;
    --no-sanitizer) SAN=0 ;;
    *) echo "unknown option $a"; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/out}
WORK=${WORK:-/tmp/ds_gpu_check}
mkdir -p "$OUT" "$WORK/logs"
LOG="$OUT/gpu_model_check.log"
: > "$LOG"
: > "$OUT/steps.log"
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
SUMMARY=()
result() { SUMMARY+=("$1: $2"); log "== $1: $2"; }

# --- locate binaries, libraries, fixtures -------------------------------------------------------------------
BIN_DIR=${BIN_DIR:-}
if [ -z "$BIN_DIR" ]; then
  BUILD=${BUILD:-build}
  DS="$BUILD/apps/deltaserve"; TCM="$BUILD/tests/cuda_model/test_cuda_model"; TC="$BUILD/tests/cuda/test_cuda"
else
  DS="$BIN_DIR/deltaserve"; TCM="$BIN_DIR/test_cuda_model"; TC="$BIN_DIR/test_cuda"
  [ -d "$BIN_DIR/lib" ] && export LD_LIBRARY_PATH="$(cd "$BIN_DIR/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for d in "${DS_FIXTURES:-}" "${BIN_DIR:+$BIN_DIR/fixtures}" shared/fixtures ../shared/fixtures; do
  if [ -n "$d" ] && [ -d "$d/models" ]; then export DS_FIXTURES="$(cd "$d" && pwd)"; break; fi
done
export DS_BIN="$(cd "$(dirname "$DS")" 2>/dev/null && pwd)/$(basename "$DS")"
log "deltaserve: $DS_BIN; tests: $TCM; fixtures: ${DS_FIXTURES:-none}; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv 2>&1 | tee -a "$LOG"
if ! "$DS" --help > /dev/null 2>>"$LOG"; then
  log "cannot run $DS (missing shared libraries? see above)"; ldd "$DS" 2>&1 | grep -i "not found" | tee -a "$LOG"
  result "binaries" "FAIL"; printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"; exit 1
fi

run_step() {  # name, limit seconds, command...
  local name=$1 limit=$2; shift 2
  log "-- $name: $*"
  timeout --kill-after=10 "$limit" "$@" > "$WORK/logs/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$WORK/logs/$name.log" >> "$LOG"
  { echo "===== $name (rc $rc): $*"; cat "$WORK/logs/$name.log"; } >> "$OUT/steps.log"
  if [ $rc -eq 0 ]; then result "$name" "PASS"; elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then result "$name" "TIMEOUT (${limit}s)"; else result "$name" "FAIL (rc $rc)"; fi
  return $rc
}

# --- 1. tests -------------------------------------------------------------------------------------------------
run_step test_cuda_model 240 "$TCM"
grep -E "^\[ (cuda|dump) " "$WORK/logs/test_cuda_model.log" | tee -a "$LOG"
if [ -x "$TC" ]; then run_step test_cuda 240 "$TC"; fi

# --- 2. decode benchmarks on synthetic models -----------------------------------------------------------------
if [ $SYNTH -eq 1 ]; then
  if "$DS" synth --help > /dev/null 2>&1; then
    VOCAB=""
    XZ="${DS_FIXTURES:-}/tokenizer/vocab-qwen3.gguf.xz"
    if [ -f "$XZ" ]; then
      if command -v xz > /dev/null; then xz -dc "$XZ" > "$WORK/vocab-qwen3.gguf"
      else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$XZ" > "$WORK/vocab-qwen3.gguf"; fi
      [ -s "$WORK/vocab-qwen3.gguf" ] && VOCAB="--vocab $WORK/vocab-qwen3.gguf"
    fi
    [ -z "$VOCAB" ] && log "no vocab-qwen3.gguf: synth uses its built-in vocabulary (a smaller output matrix than the real 248,320)"
    SIZES="0.8B 9B 27B"; [ $QUICK -eq 1 ] && SIZES="0.8B 9B"
    for size in $SIZES; do
      M="$WORK/qwen35-$size-q4_k_m.gguf"
      if [ ! -s "$M" ]; then run_step "synth_$size" 240 "$DS" synth --size "$size" --type Q4_K_M $VOCAB -o "$M" || continue; fi
      run_step "bench_${size}_b1" 240 "$DS" cuda-bench -m "$M" --tg 128 --reps 3 --breakdown --top 25 --json "$OUT/bench.jsonl"
      grep -E "^decode|^bytes per step" "$WORK/logs/bench_${size}_b1.log" | tee -a "$LOG"
      if [ "$size" = "9B" ]; then
        run_step "bench_${size}_b8" 180 "$DS" cuda-bench -m "$M" --tg 64 --batch 8 --reps 2 --json "$OUT/bench.jsonl"
        grep -E "^decode" "$WORK/logs/bench_${size}_b8.log" | tee -a "$LOG"
      fi
      [ "$size" = "27B" ] && rm -f "$M"  # 16.5 GB of disk back
    done
  else
    result "synth" "SKIP (this deltaserve has no synth subcommand: the apps helper's cmd_synth.cpp is not in this build)"
  fi
fi

# --- 3. compute-sanitizer -------------------------------------------------------------------------------------
if [ $SAN -eq 1 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -n "$CS" ]; then
    # One fixture end to end (prefill in 3 steps, 31 graph-replayed decode steps), CPU vs CUDA dumps (every
    # kernel with its dbg outputs), batching and snapshots.
    FILT='AllFiles/CudaFixtureLogits.TeacherForcedMatchesReference/tiny_gqa_q4_k_m:Models/CudaVsCpuDumps.*:CudaState.*'
    run_step memcheck 300 "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$TCM" --gtest_filter="$FILT"
    grep -E "ERROR SUMMARY|Invalid|out of bounds" "$WORK/logs/memcheck.log" | head -20 | tee -a "$LOG"
    FILT_R='AllFiles/CudaFixtureLogits.TeacherForcedMatchesReference/tiny_gqa_q4_k_m:Models/CudaVsCpuDumps.*'
    run_step racecheck 300 "$CS" --tool racecheck --racecheck-report hazard --error-exitcode 1 "$TCM" --gtest_filter="$FILT_R"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" "$WORK/logs/racecheck.log" | head -20 | tee -a "$LOG"
  else
    result "sanitizer" "SKIP (compute-sanitizer not found)"
  fi
fi

log "done in $(( $(date +%s) - T0 )) s"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"

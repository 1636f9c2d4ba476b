#!/usr/bin/env bash
# tools/gpu_prefill_check.sh: build + the prefill kernel tests + the prefill benchmark, in one run on the GPU
# machine (target: under 6 minutes on an H200 with 16 cores).
#
#   On a Debian dev machine, once:   tools/gpu_check.sh --prepare
#       fills build-devdeps/ (git-ignored: fmt/spdlog headers, GoogleTest sources) for machines without the
#       Debian dev packages. The prefill tests use no fixture files.
#   On the GPU machine (carry build-devdeps):   tools/gpu_prefill_check.sh
#       configures tools/gpu_prefill_check/CMakeLists.txt (core, quant, ops, cpu, cuda incl. src/cuda/prefill),
#       builds test_cuda_prefill and bench_cuda_prefill, runs both. Logs in $OUT (default build-gpu-prefill/out):
#       env.txt, build.log, test.log, bench.jsonl, bench.log, sanitizer.log, summary.txt (the short table, also
#       printed last).
# Environment: DS_GPU_ARCH (default 90), DS_BENCH_ARGS (default "--quick"; e.g. "--models 9B --tokens 4096"),
# DS_TEST_FILTER (gtest filter, default all), DS_SANITIZE=1 (also run compute-sanitizer memcheck and racecheck
# on the small stage and attention tests), DS_SKIP_BENCH=1.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
OUT=${OUT:-$repo/build-gpu-prefill/out}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH

{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== nvcc"; nvcc --version 2>&1 | tail -2
  echo "== cmake"; cmake --version 2>&1 | head -1
  echo "== c++"; c++ --version 2>&1 | head -1
  echo "== git"; git log --oneline -3 2>/dev/null || true
} > "$OUT/env.txt" 2>&1

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
B=build-gpu-prefill
if ! cmake -S tools/gpu_prefill_check -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES="${DS_GPU_ARCH:-90}" > "$OUT/build.log" 2>&1; then
  say "gpu_prefill_check: CONFIGURE FAILED (see build.log)"; tail -40 "$OUT/build.log"; exit 1
fi
if ! cmake --build "$B" --target test_cuda_prefill bench_cuda_prefill -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
  say "gpu_prefill_check: BUILD FAILED (see build.log)"; grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1
fi
say "gpu_prefill_check: built in $(( $(date +%s) - t0 )) s"

t1=$(date +%s)
timeout 240 "$B/test_cuda_prefill" --gtest_color=no ${DS_TEST_FILTER:+--gtest_filter=$DS_TEST_FILTER} > "$OUT/test.log" 2>&1
test_rc=$?
say "gpu_prefill_check: test_cuda_prefill exit $test_rc in $(( $(date +%s) - t1 )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|tests? ran|FAILED TEST" "$OUT/test.log" | tee -a "$summary"
grep -B2 -A10 "Failure" "$OUT/test.log" | head -60 >> "$summary"
# Measured errors per case (the tolerance calibration), most interesting first.
grep "^\[ measured \]" "$OUT/test.log" > "$OUT/measured.txt" || true

if [ "${DS_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  t2=$(date +%s)
  : > "$OUT/sanitizer.log"
  for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 "$B/test_cuda_prefill" --gtest_color=no \
      --gtest_filter='PrefillGdn.EachStageAgainstDouble:PrefillAttention.GroupsAndHeadDims' >> "$OUT/sanitizer.log" 2>&1
    say "gpu_prefill_check: compute-sanitizer $tool exit $?"
  done
  say "gpu_prefill_check: sanitizers in $(( $(date +%s) - t2 )) s"
fi

bench_rc=0
if [ "${DS_SKIP_BENCH:-0}" != 1 ]; then
  t3=$(date +%s)
  timeout 240 "$B/bench/cuda_prefill/bench_cuda_prefill" ${DS_BENCH_ARGS:---quick} > "$OUT/bench.jsonl" 2> "$OUT/bench.log"
  bench_rc=$?
  say "gpu_prefill_check: bench_cuda_prefill exit $bench_rc in $(( $(date +%s) - t3 )) s, $(wc -l < "$OUT/bench.jsonl") lines"
  python3 - "$OUT/bench.jsonl" <<'PY' 2>/dev/null | tee -a "$summary" || true
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
for r in rows:
    op = r.get("op")
    if op in ("device", "ceiling"):
        print(json.dumps(r))
    elif op == "gemm":
        extra = f' | bf16 weights {r["us_bf16_weights"]:8.1f} us {r["tflops_bf16_weights"]:6.1f} TF/s' if "us_bf16_weights" in r else ""
        print(f'gemm {r["model"]:>4} T{r["T"]:<5} {r["matrix"]:<22} {r["N"]:>6}x{r["K"]:<6} {r["inputs"]:<5} q4k {r["us_q4k"]:9.1f} us {r["tflops_q4k"]:6.1f} TF/s{extra}')
    elif op == "gdn":
        st = " ".join(f'{k[3:]}={v:.0f}' for k, v in r.items() if k.startswith("us_"))
        print(f'gdn  {r["model"]:>4} T{r["T"]:<5} nv{r["nv"]:<3} {r["us"]:9.1f} us  ~{r["approx_tflops"]:.1f} TF/s  stages(us): {st}')
    elif op == "attention":
        print(f'attn {r["model"]:>4} T{r["T"]:<5} {r["mode"]:<7} {r["us"]:9.1f} us {r["tflops"]:6.1f} TF/s')
    elif op == "estimate":
        print(f'EST  {r["model"]:>4} {r["test"]:<7} gemm {r["gemm_inputs"]:<5} attn {r["attention"]:<7} gdn layer {r["gdn_layer_us"]:9.1f} us  attn layer {r["attn_layer_us"]:9.1f} us  -> {r["est_tok_s"]:9.0f} tok/s (estimate)')
PY
fi
say "gpu_prefill_check: total $(( $(date +%s) - t0 )) s"
[ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]

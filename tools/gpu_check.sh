#!/usr/bin/env bash
# tools/gpu_check.sh: build + every CUDA test + the CUDA benchmarks, in one run on the GPU machine.
#
#   On a Debian dev machine, once:   tools/gpu_check.sh --prepare
#       copies fmt/spdlog headers, GoogleTest sources and the quant golden fixtures into
#       build-devdeps/ (git-ignored, ~6 MB): the GPU machine has CUDA, CMake and a compiler but no
#       Debian dev packages, and ../shared does not travel with the working tree.
#   On the GPU machine (carry build-devdeps):   tools/gpu_check.sh
#       configures tools/gpu_check/CMakeLists.txt (a minimal project: core, quant, ops, cpu, cuda;
#       system fmt/spdlog/GTest when present, else the carried ones), builds test_cuda and
#       bench_cuda_ops, runs both. Logs go to $OUT (default build-gpu/out): env.txt, build.log,
#       test.log, bench.jsonl, bench.log, summary.txt.
# Environment: DS_GPU_ARCH (default 90), DS_BENCH_ARGS (e.g. "--quick"), DS_FIXTURES (fixture folder;
# default ../shared/fixtures, else ./shared/fixtures, else build-devdeps/fixtures).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if [ "${1:-}" = "--prepare" ]; then
  dst=build-devdeps
  rm -rf "$dst" && mkdir -p "$dst/include"
  for d in /usr/include/fmt /usr/include/spdlog; do
    [ -d "$d" ] || { echo "gpu_check --prepare: $d missing (apt-get install libfmt-dev libspdlog-dev)"; exit 1; }
    cp -r "$d" "$dst/include/"
  done
  [ -d /usr/src/googletest ] || { echo "gpu_check --prepare: /usr/src/googletest missing (apt-get install googletest)"; exit 1; }
  cp -r /usr/src/googletest "$dst/googletest"
  # The fixtures live in ../shared, which does not travel with the working tree: carry the quant goldens.
  if [ -d ../shared/fixtures/quant ]; then
    mkdir -p "$dst/fixtures" && cp -r ../shared/fixtures/quant "$dst/fixtures/"
  else
    echo "gpu_check --prepare: ../shared/fixtures/quant not found; GPU golden tests will fail without DS_FIXTURES"
  fi
  du -sh "$dst"
  echo "gpu_check --prepare: done; carry 'build-devdeps' to the GPU machine"
  exit 0
fi

OUT=${OUT:-$repo/build-gpu/out}
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
  echo "== ninja"; ninja --version 2>&1
  echo "== c++"; c++ --version 2>&1 | head -1
  echo "== system packages"
  for h in fmt/format.h spdlog/spdlog.h gtest/gtest.h; do
    [ -e /usr/include/$h ] && echo "$h: system" || echo "$h: missing (carried build-devdeps used)"
  done
  echo "== git"; git log --oneline -1 2>/dev/null || true
} > "$OUT/env.txt" 2>&1

if [ -z "${DS_FIXTURES:-}" ]; then
  if [ -d "$repo/../shared/fixtures" ]; then export DS_FIXTURES="$repo/../shared/fixtures"
  elif [ -d "$repo/shared/fixtures" ]; then export DS_FIXTURES="$repo/shared/fixtures"
  elif [ -d "$repo/build-devdeps/fixtures" ]; then export DS_FIXTURES="$repo/build-devdeps/fixtures"; fi
fi
say "gpu_check: fixtures at ${DS_FIXTURES:-<none found>}"

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
B=build-gpu
if ! cmake -S tools/gpu_check -B "$B" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES="${DS_GPU_ARCH:-90}" > "$OUT/build.log" 2>&1; then
  say "gpu_check: CONFIGURE FAILED (see build.log)"; tail -40 "$OUT/build.log"; exit 1
fi
if ! cmake --build "$B" --target test_cuda bench_cuda_ops -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
  say "gpu_check: BUILD FAILED (see build.log)"; grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1
fi
say "gpu_check: built in $(( $(date +%s) - t0 )) s"

t1=$(date +%s)
"$B/test_cuda" --gtest_color=no > "$OUT/test.log" 2>&1
test_rc=$?
say "gpu_check: test_cuda exit $test_rc in $(( $(date +%s) - t1 )) s"
grep -E "^\[==========\] [0-9]+ tests? from .* ran|^\[  PASSED  \] [0-9]+|^\[  SKIPPED \] [0-9]+|^\[  FAILED  \]|FAILED TEST" "$OUT/test.log" | tee -a "$summary"
grep -B2 -A12 "Failure" "$OUT/test.log" | head -80 >> "$summary"

t2=$(date +%s)
timeout 300 "$B/bench/cuda/bench_cuda_ops" ${DS_BENCH_ARGS:-} > "$OUT/bench.jsonl" 2> "$OUT/bench.log"
bench_rc=$?
say "gpu_check: bench_cuda_ops exit $bench_rc in $(( $(date +%s) - t2 )) s, $(wc -l < "$OUT/bench.jsonl") lines"
# Short table: op model tensor type batch us GB/s %.
python3 - "$OUT/bench.jsonl" <<'PY' 2>/dev/null | tee -a "$summary" || true
import json, sys
for line in open(sys.argv[1]):
    try: r = json.loads(line)
    except Exception: continue
    if r.get("op") == "matvec":
        print(f'{r["model"]:>5} {r["tensor"]:<12} {r["type"]:<7} b{r["batch"]:<3} {r["rows"]:>7}x{r["cols"]:<6} {r["us"]:9.2f} us {r["gb_s"]:8.1f} GB/s {r["pct_of_4.29TB/s"]:5.1f}%')
    else:
        print(json.dumps(r))
PY
say "gpu_check: total $(( $(date +%s) - t0 )) s"
[ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]

#!/usr/bin/env bash
# tools/serve_bench.sh: the serving benchmark (tests/e2e/serve_bench.py) with the defaults of issue 7:
# `deltaserve serve -m MODEL --backend cuda --parallel 64`, concurrency 1, 8, 32, 64, prompts of 512
# random token ids, max_tokens 128 with ignore_eos (exactly 128 generated per request). One JSON line
# per level on stdout, appended to bench/results/serve.jsonl. Needs only python3 (standard library)
# and the built binary; no packages, no network (the GPU machine has python3, not node). Whole run < 4 minutes (bounded by --budget-s, default 230).
#
#   tools/serve_bench.sh MODEL.gguf [more serve_bench.py options, e.g. --levels 1,8 --requests 3]
# Environment: DS_BIN (default build/apps/deltaserve), DS_SERVE_BENCH_OUT (default bench/results/serve.jsonl),
# DS_BACKEND (default cuda; cpu for a smoke test on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: tools/serve_bench.sh MODEL.gguf [serve_bench.py options]" >&2
  exit 2
fi
model=$1
shift
command -v python3 >/dev/null || { echo "serve_bench: python3 not found" >&2; exit 2; }
export DS_BIN=${DS_BIN:-build/apps/deltaserve}
[ -x "$DS_BIN" ] || { echo "serve_bench: $DS_BIN is not an executable (build the deltaserve target, or set DS_BIN)" >&2; exit 2; }
out=${DS_SERVE_BENCH_OUT:-bench/results/serve.jsonl}
exec python3 tests/e2e/serve_bench.py --model "$model" --backend "${DS_BACKEND:-cuda}" --parallel 64 \
  --levels 1,8,32,64 --prompt-tokens 512 --max-tokens 128 --out "$out" "$@"

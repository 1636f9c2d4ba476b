#!/usr/bin/env bash
# ctest entry of the stdlib-only python scripts here (serve_bench.py): run_python.sh SCRIPT [args]
# Exit 77 (ctest: skipped) with a message when python3 or the fixture model is missing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v python3 >/dev/null 2>&1; then
  echo "e2e: SKIP: python3 not found"
  exit 77
fi
fixtures="${DS_FIXTURES:-${DS_FIXTURES_DIR:-$here/../../../shared/fixtures}}"
if [ ! -f "$fixtures/models/tiny-sym/tiny-sym-q8_0.gguf" ]; then
  echo "e2e: SKIP: fixture model not found under $fixtures"
  exit 77
fi
script=$1
shift
exec python3 "$here/$script" "$@"

#!/usr/bin/env bash
# ctest entry of the standard-library-only scripts here: node for *.mjs (abuse_test, load_test),
# python3 for *.py (serve_bench).   run_script.sh SCRIPT [args]
# Exit 77 (ctest: skipped) with a message when the interpreter or the fixture model is missing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
script=$1
shift
case "$script" in
  *.py) interp=python3 ;;
  *) interp=node ;;
esac
if ! command -v "$interp" >/dev/null 2>&1; then
  echo "e2e: SKIP: $interp not found"
  exit 77
fi
fixtures="${DS_FIXTURES:-${DS_FIXTURES_DIR:-$here/../../../shared/fixtures}}"
if [ ! -f "$fixtures/models/tiny-sym/tiny-sym-q8_0.gguf" ]; then
  echo "e2e: SKIP: fixture model not found under $fixtures"
  exit 77
fi
exec "$interp" "$here/$script" "$@"

#!/usr/bin/env bash
# ctest entry of the stdlib-only node scripts here (abuse_test.mjs, load_test.mjs):
#   run_node.sh SCRIPT [args]
# Exit 77 (ctest: skipped) with a message when node or the fixture model is missing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "e2e: SKIP: node not found"
  exit 77
fi
fixtures="${DS_FIXTURES:-${DS_FIXTURES_DIR:-$here/../../../shared/fixtures}}"
if [ ! -f "$fixtures/models/tiny-sym/tiny-sym-q8_0.gguf" ]; then
  echo "e2e: SKIP: fixture model not found under $fixtures"
  exit 77
fi
script=$1
shift
exec node "$here/$script" "$@"

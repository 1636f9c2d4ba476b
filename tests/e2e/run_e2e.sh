#!/usr/bin/env bash
# ctest entry of the OpenAI-client end-to-end tests: run_e2e.sh [SCRIPT] (default openai_client.mjs).
# Exit 77 (ctest: skipped) with a message when node, the client package (tests/e2e/setup.sh installs it)
# or the fixture model is missing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "e2e: SKIP: node not found"
  exit 77
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
  echo "e2e: SKIP: the openai package is not installed; run tests/e2e/setup.sh"
  exit 77
fi
fixtures="${DS_FIXTURES:-${DS_FIXTURES_DIR:-$here/../../../shared/fixtures}}"
if [ ! -f "$fixtures/models/tiny-sym/tiny-sym-q8_0.gguf" ]; then
  echo "e2e: SKIP: fixture model not found under $fixtures"
  exit 77
fi
exec node "$here/${1:-openai_client.mjs}"

#!/usr/bin/env bash
# Installs the end-to-end client's dependencies (npm `openai`, pinned by package-lock.json) into
# tests/e2e/node_modules (git-ignored). Without npm it says so and exits 0: the e2e test then skips.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
  echo "e2e setup: npm not found; the OpenAI-client end-to-end test will be skipped"
  exit 0
fi
if [ -f node_modules/openai/package.json ] && cmp -s package-lock.json node_modules/.package-lock.json; then
  echo "e2e setup: node_modules up to date"
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error

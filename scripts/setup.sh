#!/usr/bin/env bash
# Installs the Debian packages deltaserve builds and tests with. Idempotent; uses apt only.
# The CUDA toolkit is not installed here: the build uses nvcc when the machine has one.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config xz-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libfmt-dev libspdlog-dev
  libpcre2-dev libutf8proc-dev libomp-dev
  clang libclang-rt-14-dev
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
# The end-to-end test drives the server with the official OpenAI client (npm `openai`, pinned by
# tests/e2e/package-lock.json). It installs into tests/e2e/node_modules; without npm the test skips.
bash "$(dirname "$0")/../tests/e2e/setup.sh" || echo "setup: npm install of the e2e client failed; the e2e test will skip"

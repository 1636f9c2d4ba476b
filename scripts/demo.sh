#!/usr/bin/env bash
# Offline demo of the whole pipeline on a tiny random-weight model (no download, no file from outside
# the repository): synth writes the model with a built-in tokenizer and chat template, then run
# tokenizes a chat, renders the template, runs the forward pass, samples and streams the reply.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DS_BIN:-build/apps/deltaserve}
model=build/demo/tiny-demo.gguf
if [ ! -x "$bin" ]; then
  echo "demo: $bin not found; build first (scripts/build.sh)" >&2
  exit 1
fi
mkdir -p build/demo
if [ ! -f "$model" ]; then
  "$bin" synth --size tiny --type Q8_0 --seed 7 -o "$model"
fi
cat >&2 <<'BANNER'

============================================================================================
 deltaserve demo: a TINY RANDOM-WEIGHT model (4 layers, 256 wide, ~3 M parameters, made by
 `deltaserve synth`). It has never been trained, so its reply is GIBBERISH by design.
 What the demo shows is the pipeline working end to end: byte-level BPE tokenizer, the
 model's Jinja chat template, the Qwen3.5 forward pass (Gated DeltaNet + gated attention),
 sampling (temperature 0.8, top-k, top-p, seed 1), streaming output and the timings.
 For real output, point `deltaserve run -m` at a real Qwen3.5 GGUF.
============================================================================================
BANNER
echo "> deltaserve run -m $model --chat -p \"Hello! Who are you?\" -n 48 --temp 0.8 --seed 1" >&2
"$bin" run -m "$model" --chat -p "Hello! Who are you?" -n 48 --temp 0.8 --seed 1

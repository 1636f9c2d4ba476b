#!/usr/bin/env bash
# Builds one libFuzzer target of fuzz/ with clang (ASan + UBSan) and runs it for SECONDS (default 60) on a seed
# corpus from the fixtures (tools/fuzz_seeds.py).
#   tools/fuzz.sh TARGET [SECONDS] [extra libFuzzer args...]
#   TARGET: gguf (model files), tokenizer (user text), jinja (chat templates), schema (response_format schemas
#           and the matcher), reply (the model's replies: reasoning, content, tool calls), chat_prompt (a client's
#           messages and tools -> prompt tokens)
# Build tree: build-fuzz/ (override with DS_FUZZ_BUILD). The growing corpus lives in build-fuzz/corpus-TARGET;
# crashes are written to build-fuzz/artifacts-TARGET/ (rerun one: build-fuzz/fuzz/TARGET_fuzz FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: tools/fuzz.sh TARGET [SECONDS] [libFuzzer args...]; TARGET: gguf tokenizer jinja schema reply chat_prompt}
secs=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
build=${DS_FUZZ_BUILD:-build-fuzz}
fixtures=${DS_FIXTURES:-$(pwd)/../shared/fixtures}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_FUZZ=ON \
  -DDS_CUDA=OFF -DDS_BUILD_TESTS=OFF -DDS_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target "${target}_fuzz" -j "${DS_JOBS:-2}"

corpus=$build/corpus-$target seeds=$build/seeds-$target artifacts=$build/artifacts-$target
mkdir -p "$corpus" "$seeds" "$artifacts"
python3 tools/fuzz_seeds.py "$target" "$fixtures" "$seeds"
if [ "$target" = tokenizer ] || [ "$target" = chat_prompt ]; then  # the real Qwen vocabulary the fuzzer encodes with
  export DS_FUZZ_VOCAB=$(realpath -m "$build")/vocab-qwen35re.gguf DS_FUZZ_TEMPLATE=$fixtures/chat/qwen3.5.jinja
  [ -s "$DS_FUZZ_VOCAB" ] || xz -dc "$fixtures/tokenizer/vocab-qwen35re.gguf.xz" > "$DS_FUZZ_VOCAB"
fi
# -jobs=1 runs the fuzzer in one child process whose log is fuzz-0.log in the working folder, run-TARGET (so that
# two targets can run at once; printed at the end).
mkdir -p "$build/run-$target"
cd "$build/run-$target"
rm -f fuzz-0.log
rc=0
"../fuzz/${target}_fuzz" "../corpus-$target" "../seeds-$target" -max_total_time="$secs" -jobs=1 -workers=1 \
  -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="../artifacts-$target/" "$@" || rc=$?
tail -n 40 fuzz-0.log 2>/dev/null || true
cd ..
echo "corpus: $(ls "corpus-$target" | wc -l) files, $(du -sk "corpus-$target" | cut -f1) KiB; artifacts: $(ls "artifacts-$target" | wc -l)"
exit $rc

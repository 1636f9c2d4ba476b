#!/usr/bin/env bash
# ctest fuzz_replay.TARGET: writes TARGET's seed corpus into WORK and replays it and fuzz/regressions/TARGET.
#   run.sh TARGET REPLAY_BINARY FIXTURES_DIR WORK
set -euo pipefail
target=$1 bin=$2 fixtures=$3 work=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work/seeds"
python3 "$root/tools/fuzz_seeds.py" "$target" "$fixtures" "$work/seeds"
if [ "$target" = tokenizer ] || [ "$target" = chat_prompt ]; then
  export DS_FUZZ_VOCAB=$work/vocab-qwen35re.gguf DS_FUZZ_TEMPLATE=$fixtures/chat/qwen3.5.jinja
  [ -s "$DS_FUZZ_VOCAB" ] || xz -dc "$fixtures/tokenizer/vocab-qwen35re.gguf.xz" > "$DS_FUZZ_VOCAB"
fi
dirs=("$work/seeds")
[ -d "$root/fuzz/regressions/$target" ] && dirs+=("$root/fuzz/regressions/$target")
exec "$bin" "${dirs[@]}"

#!/bin/bash
# Session 18: batched decode A/B of session 16's final binary (deltaserve.old, tree 4a7898b-dirty = 0d532b2's defaults)
# against main 7291799 (clean20 + b1q420 merged, Q4K_LEAN default): 9B, 64 sequences after 512-token prompts and short,
# interleaved old / new, 3 rounds. Carried as devwork-ab/ (ab.tar.xz: both binaries, lib/, the vocabulary).
set -u; cd "$(dirname "$0")"; tar xJf ab.tar.xz; B=$PWD/gpu-bundle; W=/tmp/dsv; mkdir -p $W
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
"$B/deltaserve" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 16 -o "$W/m9B.gguf" > /dev/null 2>&1 || { echo synth failed; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2 3; do for bin in deltaserve.old deltaserve; do for a in "--prompt 512 --ctx 1024" ""; do
  echo "== round $r $bin batch 64 ${a:-short}"
  timeout 40 "$B/$bin" cuda-bench -m "$W/m9B.gguf" --tg 32 --reps 2 --select 0 --batch 64 $a 2>&1 | grep "^decode"
done; done; done
for r in 1 2; do for bin in deltaserve.old deltaserve; do echo "== round $r $bin batch 1 tg"; timeout 40 "$B/$bin" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 3 2>&1 | grep tg128; done; done

#!/bin/bash
# Session 15: gs18's split on the 27B (nv = 3 nk: split 2 = a 6-CTA cluster), tg128 0 / 2 interleaved, final head's binaries.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
"$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 16 -o "$W/m27B.gguf" > /dev/null 2>&1; say "synth rc=$?"
for r in 1 2 3; do for f in 0 2; do
  DS_GDN_SPLIT_B1=$f timeout 30 "$X" bench -m "$W/m27B.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "DS_GDN_SPLIT_B1=$f" >> "$OUT/bench.jsonl"
  say "TG 27B split=$f $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json")"; done; done
say done

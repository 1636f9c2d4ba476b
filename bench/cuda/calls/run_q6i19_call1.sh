#!/bin/bash
# q6i19 call 1 (H200): the Q6_K stream kernel's lean form (DS_MATVEC_STREAM_Q6K_LEAN=1: ring slot / phase counters,
# 32-bit window offsets, 6-bit codes by shared-mask bit-selects; same bits) against the default. Binaries of branch q6i19.
# 9B synth in the background; mvbench --stream6 --filter ffn_down --time-only (default / lean interleaved) with the GPU
# alone; then tests in parallel (StreamQ6KLeanSameBits x3 shards, StreamQ6KVariants under LEAN=1 x3, mvbench
# --check-only, test_cuda_model --gtest_brief=1 under LEAN=1); then tg128 9B and 27B A B A B A B (A = LEAN 0, B = LEAN 1).
# tg128 27B A B A B A B too (its synth ran in ~17 s in q6s19's call).
# Lives in /work/main/devwork-q6i19/ as go.sh beside b.tar.xz and mvbench.xz. Run as:
#   cd devwork-q6i19 && OUT=$OUT timeout 120 bash go.sh   (timeout_s 130)
set -u
cd "$(dirname "$0")"
D=$PWD; W=/tmp/dsv_q6i19; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
tar xJf b.tar.xz; B=$D/gpu-bundle
M=$W/mvbench; xz -dc "$D/mvbench.xz" > "$M"; chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; TM=$B/test_cuda_model; LIM=${LIM:-105}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
say "unpacked"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B ) &
( syn 27B ) &
# SASS of the four math kernels (no cuobjdump on the build machine): instructions per kernel and per mnemonic
( CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  for k in 16ELb0 16ELb1 8ELb0 8ELb1; do f="_ZN2ds4cuda4mvq66kernelILb1ELi${k}EEEvNS1_4ArgsE"
    "$CO" -sass -fun "$f" "$M" > "$W/sass_$k.txt" 2>&1
    echo "sass $k: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $W/sass_$k.txt) lines; $(grep -E '^\s+/\*[0-9a-f]{4}\*/' $W/sass_$k.txt | sed -E 's/^\s+\/\*[0-9a-f]{4}\*\/\s+(@!?U?P[0-9T]+\s+)?//' | awk '{print $1}' | sed 's/\..*//;s/;//' | sort | uniq -c | sort -rn | head -16 | awk '{printf "%s %s, ", $2, $1}')" >> "$OUT/sass.txt"
  done; cd "$W" && tar czf "$OUT/sass.tgz" sass_*.txt ) &
say "== mvbench"
timeout 35 "$M" --stream6 --filter ffn_down --time-only > "$W/mvb.log" 2>&1; say "mvbench rc=$?"
python3 - "$W/mvb.log" <<'PY' | tee -a "$OUT/steps.log"
import json,sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('{"op":"matvec"'): continue
    j=json.loads(l)
    if j['path'].startswith('stream6'): d[(j['model'],j['tensor'])].append(f"{j['path']}={j['us']:.2f}")
for k,v in d.items(): print(k[0],k[1],' '.join(v))
PY
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== tests"
P=()
for k in 0 1 2; do t lean_$k 60 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KLeanSameBits' & P+=($!); done
for k in 0 1 2; do t q6v_$k 60 DS_MATVEC_STREAM_Q6K_LEAN=1 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!); done
t mvcheck 60 DS_X=0 "$M" --stream6 --check-only & P+=($!)
t model 60 DS_MATVEC_STREAM_Q6K_LEAN=1 "$TM" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|\"failures\"|failures' $f | tr '\n' ' ' | cut -c1-220)"; done
grep -hE "^\[stream q6" "$W"/t_*.log | sed 's/^/  /' | head -20 >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ|mismatch|\"ok\":false" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
say "== tg128"
tg() { local m=$1 f=$2; [ $(el) -lt $LIM ] || { say "skip tg $m lean=$f"; return; }
  while [ ! -e "$W/m$m.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
  [ -e "$W/m$m.ok" ] || { say "no model $m"; return; }
  DS_MATVEC_STREAM_Q6K_LEAN=$f timeout 25 "$X" bench -m "$W/m$m.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$W/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "q6i19 call1 $m lean=$f" >> "$OUT/bench.jsonl"
  say "TG $m lean=$f $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
for r in 1 2 3; do tg 9B 0; tg 9B 1; done
for r in 1 2 3; do tg 27B 0; tg 27B 1; done
say done
cp "$W/mvb.log" "$OUT/" 2>/dev/null

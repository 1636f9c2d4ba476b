#!/bin/bash
# gs18 call 1 (H200): gdn_conv_split_kernel (each value head's rows over 2 / 4 CTAs of a cluster, DS_GDN_SPLIT_B1).
# Phase A (at once, with the model syntheses): GdnConvStep.* + GdnStep.*; racecheck and memcheck of
# GdnConvStep.FusedGivesSameBits; test_cuda_model --gtest_brief=1 with DS_GDN_SPLIT_B1=2 and =4. Phase B (one at a
# time): tg128 0.8B and 9B with DS_GDN_SPLIT_B1 0 / 2 / 4 / 0 / 2 / 4; cuda-bench --tg 16 --breakdown of the 0.8B
# with the split of the best 0.8B tg mean (then 0 if time is left).
# Run as: OUT=$OUT bash devwork-gs18/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_gs18; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model; LIM=${LIM:-105}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 0.8B ) &
( syn 9B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
t gdn 35 DS_X=0 "$TM" --gtest_filter='GdnConvStep.*:GdnStep.*' & P+=($!)
t race 55 DS_X=0 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.FusedGivesSameBits' & P+=($!)
t mem 55 DS_X=0 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.FusedGivesSameBits' & P+=($!)
t model2 60 DS_GDN_SPLIT_B1=2 "$TM" --gtest_brief=1 & P+=($!)
t model4 60 DS_GDN_SPLIT_B1=4 "$TM" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' $f | tr '\n' ' ' | cut -c1-220)"; done
grep -hE "^\[cg18/gs18\]" "$W"/t_gdn.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tg() { local s=$1 f=$2; [ $(el) -lt $LIM ] || { say "skip tg $s split=$f"; return; }
  [ -e "$W/m$s.ok" ] || { say "no model $s (split=$f)"; return; }
  DS_GDN_SPLIT_B1=$f timeout 20 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "gs18 call1 $s split=$f" >> "$OUT/bench.jsonl"
  local v=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)
  echo "$s $f $v" >> "$W/tg.txt"; say "TG $s split=$f $v"; }
say "== phase B"
for r in 1 2; do tg 0.8B 0; tg 0.8B 2; tg 0.8B 4; done
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 70 ]; do sleep 1; done
for r in 1 2; do tg 9B 0; tg 9B 2; tg 9B 4; done
BEST=$(python3 -c "
import collections; d=collections.defaultdict(list)
for l in open('$W/tg.txt'):
  s,f,v=l.split()
  if s=='0.8B':
    try: d[f].append(float(v))
    except ValueError: pass
print(max(d, key=lambda f: sum(d[f])/len(d[f])) if d else 2)" 2>/dev/null || echo 2)
say "best 0.8B split by tg mean: $BEST"
cb() { local f=$1; [ $(el) -lt $((LIM + 12)) ] || { say "skip cb split=$f"; return; }
  echo "==== cuda-bench 0.8B --tg 16 --breakdown DS_GDN_SPLIT_B1=$f" >> "$OUT/cb.log"
  DS_GDN_SPLIT_B1=$f timeout 14 "$X" cuda-bench -m "$W/m0.8B.gguf" --tg 16 --breakdown >> "$OUT/cb.log" 2>&1 < /dev/null
  say "cb split=$f rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-100)"; }
[ -e "$W/m0.8B.ok" ] && { cb $BEST; [ "$BEST" != 0 ] && cb 0; }
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log --exclude cb.log . && find . -type f ! -name all.tgz ! -name steps.log ! -name cb.log -delete)

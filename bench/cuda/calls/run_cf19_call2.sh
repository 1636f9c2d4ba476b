#!/bin/bash
# cf19 call 2 (H200): forms 1 (conv before the state's wait, base[] now in shared memory) and 2 (conv after the
# state read and the refill) of DS_GDN_CONV_FUSE_TMA. Phase A (with the 9B synthesis): GdnConvStep.* + GdnStep.* +
# ConvStep.*; racecheck and memcheck of GdnConvStep.TmaFusedSmall (both forms); test_cuda_model --gtest_brief=1 with
# DS_GDN_CONV_FUSE_TMA=2. Phase B: cuda-bench 9B --batch 64 --prompt 512 --ctx 1024 with 0 1 2 0 1 2, --breakdown with
# 2, then with the better fused form F (mean of its two): short --batch 64 0 F 0 F, --batch 16 / 32 0 F (while < LIM s).
# Run as: cd devwork-cf19 && OUT=$OUT timeout 150 bash go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_cf19; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model; LIM=${LIM:-100}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"; "$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( nice "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 10 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth 9B done" >> "$OUT/steps.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local n=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $n ${ev[*]} $*" > "$OUT/t_$n.log"; env "${ev[@]}" timeout $lim "$@" >> "$OUT/t_$n.log" 2>&1 < /dev/null; echo "rc=$?" >> "$OUT/t_$n.log"
  say "$n $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/t_$n.log" | tr '\n' ' ' | cut -c1-240)"; }
say "== phase A"
P=()
t gdn 40 DS_X=0 "$TM" --gtest_filter='GdnConvStep.*:GdnStep.*:ConvStep.*' & P+=($!)
t race 70 DS_X=0 "$CS" --tool racecheck --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.TmaFusedSmall' & P+=($!)
t mem 70 DS_X=0 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$TM" --gtest_filter='GdnConvStep.TmaFusedSmall' & P+=($!)
t model2 90 DS_GDN_CONV_FUSE_TMA=2 "$TM" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
say "== phase A done"
grep -hE "^\[cf19\]" "$OUT/t_gdn.log" | sed 's/^/  /' | tee -a "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ|hazard|Invalid" "$OUT"/t_*.log | head -20 | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local tag=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip $tag $e"; return; }
  echo "==== $tag $e $*" >> "$OUT/cb.log"; env $e timeout 30 $C "$@" >> "$OUT/cb.log" 2>&1 < /dev/null
  say "$tag $e rc=$? $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-100)"; }
say "== phase B"
for r in 1 2; do for f in 0 1 2; do cb B64x512 DS_GDN_CONV_FUSE_TMA=$f --batch 64 --prompt 512 --ctx 1024; done; done
F=$(python3 - "$OUT/cb.log" <<'PY'
import re,sys,collections
d=collections.defaultdict(list); f=None
for l in open(sys.argv[1]):
  if l.startswith('===='):
    m=re.match(r'==== B64x512 DS_GDN_CONV_FUSE_TMA=(\d)',l); f=m.group(1) if m else None; continue
  m=re.search(r'\(([0-9.]+) ms per step',l)
  if m and f and l.startswith('decode'): d[f].append(float(m.group(1)))
best=min(('1','2'),key=lambda k: sum(d[k])/len(d[k]) if d[k] else 1e9)
print(best)
PY
)
say "better fused form by B64x512 mean: $F"
cb B64x512-bd DS_GDN_CONV_FUSE_TMA=2 --batch 64 --prompt 512 --ctx 1024 --breakdown
for r in 1 2; do for f in 0 $F; do cb B64 DS_GDN_CONV_FUSE_TMA=$f --batch 64; done; done
for b in 16 32; do for f in 0 $F; do cb B$b DS_GDN_CONV_FUSE_TMA=$f --batch $b --prompt 512 --ctx 1024; done; done
say done

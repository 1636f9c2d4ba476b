#!/bin/bash
# gdn20 device call 1: the batched GDN step's states out of place (DS_GDN_OOP, two state buffers per sequence).
# Phase A (with the 9B synth; GPU processes in parallel): GdnStep.* + GdnConvStep.* (the out-of-place kernel's same
# bits, check_oop), test_cuda_model --gtest_brief=1 with DS_GDN_OOP=1 and with the default (0). Phase B, alone on the
# GPU: GdnBench.Time (in place vs out of place per batch, the gdn18 rooflines incl. the oop modes 3-5), then the 9B
# step (cuda-bench --tg 32 --reps 2 --select 0) at 64 x 512+ with DS_GDN_OOP 0 1 0 1, --breakdown 0 / 1, 32 x 512+ 0 / 1,
# short 64 0 / 1 (while under LIM). Run from the ignored devwork-gdn20/ in /work/main as
# OUT=$OUT LIM=.. timeout T bash go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsgdn20; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TM=$B/test_cuda_model; LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"; "$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
t() { local n=$1; shift; env "$@" > "$W/t_$n.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$n.log"; }
say "== phase A"
( t gdn timeout 80 "$TM" --gtest_filter='GdnStep.*:GdnConvStep.*' ) &
( t model_oop1 DS_GDN_OOP=1 timeout 110 "$TM" --gtest_brief=1 ) &
( t model_oop0 DS_GDN_OOP=0 timeout 110 "$TM" --gtest_brief=1 ) &
wait
for n in gdn model_oop1 model_oop0; do say "$n $(grep -E '^rc=|^\[  (PASSED|FAILED) |^\[  FAILED  \] [A-Z]|tests? ran' $W/t_$n.log | tr '\n' ' ' | cut -c1-400)"; done
grep -hE "Failure|Expected|Which is|differ|error" $W/t_*.log | head -40 | tee -a "$OUT/steps.log"
say "== phase B"
DS_GDN_BENCH=1 timeout 40 "$TM" --gtest_filter='GdnBench.Time' > "$W/gdnbench.log" 2>&1 < /dev/null
say "GdnBench rc=$?"; grep -E "^\[gdn18\]" "$W/gdnbench.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 o=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name (DS_GDN_OOP=$o $*)" >> "$W/cb.log"; DS_GDN_OOP=$o timeout 25 $C "$@" >> "$W/cb.log" 2>&1 < /dev/null; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
L="--batch 64 --prompt 512 --ctx 1024"
cb "64L oop0" 0 $L; cb "64L oop1" 1 $L; cb "64L oop0b" 0 $L; cb "64L oop1b" 1 $L
bd() { grep -E "^per-kernel|^gdn rule|^total" "$W/cb.log" | tail -3 | sed 's/^/  /' | tee -a "$OUT/steps.log"; }
cb "64L bd oop0" 0 $L --breakdown; bd
cb "64L bd oop1" 1 $L --breakdown; bd
cb "32L oop0" 0 --batch 32 --prompt 512 --ctx 1024; cb "32L oop1" 1 --batch 32 --prompt 512 --ctx 1024
cb "64S oop0" 0 --batch 64; cb "64S oop1" 1 --batch 64
cp "$W/cb.log" "$W/gdnbench.log" "$W"/t_*.log "$OUT/" 2>/dev/null
say done

#!/bin/bash
# NOT run yet (written in session 26, branch pfcheck): where does the 9B synth's fast-mode prefill first go non-finite?
# DS_PREFILL_CHECK=1 scans every piece-prefill op's output (non-finite count, largest |x|) and fails at the first op
# with a non-finite value, naming it. One 512-token prompt, fast mode, then --precise (finite: its largest |x| per op
# shows which activations pass f16's 65,504). ~120 s plus the start (the synth ~100 s of it).
# Run as: cd devf16 && OUT=$OUT timeout 300 bash go.sh (devf16: b.tar.xz from tools/gpu_bundle.sh, deltaserve enough)
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b 200
say synth
for m in "" --precise; do
  DS_PREFILL_CHECK=1 timeout 60 "$X" cuda-bench -m "$M9" --tg 1 --reps 1 --batch 1 --prompt 512 $m > "$OUT/check$m.log" 2>&1
  say "check $m rc=$?: $(grep -c 'prefill check' "$OUT/check$m.log") lines; first non-finite: $(grep -m1 -E '[1-9][0-9]* non-finite' "$OUT/check$m.log")"
  say "largest |x| per op kind $m: $(grep 'prefill check' "$OUT/check$m.log" | sed -E 's/.*L-?[0-9]+\.([^:]*):.*max \|x\| ([^,]*),.*/\1 \2/' | sort -k1,1 -k2,2g | awk '{m[$1]=$2} END {for (k in m) printf "%s=%s ", k, m[k]}')"
done
say done
pack_out

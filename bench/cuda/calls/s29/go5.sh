#!/bin/bash
# Session 29, call 4 (and 5, go5.sh: the hung kernel's instructions at its PC, B = 2 / 4 with N = 0 only): call 3 saw two cuda-bench runs hang (no output in 60 s) at B = 2 and 4 with DS_MVB_MULTI_NORM=0
# (the rms_norm kernel + the plain multi-sequence kernels, session 28's path). Stress: repeated short runs at B = 2 / 4
# with N = 0, N = 8 (the fold) and DS_MVB_PAIR=0 (no multi kernels), 20 s each; a hung run gets cuda-gdb's view of its
# kernels and threads (where the toolkit has cuda-gdb), then is killed. Run as: cd devf16 && OUT=$OUT timeout 560 bash go4.sh
set -u
cd "$(dirname "$0")"
. ../bench/cuda/calls/prelude.sh
synth9b_bg 16
wait9b 200
say synth
CG=$(command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || echo "")
say "cuda-gdb: ${CG:-none}"
declare -A hangs runs
one() {  # $1 label, $2 batch, $3 env
  env $3 "$X" cuda-bench -m "$M9" --tg 32 --reps 2 --select 0 --batch $2 --prompt 4 --ctx 1024 > "$OUT/one.log" 2>&1 &
  local pid=$! t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt 200 ]; do sleep 0.1; t=$((t + 1)); done
  runs[$1]=$(( ${runs[$1]:-0} + 1 ))
  if kill -0 $pid 2>/dev/null; then
    hangs[$1]=$(( ${hangs[$1]:-0} + 1 ))
    say "HANG $1 (run ${runs[$1]})"
    cat "$OUT/one.log" >> "$OUT/hang.log"
    if [ -n "$CG" ]; then
      timeout 60 "$CG" -p $pid -batch -ex "info cuda kernels" -ex "info cuda warps" -ex "x/12i \$pc-96" -ex "x/8i \$pc" -ex "info cuda lanes" >> "$OUT/hang.log" 2>&1
    fi
    nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv >> "$OUT/hang.log" 2>&1
    kill -9 $pid; wait $pid 2>/dev/null
  else
    wait $pid
    grep -E '^decode' "$OUT/one.log" | cut -c1-60 >> "$OUT/ok_$1.log"
  fi
}
for r in $(seq 1 40); do
  one n0b2 2 DS_MVB_MULTI_NORM=0; one n0b4 4 DS_MVB_MULTI_NORM=0
  [ "$(el)" -gt 200 ] && break
  [ "${hangs[n0b2]:-0}" -ge 1 ] && [ "${hangs[n0b4]:-0}" -ge 1 ] && break
done
for k in n0b2 n0b4; do say "$k: ${hangs[$k]:-0} hangs of ${runs[$k]:-0}; $(sort "$OUT/ok_$k.log" 2>/dev/null | sed -n '1p;$p' | tr '\n' ' ')"; done
say done
pack_out

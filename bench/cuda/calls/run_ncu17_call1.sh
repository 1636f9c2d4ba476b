#!/bin/bash
# ncu17 device call 1: per-instruction (SASS) warp-stall sampling of the Q4_K block kernel at B = 64 (main a8ee74e, no
# kernel change). mvb_bench = bench/cuda/matvec_batched_bench_standalone.cu linked against a8ee74e's libds_cuda.a
# (-lineinfo) / libds_quant.a / libds_core.a; `mvb_bench timedef q4_k` launches, per shape, B = 32 (1 + 30) then B = 64
# (1 + 30): block_kernel<3,0,1> ffn_gate_up (then output), block_kernel<2,0,1> ffn_down, attn_qkv, ssm_out, z_ba.
# ncu: SourceCounters + WarpStateStats + SpeedOfLight + InstructionStats, one instance each, then the source page
# (SASS) as CSV. Run from the ignored devwork-ncu17/ in /work/main as OUT=$OUT bash devwork-ncu17/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; W=/tmp/dsncu17; mkdir -p "$W"
export LD_LIBRARY_PATH="$D:/usr/local/cuda/lib64"
M=$D/mvb_bench
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$NCU" --version > "$W/ncu_version.txt" 2>&1; "$NCU" --help > "$W/ncu_help.txt" 2>&1
say "ncu $NCU: $(tail -1 $W/ncu_version.txt); help: $(grep -cE 'print-source|--page|--kill' $W/ncu_help.txt) matching lines"
( timeout 40 "$CO" -sass "$M" 2>/dev/null | awk '/Function : /{p = /block_kernel/} p' > "$W/sass_block.txt"
  timeout 20 "$CO" -res-usage "$M" 2>&1 | grep -A1 block_kernel > "$W/res.txt" ) &
KILL=""; grep -q -- '--kill' "$W/ncu_help.txt" && KILL="--kill yes"
timeout 20 "$M" timedef q4_k > "$W/td.log" 2>&1; say "timedef rc=$? $(grep -E 'B 64' $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"
pack() { ( cd "$W" && tar czf "$OUT/text.tgz" td.log ncu_version.txt ncu_help.txt res.txt ncu_run_*.txt src_*.csv src_*.err det_*.txt 2>/dev/null ); }
nc() { local tag=$1 k=$2 skip=$3; [ $(el) -lt 55 ] || { say "skip ncu $tag"; return; }
  timeout 30 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip $skip --launch-count 1 $KILL \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section InstructionStats --import-source yes \
    -o "$W/ncu_$tag" -f "$M" timedef q4_k > "$W/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$? $(grep -E '==PROF==|==ERROR==|==WARNING==' $W/ncu_run_$tag.txt | tail -2 | tr '\n' ' ' | cut -c1-300)"
  timeout 10 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$W/src_$tag.csv" 2> "$W/src_$tag.err"
  local r=$?; [ $r -eq 0 ] && [ -s "$W/src_$tag.csv" ] || { timeout 10 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page source --csv > "$W/src_$tag.csv" 2>> "$W/src_$tag.err"; r=$?; }
  timeout 10 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page details --print-details all > "$W/det_$tag.txt" 2>&1
  say "ncu $tag export rc=$r lines=$(wc -l < $W/src_$tag.csv) $(grep -E 'Duration|Warp Cycles Per Issued|Issued Warp|Executed Instructions  ' $W/det_$tag.txt | tr -s ' ' | tr '\n' ';' | cut -c1-300)"; pack; }
nc fd 'block_kernelILi2ELb0ELb1E' 36       # ffn_down 4096 x 12288, B = 64
nc gu 'block_kernelILi3ELb0ELb1E' 36       # ffn_gate_up 24576 x 4096, B = 64
nc qkv 'block_kernelILi2ELb0ELb1E' 98      # attn_qkv 8192 x 4096, B = 64
nc ssm 'block_kernelILi2ELb0ELb1E' 160     # ssm_out 4096 x 4096, B = 64
wait
say "sass lines $(wc -l < $W/sass_block.txt)"
pack; cd "$W" && xz -T4 -6 -c sass_block.txt > "$OUT/sass_block.txt.xz"
tar czf "$OUT/reps.tgz" ncu_*.ncu-rep 2>/dev/null
ls -la "$OUT" >> "$OUT/steps.log"
say done

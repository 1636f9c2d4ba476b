#!/bin/bash
# mvb17 device call 1: wgb::hl_kernel (DS_MVB_WG=16: the 2-warpgroup Q4_K shapes with 4 warpgroups per 128-row tile, hi /
# lo terms apart) and block_kernel's prebuild (DS_MVB_BLK_PRE=1, same bits). Tests first (CudaMatvecBatched shards with
# 16 + prebuild forced and with the defaults, test_cuda_model with 16 + prebuild, memcheck of config 16 + prebuild), then
# mvb_bench timedef q4_k per form, the 9B step at B = 64 short / long and B = 32 (old vs new interleaved), ncu of
# hl_kernel vs block_kernel<2> on ffn_down and of the prebuild on ffn_gate_up.
# Run from the ignored devwork-mvb17/ in /work/main as OUT=$OUT bash devwork-mvb17/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsmvb17; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$T" 2>&1 | grep -A1 -E "wgb9hl_kernel|wgb12block_kernel" | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$W/res.txt" 2>&1
NEW="DS_MVB_WG=16 DS_MVB_BLK_PRE=1"
REST='CudaMatvecBatched.*-*MatchesFloat64*-*WgmmaRing*-*SplitReduce*-*PrepReg*-*HlAndPrebuild*-*Q6KScaled*'
sh() { local name=$1 sel=$2 filt=$3 e=$4; ( env DS_TEST_MVB_WG=$sel $e timeout 120 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
sh a "16" "$REST" "DS_MVB_BLK_PRE=1"
sh a2 "16" 'CudaMatvecBatched.MatchesFloat64PerBatchRow' "DS_MVB_BLK_PRE=1"
sh b "-1" 'CudaMatvecBatched.MatchesFloat64PerBatchRow' "$NEW"
sh c "-1" "$REST" "$NEW"
sh d "-1" 'CudaMatvecBatched.MatchesFloat64PerBatchRow' "X=0"
sh e "-1" "$REST" "X=0"
sh f "x" 'CudaMatvecBatched.HlAndPrebuildBits:CudaMatvecBatched.SplitReduceSameBits' "X=0"
sh g "16,13" 'CudaMatvecBatched.WgmmaRing*:CudaMatvecBatched.PrepRegSameBits:CudaMatvecBatched.Q6KScaled*:CudaMatvecBatched.BatchOne*:CudaMatvecBatched.Rejects*' "X=0"
( env $NEW timeout 120 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model_new.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model_new.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( DS_TEST_MVB_WG=16 DS_MVB_BLK_PRE=1 timeout 120 "$CS" --tool memcheck "$T" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck16.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck16.log" ) &
wait
for f in a a2 b c d e f g; do say "test_cuda shard $f: $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
say "test_cuda_model (16 + prebuild): $(grep -E 'PASSED|FAILED|^rc' $W/t_model_new.log | tr '\n' ' ')"
say "memcheck 16 + prebuild: $(grep -E 'tests? from|PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_memcheck16.log | tr '\n' ' ')"
grep -hE "FAILED|Failure|worst|differ" $W/t_*.log | sort | uniq -c | head -80 > "$W/test_summary.txt"
cp "$W/test_summary.txt" "$W/res.txt" "$OUT/" 2>/dev/null
td() { local tag=$1 e=$2; [ $(el) -lt 120 ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 20 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td base "X=0"
td w16 "DS_MVB_WG=16"
td pre "DS_MVB_BLK_PRE=1"
td both "$NEW"
td w16g4 "DS_MVB_WG=16 DS_MVB_HL_G=4"
td w16wg2 "DS_MVB_WG=16 DS_MVB_BLK_WG=2"
td base2 "X=0"
td both2 "$NEW"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 125 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 base" "X=0" --batch 64
cb "64 w16" "DS_MVB_WG=16" --batch 64
cb "64 pre" "DS_MVB_BLK_PRE=1" --batch 64
cb "64 both" "$NEW" --batch 64
cb "64L base" "X=0" --batch 64 --prompt 512 --ctx 1024 --breakdown
cb "64L w16" "DS_MVB_WG=16" --batch 64 --prompt 512 --ctx 1024 --breakdown
cb "64L both" "$NEW" --batch 64 --prompt 512 --ctx 1024
cb "64 base2" "X=0" --batch 64
cb "64 w16_2" "DS_MVB_WG=16" --batch 64
cb "32 base" "X=0" --batch 32
cb "32 w16" "DS_MVB_WG=16" --batch 32
cb "64L base2" "X=0" --batch 64 --prompt 512 --ctx 1024
cb "64L w16_2" "DS_MVB_WG=16" --batch 64 --prompt 512 --ctx 1024
cp "$W/cb.log" "$W/td.log" "$OUT/" 2>/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 e=$2 k=$3 skip=$4 cnt=$5; [ $(el) -lt 172 ] || { say "skip ncu $tag"; return; }
  env $e timeout 12 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:$k" --launch-skip $skip --launch-count $cnt \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    -o "$W/ncu_$tag" -f "$M" timedef q4_k > "$W/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$?"
  timeout 8 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page details --print-details all > "$W/ncu_details_$tag.txt" 2>&1
  say "ncu $tag: $(grep -E '^  [_a-zA-Z]|Duration|Pipe Tensor Cycles Active|Issue Slots Busy|Eligible Warps Per|Registers Per|Achieved Occupancy' $W/ncu_details_$tag.txt | tr -s ' ' | tr '\n' ';' | cut -c1-900)"; }
# timedef q4_k launches: ffn_gate_up B 32 (1 + 30), B 64 (1 + 30) by block_kernel<3>; ffn_down B 32 (31), B 64 (31) by the
# 2-warpgroup kernel: skip 36 of the 2-warpgroup kernel's launches -> a B = 64 ffn_down
nc hl_fd "DS_MVB_WG=16" 'hl_kernelILi2E' 36 1
nc b2_fd "X=0" 'block_kernelILi2ELb0ELb1ELb0E' 36 1
nc b3pre_gu "DS_MVB_BLK_PRE=1" 'block_kernelILi3ELb0ELb1ELb1E' 36 1
nc b3_gu "X=0" 'block_kernelILi3ELb0ELb1ELb0E' 36 1
cd "$W" && tar czf "$OUT/logs.tgz" t_*.log ncu_details_*.txt ncu_run_*.txt cb.jsonl 2>/dev/null
say done

#!/bin/bash
# mvb18 device call 1: DS_MVB_BUILD (a static read + set_matvec_batched_block_build; default now 1 = build17's form)
# and the new form 2 (= 1 with the scale terms once per half block). Tests with the new default: the five tests that
# build17 could not run (MatchesFloat64PerBatchRow, PrepRegSameBits, RunToRunIdentical, BlockBuildFastSameBits (now
# 0 vs 1 vs 2), ColumnIndependentOfBatch) ALONE in one process, then the other CudaMatvecBatched.* in 3 shards with
# test_cuda_model; then mvb_bench timedef q4_k 0 / 1 / 2 / 0 / 1 / 2 and the 9B step at B = 64 after 512-token prompts
# 0 / 1 / 2 / 0 / 1 / 2, short B = 64 0 / 1 / 2. Run from the ignored devwork-mvb18/ in /work/main as
# OUT=$OUT bash devwork-mvb18/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsm18; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 20 "$CO" -res-usage "$M" 2>&1 | grep -A1 block_kernel | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
  timeout 40 "$CO" -sass "$M" 2>/dev/null | awk '/Function : /{n = (/block_kernelILi[23]ELb0ELb1E/) ? $3 : ""} n != "" {for (i = 1; i <= NF; i++) if ($i ~ /^(LOP3|SHF|HFMA2|UIADD3|ULOP3|USHF|UMOV|HGMMA|LDS|IADD3|PRMT|HMUL2|HADD2)/) {split($i, b, "."); c[n " " b[1]]++; break}} n != "" && /^ +\/\*[0-9a-f]+\*\/ +[A-Z@]/ {tot[n]++} END {for (k in c) print k, c[k]; for (k in tot) print k, "TOTAL", tot[k]}' | sort > "$OUT/sass_counts.txt" ) &
G1='CudaMatvecBatched.MatchesFloat64PerBatchRow:*PrepRegSameBits:*RunToRunIdentical:*BlockBuildFastSameBits:*ColumnIndependentOfBatch'
timeout 120 "$T" --gtest_filter="$G1" > "$W/t_g1.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_g1.log"
say "test_cuda G1 (alone, default): $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $W/t_g1.log | tr '\n' ' ')"
for i in 0 1 2; do
  ( GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i timeout 50 "$T" --gtest_filter="CudaMatvecBatched.*-$G1" > "$W/t_$i.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$i.log" ) &
done
( timeout 50 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log" ) &
wait
for i in 0 1 2; do say "test_cuda shard $i: $(grep -E '^\[       OK|^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$i.log | tr '\n' ' ')"; done
say "test_cuda_model: $(grep -E 'PASSED|FAILED|^rc' $W/t_model.log | tr '\n' ' ')"
grep -hE "FAILED|Failure|differ|worst" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
td() { local tag=$1 v=$2; env TAG=$tag DS_MVB_BUILD=$v timeout 15 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td f0 0; td f1 1; td f2 2; td f0b 0; td f1b 1; td f2b 2
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 100 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 v=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name (DS_MVB_BUILD=$v $*)" >> "$W/cb.log"; env DS_MVB_BUILD=$v timeout 20 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64L f0" 0 --batch 64 --prompt 512 --ctx 1024
cb "64L f1" 1 --batch 64 --prompt 512 --ctx 1024
cb "64L f2" 2 --batch 64 --prompt 512 --ctx 1024
cb "64L f0b" 0 --batch 64 --prompt 512 --ctx 1024
cb "64L f1b" 1 --batch 64 --prompt 512 --ctx 1024
cb "64L f2b" 2 --batch 64 --prompt 512 --ctx 1024
cb "64 f0" 0 --batch 64
cb "64 f1" 1 --batch 64
cb "64 f2" 2 --batch 64
cp "$W/cb.log" "$W/td.log" "$OUT/" 2>/dev/null
cd "$W" && tar czf "$OUT/logs.tgz" t_*.log cb.jsonl 2>/dev/null
say done

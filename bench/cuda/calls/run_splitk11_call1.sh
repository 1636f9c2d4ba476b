#!/bin/bash
# splitk11 device call 1 (binaries of the splitk11 branch, first commit): same-bits tests of the new variants
# (DS_MVB_RED=3 split-K clusters, DS_MVB_BLK_PRE=1 prebuild, DS_MVB_BLK_WS=1 deep weight ring), kernel times per variant
# (mvb_bench timedef), the 9B step A/B at B = 64 / 32, the default-config batched tests and memcheck with every new
# variant switched on. Run from the ignored devwork-splitk11/ in /work/main (b.tar.xz = gpu_bundle output without
# test_cuda_model and the fixture models, plus mvb_bench) as OUT=$OUT bash devwork-splitk11/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dssk11; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; M=$B/mvb_bench
LIM=${LIM:-110}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
timeout 20 "$CO" -res-usage "$B/test_cuda" 2>&1 | grep -A1 -E "block_kernel|wg6r" | grep -oE "(_Z[^ ]*block_kernel[^ ]*|_Z[^ ]*wg6r[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$W/res.log" 2>&1
timeout 60 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.SplitReduceSameBits:CudaMatvecBatched.BlockVariantsSameBits' > "$W/t_bits.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_bits.log"
say "bits tests: $(grep -E 'PASSED|FAILED|split reduce|^rc' $W/t_bits.log | tr '\n' ' ')"
td() { local tag=$1 e=$2 ty=$3; [ $(el) -lt $LIM ] || { say "skip td $tag"; return; }; env TAG=$tag $e timeout 25 "$M" timedef $ty >> "$W/td.log" 2>&1; say "td $tag $ty rc=$?"; }
td def "DS_MVB_RED=1" q4_k
td red3 "DS_MVB_RED=3 DS_MVB_CLUSTER_LOG=1" q4_k
td pre "DS_MVB_BLK_PRE=1" q4_k
td ws "DS_MVB_BLK_WS=1" q4_k
td all "DS_MVB_RED=3 DS_MVB_BLK_PRE=1 DS_MVB_BLK_WS=1" q4_k
td def "DS_MVB_RED=1" q6_k
td red3 "DS_MVB_RED=3 DS_MVB_CLUSTER_LOG=1" q6_k
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 70 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 def" "DS_MVB_RED=1" --batch 64 --breakdown --top 12
cb "64 red3" "DS_MVB_RED=3" --batch 64 --breakdown --top 12
cb "64 pre" "DS_MVB_BLK_PRE=1" --batch 64
cb "64 ws" "DS_MVB_BLK_WS=1" --batch 64
cb "64 all" "DS_MVB_RED=3 DS_MVB_BLK_PRE=1 DS_MVB_BLK_WS=1" --batch 64 --breakdown --top 12
cb "32 def" "DS_MVB_RED=1" --batch 32
cb "32 all" "DS_MVB_RED=3 DS_MVB_BLK_PRE=1 DS_MVB_BLK_WS=1" --batch 32
cb "64 def again" "DS_MVB_RED=1" --batch 64
grep -E "^(====|decode|matvec|gdn|total|rms|swiglu|conv|  )" $W/cb.log > $OUT/cb_summary.txt
ALL="DS_MVB_RED=3 DS_MVB_BLK_PRE=1 DS_MVB_BLK_WS=1"
( env $ALL DS_TEST_MVB_WG=-1 timeout 55 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*-*SplitReduce*:*BlockVariants*' > "$W/t_def_all.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_def_all.log" ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( env $ALL DS_TEST_MVB_WG=12,q6 timeout 55 "$CS" --tool memcheck "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.Accumulate:CudaMatvecBatched.RunToRunIdentical' > "$W/t_memcheck.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_memcheck.log" ) &
wait
say "tests: $(grep -hE 'PASSED|FAILED|ERROR SUMMARY|^rc' $W/t_def_all.log $W/t_memcheck.log | tr '\n' ' ')"
cp "$W/td.log" "$W/res.log" "$OUT/" 2>/dev/null
cd $W && tar czf "$OUT/all.tgz" *.log 2>/dev/null
say done

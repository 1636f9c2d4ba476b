#!/bin/bash
# q6s19 call 1 (H200): the Q6_K stream kernel's steady state (9B ffn_down 4096 x 12288). Binaries of branch q6s19 5f77e81:
# DS_MATVEC_STREAM_Q6K_PAIR 0 (default) / 1 (two stages per warp at once) / 2 (stage released once loaded) / 3 (both).
# Phase 0 (GPU alone, syntheses alongside): mvbench --stream6 --filter ffn_down --time-only (kernel alone, every
# ring knob + the pair modes). Phase 1: ncu (WarpStateStats SourceCounters SpeedOfLight MemoryWorkloadAnalysis) of the
# SwiGLU ffn_down launch, PAIR 0 and B, while the tests run (StreamQ6KPairSameBits x3 shards, StreamQ6KVariants under
# PAIR=3 x3, the other Stream* under PAIR=3, mvbench --check-only, test_cuda_model under PAIR=3 and 1, racecheck /
# synccheck small). Phase 2 (one at a time): tg128 9B 0 B 0 B, 27B 0 B 0 B, breakdown 9B 0 / B, StreamTimeline 0 / B,
# the other modes once, 9B 0 B; B = the pair mode with the best 9B ffn_down stream6_pairN time in phase 0.
# Lives in /work/main/devwork-q6s19/ (ignored) as go.sh beside b.tar.xz (tools/gpu_bundle.sh: deltaserve, test_cuda,
# test_cuda_model, fixtures; lib/ without libcublas*/libcudart*; stripped) and mvbench.xz
# (bench/cuda/matvec_bench_standalone.cu, nvcc -O3 -std=c++20 -arch=sm_90a -DDS_HAVE_CUDA=1 -DDS_HAVE_SM90A=1
# --expt-relaxed-constexpr -DFMT_SHARED -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -DNDEBUG -lineinfo -I src, linked against
# build/'s libds_cuda.a libds_quant.a libds_core.a -lcublas -lfmt -Xcompiler -fopenmp; stripped).
# Run as: cd devwork-q6s19 && OUT=$OUT timeout 235 bash go.sh (timeout_s 240)
set -u
cd "$(dirname "$0")"
D=$PWD; W=/tmp/dsv_q6s19; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
tar xJf b.tar.xz; B=$D/gpu-bundle
M=$W/mvbench; xz -dc "$D/mvbench.xz" > "$M"; chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; TM=$B/test_cuda_model; LIM=${LIM:-165}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
say "unpacked"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B ) &
( syn 27B ) &
say "== phase 0: mvbench"
timeout 60 "$M" --stream6 --filter ffn_down --time-only > "$W/mvb.log" 2>&1; say "mvbench rc=$?"
python3 - "$W/mvb.log" <<'PY' | tee -a "$OUT/steps.log"
import json,sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('{"op":"matvec"'): continue
    j=json.loads(l); d[(j['model'],j['tensor'])].append(f"{j['path']}={j['us']:.2f}/{j['gb_s']:.0f}")
for k,v in d.items(): print(k[0],k[1],' '.join(v))
PY
BEST=$(python3 - "$W/mvb.log" <<'PY'
import json,sys
t={}
for l in open(sys.argv[1]):
    if not l.startswith('{"op":"matvec"'): continue
    j=json.loads(l)
    if j['model']=='9B' and j['path'].startswith('stream6_pair') and '_s' not in j['path'][12:]:
        t.setdefault(int(j['path'][12]),[]).append(j['us'])
print(min(t,key=lambda m:sum(t[m])/len(t[m])) if t else 3)
PY
)
say "best pair mode by 9B ffn_down stream6_pairN: $BEST"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase 1: tests + ncu"
P=()
for k in 0 1 2; do t pair_$k 80 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KPairSameBits' & P+=($!); done
for k in 0 1 2; do t q6v3_$k 80 DS_MATVEC_STREAM_Q6K_PAIR=3 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!); done
t other3 80 DS_MATVEC_STREAM_Q6K_PAIR=3 "$TC" --gtest_filter='CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*:CudaMatvec.StreamPrefetchHint' & P+=($!)
t mvcheck 80 DS_X=0 "$M" --stream6 --check-only & P+=($!)
t model3 80 DS_MATVEC_STREAM_Q6K_PAIR=3 "$TM" --gtest_brief=1 & P+=($!)
t model1 80 DS_MATVEC_STREAM_Q6K_PAIR=1 "$TM" --gtest_brief=1 & P+=($!)
t race 80 DS_TEST_STREAM_SMALL=1 "$CS" --tool racecheck --error-exitcode 9 "$TC" --gtest_filter='CudaMatvec.StreamQ6KPairSameBits' & P+=($!)
t sync 80 DS_TEST_STREAM_SMALL=1 "$CS" --tool synccheck --error-exitcode 9 "$TC" --gtest_filter='CudaMatvec.StreamQ6KPairSameBits' & P+=($!)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nc() { local tag=$1 mode=$2
  DS_MATVEC_STREAM_Q6K_PAIR=$mode timeout 45 "$NCU" --clock-control none --kernel-name-base mangled -k "regex:mvq66kernelILb1ELi16E" \
    --launch-skip 3 --launch-count 1 --kill yes --section WarpStateStats --section SourceCounters --section SpeedOfLight \
    --section MemoryWorkloadAnalysis -o "$W/ncu_$tag" -f "$M" --stream6 --filter "9B ffn_down" --time-only > "$W/ncu_run_$tag.txt" 2>&1
  say "ncu $tag rc=$? $(grep -E '==PROF==|==ERROR==' $W/ncu_run_$tag.txt | tail -2 | tr '\n' ' ' | cut -c1-200)"
  timeout 15 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$W/src_$tag.csv" 2> "$W/src_$tag.err"
  timeout 15 "$NCU" -i "$W/ncu_$tag.ncu-rep" --page details --print-details all > "$W/det_$tag.txt" 2>&1
  say "ncu $tag: $(grep -E ' Duration|Warp Cycles Per Issued|Issued Warp Per|DRAM Throughput|Memory Throughput' $W/det_$tag.txt | tr -s ' ' | tr '\n' ';' | cut -c1-300)"; }
nc p0 0
nc p$BEST $BEST
wait "${P[@]}"
say "== phase 1 done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|\"failures\"' $f | tr '\n' ' ' | cut -c1-220)"; done
grep -hE "^\[stream q6|^\[stream wide|^\[stream xprep" "$W"/t_*.log | sed 's/^/  /' | head -40 >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ|mismatch|\"ok\":false|error\":true" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
say "== phase 2"
tl() { [ $(el) -lt $LIM ] || { say "skip timeline $1"; return; }
  echo "==== timeline PAIR=$1" >> "$W/timeline.log"
  DS_MATVEC_STREAM_Q6K_PAIR=$1 timeout 30 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' >> "$W/timeline.log" 2>&1 < /dev/null
  say "timeline PAIR=$1 rc=$? $(grep -E 'per replay|ffn_down q6' $W/timeline.log | tail -2 | cut -c1-330 | tr '\n' ' ')"; }
tg() { local s=$1 f=$2; [ $(el) -lt $LIM ] || { say "skip tg $s pair=$f"; return; }
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no model $s"; return; }
  DS_MATVEC_STREAM_Q6K_PAIR=$f timeout 40 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$W/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "q6s19 call1 $s pair=$f" >> "$OUT/bench.jsonl"
  say "TG $s pair=$f $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
cb() { [ $(el) -lt $((LIM + 10)) ] || { say "skip cb $1"; return; }
  echo "==== cuda-bench 9B --tg 16 --breakdown PAIR=$1" >> "$W/cb.log"
  DS_MATVEC_STREAM_Q6K_PAIR=$1 timeout 20 "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown >> "$W/cb.log" 2>&1 < /dev/null
  say "cb PAIR=$1 rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-100)"; }
for r in 1 2; do tg 9B 0; tg 9B $BEST; done
for r in 1 2; do tg 27B 0; tg 27B $BEST; done
cb 0; cb $BEST
tl 0; tl $BEST
for m in 1 2 3; do [ $m = $BEST ] || tg 9B $m; done
tg 9B 0; tg 9B $BEST
say done
cp "$W/mvb.log" "$W/timeline.log" "$W/cb.log" "$OUT/" 2>/dev/null
(cd "$W" && tar czf "$OUT/ncu.tgz" src_*.csv det_*.txt ncu_run_*.txt 2>/dev/null; tar czf "$OUT/reps.tgz" ncu_*.ncu-rep 2>/dev/null)
ls -la "$OUT" >> "$OUT/steps.log"

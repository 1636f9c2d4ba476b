#!/bin/bash
# b1q420 call 1 (H200): the Q4_K stream kernel's lean form (DS_MATVEC_STREAM_Q4K_LEAN=1: ring slot / phase counters
# instead of divisions by the stage count, the producer's row addresses per row group, the scales and mins by whole-word
# masks and byte picks; same bits) against the form it replaces (=0, the binaries' default). Binaries of branch b1q420.
# Steps: synth 9B / 27B / 0.8B in the background; SASS of the four integer-form kernels (cuobjdump, background);
# mvbench --stream-lean --time-only (stream / stream_lean interleaved x 3 per shape) with the GPU alone; tests in
# parallel (StreamQ4KLeanSameBits x3 shards, StreamQ4KVariants under LEAN=1 x3, mvbench --stream-lean --check-only,
# test_cuda_model --gtest_brief=1 under LEAN=1); then tg128 one run at a time: 9B A B A B A B (A = LEAN 0, B = LEAN 1),
# 27B A B W A B W A B W (W = LEAN 0 + DS_MATVEC_STREAM_Q6K_WIDE=0: q6i19's Next 2), 0.8B A B; then, time left, the 9B
# graph step with --breakdown under A and B (Q4_K 112 ops op by op).
# b.tar.xz: tools/gpu_bundle.sh of this branch's build (deltaserve, test_cuda, test_cuda_model; cuBLAS / cudart left to
# the device's /usr/local/cuda/lib64). mvbench.xz: bench/cuda/matvec_bench_standalone.cu compiled alone (nvcc -O3
# -DNDEBUG, the project's defines, sm_90a) and linked against the build's libds_cuda.a / libds_quant.a / libds_core.a,
# -lspdlog -lfmt -lgomp (libfmt.so.9 comes with the bundle's lib/).
# Lives in /work/main/devwork-b1q420/ as go.sh beside b.tar.xz and mvbench.xz. Run as:
#   cd devwork-b1q420 && OUT=$OUT timeout 170 bash go.sh   (timeout_s 180; LIM=130: no timing run starts later)
set -u
cd "$(dirname "$0")"
D=$PWD; W=/tmp/dsv_b1q420; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
tar xJf b.tar.xz; B=$D/gpu-bundle
M=$W/mvbench; xz -dc "$D/mvbench.xz" > "$M"; chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; TM=$B/test_cuda_model; LIM=${LIM:-130}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
say "unpacked"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 5 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B ) &
( syn 27B ) &
( syn 0.8B ) &
# SASS of the integer-form kernels (kernel<3, true, 8 / 16, lean false / true>): instructions and mnemonics
( CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  for k in 8ELb0 8ELb1 16ELb0 16ELb1; do f="_ZN2ds4cuda3mvq6kernelILi3ELb1ELi${k}EEEvNS1_4ArgsE"
    "$CO" -sass -fun "$f" "$M" > "$W/sass_$k.txt" 2>&1
    echo "sass $k: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $W/sass_$k.txt) lines; $(grep -E '^\s+/\*[0-9a-f]{4}\*/' $W/sass_$k.txt | sed -E 's/^\s+\/\*[0-9a-f]{4}\*\/\s+(@!?U?P[0-9T]+\s+)?//' | awk '{print $1}' | sed 's/\..*//;s/;//' | sort | uniq -c | sort -rn | head -16 | awk '{printf "%s %s, ", $2, $1}')" >> "$OUT/sass.txt"
  done; cd "$W" && tar czf "$OUT/sass.tgz" sass_*.txt ) &
say "== mvbench"
timeout 40 "$M" --stream-lean --filter "9B ffn_gate_up,9B ffn_down,9B attn_qkv,9B ssm_out,27B" --time-only > "$W/mvb.log" 2>&1; say "mvbench rc=$?"
python3 - "$W/mvb.log" <<'PY' | tee -a "$OUT/steps.log"
import json,sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith('{"op":"matvec"'): continue
    j=json.loads(l)
    if j.get('path','').startswith('stream'): d[(j['model'],j['tensor'])].append(f"{j['path']}={j['us']:.2f}")
for k,v in d.items(): print(k[0],k[1],' '.join(v))
PY
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== tests"
P=()
for k in 0 1 2; do t lean_$k 70 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ4KLeanSameBits' & P+=($!); done
for k in 0 1 2; do t q4v_$k 70 DS_MATVEC_STREAM_Q4K_LEAN=1 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!); done
t mvcheck 60 DS_X=0 "$M" --stream-lean --check-only & P+=($!)
t model 70 DS_MATVEC_STREAM_Q4K_LEAN=1 "$TM" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|\"failures\"|failures' $f | tr '\n' ' ' | cut -c1-220)"; done
grep -hE "^\[stream" "$W"/t_*.log | sed 's/^/  /' | head -20 >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|differ|mismatch|\"ok\":false" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
say "== tg128"
tg() { local m=$1 lab=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip tg $m $lab"; return; }
  while [ ! -e "$W/m$m.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
  [ -e "$W/m$m.ok" ] || { say "no model $m"; return; }
  env "$@" timeout 30 "$X" bench -m "$W/m$m.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$W/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "b1q420 call1 $m $lab" >> "$OUT/bench.jsonl"
  say "TG $m $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
A=DS_MATVEC_STREAM_Q4K_LEAN=0; L=DS_MATVEC_STREAM_Q4K_LEAN=1
for r in 1 2 3; do tg 9B A $A; tg 9B B $L; done
for r in 1 2 3; do tg 27B A $A; tg 27B B $L; tg 27B W $A DS_MATVEC_STREAM_Q6K_WIDE=0; done
tg 0.8B A $A; tg 0.8B B $L
for e in $A $L; do [ $(el) -lt $LIM ] || break
  env $e timeout 25 "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown > "$W/bd_$e.log" 2>&1 < /dev/null
  say "breakdown $e $(grep -E '^decode|Q4_K|q4_k' "$W/bd_$e.log" | head -3 | tr '\n' ' ' | cut -c1-200)"; done
cat "$W"/bd_*.log > "$OUT/breakdown.log" 2>/dev/null
say done
cp "$W/mvb.log" "$OUT/" 2>/dev/null

# Sourced by device-call scripts (bench/cuda/calls/*/go*.sh) after `cd` into their carried folder, which holds b.tar.xz
# from tools/gpu_bundle.sh: unpacks the bundle and sets what the scripts use.
#   D (the folder), B (the bundle), W (/tmp/dsv: models made on the device), X (deltaserve), TM (test_cuda_model),
#   GPU (the card's name), M9 (the 9B Q4_K_M synth's path), el / say (seconds since start; a line to steps.log),
#   synth9b_bg (makes M9 in the background, touching $W/m9B.ok when done), wait9b LIMIT (waits for it until LIMIT s),
#   serve_summary (one SERVE line per level of $OUT/serve.jsonl), pack_out (the logs into logs.tgz: only ~8 files
#   come back from $OUT), lockstep ENV (the 9B 64 x 512 + tg64 --select 0 step under ENV, e.g. "DS_KV_F16=1"; its
#   decode line and argmax digest), served ENV (64 clients, --prefill-budget 4096, 40 s, labelled "$TAG $GPU ENV"),
#   model_tests FILTER SECONDS (test_cuda_model's FILTER into tests.log; the summary and any failure into steps.log),
#   ncu_summary FILE (an ncu metrics log as one line per kernel and metric: launches, median, max), tg128 MODEL
#   (batch-1 `bench -p 0 -n 128 -r 3` on CUDA into tg.log; its tok/s into steps.log).
# Scripts before session 39 define their own cb / sb forms of the last two.
D=$PWD
tar xJf b.tar.xz
B=$D/gpu-bundle
W=/tmp/dsv
mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
TM=$B/test_cuda_model
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
  "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
M9=$W/m9B.gguf
synth9b_bg() {
  ( [ -e "$M9" ] || "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads "${1:-12}" -o "$M9" > /dev/null 2>&1
    touch "$W/m9B.ok" ) &
}
wait9b() { while [ ! -e "$W/m9B.ok" ] && [ "$(el)" -lt "$1" ]; do sleep 1; done; }
serve_summary() {
  [ -e "$OUT/serve.jsonl" ] && python3 -c "
import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); print('SERVE', d['label'], d['concurrency'], d.get('decode_tok_s'), d.get('mean_decode_batch'), d['ttft_ms'], d['itl_ms'], 'gap_ms', d.get('gap_ms'), d.get('engine_ms_per_step'), 'steps', d.get('batch_steps'))" "$OUT/serve.jsonl" | tee -a "$OUT/steps.log"
}
pack_out() {
  (cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=steps.log * &&
    find . -maxdepth 1 -type f ! -name logs.tgz ! -name steps.log -delete)
}
lockstep() {
  timeout "${LOCKSTEP_S:-25}" env $1 "$X" cuda-bench -m "$M9" --tg 64 --reps 2 --json "$OUT/cb.jsonl" --select 0 --batch 64 \
    --prompt 512 --ctx 1024 > "$OUT/cb1.log" 2>&1
  say "lockstep $1: rc=$? $(grep -E '^decode|digest' "$OUT/cb1.log" | tr '\n' ' ' | cut -c1-220)"
}
served() {
  env $1 DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 50 bash "$D/../tools/serve_bench.sh" "$M9" --levels 64 \
    --budget-s 40 --label "${TAG:-call} $GPU $1 --prefill-budget 4096" --server-args "--prefill-budget 4096" \
    >> "$OUT/serve.log" 2>&1
  say "serve $1 rc=$?"
}
model_tests() {
  timeout "$2" "$TM" --gtest_filter="$1" > "$OUT/tests.log" 2>&1
  say "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ') $(grep '\[certify\]' "$OUT/tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure' "$OUT/tests.log" | head -20 | tee -a "$OUT/steps.log"
}
ncu_summary() {
  python3 - "$1" <<'PY' | tee -a "$OUT/steps.log"
import re, sys, collections
d = collections.defaultdict(list); name = None
for l in open(sys.argv[1]):
    m = re.search(r'(\w+)(?:<[^(]*>)?\(.*\) \((\d+), (\d+), (\d+)\)x\((\d+)', l)
    if m: name = m.group(1) + ' grid ' + m.group(2) + 'x' + m.group(3); continue
    m = re.search(r'(gpu__time_duration.sum|dram__throughput\S*|lts__throughput\S*)\s+\S+\s+([\d.,]+)', l)
    if m and name: d[(name, m.group(1)[:8])].append(float(m.group(2).replace(',', '')))
for (n, k), v in sorted(d.items()):
    v.sort(); print(f'ncu {n:36s} {k} n={len(v)} med={v[len(v)//2]:.2f} max={v[-1]:.2f}')
PY
}
tg128() {
  timeout 40 "$X" bench -m "$1" --backend cuda -p 0 -n 128 -r 3 --json >> "$OUT/tg.log" 2>&1
  say "tg128 $(basename "$1") rc=$? $(grep -o '"tokens_per_s":[^,]*' "$OUT/tg.log" | tail -1)"
}

#!/bin/bash
# One-call H200 check of merged main (the coordinator's final call of a session): every GPU test, tg128 A/B
# lines, per-kernel breakdowns, batched decode 8/32/64, serving at 1/8/32/64 clients, memcheck on the newest
# kernels' tests. Carried as devwork-X/ (inside /work/main: the device tool copies that checkout) holding
# b.tar.xz (tools/gpu_bundle.sh output; lib/ without libcublas*/libcudart*, binaries stripped), this script as
# go.sh, and optionally sanitize.txt ("TOOL ENV BINARY FILTER" per line, ENV as in extra_tests.txt), lines9B.txt (one env setting per 9B tg128 line; default below), batched.txt (one env
# "B ENV [-- ARGS]" per extra batched line), lines_<size>.txt (tg128 lines of the other sizes), extra_tests.txt ("ENV BINARY FILTER" per line; ENV = VAR=V[,VAR=V...]), MEMCHECK (a gtest filter). Run as `OUT=$OUT bash devwork-X/go.sh`
# (~400 s + the cold start). Env: LIM (s), SIZES, TC_FILTER, SHARDS (test_cuda processes at once), CB_ARGS (extra
# cuda-bench arguments for the batched lines, e.g. --select 0), NO_SERVE=1 (no serving run). A bench line whose env
# holds OLD=1 runs gpu-bundle/deltaserve.old (an older build put in the bundle) instead; early_tests.txt: see below. Everything under $OUT ends in all.tgz (the tool returns at most 8 files).
# Records: session 6 (docs/measurements/2026-12-03-h200-session6-final.txt), session 7
# (docs/measurements/2026-12-03-h200-session7-final.txt).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-480}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in ${SIZES:-9B 0.8B 27B 4B}; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
# sanitize.txt: one "TOOL ENV BINARY FILTER" per line (compute-sanitizer memcheck / racecheck / synccheck on any test
# binary). SAN_EARLY=1: run them alongside the test_cuda shards (no timing runs yet), each in its own log.
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
sanitize() { [ -n "$CS" ] && [ -e "$D/sanitize.txt" ] && while read -r tool e b f; do [ $(el) -lt $(( LIM + 60 )) ] || { say "skip $tool $b $f"; continue; }
  step "$tool $e $b $f" 120 "$OUT/sanitizer.log" env ${e//,/ } "$CS" --tool "$tool" --error-exitcode 1 "$B/$b" --gtest_brief=1 --gtest_filter="$f"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log" | tail -1 | tee -a "$OUT/steps.log"; done < "$D/sanitize.txt"; }
# SAN_EARLY: every line at once (its own log, 150 s each), while test_cuda's shards run.
sanitize_early() { local n=0 P=(); while read -r tool e b f; do n=$((n+1))
    ( step "$tool $e $b $f" 150 "$OUT/sanitizer$n.log" env ${e//,/ } "$CS" --tool "$tool" --error-exitcode 1 "$B/$b" --gtest_brief=1 --gtest_filter="$f" ) & P+=($!)
  done < "$D/sanitize.txt"; wait "${P[@]}"; cat "$OUT"/sanitizer[0-9]*.log >> "$OUT/sanitizer.log"; rm -f "$OUT"/sanitizer[0-9]*.log
  grep -E "^====|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer.log" | tee -a "$OUT/steps.log"; }
# early_tests.txt: every line ("ENV BINARY FILTER") at once in its own process (150 s each), beside the sanitizers and
# test_cuda's shards (e.g. test_cuda_model under each default-off switch).
early_tests() { local n=0 P=(); while read -r e b f; do n=$((n+1))
    ( step "$b $e $f" 150 "$OUT/early$n.log" env ${e//,/ } "$B/$b" --gtest_brief=1 --gtest_filter="$f" ) & P+=($!)
  done < "$D/early_tests.txt"; wait "${P[@]}"; cat "$OUT"/early[0-9]*.log >> "$OUT/tests.log"; rm -f "$OUT"/early[0-9]*.log; }
ETPID=; [ -e "$D/early_tests.txt" ] && { early_tests & ETPID=$!; }
SANPID=; [ -n "$CS" ] && [ -e "$D/sanitize.txt" ] && [ -n "${SAN_EARLY:-}" ] && { sanitize_early & SANPID=$!; }
# test_cuda in SHARDS (default 4) processes at once on the one GPU: most of its time is host-side float64 references.
say "== test_cuda (${SHARDS:-4} shards)"
for i in $(seq 0 $(( ${SHARDS:-4} - 1 ))); do
  GTEST_TOTAL_SHARDS=${SHARDS:-4} GTEST_SHARD_INDEX=$i timeout 200 "$B/test_cuda" --gtest_brief=1 --gtest_filter="${TC_FILTER:-*}" > "$OUT/tc$i.log" 2>&1 < /dev/null & TCP="${TCP:-} $!"
done; wait $TCP
for i in $(seq 0 $(( ${SHARDS:-4} - 1 ))); do echo "==== test_cuda shard $i" >> "$OUT/tests.log"; cat "$OUT/tc$i.log" >> "$OUT/tests.log"; rm -f "$OUT/tc$i.log"; done
say "== test_cuda done"; grep -E "PASSED|FAILED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[(tc|stream|stream q6)\]|^matvec_batched|worst' "$OUT/tests.log" | head -60 > "$OUT/errors.txt"
step test_cuda_model 60 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step test_cuda_prefill 40 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
grep -E "FAILED|PASSED|tests ran|worst" "$OUT/tests.log" | tee -a "$OUT/steps.log"
[ -n "$SANPID" ] && { wait $SANPID; say "== early sanitizers done"; }
[ -n "$ETPID" ] && { wait $ETPID; say "== early tests done"; grep -E "^====|PASSED|FAILED|tests ran" "$OUT/tests.log" | tail -40 | tee -a "$OUT/steps.log"; }
bench() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  local bin=$X; case " $2 " in *" OLD=1 "*) bin=$B/deltaserve.old;; esac  # OLD=1: the bundle's older binary
  step "bench $1 $2" 40 "$OUT/bench.log" env $2 "$bin" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
[ -e "$D/lines9B.txt" ] || printf 'DS_DEFAULT=1\nDS_STEP_PDL=0 DS_MATVEC_PREFETCH_KB=0\n' > "$D/lines9B.txt"
if waitm 9B; then
  while read -r l; do bench 9B "$l"; done < "$D/lines9B.txt"
  step "breakdown 9B" 30 "$OUT/breakdown.log" "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14
  C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl ${CB_ARGS:-}"
  step "breakdown 64" 30 "$OUT/cb.log" $C --batch 64 --breakdown --top 12
  for b in 8 32; do step "batch $b" 25 "$OUT/cb.log" $C --batch $b; done
  # batched.txt: "B ENV..." or "B ENV... -- CUDA_BENCH_ARGS" (e.g. "64 DS_DEFAULT=1 -- --select 0")
  [ -e "$D/batched.txt" ] && while read -r b l; do e=${l%% -- *}; a=; [ "$e" != "$l" ] && a=${l#* -- }
    step "batch $b $l" 30 "$OUT/cb.log" env $e $C --batch $b --breakdown --top 2 $a; done < "$D/batched.txt"
  grep -E "^decode|^matvec|^gdn rule" "$OUT/cb.log" | tee -a "$OUT/steps.log"
  if [ -z "${NO_SERVE:-}" ]; then
    say "== serve"; DS_SERVE_BENCH_OUT="$OUT/serve.jsonl" timeout 90 bash "$D/../tools/serve_bench.sh" "$W/m9B.gguf" --levels 1,8,32,64 --budget-s 80 >> "$OUT/serve.log" 2>&1; say "== serve rc=$?"; tail -3 "$OUT/serve.log" | cut -c1-200 | tee -a "$OUT/steps.log"
  fi
fi
# lines_<size>.txt: env settings per tg128 line of that size (default: the defaults alone)
for s in ${SIZES:-9B 0.8B 27B 4B}; do [ $s = 9B ] && continue; waitm $s || { say "no $s"; continue; }
  if [ -e "$D/lines_$s.txt" ]; then while read -r l; do bench $s "$l"; done < "$D/lines_$s.txt"; else bench $s DS_DEFAULT=1; fi; done
# extra_tests.txt: one "ENV BINARY FILTER" per line (e.g. a default-off kernel forced on for its tests), after the benches.
[ -e "$D/extra_tests.txt" ] && while read -r e b f; do [ $(el) -lt $LIM ] || { say "skip $b $e $f"; continue; }
  step "$b $e $f" 90 "$OUT/tests.log" env ${e//,/ } "$B/$b" --gtest_brief=1 --gtest_filter="$f"; done < "$D/extra_tests.txt"
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ] && [ -n "${MEMCHECK:-}" ] && [ $(el) -lt $LIM ]; then
  step "memcheck $MEMCHECK" $(( LIM + 60 - $(el) )) "$OUT/sanitizer.log" "$CS" --tool memcheck --leak-check no --error-exitcode 1 "$B/test_cuda" --gtest_brief=1 --gtest_filter="$MEMCHECK"
  grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" | tee -a "$OUT/steps.log"
fi
[ -z "${SAN_EARLY:-}" ] && sanitize
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz . && find . -type f ! -name all.tgz ! -name steps.log -delete)

#!/usr/bin/env bash
# tools/sanitize_server.sh: `deltaserve serve` from a sanitizer build, driven through the concurrent paths of
# the engine and the server, then stopped with SIGINT while requests run; fails on any sanitizer report.
#
#   cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_CUDA=OFF -DDS_BUILD_BENCH=OFF \
#         -DDS_SANITIZE=thread                    # or -B build-asan ... -DDS_SANITIZE=address,undefined
#   ninja -C build-tsan deltaserve
#   tools/sanitize_server.sh build-tsan [MODEL.gguf]   # default: the tiny-sym q4_k_m fixture
#
# The server runs on the CPU backend, --ctx 4096, --parallel 3, --max-queue 2 (so a burst meets 429s), with one
# OpenMP thread: libgomp is not built with TSan, so with more threads every `omp parallel` region shows races
# between the engine thread and the workers it hands data to (seen with OMP_NUM_THREADS=2 on test_engine: team
# start and barriers are invisible to TSan). tools/tsan.supp covers cpp-httplib's prebuilt library (why: there).
# DS_ASYNC_STEP=0 in the environment drives the engine's synchronous step order instead.
# The drive (Python, standard library only), each phase checked, with a thread scraping /metrics and /health
# every 50 ms all along:
#   stream    5 clients (3 slots + 2 queued: none refused) x 2 streaming requests (chat and completions;
#             logprobs, stop strings, penalties, sampling), every stream ends with `data: [DONE]` and a finish_reason;
#   cancel    5 streams closed by their client after the first token: the engine counts them cancelled and
#             every slot is free again (ds_requests_running 0);
#   prefix    2 three-turn chats at once, each turn extending the last verbatim: turns 2 and 3 report
#             cached prompt tokens (prefix cache restores);
#   queue     10 simultaneous streams on 3 slots + 2 queue places: the surplus gets 429 rate_limit_exceeded,
#             the rest complete;
#   routes    structured outputs (json_object / json_schema; whole, cut by max_tokens, cancelled mid-document),
#             /v1/responses (a previous_response_id chain, text.format, GET / DELETE / input_items of the stored
#             ones, a stream closed by its client, store false), /tokenize and /detokenize (large, and bad input: 400), CORS (--cors: preflight, another
#             origin), refused schemas (400), all at once; then every slot free;
#   shutdown  4 long streams running, then SIGINT: the server must exit 0 within 120 s and every stream end.
# Sanitizer output goes to OUT_DIR/san.* (OUT_DIR: $DS_SANITIZE_OUT, default BUILD_DIR/sanitize-server); TSan
# (halt_on_error=0: every report), ASan + UBSan (UBSan aborts at its first report: -fno-sanitize-recover) and
# LeakSanitizer at exit. Exit 0 only if every phase passed, the server exited 0 and no report was written.
# The same builds run the unit tests (OMP_NUM_THREADS=1 build-tsan/tests/engine/test_engine, .../test_server)
# and the node e2e tests (DS_BIN=build-tsan/apps/deltaserve node tests/e2e/abuse_test.mjs, with TSAN_OPTIONS as
# below; under TSan the slowloris case's timing bound fails and load_test needs small numbers: it is ~10x slower).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -x "$1/apps/deltaserve" ]; then
  echo "usage: tools/sanitize_server.sh BUILD_DIR [MODEL.gguf]  (BUILD_DIR/apps/deltaserve: a sanitizer build)" >&2
  exit 2
fi
bin=$1/apps/deltaserve
model=${2:-${DS_FIXTURES:-../shared/fixtures}/models/tiny-sym/tiny-sym-q4_k_m.gguf}
[ -f "$model" ] || { echo "sanitize_server: no model at $model" >&2; exit 2; }
out=${DS_SANITIZE_OUT:-$1/sanitize-server}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)

export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export TSAN_OPTIONS="log_path=$out/san suppressions=$PWD/tools/tsan.supp halt_on_error=0 second_deadlock_stack=1 exitcode=66"
export ASAN_OPTIONS="log_path=$out/san detect_leaks=1 detect_stack_use_after_return=1 strict_string_checks=1 exitcode=66"
export UBSAN_OPTIONS="log_path=$out/san print_stacktrace=1 halt_on_error=1"
export LSAN_OPTIONS="log_path=$out/san"

"$bin" serve -m "$model" --backend cpu --ctx 4096 --parallel 3 --max-queue 2 --threads 1 --timeout 10 --port 0 \
  --cors http://a.example \
  >"$out/port" 2>"$out/server.log" &
pid=$!
for _ in $(seq 600); do  # loading under a sanitizer is slow
  [ -s "$out/port" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.2
done
port=$(head -n1 "$out/port" 2>/dev/null || true)
if [ -z "$port" ]; then
  echo "sanitize_server: the server did not start (see $out/server.log)" >&2
  kill $pid 2>/dev/null || true
  exit 1
fi
echo "sanitize_server: server pid $pid on port $port; reports in $out"

set +e
python3 - "$port" "$pid" <<'EOF'
import http.client, json, os, signal, socket, sys, threading, time

PORT, PID = int(sys.argv[1]), int(sys.argv[2])
failures = []
lock = threading.Lock()

def fail(msg):
    with lock:
        failures.append(msg)
    print("FAIL:", msg, flush=True)

def conn(timeout=300):
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)

def get(path):
    c = conn(60)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body

def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None

def post(path, body):  # non-streaming: (status, json)
    c = conn()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, json.loads(data)

def stream(path, body, close_after=None):
    """Streams a request; returns (status, events, done). close_after=n: the client goes away after n data events."""
    body = dict(body, stream=True)
    c = conn()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        data = r.read().decode()
        c.close()
        return r.status, [json.loads(data)], False
    events, done = [], False
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        events.append(json.loads(line[6:]))
        if close_after is not None and len(events) >= close_after:
            c.sock.shutdown(socket.SHUT_RDWR)  # the client disappears mid-stream
            break
    c.close()
    return 200, events, done

def finish_reason(events):
    for e in events:
        for ch in e.get("choices", []):
            if ch.get("finish_reason"):
                return ch["finish_reason"]
    return None

CHAT, COMP = "/v1/chat/completions", "/v1/completions"

def chat_body(i, **kw):
    b = {"messages": [{"role": "system", "content": "You are terse."},
                      {"role": "user", "content": f"Client {i}: count to ten in words, please."}],
         "max_tokens": 16 + i % 3 * 8, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": i}
    b.update(kw)
    return b

def comp_body(i, **kw):
    b = {"prompt": f"Once upon a time, client {i} said", "max_tokens": 20, "temperature": 0, "ignore_eos": True}
    b.update(kw)
    return b

def run_threads(fns):
    ts = [threading.Thread(target=f) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

scraping = True
scrapes = [0]
def scraper():
    while scraping:
        try:
            s1, m = get("/metrics")
            s2, _ = get("/health")
            if s1 != 200 or s2 != 200 or "ds_requests_running" not in m:
                fail(f"scrape: /metrics {s1}, /health {s2}")
            scrapes[0] += 1
        except OSError as e:
            fail(f"scrape: {e}")
        time.sleep(0.05)

def wait_metric(name, pred, what, secs=60):
    v = None
    for _ in range(secs * 10):
        v = metric(get("/metrics")[1], name)
        if v is not None and pred(v):
            return v
        time.sleep(0.1)
    fail(f"{what}: {name} = {v}")
    return v

def phase_stream():
    def client(i):
        def run():
            for k in range(2):
                if (i + k) % 2 == 0:
                    extra = {"logprobs": True, "top_logprobs": 3} if i % 3 == 0 else {"stop": ["ten", "\n\n"]}
                    st, ev, done = stream(CHAT, chat_body(i, **extra, stream_options={"include_usage": True}))
                else:
                    extra = {"presence_penalty": 0.5, "frequency_penalty": 0.3} if i % 2 else {"logprobs": 2}
                    st, ev, done = stream(COMP, comp_body(i, **extra))
                if st != 200 or not done or finish_reason(ev) not in ("stop", "length"):
                    fail(f"stream client {i}.{k}: status {st}, done {done}, finish {finish_reason(ev)}: {ev[-1:]}")
        return run
    run_threads([client(i) for i in range(5)])

def phase_cancel():
    before = metric(get("/metrics")[1], 'ds_requests_finished_total{reason="cancelled"}') or 0
    def client(i):
        def run():
            st, ev, done = stream(COMP, comp_body(i, max_tokens=400), close_after=1)
            if st != 200 or done:
                fail(f"cancel client {i}: status {st}, done {done}")
        return run
    run_threads([client(i) for i in range(5)])
    wait_metric('ds_requests_finished_total{reason="cancelled"}', lambda v: v >= before + 5, "cancel")
    wait_metric("ds_requests_running", lambda v: v == 0, "cancel: slots freed")

def phase_prefix():
    def conversation(i):
        def run():
            msgs = [{"role": "system", "content": "You are a helpful assistant who answers in one line. " * 4},
                    {"role": "user", "content": f"Conversation {i}, turn 1: name a colour."}]
            for turn in range(3):
                body = {"messages": msgs, "max_tokens": 12, "temperature": 0}
                if turn == 1:
                    st, ev, done = stream(CHAT, dict(body, stream_options={"include_usage": True}))
                    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e.get("choices"))
                    usage = next((e["usage"] for e in ev if e.get("usage")), None)
                    ok = st == 200 and done
                else:
                    st, j = post(CHAT, body)
                    ok = st == 200
                    text = j["choices"][0]["message"].get("content") or "" if ok else ""
                    usage = j.get("usage") if ok else None
                if not ok or usage is None:
                    fail(f"prefix conversation {i} turn {turn}: status {st}")
                    return
                cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                if turn > 0 and cached <= 0:
                    fail(f"prefix conversation {i} turn {turn}: no cached prompt tokens ({usage})")
                msgs = msgs + [{"role": "assistant", "content": text},
                               {"role": "user", "content": f"Conversation {i}, turn {turn + 2}: another."}]
        return run
    run_threads([conversation(i) for i in range(2)])

def phase_queue():
    results = []
    def client(i):
        def run():
            st, ev, done = stream(COMP, comp_body(i, max_tokens=48))
            results.append((st, ev, done))
        return run
    run_threads([client(i) for i in range(10)])
    n429 = [r for r in results if r[0] == 429]
    ok = [r for r in results if r[0] == 200 and r[2] and finish_reason(r[1]) == "length"]
    if not n429 or len(n429) + len(ok) != len(results):
        fail(f"queue: {len(n429)} x 429, {len(ok)} complete of {len(results)}: {[r[0] for r in results]}")
    for st, ev, _ in n429:
        if ev[0].get("error", {}).get("code") != "rate_limit_exceeded":
            fail(f"queue: 429 body {ev[0]}")

def send(method, path, body=None, headers=None):  # (status, headers, text)
    c = conn(120)
    c.request(method, path, json.dumps(body) if body is not None else None,
              dict({"Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    data = r.read().decode(errors="replace")
    c.close()
    return r.status, dict(r.getheaders()), data

def phase_routes():
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
              "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3}},
              "required": ["name", "tags"]}
    rf_schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    nothink = {"chat_template_kwargs": {"enable_thinking": False}}
    def structured(i):
        def run():
            rf = rf_schema if i % 2 else {"type": "json_object"}
            st, j = post(CHAT, chat_body(i, response_format=rf, max_tokens=120, **nothink))
            if st != 200:
                fail(f"structured {i}: status {st}: {j}")
            elif j["choices"][0]["finish_reason"] == "stop":
                try:
                    json.loads(j["choices"][0]["message"]["content"])
                except ValueError:
                    fail(f"structured {i}: not JSON: {j['choices'][0]['message']['content']!r}")
            st, ev, done = stream(CHAT, chat_body(i, response_format=rf, max_tokens=6, **nothink))  # cut by max_tokens
            if st != 200 or not done or finish_reason(ev) not in ("stop", "length"):
                fail(f"structured stream {i}: status {st}, done {done}, finish {finish_reason(ev)}")
            st, ev, done = stream(COMP, comp_body(i, response_format=rf, max_tokens=200), close_after=2)  # cancelled
            if st != 200 or done:
                fail(f"structured cancel {i}: status {st}, done {done}")
        return run
    def responses(i):
        def run():
            prev, ids = None, []
            for turn in range(3):
                body = {"input": f"Client {i}, turn {turn}: say hi.", "max_output_tokens": 8, "temperature": 0}
                if prev:
                    body["previous_response_id"] = prev
                if turn == 1:
                    body["text"] = {"format": {"type": "json_object"}}
                st, j = post("/v1/responses", body)
                if st != 200 or j.get("status") not in ("completed", "incomplete"):
                    fail(f"responses {i}.{turn}: status {st}: {j}")
                    return
                prev = j["id"]
                ids.append(prev)
            # The stored ones: retrieved, listed, the first deleted (then 404), while the other phases' requests run.
            for rid in ids:
                st, _, t = send("GET", f"/v1/responses/{rid}")
                if st != 200 or json.loads(t)["id"] != rid:
                    fail(f"responses GET {rid}: {st} {t[:200]}")
            st, _, t = send("GET", f"/v1/responses/{ids[-1]}/input_items?order=asc&limit=100")
            if st != 200 or len(json.loads(t)["data"]) < 3:  # the three inputs, and the first two outputs
                fail(f"responses input_items: {st} {t[:200]}")
            for expect in (200, 404):
                st, _, t = send("DELETE", f"/v1/responses/{ids[0]}")
                if st != expect:
                    fail(f"responses DELETE: {st} (expected {expect}) {t[:200]}")
            c = conn()  # a stream whose client goes away after the first events
            c.request("POST", "/v1/responses", json.dumps({"input": "count", "max_output_tokens": 300, "stream": True,
                                                          "store": False, "previous_response_id": prev}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            for _ in range(6):
                r.fp.readline()
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
        return run
    def tokens(i):
        def run():
            st, _, t = send("POST", "/tokenize", {"prompt": "h\u00e9llo \u4e16\u754c " * 2000, "return_token_strs": True})
            if st != 200:
                fail(f"tokenize: {st}")
                return
            ids = json.loads(t)["tokens"]
            st, _, t = send("POST", "/detokenize", {"tokens": ids * 20})
            if st != 200:
                fail(f"detokenize: {st}")
            for bad in ({"tokens": [-1]}, {"tokens": "x"}, {"prompt": 5}):
                st, _, t = send("POST", "/detokenize" if "tokens" in bad else "/tokenize", bad)
                if st != 400:
                    fail(f"tokens {bad}: {st} {t[:200]}")
            st, h, _ = send("OPTIONS", "/v1/responses", None, {"Origin": "http://a.example",
                            "Access-Control-Request-Method": "POST"})
            if st != 204 or h.get("Access-Control-Allow-Origin") != "http://a.example":
                fail(f"CORS preflight: {st} {h}")
            st, h, _ = send("GET", "/v1/models", None, {"Origin": "http://other.example"})
            if st != 200 or "Access-Control-Allow-Origin" in h:
                fail(f"CORS other origin: {st} {h}")
            for bad in ({"properties": {"a": {"$ref": "#"}}, "required": ["a"]}, {"type": ["string"] * 300000}):
                st, _, t = send("POST", CHAT, chat_body(i, response_format={"type": "json_schema",
                                "json_schema": {"name": "x", "schema": bad}}))
                if st != 400:
                    fail(f"bad schema: {st} {t[:200]}")
        return run
    run_threads([structured(0), structured(1), responses(2), tokens(3)])
    wait_metric("ds_requests_running", lambda v: v == 0, "routes: slots freed")

def phase_shutdown():
    ends = []
    started = threading.Barrier(5)
    def client(i):
        def run():
            c = conn()
            c.request("POST", COMP, json.dumps(comp_body(i, max_tokens=2000, stream=True)),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.fp.readline()  # the first event
            started.wait()
            try:
                while r.fp.readline():
                    pass
                ends.append(i)
            except OSError as e:
                fail(f"shutdown client {i}: {e}")
            c.close()
        return run
    ts = [threading.Thread(target=client(i)) for i in range(4)]
    for t in ts:
        t.start()
    started.wait()
    time.sleep(0.5)
    os.kill(PID, signal.SIGINT)
    for t in ts:
        t.join(120)
    if len(ends) != 4:
        fail(f"shutdown: {len(ends)} of 4 streams ended")

sc = threading.Thread(target=scraper)
sc.start()
try:
    for name, fn in [("stream", phase_stream), ("cancel", phase_cancel), ("prefix", phase_prefix),
                     ("queue", phase_queue), ("routes", phase_routes)]:
        t0 = time.time()
        fn()
        print(f"phase {name}: {time.time() - t0:.1f} s, failures so far {len(failures)}", flush=True)
    scraping = False
    sc.join()
    print(f"scrapes of /metrics + /health during load: {scrapes[0]}", flush=True)
    phase_shutdown()
    print("phase shutdown: SIGINT sent with 4 streams running", flush=True)
except Exception as e:
    fail(f"driver: {type(e).__name__}: {e}")
finally:
    scraping = False
sys.exit(1 if failures else 0)
EOF
drive=$?
set -e
rc=0
for _ in $(seq 600); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.2
done
if kill -0 $pid 2>/dev/null; then
  echo "sanitize_server: the server did not exit within 120 s of SIGINT" >&2
  kill -9 $pid
  rc=1
fi
srv=0
wait $pid || srv=$?
reports=$(ls "$out"/san.* 2>/dev/null || true)
echo "sanitize_server: drive $( [ $drive = 0 ] && echo passed || echo FAILED ), server exit $srv," \
  "sanitizer reports: ${reports:-none}"
for f in $reports; do grep -E "^(WARNING|ERROR|SUMMARY)|runtime error" "$f" | sort | uniq -c; done
[ $drive = 0 ] && [ $srv = 0 ] && [ -z "$reports" ] && [ $rc = 0 ]

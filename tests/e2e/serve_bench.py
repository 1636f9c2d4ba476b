#!/usr/bin/env python3
"""Serving benchmark for `deltaserve serve` (issue 7), Python's standard library only.

Python rather than node because the GPU machine has python3 but no node (and no network to get it).
Starts `deltaserve serve` on 127.0.0.1 (random port), then for each concurrency level C runs C client
threads, each sending --requests streaming /v1/completions requests back to back. Every request is a
prompt of exactly --prompt-tokens random token ids (so no prefix is shared between requests) with
max_tokens = --max-tokens and "ignore_eos": true, so each generates exactly that many tokens even with
random weights. Per level: one JSON line on stdout (appended to --out): aggregate output tok/s, time to
first token, inter-token latency and time per output token (p50/p99), request latency, errors, and the
mean decode batch and the decode rate (decode_tok_s: decode-step tokens per second of decode steps, the
prompts' prefill left out, as llama-batched-bench's S_TG) from the server's /metrics, and where the engine
thread's time went per decode step (engine_ms_per_step: prefill, decode, sample, other; from ds_engine_seconds_total). With DS_LOG=debug the
server's per-256-step phase lines are printed at the end, with its last log lines after the SIGTERM.
The whole run is bounded by --budget-s.

  python3 tests/e2e/serve_bench.py --model FILE [--backend cuda] [--parallel 64] [--levels 1,8,32,64]
      [--prompt-tokens 512] [--max-tokens 128] [--requests 2] [--ctx N] [--out bench/results/serve.jsonl]
      [--server-args "--prefix-cache-mb 0"] [--label TEXT] [--think-ms MS]
--think-ms MS: each client waits an exponential time of mean MS before each request, so requests stop arriving
in bursts (time to first token under spread-out arrivals; the wall time then includes the waits).
Environment: DS_BIN (default build/apps/deltaserve).
Exit status: 0 when every request generated exactly max_tokens and the server answered no 5xx.
"""
import argparse
import datetime
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(*a):
    print("[serve_bench]", *a, file=sys.stderr, flush=True)


def percentile(xs, p):
    """The element at floor(p% of n) of the sorted list (common.mjs's rule); NaN for an empty list."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


class Server:
    """`deltaserve serve` on a random loopback port: it prints the port on its first stdout line."""

    def __init__(self, binary, args, timeout_s):
        # Passive OpenMP waiting, as common.mjs: spinning threads steal the cores of an oversubscribed machine.
        env = dict(os.environ, DS_LOG=os.environ.get("DS_LOG", "warn"),
                   OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
        self.proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0"] + args,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.err, self.engine_lines = [], []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        port = [None]

        def read_port():
            line = self.proc.stdout.readline()
            if line.strip().isdigit():
                port[0] = int(line)

        t = threading.Thread(target=read_port, daemon=True)
        t.start()
        t.join(timeout_s)
        if port[0] is None:
            self.proc.kill()
            raise RuntimeError(f"server did not start in {timeout_s} s: {''.join(self.err)[-2000:]}")
        self.port = port[0]

    def _drain_stderr(self):
        for line in self.proc.stderr:
            if "engine: last" in line:  # the engine's phase lines (DS_LOG=debug), kept apart from request lines
                self.engine_lines.append(line)
                del self.engine_lines[:-100]
            self.err.append(line)
            del self.err[:-200]

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, body

    def metric(self, name):
        m = re.search(rf"^{re.escape(name)} (\S+)$", self.get("/metrics")[1], re.M)
        return float(m.group(1)) if m else float("nan")

    def phases(self):
        """Engine seconds by phase (ds_engine_seconds_total), decode steps and full rows, from one /metrics read."""
        text = self.get("/metrics")[1]
        out = {m.group(1): float(m.group(2))
               for m in re.finditer(r'^ds_engine_seconds_total\{phase="(\w+)"\} (\S+)$', text, re.M)}
        # decode steps by batch size: the cumulative histogram's buckets (le="1", "2", ... "+Inf")
        for m in re.finditer(r'^ds_decode_batch_size_bucket\{le="([^"]+)"\} (\S+)$', text, re.M):
            out["le:" + m.group(1)] = float(m.group(2))
        for name in ("ds_decode_steps_total", "ds_decode_full_rows_total", "ds_prefill_calls_total",
                     "ds_engine_step_gap_seconds_total", "ds_engine_step_gaps_total"):
            m = re.search(rf"^{name} (\S+)$", text, re.M)
            out[name] = float(m.group(1)) if m else float("nan")
        return out

    def stop(self, grace_s=10):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def batch_steps(ph0, ph1):
    """Decode steps of the level per ds_decode_batch_size bucket (not cumulative), from two phases() reads."""
    keys = [k for k in ph1 if k.startswith("le:")]
    if not keys:
        return None
    keys.sort(key=lambda k: float("inf") if k == "le:+Inf" else float(k[3:]))
    out, prev = {}, 0.0
    for k in keys:
        cum = ph1[k] - ph0.get(k, 0.0)
        if cum - prev > 0:
            out[k[3:]] = int(cum - prev)
        prev = cum
    return out


def stream_completion(port, body, timeout_s=300):
    """One streaming request; returns (status, usage, token event times in s from the send, done, error)."""
    data = json.dumps(dict(body, stream=True)).encode()
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    c.request("POST", "/v1/completions", body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    times, usage, done, error = [], None, False, None
    if r.status != 200:
        error = r.read().decode(errors="replace")[:300]
    else:
        for raw in r:  # SSE: "data: {...}" lines separated by blank lines; ": ..." comments are keep-alives
            line = raw.decode().rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            if payload == "[DONE]":
                done = True
                continue
            j = json.loads(payload)
            if "error" in j:
                error = payload[:300]
            if j.get("usage"):
                usage = j["usage"]
            ch = (j.get("choices") or [None])[0]
            if ch and ch.get("text"):
                times.append(time.perf_counter() - t0)
    c.close()
    return r.status, usage, times, done, error


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.errors = self.tokens = self.prompt_tokens = 0
        self.ttft, self.itl, self.tpot, self.latency = [], [], [], []


def one(port, body, max_tokens, st):
    t = time.perf_counter()
    try:
        status, usage, times, done, error = stream_completion(port, body)
    except Exception as e:  # transport errors count as failures, never end the run
        with st.lock:
            st.errors += 1
            if st.errors <= 3:
                log(f"transport error: {e}")
        return
    with st.lock:
        if status != 200 or not done or error or not usage or usage.get("completion_tokens") != max_tokens:
            st.errors += 1
            if st.errors <= 3:
                log(f"bad request: HTTP {status}, done {done}, usage {usage}, error {error}")
            return
        st.ok += 1
        st.tokens += usage["completion_tokens"]
        st.prompt_tokens += usage["prompt_tokens"]
        if times:
            st.ttft.append(times[0] * 1e3)
            st.itl += [(b - a) * 1e3 for a, b in zip(times, times[1:])]
        if len(times) >= 2:  # time per output token after the first (tokens with empty text included)
            st.tpot.append((times[-1] - times[0]) * 1e3 / (usage["completion_tokens"] - 1))
        st.latency.append((time.perf_counter() - t) * 1e3)


def run_clients(n_clients, n_requests, make_body, port, max_tokens, st, think_ms=0.0):
    """n_clients threads, each sending n_requests back to back; with think_ms > 0 each waits an exponential time of
    that mean before every request (its first too), so arrivals spread out instead of coming in bursts."""
    def client(i):
        rng = random.Random(0x51ED + i)  # fixed per client: runs are comparable
        for _ in range(n_requests):
            if think_ms > 0:
                time.sleep(rng.expovariate(1e3 / think_ms))
            one(port, make_body(), max_tokens, st)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def binary_commit(binary):
    """The commit the binary was built from (`deltaserve --version`: "deltaserve X (commit SHA)")."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"\(commit (\S+)\)", out)
        return m.group(1) if m else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--parallel", type=int, default=64)
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--requests", type=int, default=2, help="per client and level")
    ap.add_argument("--ctx", type=int, default=0, help="default: max(1024, prompt + max_tokens + 64)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget-s", type=float, default=230)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--label", default="")
    ap.add_argument("--think-ms", type=float, default=0.0,
                    help="mean of an exponential wait before each request of a client (0: back to back, in step)")
    # "--server-args --prefill-first" would read the value as an option: join such a pair into --server-args=VALUE.
    argv, i = [], 1
    while i < len(sys.argv):
        if sys.argv[i] == "--server-args" and i + 1 < len(sys.argv):
            argv.append("--server-args=" + sys.argv[i + 1])
            i += 2
        else:
            argv.append(sys.argv[i])
            i += 1
    a = ap.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",")]
    if min(levels) < 1 or a.prompt_tokens < 1 or a.max_tokens < 1 or a.requests < 1:
        ap.error("levels, --prompt-tokens, --max-tokens and --requests must be positive")
    if a.think_ms < 0:
        ap.error("--think-ms must be >= 0")
    ctx = a.ctx or max(1024, a.prompt_tokens + a.max_tokens + 64)
    binary = os.environ.get("DS_BIN", os.path.join(HERE, "..", "..", "build", "apps", "deltaserve"))

    t0 = time.perf_counter()
    args = ["-m", a.model, "--backend", a.backend, "--parallel", str(a.parallel), "--ctx", str(ctx),
            "--max-queue", str(max(256, max(levels)))] + a.server_args.split()
    log("starting: deltaserve serve " + " ".join(args))
    srv = Server(binary, args, 180)

    def over_budget():
        log(f"over the budget of {a.budget_s} s; stopping")
        srv.proc.kill()
        os._exit(3)

    watchdog = threading.Timer(a.budget_s, over_budget)
    watchdog.daemon = True
    watchdog.start()
    meta = json.loads(srv.get("/v1/models")[1])["data"][0]["meta"]
    log(f"server up in {time.perf_counter() - t0:.1f} s: backend {meta['backend']}, {meta['parallel']} slots, "
        f"vocab {meta['n_vocab']}, ctx {meta['n_ctx']}")

    rng = random.Random(0x9E3779B9)  # fixed seed: runs are comparable; prompts never repeat
    rng_lock = threading.Lock()

    def make_body():
        with rng_lock:
            prompt = [rng.randrange(meta["n_vocab"]) for _ in range(a.prompt_tokens)]
        return {"model": "bench", "prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0,
                "ignore_eos": True, "stream_options": {"include_usage": True}}

    # Warm-up: one request alone, then one batch of the largest level (graph capture, allocator).
    st = Stats()
    run_clients(1, 1, make_body, srv.port, a.max_tokens, st)
    run_clients(min(max(levels), a.parallel), 1, make_body, srv.port, a.max_tokens, st)
    log(f"warm-up: {st.ok} ok, {st.errors} errors, {time.perf_counter() - t0:.1f} s since start")
    if st.errors:
        log("warm-up failed; stopping")
        srv.stop()
        return 1

    device = a.backend
    if "cuda" in meta["backend"] or a.backend == "cuda":
        try:
            device = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                                    capture_output=True, text=True).stdout.strip() or device
        except OSError:
            pass
    commit = binary_commit(binary)
    failures = 0
    r1 = lambda x: round(x, 1)
    r2 = lambda x: round(x, 2)
    r3 = lambda x: round(x, 3)
    for c in levels:
        st = Stats()
        ph0 = srv.phases()
        ts = time.perf_counter()
        run_clients(c, a.requests, make_body, srv.port, a.max_tokens, st, a.think_ms)
        wall = time.perf_counter() - ts
        ph1 = srv.phases()
        steps = ph1["ds_decode_steps_total"] - ph0["ds_decode_steps_total"]
        # Where the engine thread's time went, per decode step (ms): older servers lack these counters.
        step_ms = {k: r2((ph1[k] - ph0[k]) * 1e3 / steps) for k in ("prefill", "decode", "sample", "other")
                   if k in ph0 and k in ph1 and steps > 0}
        line = {
            "bench": "serve", "client": "serve_bench.py", "model_file": os.path.basename(a.model),
            "model_bytes": os.path.getsize(a.model), "backend": meta["backend"], "device": device,
            "slots": meta["parallel"], "ctx": meta["n_ctx"], "concurrency": c, "requests": c * a.requests,
            "ok": st.ok, "errors": st.errors, "prompt_tokens": a.prompt_tokens, "max_tokens": a.max_tokens,
            "think_ms": a.think_ms,
            "wall_s": r2(wall),
            "output_tok_s": r1(st.tokens / wall),  # aggregate generated tokens per second
            "total_tok_s": r1((st.tokens + st.prompt_tokens) / wall),  # prompt + generated
            "ttft_ms": {"p50": r1(percentile(st.ttft, 50)), "p99": r1(percentile(st.ttft, 99))},
            "itl_ms": {"p50": r2(percentile(st.itl, 50)), "p99": r2(percentile(st.itl, 99))},
            "tpot_ms": {"p50": r2(percentile(st.tpot, 50)), "p99": r2(percentile(st.tpot, 99))},
            "latency_ms": {"p50": r1(percentile(st.latency, 50)), "p99": r1(percentile(st.latency, 99))},
            # the first token of each request comes from its prefill, the rest from decode steps
            "mean_decode_batch": r1((st.tokens - st.ok) / steps) if steps > 0 else None,
            # llama-batched-bench's S_TG analog: tokens of decode steps per second of decode steps (engine
            # decode + sampling time), i.e. the aggregate decode rate with the prompts' prefill time left out
            "decode_tok_s": r1((st.tokens - st.ok) / (ph1["decode"] - ph0["decode"] + ph1["sample"] - ph0["sample"]))
            if all(k in ph0 and k in ph1 for k in ("decode", "sample")) and ph1["decode"] > ph0["decode"] else None,
            "engine_ms_per_step": step_ms or None,
            # decode steps per batch-size bucket (rows in (previous bound, bound]), e.g. the partial steps of a burst
            "batch_steps": batch_steps(ph0, ph1),
            # host time from a step's result to the next step's launch (the device without a step), per such step
            "gap_ms": r3((ph1["ds_engine_step_gap_seconds_total"] - ph0["ds_engine_step_gap_seconds_total"]) * 1e3 /
                         (ph1["ds_engine_step_gaps_total"] - ph0["ds_engine_step_gaps_total"]))
            if ph1["ds_engine_step_gaps_total"] > ph0["ds_engine_step_gaps_total"] else None,
            "prefill_calls": int(ph1["ds_prefill_calls_total"] - ph0["ds_prefill_calls_total"])
            if ph1["ds_prefill_calls_total"] == ph1["ds_prefill_calls_total"] else None,
            "full_rows": int(ph1["ds_decode_full_rows_total"] - ph0["ds_decode_full_rows_total"])
            if ph1["ds_decode_full_rows_total"] == ph1["ds_decode_full_rows_total"] else None,
            "label": a.label, "commit": commit,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        failures += st.errors > 0
        print(json.dumps(line), flush=True)
        if a.out:
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            with open(a.out, "a") as f:
                f.write(json.dumps(line) + "\n")
    srv5xx = re.search(r'status="5\d\d"', srv.get("/metrics")[1]) is not None
    code = srv.stop()
    watchdog.cancel()
    time.sleep(0.2)  # the stderr reader's last lines
    for line in srv.engine_lines:
        log("server: " + line.rstrip())
    for line in srv.err[-2:]:
        log("server's last log line: " + line.rstrip())
    log(f"done in {time.perf_counter() - t0:.1f} s; server exit {code}" + ("; the server answered 5xx" if srv5xx else ""))
    return 1 if failures or code != 0 or srv5xx else 0


if __name__ == "__main__":
    sys.exit(main())

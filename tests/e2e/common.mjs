// Shared by the e2e scripts: start `deltaserve serve` on a fixture model (loopback, random port),
// read the port it prints, stop it. Only 127.0.0.1 is ever contacted.
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export function fixture(rel) {
  const dir = process.env.DS_FIXTURES || process.env.DS_FIXTURES_DIR || path.join(here, '..', '..', '..', 'shared', 'fixtures');
  return path.join(dir, rel);
}

export function binary() {
  const bin = process.env.DS_BIN || path.join(here, '..', '..', 'build', 'apps', 'deltaserve');
  return bin;
}

// Starts the server; resolves { proc, port, url, stderr() } once it printed its port.
export function startServer(args, { timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    // The CPU backend unless asked otherwise (DS_BACKEND=cuda): the checks compare batched greedy
    // output with lone runs, which the CPU reference guarantees bit for bit.
    const backend = args.includes('--backend') ? [] : ['--backend', process.env.DS_BACKEND || 'cpu'];
    const proc = spawn(binary(), ['serve', '--host', '127.0.0.1', '--port', '0', ...backend, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // Passive OpenMP waiting: on a shared, oversubscribed machine (CI) spinning threads steal the
      // cores the work needs (measured: ~2x the decode throughput on a 2-core box under load).
      env: { ...process.env, DS_LOG: process.env.DS_LOG || 'warn', OMP_WAIT_POLICY: process.env.OMP_WAIT_POLICY || 'passive' },
    });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms: ${err}`));
    }, timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^(\d+)\n/);
      if (m) {
        clearTimeout(timer);
        const port = Number(m[1]);
        resolve({ proc, port, url: `http://127.0.0.1:${port}`, stderr: () => err });
      }
    });
    proc.stderr.on('data', (d) => {
      err += d;
      if (err.length > 1 << 20) err = err.slice(-(1 << 19));
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening: ${err}`));
    });
  });
}

// Closes this process's client sockets, sends SIGTERM, resolves the exit code (SIGKILL after `graceMs`).
export function stopServer(srv, graceMs = 10000) {
  agent.destroy();  // idle keep-alive sockets would hold server workers until their keep-alive timeout
  return new Promise((resolve) => {
    if (srv.proc.exitCode !== null) return resolve(srv.proc.exitCode);
    const t = setTimeout(() => srv.proc.kill('SIGKILL'), graceMs);
    srv.proc.once('exit', (code, sig) => {
      clearTimeout(t);
      resolve(code ?? sig);
    });
    srv.proc.kill('SIGTERM');
  });
}

export function rssKiB(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = s.match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) : NaN;
}

export function percentile(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// The whole reply of a streamed chat completion: reasoning, content, tool calls, finish reason.
export async function collectChatStream(stream) {
  const r = { reasoning: '', content: '', tool_calls: [], finish: null, usage: null, chunks: 0, ttftMs: null };
  const t0 = performance.now();
  for await (const chunk of stream) {
    r.chunks++;
    if (chunk.usage) r.usage = chunk.usage;
    const ch = chunk.choices?.[0];
    if (!ch) continue;
    const d = ch.delta || {};
    if ((d.content || d.reasoning_content) && r.ttftMs === null) r.ttftMs = performance.now() - t0;
    if (d.reasoning_content) r.reasoning += d.reasoning_content;
    if (d.content) r.content += d.content;
    if (d.tool_calls) r.tool_calls.push(...d.tool_calls);
    if (ch.finish_reason) r.finish = ch.finish_reason;
  }
  return r;
}

// ---- A plain node:http client (no npm packages: the GPU machine has no network) ----
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

// One request; resolves { status, headers, body (string), json (parsed or null) }. Never rejects on
// an HTTP status; rejects on transport errors or after timeoutMs.
// A request on a reused keep-alive socket can race the server closing that idle socket (the abuse test's
// server closes idle connections after its 2 s --timeout): Node then reports ECONNRESET ("socket hang up")
// with req.reusedSocket set. That request never reached the server, so it is sent again once, as Node's
// documentation advises.
export function httpRequest(url, opts = {}, retried = false) {
  return httpRequestOnce(url, opts).catch((e) => {
    if (!retried && e.reusedSocket && e.code === 'ECONNRESET') return httpRequest(url, opts, true);
    throw e;
  });
}

function httpRequestOnce(url, { method = 'GET', headers = {}, body = null, timeoutMs = 300000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === null ? null : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const h = { ...headers };
    if (data) {
      h['Content-Type'] ??= 'application/json';
      h['Content-Length'] = data.length;
    }
    const req = http.request(url, { method, headers: h, agent }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch {}
        resolve({ status: res.statusCode, headers: res.headers, body: text, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', (e) => { e.reusedSocket = req.reusedSocket; reject(e); });
    if (data) req.write(data);
    req.end();
  });
}

// A streaming request (body.stream is forced on). Resolves
// { status, error (the JSON error body when not 200), events (parsed data events), done ([DONE] seen),
//   text, reasoning, finish, usage, tAt (ms since the request, per event that carried text),
//   tHeaders (ms to the response headers) }.
// `onEvent(ev, r)` may call r.drop() to close the connection mid-stream (resolves then).
export function streamRequest(url, body, opts = {}, retried = false) {
  return streamRequestOnce(url, body, opts).catch((e) => {  // see httpRequest: the keep-alive race
    if (!retried && e.reusedSocket && e.code === 'ECONNRESET' && !e.gotResponse) return streamRequest(url, body, opts, true);
    throw e;
  });
}

function streamRequestOnce(url, body, { headers = {}, timeoutMs = 300000, onEvent = null } = {}) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify({ ...body, stream: true }));
    const t0 = performance.now();
    const r = { status: 0, error: null, events: [], done: false, text: '', reasoning: '', finish: null, usage: null,
                tAt: [], tHeaders: null, dropped: false };
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': data.length, ...headers },
    }, (res) => {
      r.status = res.statusCode;
      r.tHeaders = performance.now() - t0;
      let buf = '';
      const parts = [];
      res.setEncoding('utf8');
      res.on('data', (d) => {
        if (res.statusCode !== 200) { parts.push(d); return; }
        buf += d;
        let e;
        while ((e = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, e);
          buf = buf.slice(e + 2);
          if (ev.startsWith(':')) continue;  // keep-alive comment
          if (!ev.startsWith('data: ')) throw new Error(`bad SSE event: ${ev.slice(0, 100)}`);
          const payload = ev.slice(6);
          if (payload === '[DONE]') { r.done = true; continue; }
          const j = JSON.parse(payload);
          r.events.push(j);
          if (j.error) r.error = j;
          if (j.usage) r.usage = j.usage;
          const ch = j.choices?.[0];
          if (ch) {
            const piece = ch.text ?? ch.delta?.content ?? '';
            const think = ch.delta?.reasoning_content ?? '';
            if (piece || think) r.tAt.push(performance.now() - t0);
            r.text += piece;
            r.reasoning += think;
            if (ch.finish_reason) r.finish = ch.finish_reason;
          }
          if (onEvent) onEvent(j, r);
          if (r.dropped) return;
        }
      });
      res.on('end', () => {
        if (res.statusCode !== 200) {
          const text = parts.join('');
          try { r.error = JSON.parse(text); } catch { r.error = text; }
        }
        resolve(r);
      });
      res.on('error', (err) => (r.dropped ? resolve(r) : reject(err)));
      res.on('close', () => { if (r.dropped) resolve(r); });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', (err) => {
      if (r.dropped) return resolve(r);
      err.reusedSocket = req.reusedSocket;
      err.gotResponse = r.status !== 0;
      reject(err);
    });
    r.drop = () => { r.dropped = true; req.destroy(); };
    req.write(data);
    req.end();
  });
}

// A Prometheus sample from /metrics, e.g. metric(url, 'ds_requests_running').
export async function metric(url, name) {
  const t = (await httpRequest(`${url}/metrics`)).body;
  const esc = name.replace(/[{}"\\[\]()+.*?^$|]/g, (c) => '\\' + c);
  const m = t.match(new RegExp(`^${esc} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

// ---- raw sockets (requests no HTTP client library would send) ----
// Writes `bytes` to 127.0.0.1:port; resolves the response text once the server closes (or after readMs).
export function rawRequest(port, bytes, { readMs = 5000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let out = Buffer.alloc(0);
    s.on('data', (d) => { out = Buffer.concat([out, d]); });
    s.on('error', () => {});
    s.on('close', () => resolve(out.toString('latin1')));
    s.write(bytes);
    setTimeout(() => s.destroy(), readMs);
  });
}
// A complete HTTP/1.1 POST (Connection: close) with a JSON content type, `key` as the bearer token and
// `extra` header lines; `body` is a string or a Buffer (sent as is, however malformed).
export function rawPost(path, body, key, extra = '') {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${b.length}\r\nConnection: close\r\n${extra}\r\n`), b]);
}
// The status code of a raw HTTP response.
export const rawStatus = (resp) => Number((resp.match(/^HTTP\/1\.1 (\d+)/) || [])[1]);

// The scripts' TAP-style runner: test(name, fn) runs one case and prints "ok N - name" or "not ok N - name" with
// the error; finish(srv) stops the server (a non-zero exit counts as a failure), prints the tally and exits 0 only
// if every case passed. The whole script fails after timeoutMs (a hung server must not hang CI).
export function tapRunner({ timeoutMs = 240000 } = {}) {
  const deadline = setTimeout(() => {
    console.error('e2e: timed out');
    process.exit(1);
  }, timeoutMs);
  let failed = 0, n = 0;
  async function test(name, fn) {
    n++;
    try {
      await fn();
      console.log(`ok ${n} - ${name}`);
    } catch (e) {
      failed++;
      console.log(`not ok ${n} - ${name}\n  ${String(e && e.stack || e).split('\n').join('\n  ')}`);
    }
  }
  async function finish(srv) {
    const code = await stopServer(srv);
    if (code !== 0) {
      failed++;
      console.log(`not ok - server exit code ${code}\n${srv.stderr()}`);
    }
    clearTimeout(deadline);
    console.log(`${n - failed}/${n} passed`);
    process.exit(failed ? 1 : 0);
  }
  return { test, finish };
}

// Shared by the e2e scripts: start `deltaserve serve` on a fixture model (loopback, random port),
// read the port it prints, stop it. Only 127.0.0.1 is ever contacted.
import { spawn } from 'node:child_process';
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
    const proc = spawn(binary(), ['serve', '--host', '127.0.0.1', '--port', '0', ...args], {
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

// SIGTERM, then the exit code (SIGKILL after `graceMs`).
export function stopServer(srv, graceMs = 10000) {
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

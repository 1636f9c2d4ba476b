// Load test (bounded, loopback only): C concurrent streaming chat clients for D seconds against
// `deltaserve serve` on the tiny fixture model. Every stream is checked against the same prompt run
// alone: half the requests use a fixed prompt set (references computed alone before the load), half
// a unique prompt (re-run alone after the load, up to --verify of them). Reports throughput,
// TTFT and latency percentiles, 5xx and other errors, mismatches, and the server's RSS before,
// right after and some seconds after the run.
//   node tests/e2e/load_test.mjs [--clients 64] [--duration 120] [--parallel 64] [--prefix-cache-mb 1024]
import OpenAI from 'openai';
import { collectChatStream, fixture, percentile, rssKiB, startServer, stopServer } from './common.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const CLIENTS = Number(args.clients ?? 64);
const DURATION_S = Number(args.duration ?? 120);
const PARALLEL = Number(args.parallel ?? 64);
const CACHE_MB = Number(args['prefix-cache-mb'] ?? 1024);
const VERIFY = Number(args.verify ?? 300);
const ROUNDS = Number(args.rounds ?? 1);  // the load phase again on the same server: RSS must not keep growing
const N_FIXED = 32;
const MODEL_FILE = args.model ?? fixture('models/tiny-sym/tiny-sym-q8_0.gguf');
const log = (...a) => console.error('[load]', ...a);

const srv = await startServer(['-m', MODEL_FILE, '--parallel', String(PARALLEL), '--ctx', '1024', '--max-queue', '512',
                               '--prefix-cache-mb', String(CACHE_MB), '--timeout', '30']);
const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 300000 });
const hardStop = setTimeout(() => { log('hard timeout'); srv.proc.kill('SIGKILL'); process.exit(2); }, (DURATION_S + 900) * 1000);

const request = (text, maxTokens) => ({
  model: 'tiny', temperature: 0, max_tokens: maxTokens,
  messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: text }],
});
const fixedPrompt = (i) => `Fixed question ${i}: tell me about the number ${i * 7}.`;
const fixedMax = (i) => 16 + (i % 6) * 8;  // 16 .. 56 tokens
const sig = (m) => JSON.stringify([m.reasoning ?? m.reasoning_content ?? '', m.content ?? '', m.finish ?? m.finish_reason]);

async function alone(text, maxTokens) {
  const r = await client.chat.completions.create(request(text, maxTokens));
  return sig({ ...r.choices[0].message, finish: r.choices[0].finish_reason });
}

log(`server ${srv.url} pid ${srv.proc.pid}; ${CLIENTS} clients, ${DURATION_S} s, ${PARALLEL} slots, prefix cache ${CACHE_MB} MiB`);
const refs = [];
for (let i = 0; i < N_FIXED; i++) refs.push(await alone(fixedPrompt(i), fixedMax(i)));
// Warm-up so that allocator pools and the prefix cache (at most 512 snapshots, about 3 per
// request) reach their working size before "before".
for (let round = 0; round < 4; round++)
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) =>
    client.chat.completions.create(request(`warm-up ${round} ${c}`, 8)).catch(() => {})));
const rssBefore = rssKiB(srv.proc.pid);
const rssTimeline = [];

const stats = { requests: 0, ok: 0, s5xx: 0, s4xx: 0, other: 0, mismatches: 0, tokens: 0, ttft: [], lat: [] };
const unique = [];  // [text, maxTokens, signature under load]
const t0 = performance.now();
let endAt = t0 + DURATION_S * 1000;

async function worker(c) {
  for (let k = 0; performance.now() < endAt; k++) {
    const fixed = (c + k) % 2 === 0;
    const i = ((c % 1000) * 5 + k) % N_FIXED;
    // Unique prompts of one fixed length, so the prefix cache's make-up (and bytes) stays stationary.
    const id = String(c).padStart(5, '0') + String(k).padStart(5, '0');
    const text = fixed ? fixedPrompt(i) : `Client request ${id}: what follows ${id}?`;
    const maxTokens = fixed ? fixedMax(i) : 16 + ((c + k) % 5) * 8;
    const t = performance.now();
    stats.requests++;
    try {
      const stream = await client.chat.completions.create({ ...request(text, maxTokens), stream: true,
                                                            stream_options: { include_usage: true } });
      const tHeaders = performance.now() - t;
      const r = await collectChatStream(stream);
      stats.lat.push(performance.now() - t);
      if (r.ttftMs !== null) stats.ttft.push(tHeaders + r.ttftMs);
      stats.tokens += r.usage?.completion_tokens ?? 0;
      stats.ok++;
      const s = sig(r);
      if (fixed) {
        if (s !== refs[i]) {
          stats.mismatches++;
          if (stats.mismatches <= 5) log(`MISMATCH fixed ${i}: ${s.slice(0, 200)} vs ${refs[i].slice(0, 200)}`);
        }
      } else if (unique.length < 100000) {
        unique.push([text, maxTokens, s]);
      }
    } catch (e) {
      const st = e?.status;
      if (st >= 500) stats.s5xx++;
      else if (st >= 400) stats.s4xx++;
      else stats.other++;
      if (stats.s5xx + stats.s4xx + stats.other <= 5) log(`error: ${st} ${e?.message}`);
    }
  }
}

const metricsTimer = setInterval(async () => {
  try {
    const t = await (await fetch(`${srv.url}/metrics`)).text();
    const g = (n) => (t.match(new RegExp(`^${n} (\\S+)$`, 'm')) || [])[1];
    rssTimeline.push(+(rssKiB(srv.proc.pid) / 1024).toFixed(1));
    log(`t=${((performance.now() - t0) / 1000).toFixed(0)}s running=${g('ds_requests_running')} waiting=${g('ds_requests_waiting')} ` +
        `done=${stats.ok} tokens=${stats.tokens} rss=${(rssKiB(srv.proc.pid) / 1024).toFixed(1)}MiB`);
  } catch {}
}, 15000);
const rssRounds = [], cacheRounds = [];
const cacheBytes = async () => Number(((await (await fetch(`${srv.url}/metrics`)).text())
  .match(/^ds_state_memory_bytes\{kind="prefix_cache"\} (\S+)$/m) || [])[1]);
for (let round = 0; round < ROUNDS; round++) {
  endAt = performance.now() + DURATION_S * 1000;
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => worker(c + 1000 * round)));
  rssRounds.push(+(rssKiB(srv.proc.pid) / 1024).toFixed(1));
  cacheRounds.push(+((await cacheBytes()) / 1048576).toFixed(1));
}
clearInterval(metricsTimer);
const elapsed = (performance.now() - t0) / 1000;
const rssAfter = rssKiB(srv.proc.pid);

// Unique prompts, run alone now (sequentially, a sample spread over the run).
let verified = 0;
const step = Math.max(1, Math.floor(unique.length / VERIFY));
for (let j = 0; j < unique.length && verified < VERIFY; j += step, verified++) {
  const [text, maxTokens, s] = unique[j];
  const a = await alone(text, maxTokens);
  if (a !== s) {
    stats.mismatches++;
    if (stats.mismatches <= 10) log(`MISMATCH unique: ${s.slice(0, 200)} vs alone ${a.slice(0, 200)}`);
  }
}
await new Promise((r) => setTimeout(r, 5000));
const rssIdle = rssKiB(srv.proc.pid);
const metrics = await (await fetch(`${srv.url}/metrics`)).text();
const m = (n) => Number((metrics.match(new RegExp(`^${n.replace(/[{}"]/g, (c) => '\\' + c)} (\\S+)$`, 'm')) || [])[1]);
const code = await stopServer(srv);
clearTimeout(hardStop);

const summary = {
  clients: CLIENTS, duration_s: +elapsed.toFixed(1), slots: PARALLEL, prefix_cache_mb: CACHE_MB,
  requests: stats.requests, ok: stats.ok, http_5xx: stats.s5xx, http_4xx: stats.s4xx, other_errors: stats.other,
  mismatches: stats.mismatches, fixed_checked: stats.ok - unique.length, unique_verified_alone: verified,
  completion_tokens: stats.tokens, tokens_per_s: +(stats.tokens / elapsed).toFixed(1),
  requests_per_s: +(stats.ok / elapsed).toFixed(2),
  ttft_ms: { p50: +percentile(stats.ttft, 50).toFixed(1), p99: +percentile(stats.ttft, 99).toFixed(1) },
  latency_ms: { p50: +percentile(stats.lat, 50).toFixed(1), p99: +percentile(stats.lat, 99).toFixed(1) },
  server_rss_mib: { before: +(rssBefore / 1024).toFixed(1), every_15s: rssTimeline, after_each_round: rssRounds, after: +(rssAfter / 1024).toFixed(1),
                    idle_after: +(rssIdle / 1024).toFixed(1) },
  prefix_cache_bytes: m('ds_state_memory_bytes{kind="prefix_cache"}'),
  prefix_cache_mib_after_each_round: cacheRounds,
  server_5xx_in_metrics: (metrics.match(/status="5\d\d"\} (\d+)/g) || []).length,
  server_exit: code,
};
console.log(JSON.stringify(summary, null, 1));
const pass = stats.s5xx === 0 && stats.other === 0 && stats.mismatches === 0 && code === 0;
process.exit(pass ? 0 : 1);

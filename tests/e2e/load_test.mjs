// Load test (bounded, loopback only): C concurrent streaming chat clients for D seconds against
// `deltaserve serve` on the tiny fixture model. Every stream is checked against the same prompt run
// alone: half the requests use a fixed prompt set (references computed alone before the load), half
// a unique prompt (re-run alone after the load, up to --verify of them). Reports throughput,
// TTFT and latency percentiles, 5xx and other errors, mismatches, and the server's RSS before,
// right after and some seconds after the run. Node's standard library only (no npm install).
//   node tests/e2e/load_test.mjs [--clients 64] [--duration 120] [--parallel 64] [--prefix-cache-mb 1024]
//                                [--rounds 1] [--verify 300] [--model FILE] [--json-out FILE]
import { appendFileSync } from 'node:fs';
import { fixture, httpRequest, percentile, rssKiB, startServer, stopServer, streamRequest } from './common.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const CLIENTS = Number(args.clients ?? 64);
const DURATION_S = Number(args.duration ?? 120);
const PARALLEL = Number(args.parallel ?? 64);
const CACHE_MB = Number(args['prefix-cache-mb'] ?? 1024);
const VERIFY = Number(args.verify ?? 300);
const MAX_RSS_GROWTH_MIB = Number(args['max-rss-growth-mib'] ?? 64);
const ROUNDS = Number(args.rounds ?? 1);  // the load phase again on the same server: RSS must not keep growing
const N_FIXED = Number(args.fixed ?? 32);  // prompts with a reference computed alone first
const WARMUP = Number(args.warmup ?? 4);  // warm-up rounds of CLIENTS short requests
const MODEL_FILE = args.model ?? fixture('models/tiny-sym/tiny-sym-q8_0.gguf');
const log = (...a) => console.error('[load]', ...a);

const srv = await startServer(['-m', MODEL_FILE, '--parallel', String(PARALLEL), '--ctx', '1024', '--max-queue', '512',
                               '--prefix-cache-mb', String(CACHE_MB), '--timeout', '30']);
const CC = `${srv.url}/v1/chat/completions`;
const hardStop = setTimeout(() => { log('hard timeout'); srv.proc.kill('SIGKILL'); process.exit(2); }, (DURATION_S + 900) * 1000);

const request = (text, maxTokens) => ({
  model: 'tiny', temperature: 0, max_tokens: maxTokens,
  messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: text }],
});
const fixedPrompt = (i) => `Fixed question ${i}: tell me about the number ${i * 7}.`;
const fixedMax = (i) => 16 + (i % 6) * 8;  // 16 .. 56 tokens
const sig = (m) => JSON.stringify([m.reasoning ?? m.reasoning_content ?? '', m.content ?? '', m.finish ?? m.finish_reason]);

async function alone(text, maxTokens) {
  const r = await httpRequest(CC, { method: 'POST', body: request(text, maxTokens) });
  if (r.status !== 200) throw new Error(`alone: HTTP ${r.status}: ${r.body.slice(0, 300)}`);
  return sig({ ...r.json.choices[0].message, finish: r.json.choices[0].finish_reason });
}

log(`server ${srv.url} pid ${srv.proc.pid}; ${CLIENTS} clients, ${DURATION_S} s, ${PARALLEL} slots, prefix cache ${CACHE_MB} MiB`);
const refs = [];
for (let i = 0; i < N_FIXED; i++) refs.push(await alone(fixedPrompt(i), fixedMax(i)));
// Warm-up so that allocator pools and the prefix cache (at most 512 snapshots, about 3 per
// request) reach their working size before "before".
for (let round = 0; round < WARMUP; round++)
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) =>
    httpRequest(CC, { method: 'POST', body: request(`warm-up ${round} ${c}`, 8) }).catch(() => {})));
const rssBefore = rssKiB(srv.proc.pid);
const rssTimeline = [];

const stats = { requests: 0, ok: 0, s5xx: 0, s4xx: 0, other: 0, incomplete: 0, mismatches: 0, tokens: 0, ttft: [], itl: [], lat: [] };
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
      const r = await streamRequest(CC, { ...request(text, maxTokens), stream_options: { include_usage: true } });
      if (r.status !== 200) {
        if (r.status >= 500) stats.s5xx++;
        else stats.s4xx++;
        if (stats.s5xx + stats.s4xx + stats.other <= 5) log(`error: HTTP ${r.status} ${JSON.stringify(r.error).slice(0, 200)}`);
        continue;
      }
      if (!r.done || r.error || !r.finish || !r.usage) {  // an event stream cut short or ending in an error event
        stats.incomplete++;
        if (stats.incomplete <= 5) log(`incomplete stream: ${JSON.stringify(r.error ?? r.events.at(-1)).slice(0, 200)}`);
        continue;
      }
      stats.lat.push(performance.now() - t);
      if (r.tAt.length) stats.ttft.push(r.tAt[0]);
      for (let j = 1; j < r.tAt.length; j++) stats.itl.push(r.tAt[j] - r.tAt[j - 1]);
      stats.tokens += r.usage.completion_tokens;
      stats.ok++;
      const s = sig({ reasoning: r.reasoning, content: r.text, finish: r.finish });
      if (fixed) {
        if (s !== refs[i]) {
          stats.mismatches++;
          if (stats.mismatches <= 5) log(`MISMATCH fixed ${i}: ${s.slice(0, 200)} vs ${refs[i].slice(0, 200)}`);
        }
      } else if (unique.length < 100000) {
        unique.push([text, maxTokens, s]);
      }
    } catch (e) {
      stats.other++;  // transport: refused, reset, timed out
      if (stats.s5xx + stats.s4xx + stats.other <= 5) log(`error: ${e?.message}`);
    }
  }
}

const metricsTimer = setInterval(async () => {
  try {
    const t = (await httpRequest(`${srv.url}/metrics`)).body;
    const g = (n) => (t.match(new RegExp(`^${n} (\\S+)$`, 'm')) || [])[1];
    rssTimeline.push(+(rssKiB(srv.proc.pid) / 1024).toFixed(1));
    log(`t=${((performance.now() - t0) / 1000).toFixed(0)}s running=${g('ds_requests_running')} waiting=${g('ds_requests_waiting')} ` +
        `done=${stats.ok} tokens=${stats.tokens} rss=${(rssKiB(srv.proc.pid) / 1024).toFixed(1)}MiB`);
  } catch {}
}, 15000);
const rssRounds = [], cacheRounds = [];
const cacheBytes = async () => Number(((await httpRequest(`${srv.url}/metrics`)).body
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
const metrics = (await httpRequest(`${srv.url}/metrics`)).body;
const m = (n) => Number((metrics.match(new RegExp(`^${n.replace(/[{}"]/g, (c) => '\\' + c)} (\\S+)$`, 'm')) || [])[1]);
const code = await stopServer(srv);
clearTimeout(hardStop);

const summary = {
  clients: CLIENTS, duration_s: +elapsed.toFixed(1), slots: PARALLEL, prefix_cache_mb: CACHE_MB,
  requests: stats.requests, ok: stats.ok, http_5xx: stats.s5xx, http_4xx: stats.s4xx, transport_errors: stats.other,
  incomplete_streams: stats.incomplete,
  mismatches: stats.mismatches, fixed_checked: stats.ok - unique.length, unique_verified_alone: verified,
  completion_tokens: stats.tokens, tokens_per_s: +(stats.tokens / elapsed).toFixed(1),
  requests_per_s: +(stats.ok / elapsed).toFixed(2),
  ttft_ms: { p50: +percentile(stats.ttft, 50).toFixed(1), p99: +percentile(stats.ttft, 99).toFixed(1) },
  inter_token_ms: { p50: +percentile(stats.itl, 50).toFixed(2), p99: +percentile(stats.itl, 99).toFixed(2) },
  latency_ms: { p50: +percentile(stats.lat, 50).toFixed(1), p99: +percentile(stats.lat, 99).toFixed(1) },
  server_rss_mib: { before: +(rssBefore / 1024).toFixed(1), every_15s: rssTimeline, after_each_round: rssRounds, after: +(rssAfter / 1024).toFixed(1),
                    idle_after: +(rssIdle / 1024).toFixed(1) },
  prefix_cache_bytes: m('ds_state_memory_bytes{kind="prefix_cache"}'),
  prefix_cache_mib_after_each_round: cacheRounds,
  // Growth of the server's RSS from the end of the first round to the end of the last: flat memory
  // means this stays near 0 however many rounds run.
  rss_growth_after_first_round_mib: rssRounds.length >= 2 ? +(rssRounds.at(-1) - rssRounds[0]).toFixed(1) : null,
  server_5xx_in_metrics: (metrics.match(/status="5\d\d"\} (\d+)/g) || []).length,
  server_exit: code,
};
console.log(JSON.stringify(summary, null, 1));
if (args['json-out']) appendFileSync(args['json-out'], JSON.stringify({ ...summary, timestamp: new Date().toISOString() }) + '\n');
const pass = stats.s5xx === 0 && stats.other === 0 && stats.incomplete === 0 && stats.mismatches === 0 &&
             stats.ok > 0 && summary.server_5xx_in_metrics === 0 && code === 0 &&
             !(summary.rss_growth_after_first_round_mib > MAX_RSS_GROWTH_MIB);
if (summary.rss_growth_after_first_round_mib > MAX_RSS_GROWTH_MIB)
  log(`RSS grew by ${summary.rss_growth_after_first_round_mib} MiB after the first round (limit ${MAX_RSS_GROWTH_MIB})`);
process.exit(pass ? 0 : 1);

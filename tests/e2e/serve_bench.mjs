// Serving benchmark: starts `deltaserve serve` (loopback, random port), then for each concurrency
// level C sends C concurrent streaming clients, each running --requests requests back to back, every
// request a prompt of exactly --prompt-tokens random token ids (/v1/completions with a token-id
// prompt, so no prefix is shared) and max_tokens = --max-tokens with "ignore_eos": true (every request
// generates exactly that many tokens, even with random weights). Per level it prints one JSON line
// (and appends it to --out): aggregate output tok/s, TTFT p50/p99, inter-token latency p50/p99, time
// per output token, errors. Node's standard library only (no npm install; the GPU machine has no
// network). Bounded by --budget-s (default 230 s) for the whole run.
//   node tests/e2e/serve_bench.mjs --model FILE [--backend cuda] [--parallel 64] [--levels 1,8,32,64]
//        [--prompt-tokens 512] [--max-tokens 128] [--requests 2] [--ctx 1024] [--out bench/results/serve.jsonl]
//        [--server-args "--prefix-cache-mb 0"] [--label TEXT]
import { execSync } from 'node:child_process';
import { appendFileSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { httpRequest, metric, percentile, startServer, stopServer, streamRequest } from './common.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (!a.startsWith('--')) throw new Error(`unexpected argument '${a}'`);
  args[a.slice(2)] = process.argv[++i];
}
if (!args.model) {
  console.error('serve_bench: --model FILE is required');
  process.exit(2);
}
const BACKEND = args.backend ?? 'cuda';
const PARALLEL = Number(args.parallel ?? 64);
const LEVELS = (args.levels ?? '1,8,32,64').split(',').map(Number);
const PROMPT = Number(args['prompt-tokens'] ?? 512);
const MAX_TOKENS = Number(args['max-tokens'] ?? 128);
const REQUESTS = Number(args.requests ?? 2);  // per client and level
const CTX = Number(args.ctx ?? Math.max(1024, PROMPT + MAX_TOKENS + 64));
const OUT = args.out ?? null;
const BUDGET_S = Number(args['budget-s'] ?? 230);
const log = (...a) => console.error('[serve_bench]', ...a);
if (LEVELS.some((c) => !(c >= 1)) || !(PROMPT >= 1) || !(MAX_TOKENS >= 1) || !(REQUESTS >= 1))
  throw new Error('serve_bench: levels, prompt-tokens, max-tokens and requests must be positive');

const t0 = performance.now();
const serverArgs = ['-m', args.model, '--backend', BACKEND, '--parallel', String(PARALLEL), '--ctx', String(CTX),
                    '--max-queue', String(Math.max(256, Math.max(...LEVELS))),
                    ...(args['server-args'] ? args['server-args'].split(/\s+/).filter(Boolean) : [])];
log(`starting: deltaserve serve ${serverArgs.join(' ')}`);
const srv = await startServer(serverArgs, { timeoutMs: 180000 });
const hardStop = setTimeout(() => {
  log(`over the budget of ${BUDGET_S} s; stopping`);
  srv.proc.kill('SIGKILL');
  process.exit(3);
}, BUDGET_S * 1000);
const models = await httpRequest(`${srv.url}/v1/models`);
const meta = models.json.data[0].meta;
log(`server up in ${((performance.now() - t0) / 1000).toFixed(1)} s: backend ${meta.backend}, ${meta.parallel} slots, ` +
    `vocab ${meta.n_vocab}, ctx ${meta.n_ctx}`);

// Random token ids, never repeating a prompt (a fixed-seed generator: runs are comparable).
let seed = 0x9e3779b9;
const rand = () => {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed;
};
const prompt = () => Array.from({ length: PROMPT }, () => rand() % meta.n_vocab);
const CMPL = `${srv.url}/v1/completions`;
const body = () => ({ model: 'bench', prompt: prompt(), max_tokens: MAX_TOKENS, temperature: 0, ignore_eos: true,
                      stream_options: { include_usage: true } });

async function one(st) {
  const t = performance.now();
  try {
    const r = await streamRequest(CMPL, body());
    if (r.status !== 200 || !r.done || r.error || r.usage?.completion_tokens !== MAX_TOKENS) {
      st.errors++;
      if (st.errors <= 3) log(`bad request: HTTP ${r.status}, done ${r.done}, usage ${JSON.stringify(r.usage)}, ` +
                              `error ${JSON.stringify(r.error).slice(0, 300)}`);
      return;
    }
    st.tokens += r.usage.completion_tokens;
    st.prompt_tokens += r.usage.prompt_tokens;
    if (r.tAt.length) st.ttft.push(r.tAt[0]);
    for (let j = 1; j < r.tAt.length; j++) st.itl.push(r.tAt[j] - r.tAt[j - 1]);
    // Time per output token after the first (all tokens counted, even those whose text was empty).
    if (r.tAt.length >= 2) st.tpot.push((r.tAt.at(-1) - r.tAt[0]) / (r.usage.completion_tokens - 1));
    st.latency.push(performance.now() - t);
    st.ok++;
  } catch (e) {
    st.errors++;
    if (st.errors <= 3) log(`transport error: ${e?.message}`);
  }
}

// Warm-up: one request alone, then one batch of the largest level (CUDA graph capture, allocator).
{
  const st = { ok: 0, errors: 0, tokens: 0, prompt_tokens: 0, ttft: [], itl: [], tpot: [], latency: [] };
  await one(st);
  await Promise.all(Array.from({ length: Math.min(Math.max(...LEVELS), PARALLEL) }, () => one(st)));
  log(`warm-up: ${st.ok} ok, ${st.errors} errors, ${((performance.now() - t0) / 1000).toFixed(1)} s since start`);
  if (st.errors) {
    log('warm-up failed; stopping');
    await stopServer(srv);
    process.exit(1);
  }
}

let commit = 'unknown';
try {
  commit = execSync('git rev-parse --short HEAD', { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  if (execSync('git status --porcelain --untracked-files=no', { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim())
    commit += '-dirty';
} catch {}
let device = BACKEND;
try {
  if (meta.backend.includes('cuda') || BACKEND === 'cuda')
    device = execSync('nvidia-smi --query-gpu=name --format=csv,noheader -i 0', { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString().trim();
} catch {}

const r1 = (x) => +x.toFixed(1), r2 = (x) => +x.toFixed(2);
let failures = 0;
const lines = [];
for (const c of LEVELS) {
  const st = { ok: 0, errors: 0, tokens: 0, prompt_tokens: 0, ttft: [], itl: [], tpot: [], latency: [] };
  const steps0 = await metric(srv.url, 'ds_decode_steps_total');
  const ts = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    for (let k = 0; k < REQUESTS; k++) await one(st);
  }));
  const wall = (performance.now() - ts) / 1000;
  const steps = (await metric(srv.url, 'ds_decode_steps_total')) - steps0;
  const line = {
    bench: 'serve', model_file: path.basename(args.model), model_bytes: statSync(args.model).size,
    backend: meta.backend, device, slots: meta.parallel, ctx: meta.n_ctx, concurrency: c, requests: c * REQUESTS,
    ok: st.ok, errors: st.errors, prompt_tokens: PROMPT, max_tokens: MAX_TOKENS, wall_s: r2(wall),
    output_tok_s: r1(st.tokens / wall),                     // aggregate generated tokens per second
    total_tok_s: r1((st.tokens + st.prompt_tokens) / wall), // prompt + generated
    ttft_ms: { p50: r1(percentile(st.ttft, 50)), p99: r1(percentile(st.ttft, 99)) },
    itl_ms: { p50: r2(percentile(st.itl, 50)), p99: r2(percentile(st.itl, 99)) },
    tpot_ms: { p50: r2(percentile(st.tpot, 50)), p99: r2(percentile(st.tpot, 99)) },
    latency_ms: { p50: r1(percentile(st.latency, 50)), p99: r1(percentile(st.latency, 99)) },
    mean_decode_batch: steps > 0 ? r1((st.tokens - st.ok) / steps) : null,  // the first token of each comes from prefill
    label: args.label ?? '', commit, timestamp: new Date().toISOString(),
  };
  if (st.errors) failures++;
  console.log(JSON.stringify(line));
  lines.push(line);
  if (OUT) {
    mkdirSync(path.dirname(OUT), { recursive: true });
    appendFileSync(OUT, JSON.stringify(line) + '\n');
  }
}
const srv5xx = /status="5\d\d"/.test((await httpRequest(`${srv.url}/metrics`)).body);
const code = await stopServer(srv);
clearTimeout(hardStop);
log(`done in ${((performance.now() - t0) / 1000).toFixed(1)} s; server exit ${code}${srv5xx ? '; the server answered 5xx' : ''}`);
process.exit(failures || code !== 0 || srv5xx ? 1 : 0);

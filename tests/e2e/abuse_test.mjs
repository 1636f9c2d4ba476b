// Abuse test of a real `deltaserve serve` process over loopback (ctest e2e.abuse; node's standard
// library only). Every case asserts the HTTP status and OpenAI's error shape
// {"error": {"message", "type", "param", "code"}}, and after every case a normal request must still
// succeed. Cases: malformed JSON, wrong types, unknown fields (accepted), huge bodies (413; chunked or
// length-less ones 411), numbers beyond double (400), other methods on known routes (405), an assistant
// tool-call turn with content null (200, the model's own template), deep nesting, prompts over the context (400), max_tokens beyond the limits, invalid UTF-8, missing or
// wrong API key (401), garbage HTTP, a slowloris-style partial body (times out while others are
// served), and disconnects mid-stream (the sequence is freed: /health and /metrics show it).
// Bounded: ~20 s on a tiny fixture model.
//   DS_BIN=build/apps/deltaserve node tests/e2e/abuse_test.mjs
import assert from 'node:assert/strict';
import net from 'node:net';
import { fixture, httpRequest, metric, rawPost, rawRequest, rawStatus, startServer, stopServer, streamRequest } from './common.mjs';

const KEY = 'abuse-key';
const TIMEOUT_S = 2;  // --timeout: a stalled socket read or write
const CTX = 512;
const MAX_TOKENS_LIMIT = 256;
const MODEL_FILE = process.env.DS_E2E_MODEL || fixture('models/tiny-sym/tiny-sym-q8_0.gguf');
const deadline = setTimeout(() => {
  console.log('not ok - abuse test timed out');
  process.exit(1);
}, 120000);

const srv = await startServer(['-m', MODEL_FILE, '--parallel', '4', '--ctx', String(CTX), '--api-key', KEY,
                               '--max-body-mb', '1', '--timeout', String(TIMEOUT_S),
                               '--max-tokens-limit', String(MAX_TOKENS_LIMIT)]);
const AUTH = { Authorization: `Bearer ${KEY}` };
const CC = `${srv.url}/v1/chat/completions`;
const CMPL = `${srv.url}/v1/completions`;
let failed = 0, n = 0;

async function test(name, fn) {
  n++;
  try {
    await fn();
    await normalRequestWorks();
    console.log(`ok ${n} - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${n} - ${name}\n  ${String(e && e.stack || e).split('\n').join('\n  ')}`);
  }
}

const msgs = (text) => [{ role: 'user', content: text }];
const post = (url, body, headers = AUTH) => httpRequest(url, { method: 'POST', headers, body });

// OpenAI's error shape, with the status and (when given) param and code.
function expectError(r, status, { param, code, message } = {}) {
  assert.equal(r.status, status, `status ${r.status}, body ${String(r.body).slice(0, 300)}`);
  assert.match(String(r.headers?.['content-type'] ?? 'application/json'), /application\/json/);
  const e = r.json?.error;
  assert.ok(e && typeof e === 'object', `no error object: ${String(r.body).slice(0, 300)}`);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok('param' in e && 'code' in e, 'param and code present (null allowed)');
  if (status >= 500) assert.equal(e.type, 'server_error');
  else assert.notEqual(e.type, 'server_error');
  if (param !== undefined) assert.equal(e.param, param);
  if (code !== undefined) assert.equal(e.code, code);
  if (message !== undefined) assert.match(e.message, message);
}

async function normalRequestWorks() {
  const r = await post(CC, { model: 'x', messages: msgs('Say hi'), max_tokens: 3, temperature: 0 });
  assert.equal(r.status, 200, `normal request after the case: ${r.status} ${r.body.slice(0, 200)}`);
  assert.equal(r.json.object, 'chat.completion');
  assert.equal(r.json.usage.completion_tokens <= 3, true);
}

const raw = (bytes, opts) => rawRequest(srv.port, bytes, opts);
// The status and JSON body of a raw HTTP response.
function parseRaw(resp) {
  const status = rawStatus(resp);
  const head = resp.slice(0, resp.indexOf('\r\n\r\n'));
  const body = resp.slice(resp.indexOf('\r\n\r\n') + 4);
  let json = null;
  try { json = JSON.parse(body); } catch {}
  const ct = (head.match(/^Content-Type: (.*)$/mi) || [])[1];
  return { status, body, json, headers: { 'content-type': ct } };
}
const post_ = (path, body, extra = '') => rawPost(path, body, KEY, extra);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

await test('malformed JSON is 400', async () => {
  expectError(await post(CC, '{"messages": ['), 400, { message: /not valid JSON/ });
  expectError(await post(CC, '{"messages": [}'), 400);
  expectError(await post(CC, ''), 400);
  expectError(await post(CC, 'null'), 400);
  expectError(await post(CC, '[1, 2]'), 400, { message: /JSON object/ });
  expectError(await post(CMPL, '{"prompt": "x",}'), 400);
});

await test('wrong types are 400 naming the field', async () => {
  const base = { model: 'x', messages: msgs('x'), max_tokens: 2 };
  expectError(await post(CC, { ...base, temperature: 'hot' }), 400, { param: 'temperature', message: /must be a number, got string/ });
  expectError(await post(CC, { ...base, messages: 5 }), 400, { param: 'messages' });
  expectError(await post(CC, { ...base, messages: [{ role: 'user', content: 7 }] }), 400, { param: 'messages[0].content' });
  expectError(await post(CC, { ...base, messages: [{ role: 'wizard', content: 'x' }] }), 400, { param: 'messages[0].role' });
  expectError(await post(CC, { ...base, max_tokens: 'ten' }), 400, { param: 'max_tokens' });
  expectError(await post(CC, { ...base, stream: 'yes' }), 400, { param: 'stream' });
  expectError(await post(CC, { ...base, stop: [1, 2] }), 400, { param: 'stop' });
  expectError(await post(CC, { ...base, top_p: 3 }), 400, { param: 'top_p' });
  expectError(await post(CC, { ...base, n: 2 }), 400, { param: 'n' });
  expectError(await post(CC, { ...base, logit_bias: { abc: 1 } }), 400, { param: 'logit_bias' });
  expectError(await post(CMPL, { prompt: { text: 'x' } }), 400, { param: 'prompt' });
  expectError(await post(CMPL, { prompt: [1, -5, 2] }), 400, { param: 'prompt' });
  expectError(await post(CMPL, {}), 400, { param: 'prompt' });
});

await test('unknown fields are accepted and ignored', async () => {
  const r = await post(CC, { model: 'whatever', messages: [{ role: 'user', content: 'x', name: 'bob', extra: 1 }],
                             max_tokens: 2, frobnicate: { deep: [1, 2] }, user: 'u1', metadata: { a: 'b' }, store: false });
  assert.equal(r.status, 200, r.body);
  assert.equal(r.json.choices.length, 1);
  const c = await post(CMPL, { prompt: 'x', max_tokens: 2, unknown_thing: null });
  assert.equal(c.status, 200, c.body);
});

await test('huge bodies are 413 (chunked ones 411)', async () => {
  // Over --max-body-mb 1, declared in Content-Length.
  expectError(parseRaw(await raw(post_('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(2 << 20) })))), 413,
              { code: 'payload_too_large' });
  // A chunked body (no Content-Length) is refused before it is read: cpp-httplib would read it
  // without a size limit. The body is kept small so that the client has sent it all before the answer
  // comes (a multi-MiB one races the server's close: the client then sees a reset, not the 411).
  const big = Buffer.from(JSON.stringify({ prompt: 'y'.repeat(4096) }));
  const chunked = Buffer.concat([
    Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
                'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'),
    Buffer.from(big.length.toString(16) + '\r\n'), big, Buffer.from('\r\n0\r\n\r\n')]);
  expectError(parseRaw(await raw(chunked)), 411, { code: 'length_required' });
  // So is a POST that declares no length at all: cpp-httplib would read it until the client closes.
  const noLength = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
                   'Content-Type: application/json\r\nConnection: close\r\n\r\n{"prompt": "x"}';
  expectError(parseRaw(await raw(noLength)), 411, { code: 'length_required' });
});

await test('numbers beyond double are 400, other methods on known routes 405', async () => {
  const r = await post(CC, `{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}`);
  expectError(r, 400, { message: /number overflow/ });
  expectError(await httpRequest(CC, { method: 'PUT', headers: AUTH, body: {} }), 405, { code: 'method_not_allowed' });
  expectError(await httpRequest(`${srv.url}/health`, { method: 'POST', body: {} }), 405, { code: 'method_not_allowed' });
});

await test('an assistant tool-call turn with content null renders with the model\'s template', async () => {
  // As OpenAI clients send the turn back; Qwen3's template tests `'</think>' in message.content`.
  const call = { id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a": 1}' } };
  for (const assistant of [{ role: 'assistant', content: null, tool_calls: [call] },
                           { role: 'assistant', tool_calls: [call] }]) {
    const r = await post(CC, { messages: [...msgs('Use f'), assistant, { role: 'tool', tool_call_id: 'c1', content: '2' }],
                               max_tokens: 2, tools: [{ type: 'function', function: { name: 'f' } }] });
    assert.equal(r.status, 200, r.body);
  }
});

await test('deeply nested JSON is answered, not a crash', async () => {
  const deep = '{"messages":' + '['.repeat(200000) + ']'.repeat(200000) + '}';
  const r = await post(CC, deep);
  assert.equal(r.status, 400, r.body.slice(0, 200));
  expectError(r, 400);
  assert.equal(srv.proc.exitCode, null, 'server still running');
});

await test('prompts over the context are 400 with a clear message', async () => {
  const long = 'word '.repeat(2000);
  expectError(await post(CC, { messages: msgs(long) }), 400,
              { code: 'context_length_exceeded', param: 'messages', message: /the prompt has \d+ tokens; this server accepts at most 512/ });
  expectError(await post(CMPL, { prompt: long, max_tokens: 5 }), 400, { code: 'context_length_exceeded', param: 'prompt' });
  // Streaming requests are refused the same way (a JSON error, not an event stream).
  const s = await streamRequest(CC, { messages: msgs(long) }, { headers: AUTH });
  assert.equal(s.status, 400);
  assert.equal(s.error?.error?.code, 'context_length_exceeded');
});

await test('max_tokens beyond the limits is 400', async () => {
  const base = { messages: msgs('x') };
  expectError(await post(CC, { ...base, max_tokens: MAX_TOKENS_LIMIT + 1 }), 400,
              { param: 'max_tokens', message: /at most 256/ });
  expectError(await post(CC, { ...base, max_completion_tokens: 100000 }), 400, { param: 'max_tokens' });
  expectError(await post(CC, { ...base, max_tokens: 0 }), 400, { param: 'max_tokens' });
  expectError(await post(CC, { ...base, max_tokens: -1 }), 400, { param: 'max_tokens' });
  expectError(await post(CC, { ...base, max_tokens: 1e12 }), 400, { param: 'max_tokens' });
  expectError(await post(CC, { ...base, max_tokens: 2.5 }), 400, { param: 'max_tokens' });
  // Within the limit but prompt + max_tokens over the context.
  expectError(await post(CMPL, { prompt: 'word '.repeat(300), max_tokens: 250 }), 400,
              { code: 'context_length_exceeded', message: /maximum context length is 512 tokens/ });
});

await test('invalid UTF-8 and lone surrogates are 400', async () => {
  const bad = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe, 0xc3]),
                             Buffer.from('"}]}')]);
  expectError(await post(CC, bad), 400);
  expectError(await post(CC, Buffer.from([0x7b, 0x22, 0x6d, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])), 400);
  expectError(await post(CC, '{"messages":[{"role":"user","content":"\\ud800"}]}'), 400);
  expectError(await post(CMPL, '{"prompt":"\\udfff abc"}'), 400);
});

await test('missing or wrong API key is 401', async () => {
  const body = { messages: msgs('x'), max_tokens: 2 };
  expectError(await post(CC, body, {}), 401, { code: 'invalid_api_key', message: /didn't provide an API key/ });
  expectError(await post(CC, body, { Authorization: 'Bearer nope' }), 401, { code: 'invalid_api_key' });
  expectError(await post(CC, body, { Authorization: `Basic ${KEY}` }), 401, { code: 'invalid_api_key' });
  expectError(await post(CC, body, { Authorization: KEY }), 401);
  expectError(await httpRequest(`${srv.url}/v1/models`), 401, { code: 'invalid_api_key' });
  expectError(await post(CMPL, { prompt: 'x' }, { Authorization: `Bearer ${KEY}x` }), 401);
  // Auth is checked before the body is parsed.
  expectError(await post(CC, '{not json', {}), 401);
  assert.equal((await httpRequest(`${srv.url}/health`)).status, 200);  // not under /v1
});

await test('garbage HTTP, unknown routes and methods get JSON errors', async () => {
  expectError(parseRaw(await raw('NONSENSE\r\n\r\n')), 400, { message: /malformed HTTP request/ });
  const badLength = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
                    'Content-Type: application/json\r\nContent-Length: abc\r\nConnection: close\r\n\r\n{"prompt":"x"}';
  expectError(parseRaw(await raw(badLength)), 400);
  expectError(await httpRequest(`${srv.url}/v1/nothing`, { headers: AUTH }), 404, { code: 'unknown_url' });
  expectError(await httpRequest(CC, { headers: AUTH }), 405);
  // A header section far over any sane size.
  const r = parseRaw(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200000)}\r\nConnection: close\r\n\r\n`));
  expectError(r, 400);  // refused with a JSON error
});

await test('slowloris: a stalled partial body times out and blocks no one', async () => {
  // Headers promise 2000 bytes of body; 20 arrive, then nothing. Several such clients at once.
  const stalled = [];
  for (let i = 0; i < 8; i++) {
    stalled.push(new Promise((resolve) => {
      const t0 = performance.now();
      const s = net.connect(srv.port, '127.0.0.1');
      let out = '';
      s.on('data', (d) => { out += d; });
      s.on('error', () => {});
      s.on('close', () => resolve({ ms: performance.now() - t0, out }));
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\n` +
              'Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{"messages": [{"role"');
      setTimeout(() => s.destroy(), 15000);  // the test's own bound
    }));
  }
  // Meanwhile others are served promptly, and a stream runs intact (equal to the same request alone).
  const streamBody = { prompt: 'Meanwhile', max_tokens: 60, ignore_eos: true, temperature: 0 };
  const bg = streamRequest(CMPL, streamBody, { headers: AUTH });
  const t0 = performance.now();
  for (let i = 0; i < 5; i++) await normalRequestWorks();
  const fastMs = performance.now() - t0;
  const b = await bg;
  assert.ok(b.done && b.finish === 'length', 'the concurrent stream ran to its end');
  assert.equal(b.text, (await post(CMPL, streamBody)).json.choices[0].text);
  assert.ok(fastMs < TIMEOUT_S * 1000, `normal requests took ${fastMs.toFixed(0)} ms while slow clients stalled`);
  for (const r of await Promise.all(stalled)) {
    // After --timeout s without a byte the server answers 400 (the body never came), then closes the
    // idle connection after its keep-alive timeout (--timeout here): well before our 15 s bound.
    expectError(parseRaw(r.out), 400);
    assert.ok(r.ms > TIMEOUT_S * 1000 - 500, `closed too early (${r.ms.toFixed(0)} ms)`);
    assert.ok(r.ms < 2 * TIMEOUT_S * 1000 + 3000, `stalled client closed after ${r.ms.toFixed(0)} ms`);
  }
  // A stalled header section (no blank line) is dropped the same way.
  const h = await new Promise((resolve) => {
    const t1 = performance.now();
    const s = net.connect(srv.port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => { out += d; });
    s.on('error', () => {});
    s.on('close', () => resolve({ ms: performance.now() - t1, out }));
    s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    setTimeout(() => s.destroy(), 15000);
  });
  expectError(parseRaw(h.out), 400);
  assert.ok(h.ms < 2 * TIMEOUT_S * 1000 + 3000, `stalled headers closed after ${h.ms.toFixed(0)} ms`);
});

await test('disconnect mid-stream frees the sequence (/health, /metrics)', async () => {
  const cancelledBefore = await metric(srv.url, 'ds_requests_finished_total{reason="cancelled"}');
  const drops = [];
  for (const url of [CC, CMPL]) {
    const body = url === CC ? { messages: msgs('Go on forever'), max_tokens: 250, ignore_eos: true }
                            : { prompt: 'Go on forever', max_tokens: 250, ignore_eos: true };
    let k = 0;
    drops.push(streamRequest(url, body, { headers: AUTH, onEvent: (ev, r) => { if (++k === 4) r.drop(); } }));
  }
  const rs = await Promise.all(drops);
  for (const r of rs) {
    assert.equal(r.status, 200);
    assert.ok(r.dropped && !r.done, 'dropped before the end');
  }
  let health;
  for (let i = 0; i < 300; i++) {
    health = (await httpRequest(`${srv.url}/health`)).json;
    if (health.running === 0) break;
    await sleep(10);
  }
  assert.equal(health.running, 0, `still running: ${JSON.stringify(health)}`);
  assert.equal(health.waiting, 0);
  assert.equal(await metric(srv.url, 'ds_requests_finished_total{reason="cancelled"}'), cancelledBefore + 2);
  assert.equal(await metric(srv.url, 'ds_requests_running'), 0);
  // A stream read to its end is complete.
  const full = await streamRequest(CMPL, { prompt: 'Go on', max_tokens: 20, ignore_eos: true,
                                           stream_options: { include_usage: true } }, { headers: AUTH });
  assert.ok(full.done);
  assert.equal(full.finish, 'length');
  assert.equal(full.usage.completion_tokens, 20);
});

await test('no 5xx was answered during the whole run', async () => {
  const t = (await httpRequest(`${srv.url}/metrics`)).body;
  assert.ok(!/status="5\d\d"/.test(t), t.split('\n').filter((l) => /status="5/.test(l)).join('\n'));
});

const code = await stopServer(srv);
if (code !== 0) {
  failed++;
  console.log(`not ok - server exit code ${code}\n${srv.stderr().slice(-3000)}`);
}
clearTimeout(deadline);
console.log(`${n - failed}/${n} passed`);
process.exit(failed ? 1 : 0);

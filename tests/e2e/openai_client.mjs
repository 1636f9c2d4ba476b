// End-to-end: the official OpenAI client (npm `openai`) against `deltaserve serve` on the tiny
// fixture model, unchanged: models, chat and completions with and without streaming, logprobs,
// usage, multi-turn prefix reuse, the response shapes field by field as the SDK types them (refusal,
// logprobs.refusal, usage null until the usage chunk, reasoning_tokens, the SDK's stream helper,
// completions text_offset), an agent loop replaying a tool-call reply, typed errors (401, 400),
// an aborted stream, concurrent streams
// equal to the same prompts run alone, and raw-socket abuse (malformed JSON, invalid UTF-8, huge
// body, slow sender, disconnect mid-stream) while another stream keeps going. Bounded: ~1 minute.
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { collectChatStream, fixture, rawPost, rawRequest, rawStatus, startServer, tapRunner } from './common.mjs';

const KEY = 'e2e-key';
const MODEL_FILE = process.env.DS_E2E_MODEL || fixture('models/tiny-sym/tiny-sym-q8_0.gguf');

const srv = await startServer(['-m', MODEL_FILE, '--parallel', '4', '--ctx', '1024', '--api-key', KEY,
                               '--max-body-mb', '1', '--timeout', '5']);
const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
const { test, finish } = tapRunner();

const greedy = { temperature: 0, max_tokens: 24 };
const msgs = (text) => [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: text }];

async function metric(name) {
  const t = await (await fetch(`${srv.url}/metrics`)).text();
  const m = t.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

await test('models.list', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, 'tiny-sym-q8_0');
  const m = await client.models.retrieve('tiny-sym-q8_0');
  assert.equal(m.object, 'model');
});

let plain;
await test('chat non-streaming', async () => {
  plain = await client.chat.completions.create({ model: 'tiny-sym-q8_0', messages: msgs('Tell me a story.'), ...greedy });
  assert.equal(plain.object, 'chat.completion');
  const c = plain.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(plain.usage.prompt_tokens > 10);
  assert.ok(plain.usage.completion_tokens >= 1 && plain.usage.completion_tokens <= 24);
  assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);
});

await test('chat streaming equals non-streaming (greedy), usage chunk', async () => {
  const stream = await client.chat.completions.create({
    model: 'tiny-sym-q8_0', messages: msgs('Tell me a story.'), ...greedy, stream: true,
    stream_options: { include_usage: true },
  });
  const r = await collectChatStream(stream);
  const m = plain.choices[0].message;
  assert.equal(r.content, m.content ?? '');
  assert.equal(r.reasoning, m.reasoning_content ?? '');
  assert.equal(r.finish, plain.choices[0].finish_reason);
  assert.equal(r.usage.completion_tokens, plain.usage.completion_tokens);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, plain.usage.prompt_tokens);  // same prompt: from the cache
});

await test('thinking switch via chat_template_kwargs', async () => {
  const on = await client.chat.completions.create({ model: 'x', messages: msgs('Hi'), ...greedy });
  const off = await client.chat.completions.create({
    model: 'x', messages: msgs('Hi'), ...greedy, chat_template_kwargs: { enable_thinking: false },
  });
  // Qwen3's template adds an empty think block to the prompt when thinking is off.
  assert.equal(off.usage.prompt_tokens, on.usage.prompt_tokens + 4);
});

await test('completions non-streaming and streaming agree', async () => {
  const a = await client.completions.create({ model: 'x', prompt: 'Once upon a time', ...greedy, logprobs: 2 });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices[0].logprobs.tokens.length, a.usage.completion_tokens);
  const s = await client.completions.create({ model: 'x', prompt: 'Once upon a time', ...greedy, stream: true });
  let text = '';
  for await (const c of s) text += c.choices[0]?.text ?? '';
  assert.equal(text, a.choices[0].text);
});

await test('chat logprobs', async () => {
  const r = await client.chat.completions.create({ model: 'x', messages: msgs('Count'), ...greedy, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);  // greedy picks the most likely token
  }
});

await test('multi-turn reuses the conversation prefix', async () => {
  const turn1 = msgs('Where is Paris?');
  const a = await client.chat.completions.create({ model: 'x', messages: turn1, ...greedy, chat_template_kwargs: { enable_thinking: false } });
  const turn2 = [...turn1, { role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'And Rome?' }];
  const b = await client.chat.completions.create({ model: 'x', messages: turn2, ...greedy, chat_template_kwargs: { enable_thinking: false } });
  // The template re-renders turn 1's reply without the empty think block its prompt ended with, so
  // the reusable prefix is turn 1's conversation up to its generation prompt
  // ("<|im_start|>assistant\n<think>\n\n</think>\n\n", a dozen tokens in the tiny vocabulary).
  const cached = b.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0 && a.usage.prompt_tokens - cached <= 16, `cached ${cached} of ${b.usage.prompt_tokens}`);
});

await test('typed errors: 401, 400, context length', async () => {
  const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: msgs('x'), temperature: 5 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: msgs('x'), max_tokens: 5000 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: msgs('x'), max_tokens: 1010 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  await assert.rejects(client.chat.completions.create({ model: 'x', messages: [] }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
});

await test('aborted stream frees its slot', async () => {
  const stream = await client.chat.completions.create({ model: 'x', messages: msgs('Go on'), max_tokens: 900, ignore_eos: true, stream: true });
  let k = 0;
  for await (const _ of stream) if (++k === 5) break;  // leaving the loop aborts the request
  for (let i = 0; i < 200 && (await metric('ds_requests_running')) > 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(await metric('ds_requests_running'), 0);
  assert.ok((await metric('ds_requests_finished_total{reason="cancelled"}')) >= 1);
});

await test('concurrent streams equal the same prompts run alone', async () => {
  const prompts = Array.from({ length: 10 }, (_, i) => `Question number ${i}: what comes next?`);
  const req = (p) => ({ model: 'x', messages: msgs(p), temperature: 0, max_tokens: 20 + prompts.indexOf(p), ignore_eos: true });
  const alone = [];
  for (const p of prompts) alone.push((await client.chat.completions.create(req(p))).choices[0].message);
  const together = await Promise.all(prompts.map(async (p) =>
    collectChatStream(await client.chat.completions.create({ ...req(p), stream: true }))));
  together.forEach((r, i) => {
    assert.equal(r.content, alone[i].content ?? '', `prompt ${i}`);
    assert.equal(r.reasoning, alone[i].reasoning_content ?? '', `prompt ${i}`);
  });
});

// ---- response shapes, field by field, as openai-node 6.x types them ----

await test('chat shapes: refusal, logprobs, reasoning_tokens (non-streaming)', async () => {
  const r = await client.chat.completions.create({ model: 'x', messages: msgs('Shape'), ...greedy, logprobs: true, top_logprobs: 1 });
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(typeof r.created, 'number');
  assert.ok(r.id.startsWith('chatcmpl-'));
  assert.equal(c.message.refusal, null);              // `string | null`, not optional
  assert.equal(c.logprobs.refusal, null);
  for (const t of c.logprobs.content) assert.ok(Array.isArray(t.bytes) && typeof t.token === 'string');
  const d = r.usage.completion_tokens_details;
  assert.ok(d.reasoning_tokens >= 0 && d.reasoning_tokens <= r.usage.completion_tokens);
  // The tiny model rarely closes its think block: all reasoning then, every token counted.
  if (!c.message.content) assert.equal(d.reasoning_tokens, r.usage.completion_tokens);
  if (!c.message.reasoning_content) assert.equal(d.reasoning_tokens, 0);
  const off = await client.chat.completions.create({ model: 'x', messages: msgs('Shape'), ...greedy,
                                                     chat_template_kwargs: { enable_thinking: false } });
  assert.equal(off.usage.completion_tokens_details.reasoning_tokens, 0);
});

await test('chat stream: usage null until the usage chunk; the SDK helper accumulates it', async () => {
  const stream = await client.chat.completions.create({
    model: 'x', messages: msgs('Shape'), ...greedy, logprobs: true, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const last = chunks.pop();
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage.total_tokens > 0);
  for (const c of chunks) {
    assert.equal(c.usage, null);
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.choices.length, 1);
    if (c.choices[0].logprobs) assert.equal(c.choices[0].logprobs.refusal, null);
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.ok(chunks.slice(1).every((c) => c.choices[0].delta.role === undefined), 'role only in the first chunk');
  // The SDK's own stream helper (what runTools and many UIs use) builds the same completion.
  const helper = client.chat.completions.stream({ model: 'x', messages: msgs('Shape'), ...greedy, logprobs: true });
  const fin = await helper.finalChatCompletion();
  const plainShape = await client.chat.completions.create({ model: 'x', messages: msgs('Shape'), ...greedy, logprobs: true });
  assert.equal(fin.choices[0].finish_reason, plainShape.choices[0].finish_reason);
  assert.equal(fin.choices[0].message.role, 'assistant');
  assert.equal(fin.choices[0].message.refusal, null);
  assert.equal(fin.choices[0].logprobs.content.length, plainShape.choices[0].logprobs.content.length);
});

await test('completions logprobs: text_offset counts characters from the prompt start', async () => {
  const prompt = 'Once upon a time';
  for (const stream of [false, true]) {
    const req = { model: 'x', prompt, ...greedy, logprobs: 1 };
    let text = '';
    const lp = { tokens: [], text_offset: [] };
    if (stream) {
      for await (const c of await client.completions.create({ ...req, stream: true })) {
        const ch = c.choices[0];
        if (!ch) continue;
        text += ch.text;
        lp.tokens.push(...ch.logprobs.tokens);
        lp.text_offset.push(...ch.logprobs.text_offset);
      }
    } else {
      const r = await client.completions.create(req);
      text = r.choices[0].text;
      Object.assign(lp, r.choices[0].logprobs);
      assert.equal(lp.token_logprobs.length, lp.tokens.length);
      assert.equal(lp.top_logprobs.length, lp.tokens.length);
    }
    assert.equal(lp.text_offset[0], prompt.length, `stream ${stream}`);
    // Each token starts where the previous one's characters end (up to a token that is part of a
    // character, which OpenAI writes as "bytes:\xNN").
    let pos = prompt.length;
    lp.tokens.forEach((t, i) => {
      if (lp.tokens.slice(0, i).some((x) => x.startsWith('bytes:'))) return;
      assert.equal(lp.text_offset[i], pos, `token ${i} of ${JSON.stringify(lp.tokens)}`);
      pos += [...t].length;
    });
    assert.ok(text.length > 0);
  }
});

await test('agent loop: the SDK reply with tool_calls replayed (content null), then the tool result', async () => {
  // What runTools and LangChain-style loops send back: the assistant message as the SDK returned it
  // (content null beside tool_calls), then a tool message answering its id. The tiny model's
  // template is Qwen3's, which tests `'</think>' in message.content`.
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
                   parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const assistant = { role: 'assistant', content: null, refusal: null,
                      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] };
  const r = await client.chat.completions.create({
    model: 'x', tools, ...greedy,
    messages: [...msgs('Weather in Paris?'), assistant, { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 20}' }],
  });
  assert.equal(r.object, 'chat.completion');
  assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
});

await test('tool_choice: a named function or "required" forces the call; what cannot be forced is a typed 400', async () => {
  // The reply opens with the template's opening of a call (Qwen3's JSON form for the tiny model, which
  // writes noise after it): a parsed call is the named one, else the opening shows in the content.
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
                 { type: 'function', function: { name: 'get_time' } }];
  for (const tool_choice of [{ type: 'function', function: { name: 'get_time' } }, 'required']) {
    const r = await client.chat.completions.create({ model: 'x', messages: msgs('Weather?'), tools, tool_choice, ...greedy });
    const m = r.choices[0].message;
    assert.equal(m.reasoning_content, undefined);
    const opening = tool_choice === 'required' ? '<tool_call>\n{"name": "' : '<tool_call>\n{"name": "get_time';
    if (m.tool_calls) {
      // OpenAI: "tool_calls" for required, "stop" for a named function.
      assert.equal(r.choices[0].finish_reason, tool_choice === 'required' ? 'tool_calls' : 'stop');
      if (tool_choice !== 'required') assert.deepEqual(m.tool_calls.map((c) => c.function.name), ['get_time']);
    } else {
      assert.ok(m.content.startsWith(opening), JSON.stringify(m.content));
    }
  }
  for (const [body, param] of [[{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name'],
                               [{ tool_choice: 'required' }, 'tool_choice']]) {
    await assert.rejects(client.chat.completions.create({ model: 'x', messages: msgs('Weather?'), ...greedy, ...body }),
                         (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param);
  }
});

// ---- raw sockets ----
const raw = (bytes) => rawRequest(srv.port, bytes, { readMs: 3000 });
const post = (path, body, extra = '') => rawPost(path, body, KEY, extra);
const status = rawStatus;

await test('response_format json_schema / json_object: the content parses (streaming and not); bad schemas are typed 400s', async () => {
  // Every choice bounded (boolean, enum, a short array of enums): the tiny model's document always ends.
  const schema = {
    type: 'object', additionalProperties: false, required: ['ok', 'mood', 'tags'],
    properties: { ok: { type: 'boolean' }, mood: { enum: ['calm', 'busy'] },
                  tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 2 } },
  };
  const response_format = { type: 'json_schema', json_schema: { name: 'status', strict: true, schema } };
  const body = { model: 'x', messages: msgs('Status as JSON'), temperature: 0, max_tokens: 400, response_format,
                 chat_template_kwargs: { enable_thinking: false } };
  const check = (content) => {
    const j = JSON.parse(content);
    assert.deepEqual(Object.keys(j), ['ok', 'mood', 'tags']);
    assert.equal(typeof j.ok, 'boolean');
    assert.ok(['calm', 'busy'].includes(j.mood), content);
    assert.ok(Array.isArray(j.tags) && j.tags.length <= 2 && j.tags.every((t) => ['a', 'b', 'c'].includes(t)), content);
  };
  const r = await client.chat.completions.create(body);
  assert.equal(r.choices[0].finish_reason, 'stop');
  check(r.choices[0].message.content);
  const s = await collectChatStream(await client.chat.completions.create({ ...body, stream: true }));
  assert.equal(s.content, r.choices[0].message.content);
  check(s.content);
  for (const seed of [1, 2]) {
    const x = await client.chat.completions.create({ ...body, temperature: 1, seed });
    check(x.choices[0].message.content);
  }
  // json_object: an object, or cut by max_tokens with finish_reason length.
  const o = await client.chat.completions.create({ ...body, response_format: { type: 'json_object' }, max_tokens: 40 });
  if (o.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
  else assert.equal(o.choices[0].finish_reason, 'length');
  assert.equal(o.choices[0].message.content.trimStart()[0], '{');
  const bad = { ...response_format, json_schema: { name: 'x', schema: { type: 'object', properties: { id: { type: 'string', pattern: '^a' } } } } };
  await assert.rejects(client.chat.completions.create({ ...body, response_format: bad }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.json_schema.schema.properties.id.pattern');
  await assert.rejects(client.chat.completions.create({ ...body, response_format: { type: 'yaml' } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.type');
});

await test('abuse: each gets its status while a stream keeps going', async () => {
  // A long stream runs throughout; it must finish intact.
  const bg = client.chat.completions.create({ model: 'x', messages: msgs('Background'), temperature: 0, max_tokens: 200, ignore_eos: true, stream: true })
    .then(collectChatStream);
  assert.equal(status(await raw(post('/v1/chat/completions', '{"messages": [', ''))), 400);
  assert.equal(status(await raw(post('/v1/chat/completions', Buffer.from([0x7b, 0x22, 0x6d, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])))), 400);
  assert.equal(status(await raw(post('/v1/chat/completions', '{"messages":[{"role":"user","content":"\\ud800"}]}'))), 400);
  assert.equal(status(await raw(post('/v1/chat/completions', JSON.stringify({ messages: 5 })))), 400);
  assert.equal(status(await raw(post('/v1/chat/completions', JSON.stringify({ messages: msgs('x'), max_tokens: 2, what: 1 })))), 200);
  assert.equal(status(await raw(post('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(2 << 20) })))), 413);
  assert.equal(status(await raw(post('/v1/completions', JSON.stringify({ prompt: 'word '.repeat(3000) })))), 400);
  assert.equal(status(await raw(`GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)), 401);
  assert.equal(status(await raw('NONSENSE\r\n\r\n')), 400);
  // A slow sender (one byte every 20 ms for the headers) is served, and so is everyone else.
  const slowReq = post('/v1/completions', JSON.stringify({ prompt: 'slow', max_tokens: 2 }));
  const slow = new Promise((resolve) => {
    const s = net.connect(srv.port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => { out += d; });
    s.on('close', () => resolve(out));
    let i = 0;
    const tick = setInterval(() => {
      if (i < 40) s.write(slowReq.subarray(i, ++i));
      else { clearInterval(tick); s.write(slowReq.subarray(i)); }
    }, 20);
  });
  const quick = await client.completions.create({ model: 'x', prompt: 'quick', max_tokens: 3 });
  assert.equal(quick.choices.length, 1);
  assert.equal(status(await slow), 200);
  // Disconnect mid-stream: the server notices and frees the slot.
  const before = await metric('ds_requests_finished_total{reason="cancelled"}');
  await new Promise((resolve) => {
    const s = net.connect(srv.port, '127.0.0.1');
    s.write(post('/v1/completions', JSON.stringify({ prompt: 'drop me', max_tokens: 800, ignore_eos: true, stream: true })));
    let got = 0;
    s.on('data', (d) => { got += d.length; if (got > 600) { s.destroy(); resolve(); } });
  });
  for (let i = 0; i < 300 && (await metric('ds_requests_finished_total{reason="cancelled"}')) === before; i++)
    await new Promise((r) => setTimeout(r, 10));
  assert.equal(await metric('ds_requests_finished_total{reason="cancelled"}'), before + 1);
  const b = await bg;
  assert.equal(b.finish, 'length');
  const again = await client.chat.completions.create({ model: 'x', messages: msgs('Background'), temperature: 0, max_tokens: 200, ignore_eos: true });
  assert.equal(b.content, again.choices[0].message.content ?? '');
  assert.equal(b.reasoning, again.choices[0].message.reasoning_content ?? '');
});

await test('metrics exposition', async () => {
  const t = await (await fetch(`${srv.url}/metrics`)).text();
  for (const name of ['ds_http_requests_total', 'ds_requests_waiting', 'ds_time_to_first_token_seconds_bucket',
                      'ds_inter_token_latency_seconds_bucket', 'ds_state_memory_bytes', 'ds_generation_tokens_total'])
    assert.ok(t.includes(name), name);
  assert.ok(!/status="5\d\d"/.test(t), 'no 5xx answered');
});

await finish(srv);

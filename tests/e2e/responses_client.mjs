// End-to-end: POST /v1/responses (the Responses API) through the official OpenAI client (npm `openai`),
// unchanged, against `deltaserve serve` on the tiny fixture model: client.responses.create without and
// with streaming (the SDK's output_text, usage adding up, the stream helper's final response equal to the
// accumulated deltas, sequence numbers), a function tool round trip (a forced function_call, then its
// function_call_output, replayed as input and continued by previous_response_id: the same prompt), stored
// responses (retrieve, inputItems.list paged, delete) and typed errors (400 with param, 401, 404). The tiny
// model's text is noise: only shapes and equalities are checked.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { fixture, startServer, tapRunner } from './common.mjs';

const KEY = 'e2e-key';
const MODEL_FILE = process.env.DS_E2E_MODEL || fixture('models/tiny-sym/tiny-sym-q8_0.gguf');

const srv = await startServer(['-m', MODEL_FILE, '--parallel', '4', '--ctx', '1024', '--api-key', KEY, '--timeout', '5']);
const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
const { test, finish } = tapRunner();

const greedy = { model: 'tiny-sym-q8_0', temperature: 0, max_output_tokens: 24 };

function checkUsage(u) {
  assert.ok(u.input_tokens > 5, JSON.stringify(u));
  assert.ok(u.output_tokens >= 1 && u.output_tokens <= 24, JSON.stringify(u));
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.ok(u.output_tokens_details.reasoning_tokens <= u.output_tokens);
  assert.ok(u.input_tokens_details.cached_tokens <= u.input_tokens);
}

// The text of the response's message items (what the SDK's output_text joins).
const messageText = (r) => r.output.filter((i) => i.type === 'message').flatMap((i) => i.content).map((c) => c.text).join('');

let plain;
await test('responses.create non-streaming: Response shape, output_text, usage', async () => {
  plain = await client.responses.create({ ...greedy, instructions: 'You are terse.', input: 'Tell me a story.',
                                          reasoning: { effort: 'none' }, metadata: { run: 'e2e' } });
  assert.match(plain.id, /^resp_/);
  assert.equal(plain.object, 'response');
  assert.ok(Number.isInteger(plain.created_at));
  assert.ok(['completed', 'incomplete'].includes(plain.status));
  if (plain.status === 'incomplete') assert.deepEqual(plain.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(plain.error, null);
  assert.equal(plain.instructions, 'You are terse.');
  assert.equal(plain.max_output_tokens, 24);
  assert.equal(plain.temperature, 0);
  assert.deepEqual(plain.metadata, { run: 'e2e' });
  assert.deepEqual(plain.reasoning, { effort: 'none', summary: null });
  assert.equal(plain.tool_choice, 'auto');
  assert.deepEqual(plain.tools, []);
  const msg = plain.output.find((i) => i.type === 'message');
  assert.ok(msg, JSON.stringify(plain.output));
  assert.equal(msg.role, 'assistant');
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.content[0].type, 'output_text');
  assert.deepEqual(msg.content[0].annotations, []);
  assert.ok(plain.output_text.length > 0, 'output_text non-empty');  // computed by the SDK
  assert.equal(plain.output_text, messageText(plain));
  checkUsage(plain.usage);
});

await test('streaming: events in order, deltas add up to the final response, equal to non-streaming (greedy)', async () => {
  const stream = await client.responses.create({ ...greedy, instructions: 'You are terse.', input: 'Tell me a story.',
                                                 reasoning: { effort: 'none' }, stream: true });
  const types = [];
  let text = '', seq = -1, final;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seq + 1, ev.type);
    seq = ev.sequence_number;
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.ok(final, types.join(','));
  assert.equal(messageText(final), text);
  assert.equal(text, messageText(plain));
  assert.equal(final.status, plain.status);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
  assert.equal(final.usage.input_tokens_details.cached_tokens, plain.usage.input_tokens);  // the same prompt: cached
  // The SDK's stream helper accumulates the events into the same final response.
  const helper = client.responses.stream({ ...greedy, instructions: 'You are terse.', input: 'Tell me a story.',
                                           reasoning: { effort: 'none' } });
  let deltas = '';
  helper.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const fin = await helper.finalResponse();
  assert.equal(messageText(fin), deltas);
  assert.equal(deltas, plain.output_text);
  // (The helper takes the final Response from response.completed only: a reply cut at max_output_tokens ends
  // with response.incomplete, and its snapshot keeps the accumulated output, as with OpenAI's own server.)
});

await test('reasoning.effort switches thinking as chat_template_kwargs.enable_thinking does', async () => {
  const on = await client.responses.create({ ...greedy, input: 'Hi', reasoning: { effort: 'high' } });
  const off = await client.responses.create({ ...greedy, input: 'Hi', reasoning: { effort: 'minimal' } });
  // Qwen3's template (the tiny model's) adds an empty think block to the prompt when thinking is off.
  assert.equal(off.usage.input_tokens, on.usage.input_tokens + 4);
  const chatOff = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Hi' }],
                                                         max_tokens: 1, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(off.usage.input_tokens, chatOff.usage.prompt_tokens);  // the same prompt as chat's
});

await test('function tool round trip: forced call, its output replayed or continued by previous_response_id', async () => {
  const tools = [{ type: 'function', name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} }, strict: false }];
  const first = await client.responses.create({ ...greedy, input: 'What time is it?', tools,
                                                tool_choice: { type: 'function', name: 'get_time' } });
  assert.deepEqual(first.tool_choice, { type: 'function', name: 'get_time' });
  assert.equal(first.tools[0].name, 'get_time');
  // The reply opens with the template's call opening (Qwen3's JSON form for the tiny model, which writes noise
  // after it): a parsed call is the named one, else the opening shows in the text.
  let call = first.output.find((i) => i.type === 'function_call');
  if (call) {
    assert.equal(call.name, 'get_time');
    assert.match(call.call_id, /^call_/);
    assert.match(call.id, /^fc_/);
    assert.equal(typeof call.arguments, 'string');
  } else {
    assert.ok(first.output_text.startsWith('<tool_call>\n{"name": "get_time'), JSON.stringify(first.output_text));
    call = { type: 'function_call', call_id: 'call_e2e', name: 'get_time', arguments: '{}' };  // as an agent would replay it
  }
  const output = { type: 'function_call_output', call_id: call.call_id, output: '12:00' };
  const follow = { ...greedy, tools, reasoning: { effort: 'none' } };
  const replayed = await client.responses.create({ ...follow, input: [{ role: 'user', content: 'What time is it?' }, call, output] });
  assert.ok(replayed.output_text.length > 0 || replayed.output.some((i) => i.type === 'function_call'));
  checkUsage(replayed.usage);
  // Continued from the stored response: its conversation (input and output items) comes first, so the prompt
  // and the (greedy) reply equal those of the client replaying the items itself.
  const continued = await client.responses.create({ ...follow, previous_response_id: first.id, input: [output] });
  const replayedFirst = await client.responses.create({ ...follow, input: [{ role: 'user', content: 'What time is it?' },
                                                                        ...first.output, output] });
  assert.equal(continued.previous_response_id, first.id);
  assert.equal(continued.usage.input_tokens, replayedFirst.usage.input_tokens);
  assert.equal(continued.output_text, replayedFirst.output_text);
  // Continuing any stored response works the same way: here the first, plain one.
  // (Instructions are not carried over, as in OpenAI's API: sent again, the earlier turn's prompt is a prefix.)
  const next = await client.responses.create({ ...greedy, previous_response_id: plain.id, instructions: 'You are terse.',
                                               input: 'And then?', reasoning: { effort: 'none' } });
  assert.ok(next.usage.input_tokens > plain.usage.input_tokens);
  assert.ok(next.usage.input_tokens_details.cached_tokens > 0, 'the earlier turn is reused from the prefix cache');
});

await test('stored responses: retrieve, inputItems.list (paged), delete, then 404 naming the id', async () => {
  const got = await client.responses.retrieve(plain.id);
  assert.deepEqual(JSON.parse(JSON.stringify(got)), JSON.parse(JSON.stringify(plain)));  // as create answered it
  assert.equal(got.output_text, plain.output_text);
  const next = await client.responses.create({ ...greedy, previous_response_id: plain.id, input: 'And then?',
                                               reasoning: { effort: 'none' } });
  // The SDK pages through with `after` (one item a page here); its input: the continued conversation, then its own.
  const items = [];
  for await (const item of client.responses.inputItems.list(next.id, { order: 'asc', limit: 1 })) items.push(item);
  assert.equal(items.length, 2 + plain.output.length, JSON.stringify(items));
  assert.deepEqual(items[0].content, [{ type: 'input_text', text: 'Tell me a story.' }]);  // not the instructions
  const reply = items.find((i) => i.role === 'assistant');
  assert.ok(reply, JSON.stringify(items));
  assert.equal(reply.content[0].text, plain.output_text);
  assert.deepEqual(items.at(-1).content, [{ type: 'input_text', text: 'And then?' }]);
  assert.equal(new Set(items.map((i) => i.id)).size, items.length);
  const newestFirst = await client.responses.inputItems.list(next.id);
  assert.deepEqual(newestFirst.data.map((i) => i.id), items.map((i) => i.id).reverse());
  assert.equal(newestFirst.has_more, false);

  await client.responses.delete(next.id);  // typed void: {id, object: "response.deleted", deleted: true} on the wire
  const gone = (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.message.includes(next.id);
  await assert.rejects(client.responses.retrieve(next.id), gone);
  await assert.rejects(client.responses.delete(next.id), gone);
  await assert.rejects(client.responses.inputItems.list(next.id), gone);
  await assert.rejects(client.responses.create({ ...greedy, previous_response_id: next.id, input: 'x' }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
  assert.equal((await client.responses.retrieve(plain.id)).id, plain.id);  // the other stays
  const noKey = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(noKey.responses.retrieve(plain.id), (e) => e instanceof OpenAI.AuthenticationError);
  await assert.rejects(noKey.responses.delete(plain.id), (e) => e instanceof OpenAI.AuthenticationError);
});

await test('text.format json_schema: output_text parses as an instance (streaming and not), echoed in the Response', async () => {
  const schema = { type: 'object', additionalProperties: false, required: ['ok', 'mood'],
                   properties: { ok: { type: 'boolean' }, mood: { enum: ['calm', 'busy'] } } };
  const format = { type: 'json_schema', name: 'status', strict: true, schema };
  const body = { model: 'x', input: 'Status as JSON', temperature: 0, max_output_tokens: 200,
                 reasoning: { effort: 'none' }, text: { format } };
  const r = await client.responses.create(body);
  assert.equal(r.status, 'completed');
  const j = JSON.parse(r.output_text);
  assert.deepEqual(Object.keys(j), ['ok', 'mood']);
  assert.equal(typeof j.ok, 'boolean');
  assert.ok(['calm', 'busy'].includes(j.mood), r.output_text);
  assert.deepEqual(r.text.format, format);
  let streamed = '';
  for await (const e of await client.responses.create({ ...body, stream: true }))
    if (e.type === 'response.output_text.delta') streamed += e.delta;
  assert.equal(streamed, r.output_text);
});

await test('typed errors: 400 naming the param, 401 without the key', async () => {
  for (const [body, param] of [[{ input: 'x', text: { format: { type: 'xml' } } }, 'text.format'],
                               [{ input: 'x', text: { format: { type: 'json_schema', name: 's', schema: { type: 'bool' } } } }, 'text.format.schema.type'],
                               [{ input: [{ type: 'input_image', image_url: 'http://x' }] }, 'input[0].type'],
                               [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
                               [{ input: 'x', max_output_tokens: 100000 }, 'max_output_tokens'],
                               [{ input: 'x', previous_response_id: 'resp_unknown' }, 'previous_response_id']]) {
    await assert.rejects(client.responses.create({ model: 'x', ...body }),
                         (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param,
                         JSON.stringify(body));
  }
  const noKey = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(noKey.responses.create({ model: 'x', input: 'x' }),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

await test('metrics: /v1/responses counted, no 5xx', async () => {
  const t = await (await fetch(`${srv.url}/metrics`)).text();
  assert.match(t, /ds_http_requests_total\{route="\/v1\/responses",status="200"\} \d+/);
  assert.match(t, /ds_http_requests_total\{route="\/v1\/responses",status="400"\} 7/);  // the typed-errors test's six and one previous_response_id deleted
  assert.match(t, /ds_http_requests_total\{route="\/v1\/responses\/\{id\}",status="404"\} 2/);
  assert.ok(!/status="5\d\d"/.test(t), 'no 5xx answered');
});

await finish(srv);

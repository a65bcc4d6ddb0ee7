// Every dialect through the real proxy against the simulator: TTFT, time to first content
// token, inter-token latency and token counts on /metrics are checked against what the
// simulator was told (x-sim-* headers), and malformed events are counted by api and reason
// while the stream still reaches the client whole.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { describeResult, request, startProxy, startSim, stopAll, waitMetrics } from './lib/harness.mjs';

after(stopAll);

let sim;
let proxy;
before(async () => {
  sim = await startSim();
  proxy = await startProxy({ upstream: sim.port });
});

const TTFT_MS = 150;
const ITL_MS = 5;
const TOKENS = 20;
const REASONING = 4;
const PROMPT = 'hello there world'; // 3 words: the simulator's prompt token count

// path, body, the model label it gets, and what the dialect reports.
const dialects = [
  {
    api: 'openai_responses', model: 'd-responses', path: '/v1/responses',
    body: (model) => ({ model, input: PROMPT, stream: true }),
    reasoning: true, reportsReasoning: true,
  },
  {
    api: 'anthropic_messages', model: 'd-anthropic', path: '/v1/messages',
    body: (model) => ({ model, max_tokens: 1000, messages: [{ role: 'user', content: PROMPT }], stream: true }),
    reasoning: true, reportsReasoning: false,
  },
  {
    api: 'tgi_generate', model: 'unknown', path: '/generate_stream',
    body: () => ({ inputs: PROMPT, parameters: { max_new_tokens: 1000 } }),
    reasoning: false,
  },
  {
    api: 'llamacpp_completion', model: 'unknown', path: '/completion',
    body: () => ({ prompt: PROMPT, stream: true, n_predict: 1000 }),
    reasoning: false,
  },
  {
    api: 'ollama_chat', model: 'd-ollama-chat', path: '/api/chat',
    body: (model) => ({ model, messages: [{ role: 'user', content: PROMPT }] }),
    reasoning: true, reportsReasoning: false,
  },
  {
    api: 'ollama_generate', model: 'd-ollama-generate', path: '/api/generate',
    body: (model) => ({ model, prompt: PROMPT }),
    reasoning: true, reportsReasoning: false,
  },
  {
    api: 'gemini_generate', model: 'd-gemini', path: '/v1beta/models/d-gemini:streamGenerateContent?alt=sse',
    body: () => ({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }] }),
    reasoning: true, reportsReasoning: true,
  },
];

for (const d of dialects) {
  test(`${d.api}: TTFT, content TTFT, ITL and token counts match the simulator`, { timeout: 30_000 }, async () => {
    const reasoning = d.reasoning ? REASONING : 0;
    const res = await request({
      port: proxy.port, path: d.path, body: d.body(d.model),
      headers: {
        'x-sim-ttft-ms': String(TTFT_MS), 'x-sim-itl-ms': String(ITL_MS),
        'x-sim-output-tokens': String(TOKENS), 'x-sim-reasoning-tokens': String(reasoning),
      },
    });
    assert.equal(res.status, 200, describeResult(res));
    assert.equal(res.complete, true, describeResult(res));
    const labels = { api: d.api, model: d.model };
    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
    assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete', code: '200' }), 1);
    assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
    assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'input' }), 3);
    assert.equal(m.value('tokenmeter_reasoning_tokens_total', labels),
      d.reportsReasoning ? reasoning : 0);
    assert.equal(m.value('tokenmeter_parse_errors_total', { api: d.api }), 0);

    const ttft = m.histogram('tokenmeter_time_to_first_token_seconds', labels);
    assert.equal(ttft.count, 1);
    assert.ok(ttft.sum >= TTFT_MS / 1000 && ttft.sum < TTFT_MS / 1000 + 0.5, `ttft ${ttft.sum}`);
    const content = m.histogram('tokenmeter_time_to_first_content_token_seconds', labels);
    assert.equal(content.count, 1);
    // The first answer token is due `reasoning` inter-token gaps after the first thinking token;
    // the simulator never sends early (deadlines from its own receipt, after the proxy's).
    const thinking = (reasoning * ITL_MS) / 1000;
    assert.ok(content.sum >= TTFT_MS / 1000 + thinking, `content ttft ${content.sum}`);
    assert.ok(content.sum >= ttft.sum);
    assert.ok(content.sum < TTFT_MS / 1000 + thinking + 0.5, `content ttft ${content.sum}`);
    // One token per chunk: n - 1 gaps; their sum is t_last - t_first, which ends no earlier
    // than the last chunk's deadline (timers fire late, never early).
    const itl = m.histogram('tokenmeter_inter_token_latency_seconds', labels);
    assert.equal(itl.count, TOKENS - 1);
    assert.ok(ttft.sum + itl.sum >= (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000,
      `ttft ${ttft.sum} + itl sum ${itl.sum}`);
    assert.ok(itl.sum < ((TOKENS - 1) * ITL_MS) / 1000 + 0.5, `itl sum ${itl.sum}`);
  });
}

// Garbage after every content chunk: for SSE dialects a malformed data line and an event with
// an unknown type; for NDJSON a malformed line and an object of the wrong shape.
const garbage = [
  { api: 'anthropic_messages', d: dialects[1], second: 'unknown_event' },
  { api: 'openai_responses', d: dialects[0], second: 'unknown_event' },
  { api: 'gemini_generate', d: dialects[6], second: 'unknown_event' },
  { api: 'ollama_chat', d: dialects[4], second: 'unexpected_shape' },
];
for (const g of garbage) {
  test(`${g.api}: malformed events are counted by reason and forwarded; the request is still metered`, { timeout: 30_000 }, async () => {
    const tokens = 6;
    const before = await proxy.metrics();
    const labels = { api: g.api, model: g.d.model };
    const res = await request({
      port: proxy.port, path: g.d.path, body: g.d.body(g.d.model),
      headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '1', 'x-sim-output-tokens': String(tokens), 'x-sim-fail': 'garbage' },
    });
    assert.equal(res.status, 200, describeResult(res));
    assert.equal(res.complete, true);
    const text = res.body.toString();
    assert.equal(text.split('{not json').length - 1, tokens, 'the garbage reached the client');
    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >
      before.value('tokenmeter_requests_total', labels));
    const delta = (name, l) => m.value(name, l) - before.value(name, l);
    assert.equal(delta('tokenmeter_parse_errors_total', { api: g.api, reason: 'invalid_json' }), tokens);
    assert.equal(delta('tokenmeter_parse_errors_total', { api: g.api, reason: g.second }), tokens);
    assert.equal(delta('tokenmeter_tokens_total', { ...labels, type: 'output' }), tokens);
    assert.equal(delta('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  });
}

test('non-streamed bodies of every dialect are metered', { timeout: 30_000 }, async () => {
  const bodies = [
    { api: 'openai_responses', path: '/v1/responses', body: { model: 'nb-responses', input: PROMPT }, model: 'nb-responses' },
    { api: 'anthropic_messages', path: '/v1/messages', body: { model: 'nb-anthropic', max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] }, model: 'nb-anthropic' },
    { api: 'tgi_generate', path: '/generate', body: { inputs: PROMPT }, model: 'unknown' },
    { api: 'llamacpp_completion', path: '/completion', body: { prompt: PROMPT }, model: 'unknown' },
    { api: 'ollama_chat', path: '/api/chat', body: { model: 'nb-ollama', stream: false, messages: [{ role: 'user', content: PROMPT }] }, model: 'nb-ollama' },
    { api: 'gemini_generate', path: '/v1beta/models/nb-gemini:generateContent', body: { contents: [{ parts: [{ text: PROMPT }] }] }, model: 'nb-gemini' },
  ];
  for (const b of bodies) {
    const before = await proxy.metrics();
    const labels = { api: b.api, model: b.model };
    const res = await request({
      port: proxy.port, path: b.path, body: b.body,
      headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '7' },
    });
    assert.equal(res.status, 200, `${b.api}: ${describeResult(res)}`);
    assert.match(res.headers['content-type'], /application\/json/);
    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >
      before.value('tokenmeter_requests_total', labels));
    const delta = (name, l) => m.value(name, l) - before.value(name, l);
    assert.equal(delta('tokenmeter_tokens_total', { ...labels, type: 'output' }), 7, b.api);
    assert.equal(delta('tokenmeter_tokens_total', { ...labels, type: 'input' }), 3, b.api);
    assert.equal(delta('tokenmeter_parse_errors_total', { api: b.api }), 0, b.api);
  }
});

// The upstream closes mid-stream after 3 content chunks: the client's response is cut, the
// request is upstream_truncated, and the meter keeps what it read (3 tokens timed; a running
// usage total, where the dialect gives one, is reported as it stood).
for (const [d, reported] of [[dialects[1], 0], [dialects[2], 0], [dialects[4], 0], [dialects[6], 3]]) {
  test(`${d.api}: a stream cut mid-way is metered as upstream_truncated with what was read`, { timeout: 30_000 }, async () => {
    const before = await proxy.metrics();
    const labels = { api: d.api, model: d.model };
    const res = await request({
      port: proxy.port, path: d.path, body: d.body(d.model),
      headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '2', 'x-sim-output-tokens': '10', 'x-sim-fail': 'close-after:3' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.complete, false, 'the client must see the cut');
    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >
      before.value('tokenmeter_requests_total', labels));
    const delta = (name, l) => m.value(name, l) - before.value(name, l);
    assert.equal(delta('tokenmeter_requests_total', { ...labels, outcome: 'upstream_truncated' }), 1);
    assert.equal(delta('tokenmeter_reported_tokens_total', { ...labels, type: 'output' }), reported);
    // Billed as the usage record bills it: the running report, else the 3 tokens that were read.
    assert.equal(delta('tokenmeter_tokens_total', { ...labels, type: 'output' }), 3);
    const itlBefore = before.histogram('tokenmeter_inter_token_latency_seconds', labels).count;
    assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', labels).count - itlBefore, 2);
  });
}

// Byte-for-byte forwarding: the same request sent directly to simulator A and through the proxy
// (which fronts simulator B, started with the same flags) gives identical response bodies. Each
// case uses a fresh pair so that the request is the first one of both simulators (the chunk ids
// carry a per-process request counter).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, completionBody, describeResult, parseSse, request, sseText, startProxy, startSimPair,
  stopAll, expectedText, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

// Sends `req` to sim A directly and through a proxy in front of sim B; returns both results,
// the proxy and the pair. The pair and proxy are stopped by the caller (or by stopAll).
async function twin(req) {
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  const direct = await request({ port: simA.port, ...req });
  const proxied = await request({ port: proxy.port, ...req });
  return { direct, proxied, proxy, simA, simB };
}

function assertSameBytes(direct, proxied) {
  assert.equal(direct.status, 200, `direct: ${describeResult(direct)}`);
  assert.equal(proxied.status, direct.status, `proxied: ${describeResult(proxied)}`);
  assert.equal(direct.complete, true, `direct: ${describeResult(direct)}`);
  assert.equal(proxied.complete, true, `proxied: ${describeResult(proxied)}`);
  assert.equal(proxied.error, undefined);
  assert.equal(proxied.headers['content-type'], direct.headers['content-type']);
  assert.ok(direct.body.length > 0);
  assert.ok(proxied.body.equals(direct.body),
    `bodies differ: direct ${direct.body.length} bytes, proxied ${proxied.body.length} bytes\n` +
    `direct:  ${JSON.stringify(direct.body.toString().slice(0, 400))}\n` +
    `proxied: ${JSON.stringify(proxied.body.toString().slice(0, 400))}`);
}

const fast = { 'x-sim-ttft-ms': '5', 'x-sim-itl-ms': '2', 'x-sim-output-tokens': '12' };

test('streamed chat completion with include_usage is forwarded byte for byte', { timeout: 30_000 }, async () => {
  const { direct, proxied, proxy } = await twin({
    body: chatBody('bytes-chat-stream', { includeUsage: true }), headers: fast,
  });
  assertSameBytes(direct, proxied);
  const text = proxied.body.toString();
  assert.equal(sseText(text), expectedText(12));
  const events = parseSse(text);
  assert.equal(events.at(-1).data, '[DONE]');
  assert.deepEqual(events.at(-2).json.usage, { prompt_tokens: 3, completion_tokens: 12, total_tokens: 15 });
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'bytes-chat-stream' }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total',
    { model: 'bytes-chat-stream', api: 'openai_chat', outcome: 'complete', code: '200' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'bytes-chat-stream', type: 'output' }), 12);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'bytes-chat-stream', type: 'input' }), 3);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

test('streamed /v1/completions is forwarded byte for byte', { timeout: 30_000 }, async () => {
  const { direct, proxied, proxy } = await twin({
    path: '/v1/completions', body: completionBody('bytes-completions-stream'), headers: fast,
  });
  assertSameBytes(direct, proxied);
  assert.equal(sseText(proxied.body.toString()), expectedText(12));
  const m = await waitMetrics(proxy,
    (x) => x.value('tokenmeter_requests_total', { model: 'bytes-completions-stream' }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total',
    { model: 'bytes-completions-stream', api: 'openai_completions', outcome: 'complete' }), 1);
});

test('non-streamed chat completion is forwarded byte for byte', { timeout: 30_000 }, async () => {
  const { direct, proxied, proxy } = await twin({
    body: chatBody('bytes-chat-json', { stream: false }), headers: fast,
  });
  assertSameBytes(direct, proxied);
  const json = JSON.parse(proxied.body.toString());
  assert.equal(json.choices[0].message.content, expectedText(12));
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'bytes-chat-json' }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total',
    { model: 'bytes-chat-json', api: 'openai_chat', outcome: 'complete', code: '200' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'bytes-chat-json', type: 'output' }), 12);
  // Non-streamed responses have no per-token timing.
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model: 'bytes-chat-json' }).count, 0);
});

test('x-sim-fail: garbage stream is forwarded byte for byte and counted as parse errors', { timeout: 30_000 }, async () => {
  const n = 6;
  const { direct, proxied, proxy } = await twin({
    body: chatBody('bytes-garbage', { includeUsage: true }),
    headers: { ...fast, 'x-sim-output-tokens': String(n), 'x-sim-fail': 'garbage' },
  });
  assertSameBytes(direct, proxied);
  assert.ok(proxied.body.toString().includes('data: {not json'));
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'bytes-garbage' }) >= 1);
  // After every content chunk: one malformed JSON event and one unknown event, each counted.
  assert.equal(m.value('tokenmeter_parse_errors_total'), 2 * n);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'bytes-garbage', outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'bytes-garbage', type: 'output' }), n);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model: 'bytes-garbage' }).count, 1);
});

test('x-sim-continuous-usage stream is forwarded byte for byte', { timeout: 30_000 }, async () => {
  const { direct, proxied, proxy } = await twin({
    body: chatBody('bytes-continuous', { includeUsage: true }),
    headers: { ...fast, 'x-sim-continuous-usage': '1', 'x-sim-tokens-per-chunk': '3' },
  });
  assertSameBytes(direct, proxied);
  const events = parseSse(proxied.body.toString());
  assert.ok(events.filter((e) => e.json && e.json.usage && e.json.choices.length > 0).length >= 4,
    'content chunks carry running usage');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'bytes-continuous' }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'bytes-continuous', outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'bytes-continuous', type: 'output' }), 12);
  // 4 chunks of 3 tokens: n_out - 1 = 11 ITL observations.
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', { model: 'bytes-continuous' }).count, 11);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

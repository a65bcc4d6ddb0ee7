// End to end with the official openai npm SDK (pinned in package-lock.json; `npm ci` in this
// directory installs it): the SDK talks to the proxy exactly as it talks to a model server, and
// gets exactly what it gets from a twin simulator directly. Its embeddings (base64 by default,
// decoded by the SDK) are billed by the usage the server reports.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import {
  expectedText, makeTempDir, startProxy, startSimPair, stopAll, waitMetrics,
} from '../integration/lib/harness.mjs';
import { waitRecord } from '../integration/lib/usage.mjs';

after(stopAll);

const here = fileURLToPath(new URL('.', import.meta.url));

// The SDK must be installed: a missing SDK is a failure, never a skip.
async function loadOpenAI() {
  const marker = fileURLToPath(new URL('./node_modules/openai/package.json', import.meta.url));
  if (!existsSync(marker)) {
    throw new Error(`the openai npm SDK is not installed (${marker} is missing). ` +
      `Run \`npm ci\` in ${here} (scripts/test.sh does this before ctest).`);
  }
  const module = await import('openai');
  return module.default;
}

const TOKENS = 16;
const simHeaders = { 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': String(TOKENS) };

test('openai SDK: streamed and non-streamed chat completions through the proxy', { timeout: 60_000 }, async () => {
  const OpenAI = await loadOpenAI();
  const model = 'sdk-model';
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  const viaProxy = new OpenAI({ baseURL: `http://127.0.0.1:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
  const direct = new OpenAI({ baseURL: `http://127.0.0.1:${simA.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });

  const params = {
    model,
    messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'say something' }],
    stream: true,
    stream_options: { include_usage: true },
  };
  async function collect(client) {
    const stream = await client.chat.completions.create(params, { headers: simHeaders });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    return chunks;
  }
  // The first request of each simulator: identical ids and bytes.
  const reference = await collect(direct);
  const chunks = await collect(viaProxy);

  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('');
  assert.equal(text, expectedText(TOKENS));
  assert.deepEqual(chunks, reference, 'the SDK sees the same chunks through the proxy as directly');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const finish = chunks.find((c) => c.choices[0] && c.choices[0].finish_reason);
  assert.equal(finish.choices[0].finish_reason, 'stop');
  const usageChunk = chunks.at(-1);
  assert.deepEqual(usageChunk.choices, []);
  assert.deepEqual(usageChunk.usage, { prompt_tokens: 4, completion_tokens: TOKENS, total_tokens: 4 + TOKENS });

  // Non-streamed: the second request of each simulator.
  const nonStreamParams = { model, messages: params.messages };
  const completionDirect = await direct.chat.completions.create(nonStreamParams, { headers: simHeaders });
  const completion = await viaProxy.chat.completions.create(nonStreamParams, { headers: simHeaders });
  assert.deepEqual(completion, completionDirect);
  assert.equal(completion.choices[0].message.content, expectedText(TOKENS));
  assert.equal(completion.usage.completion_tokens, TOKENS);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 2);
  assert.equal(m.value('tokenmeter_requests_total', { model, api: 'openai_chat', outcome: 'complete', code: '200' }), 2);
  const ttft = m.histogram('tokenmeter_time_to_first_token_seconds', { model, api: 'openai_chat' });
  assert.equal(ttft.count, 1, 'one TTFT observation: the streamed request');
  assert.ok(ttft.sum >= 0.019 && ttft.sum < 1, `TTFT ${ttft.sum}`);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', { model }).count, TOKENS - 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model, type: 'output' }), 2 * TOKENS);
  assert.equal(m.value('tokenmeter_tokens_total', { model, type: 'input' }), 2 * 4);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

test('openai SDK: legacy completions stream and an upstream error through the proxy', { timeout: 60_000 }, async () => {
  const OpenAI = await loadOpenAI();
  const model = 'sdk-model-completions';
  const [, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });

  const stream = await client.completions.create(
    { model, prompt: 'once upon a time', stream: true, stream_options: { include_usage: true } },
    { headers: simHeaders });
  let text = '';
  let usage;
  for await (const chunk of stream) {
    if (chunk.choices[0]) text += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, expectedText(TOKENS));
  assert.equal(usage.completion_tokens, TOKENS);

  // An upstream 429 reaches the SDK as its typed error.
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] },
      { headers: { 'x-sim-fail': 'status:429' } }),
    (error) => {
      assert.equal(error.status, 429);
      assert.equal(error.constructor.name, 'RateLimitError');
      assert.equal(error.code, 'rate_limit_exceeded');
      return true;
    });

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 2);
  assert.equal(m.value('tokenmeter_requests_total', { model, api: 'openai_completions', outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, api: 'openai_chat', outcome: 'upstream_error', code: '429' }), 1);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model, api: 'openai_completions' }).count, 1);
});

test('openai SDK: embeddings.create through the proxy, billed by the usage the server reports', { timeout: 60_000 }, async () => {
  const OpenAI = await loadOpenAI();
  const model = 'sdk-embedding-model';
  const [simA, simB] = await startSimPair();
  const spool = makeTempDir('tokenmeter-e2e-embeddings-');
  const proxy = await startProxy({ upstream: simB.port, config: `usage:\n  spool_dir: ${spool}\n` });
  const viaProxy = new OpenAI({ baseURL: `http://127.0.0.1:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
  const direct = new OpenAI({ baseURL: `http://127.0.0.1:${simA.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });

  // The SDK asks for base64 and decodes it to floats itself; the second call asks for floats.
  const input = ['the first passage to embed', 'a second one'];
  const reference = await direct.embeddings.create({ model, input });
  const result = await viaProxy.embeddings.create({ model, input }, { headers: { 'x-request-id': 'sdk-emb-1' } });
  assert.deepEqual(result, reference, 'the SDK gets the same embeddings through the proxy as directly');
  assert.equal(result.data.length, 2);
  assert.equal(result.data[0].embedding.length, 8);
  assert.ok(result.data[0].embedding.every((x) => typeof x === 'number' && Number.isFinite(x)));
  assert.deepEqual(result.usage, { prompt_tokens: 8, total_tokens: 8, completion_tokens: 0, prompt_tokens_details: null });
  const floats = await viaProxy.embeddings.create({ model, input: [[1, 2, 3]], encoding_format: 'float', dimensions: 4 },
    { headers: { 'x-request-id': 'sdk-emb-2' } });
  assert.equal(floats.data[0].embedding.length, 4);
  assert.equal(floats.usage.prompt_tokens, 3);

  const first = await waitRecord(spool, 'sdk-emb-1');
  assert.equal(first.api, 'openai_embeddings');
  assert.equal(first.model, model);
  assert.equal(first.input_tokens, 8);
  assert.equal(first.input_source, 'reported');
  assert.equal(first.output_tokens, 0);
  assert.equal(first.ttft_s, null);
  assert.equal(first.outcome, 'complete');
  const second = await waitRecord(spool, 'sdk-emb-2');
  assert.equal(second.input_tokens, 3);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 2);
  assert.equal(m.value('tokenmeter_requests_total', { model, api: 'openai_embeddings', outcome: 'complete', code: '200' }), 2);
  assert.equal(m.value('tokenmeter_tokens_total', { model, api: 'openai_embeddings', type: 'input' }), 11);
  assert.equal(m.histogram('tokenmeter_request_duration_seconds', { model, api: 'openai_embeddings' }).count, 2);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model }).count, 0);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

// End to end with the official SDKs of the other dialects (pinned in package-lock.json; `npm ci`
// in this directory installs them): openai (Responses API streamed, and a chat stream that did
// not ask for usage, so the proxy injects and removes it), @anthropic-ai/sdk (messages.stream)
// and ollama (chat, streamed). Each SDK talks to the proxy as to a model server and must get
// exactly what it gets from a twin simulator directly, while /metrics counts the tokens.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { expectedText, startProxy, startSimPair, stopAll, waitMetrics } from '../integration/lib/harness.mjs';
import { loadSdk } from './lib/load_sdk.mjs';

after(stopAll);


const TOKENS = 12;
const REASONING = 3;
const simHeaders = {
  'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '3', 'x-sim-output-tokens': String(TOKENS),
  'x-sim-reasoning-tokens': String(REASONING),
};

async function twin() {
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  return { simA, proxy };
}

test('openai SDK: Responses API streamed through the proxy', { timeout: 60_000 }, async () => {
  const { default: OpenAI } = await loadSdk('openai');
  const { simA, proxy } = await twin();
  const client = (port) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
  async function collect(port) {
    const stream = await client(port).responses.create(
      { model: 'sdk-responses', input: 'say something', stream: true }, { headers: simHeaders });
    const events = [];
    for await (const event of stream) events.push(event);
    return events;
  }
  const reference = await collect(simA.port);
  const events = await collect(proxy.port);
  assert.deepEqual(events, reference);
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, expectedText(TOKENS).slice(expectedText(REASONING).length));
  const completed = events.find((e) => e.type === 'response.completed');
  assert.equal(completed.response.usage.output_tokens, TOKENS);

  const labels = { model: 'sdk-responses', api: 'openai_responses' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.equal(m.value('tokenmeter_reasoning_tokens_total', labels), REASONING);
  assert.equal(m.histogram('tokenmeter_time_to_first_content_token_seconds', labels).count, 1);
});

test('openai SDK: a chat stream without include_usage is unchanged, and metered', { timeout: 60_000 }, async () => {
  const { default: OpenAI } = await loadSdk('openai');
  const { simA, proxy } = await twin();
  const params = { model: 'sdk-injected', messages: [{ role: 'user', content: 'say something' }], stream: true };
  async function collect(port) {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
    const stream = await client.chat.completions.create(params, { headers: simHeaders });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    return chunks;
  }
  const reference = await collect(simA.port);
  const chunks = await collect(proxy.port);
  assert.deepEqual(chunks, reference);
  assert.ok(chunks.every((c) => c.choices.length > 0 && !('usage' in c)), 'no usage reached the SDK');
  const labels = { model: 'sdk-injected', api: 'openai_chat' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.equal(m.value('tokenmeter_reasoning_tokens_total', labels), REASONING);
});

test('@anthropic-ai/sdk: messages.stream through the proxy', { timeout: 60_000 }, async () => {
  const { default: Anthropic } = await loadSdk('@anthropic-ai/sdk');
  const { simA, proxy } = await twin();
  async function collect(port) {
    const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
    const stream = client.messages.stream(
      { model: 'sdk-claude', max_tokens: 100, messages: [{ role: 'user', content: 'say something' }] },
      { headers: simHeaders });
    const events = [];
    for await (const event of stream) events.push(event);
    return { events, message: await stream.finalMessage() };
  }
  const reference = await collect(simA.port);
  const got = await collect(proxy.port);
  assert.deepEqual(got.events, reference.events);
  assert.deepEqual(got.message, reference.message);
  const thinking = got.message.content.find((b) => b.type === 'thinking');
  const text = got.message.content.find((b) => b.type === 'text');
  assert.equal(thinking.thinking, expectedText(REASONING));
  assert.equal(thinking.thinking + text.text, expectedText(TOKENS));
  assert.equal(got.message.usage.output_tokens, TOKENS);

  const labels = { model: 'sdk-claude', api: 'anthropic_messages' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'input' }), 2);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', labels).count, TOKENS - 1);
});

test('ollama: chat streamed through the proxy', { timeout: 60_000 }, async () => {
  const { Ollama } = await loadSdk('ollama');
  const { simA, proxy } = await twin();
  async function collect(port) {
    const client = new Ollama({ host: `http://127.0.0.1:${port}`, headers: simHeaders });
    const stream = await client.chat({ model: 'sdk-llama', messages: [{ role: 'user', content: 'say something' }], stream: true });
    const parts = [];
    for await (const part of stream) parts.push(part);
    return parts;
  }
  const reference = await collect(simA.port);
  const parts = await collect(proxy.port);
  assert.deepEqual(parts, reference);
  assert.equal(parts.map((p) => p.message.content).join(''), expectedText(TOKENS).slice(expectedText(REASONING).length));
  assert.equal(parts.at(-1).done, true);
  assert.equal(parts.at(-1).eval_count, TOKENS);

  const labels = { model: 'sdk-llama', api: 'ollama_chat' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'input' }), 2);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', labels).count, 1);
});

// End to end with the official openai npm SDK (pinned in package-lock.json; `npm ci` in this
// directory installs it): the SDK talks to the proxy exactly as it talks to a model server, and
// gets exactly what it gets from a twin simulator directly. Its embeddings (base64 by default,
// decoded by the SDK) are billed by the usage the server reports.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
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

// A transcription server as OpenAI streams one: after `firstDeltaMs` the deltas, then the done
// event with its usage. It keeps what each request carried, to compare with what was sent.
async function startTranscriptionUpstream(firstDeltaMs) {
  const received = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      received.push({ path: req.url, contentType: req.headers['content-type'], body });
      const streamed = /name="stream"\r\n\r\ntrue\r\n/.test(body.toString('latin1'));
      if (!streamed) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ text: 'Hello there', usage: { type: 'duration', seconds: 3 } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      await sleep(firstDeltaMs);
      for (const delta of ['Hello', ' there']) {
        res.write(`data: ${JSON.stringify({ type: 'transcript.text.delta', delta })}\n\n`);
        await sleep(5);
      }
      res.end(`data: ${JSON.stringify({ type: 'transcript.text.done', text: 'Hello there', usage: {
        type: 'tokens', input_tokens: 21, input_token_details: { text_tokens: 0, audio_tokens: 21 },
        output_tokens: 2, total_tokens: 23 } })}\n\n`);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => new Promise((resolve) => server.close(resolve)));
  return { port: server.address().port, received };
}

test('openai SDK: audio.transcriptions.create({stream: true}) through the proxy: TTFT of the transcript, reported usage, upload untouched', { timeout: 60_000 }, async () => {
  const OpenAI = await loadOpenAI();
  const { toFile } = await import('openai');
  const upstream = await startTranscriptionUpstream(60);
  const spool = makeTempDir('tokenmeter-e2e-audio-');
  const proxy = await startProxy({ upstream: upstream.port, config: `usage:\n  spool_dir: ${spool}\n` });
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
  // Audio bytes that hold every byte value and the CRLFs a multipart reader might trip on.
  const audio = Buffer.concat([Buffer.from('RIFF\r\n\r\n--'), Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256))]);
  const stream = await client.audio.transcriptions.create(
    { file: await toFile(audio, 'speech.wav', { type: 'audio/wav' }), model: 'whisper-sdk', stream: true },
    { headers: { 'x-request-id': 'sdk-audio-1' } });
  const events = [];
  for await (const event of stream) events.push(event);
  assert.deepEqual(events.map((e) => e.type), ['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done']);
  assert.equal(events.at(-1).usage.input_tokens, 21);

  // The upload reached the server as the SDK sent it: its file part holds the audio byte for byte.
  const got = upstream.received[0];
  assert.equal(got.path, '/v1/audio/transcriptions');
  assert.match(got.contentType, /^multipart\/form-data; boundary=/);
  assert.ok(got.body.includes(audio), 'the audio bytes arrived unchanged');

  const record = await waitRecord(spool, 'sdk-audio-1');
  assert.equal(record.api, 'openai_transcriptions');
  assert.equal(record.model, 'whisper-sdk');
  assert.equal(record.streamed, true);
  assert.equal(record.input_tokens, 21);
  assert.equal(record.input_source, 'reported');
  assert.equal(record.output_tokens, 2);
  assert.equal(record.output_source, 'reported');
  assert.ok(record.ttft_s >= 0.055 && record.ttft_s < 5, JSON.stringify(record));

  // Not streamed, usage in seconds: the text counts (one token per text chunk: this proxy runs
  // without a tokenizer), the audio's input is unknown, never 0.
  const whole = await client.audio.transcriptions.create(
    { file: await toFile(audio, 'speech.wav', { type: 'audio/wav' }), model: 'whisper-sdk' },
    { headers: { 'x-request-id': 'sdk-audio-2' } });
  assert.equal(whole.text, 'Hello there');
  const second = await waitRecord(spool, 'sdk-audio-2');
  assert.equal(second.streamed, false);
  assert.equal(second.ttft_s, null);
  assert.equal(second.input_tokens, null);
  assert.equal(second.input_source, 'none');
  assert.equal(second.output_tokens, 1, JSON.stringify(second));
  assert.equal(second.output_source, 'counted');

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'whisper-sdk' }) >= 2);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'openai_transcriptions', outcome: 'complete', code: '200' }), 2);
  const ttft = m.histogram('tokenmeter_time_to_first_token_seconds', { api: 'openai_transcriptions' });
  assert.equal(ttft.count, 1, 'one TTFT: the streamed transcript');
  assert.ok(ttft.sum >= 0.055, `TTFT ${ttft.sum}`);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_transcriptions', type: 'input' }), 21);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

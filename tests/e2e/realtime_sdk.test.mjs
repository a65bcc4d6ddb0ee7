// End to end with the official openai npm SDK's Realtime WebSocket client (OpenAIRealtimeWS from
// openai/beta/realtime/ws, over the `ws` package; both pinned in package-lock.json): the SDK
// always speaks wss://, so it reaches the proxy's TLS listener, which tunnels to a plain `ws`
// server speaking the Realtime (beta) events. The SDK gets every event as the server sent it,
// and each response is one usage record with the usage its response.done reported.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import { makeCa, makeLeaf } from '../integration/lib/certs.mjs';
import { makeTempDir, startProxy, stopAll, waitFor, waitMetrics } from '../integration/lib/harness.mjs';
import { waitRecord } from '../integration/lib/usage.mjs';
import { loadSdk } from './lib/load_sdk.mjs';

let ca;
let leaf;
const closers = [];

before(() => {
  ca = makeCa();
  leaf = makeLeaf(ca, 'realtime-proxy', { hosts: ['localhost', '127.0.0.1'] });
});

after(async () => {
  await stopAll();
  for (const close of closers) await close();
});

// A Realtime (beta event names) server: session.created on connect, session.updated for
// session.update, and for each response.create a response with text and audio deltas.
async function startRealtimeServer(WebSocketServer) {
  const seen = { handshakes: [], clientEvents: [] };
  const server = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws, req) => {
    seen.handshakes.push({ url: req.url, headers: { ...req.headers } });
    let model = new URL(req.url, 'http://x').searchParams.get('model');
    let n = 0;
    const send = (event) => ws.send(JSON.stringify({ event_id: `ev_${Math.random()}`, ...event }));
    send({ type: 'session.created', session: { id: 'sess_1', object: 'realtime.session', model } });
    ws.on('message', (data) => {
      const event = JSON.parse(data.toString());
      seen.clientEvents.push(event);
      if (event.type === 'session.update') {
        model = event.session.model ?? model;
        send({ type: 'session.updated', session: { id: 'sess_1', object: 'realtime.session', model } });
      } else if (event.type === 'response.create') {
        const id = `resp_${++n}`;
        send({ type: 'response.created', response: { id, object: 'realtime.response', status: 'in_progress', output: [] } });
        setTimeout(() => {
          send({ type: 'response.audio_transcript.delta', response_id: id, item_id: 'item_1', output_index: 0, content_index: 0, delta: 'Bonjour, ' });
          send({ type: 'response.audio.delta', response_id: id, item_id: 'item_1', output_index: 0, content_index: 0, delta: Buffer.alloc(3000).toString('base64') });
          send({ type: 'response.text.delta', response_id: id, item_id: 'item_1', output_index: 0, content_index: 1, delta: 'le monde' });
          send({
            type: 'response.done',
            response: {
              id, object: 'realtime.response', status: 'completed', output: [],
              usage: {
                total_tokens: 257, input_tokens: 200, output_tokens: 57,
                input_token_details: { cached_tokens: 128, text_tokens: 40, audio_tokens: 160 },
                output_token_details: { text_tokens: 12, audio_tokens: 45 },
              },
            },
          });
        }, 25);
      }
    });
    ws.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => {
    for (const client of wss.clients) client.terminate();
    wss.close();
    server.close(() => resolve());
  }));
  return { port: server.address().port, seen };
}

test('OpenAIRealtimeWS through the proxy: events unchanged, one usage record per response', { timeout: 60_000 }, async () => {
  const { default: OpenAI } = await loadSdk('openai');
  const { WebSocketServer } = await loadSdk('ws');
  const { OpenAIRealtimeWS } = await import('openai/beta/realtime/ws');
  const upstream = await startRealtimeServer(WebSocketServer);
  const spool = makeTempDir('tokenmeter-realtime-sdk-');
  const proxy = await startProxy({
    upstream: upstream.port,
    config: `tls:\n  cert_file: ${leaf.cert}\n  key_file: ${leaf.key}\n` +
      `tenants:\n  source: header\n  header: x-tenant-id\nusage:\n  spool_dir: ${spool}\n`,
  });
  const client = new OpenAI({ apiKey: 'sk-e2e-realtime', baseURL: `https://127.0.0.1:${proxy.port}/v1` });
  const rt = new OpenAIRealtimeWS({
    model: 'gpt-4o-realtime-preview',
    options: { ca: readFileSync(ca.cert), headers: { 'x-request-id': 'sdk-rt', 'x-tenant-id': 'team-sdk' } },
  }, client);
  const events = [];
  const errors = [];
  rt.on('event', (event) => events.push(event));
  rt.on('error', (error) => errors.push(error));
  await new Promise((resolve, reject) => {
    rt.socket.once('open', resolve);
    rt.socket.once('error', reject);
  });
  await waitFor(() => events.find((e) => e.type === 'session.created'), { what: 'session.created' });
  rt.send({ type: 'session.update', session: { modalities: ['text', 'audio'], model: 'gpt-4o-mini-realtime-preview' } });
  await waitFor(() => events.find((e) => e.type === 'session.updated'), { what: 'session.updated' });
  const done = [];
  rt.on('response.done', (event) => done.push(event));
  rt.send({ type: 'response.create' });
  await waitFor(() => done.length === 1, { timeoutMs: 5000, what: 'the first response.done' });
  rt.send({ type: 'response.create' });
  await waitFor(() => done.length === 2, { timeoutMs: 5000, what: 'the second response.done' });

  // The SDK got what the server sent: the text of each response, and its usage.
  const text = events.filter((e) => e.type === 'response.audio_transcript.delta' || e.type === 'response.text.delta')
    .map((e) => e.delta).join('');
  assert.equal(text, 'Bonjour, le mondeBonjour, le monde');
  assert.equal(done[0].response.usage.output_tokens, 57);
  assert.deepEqual(errors, []);
  const handshake = upstream.seen.handshakes[0];
  assert.equal(handshake.url, '/v1/realtime?model=gpt-4o-realtime-preview');
  assert.equal(handshake.headers.authorization, 'Bearer sk-e2e-realtime');
  assert.equal(handshake.headers['openai-beta'], 'realtime=v1');

  for (const n of [1, 2]) {
    const record = await waitRecord(spool, `sdk-rt:${n}`);
    assert.equal(record.api, 'openai_realtime');
    assert.equal(record.model, 'gpt-4o-mini-realtime-preview', 'the model session.update named');
    assert.equal(record.tenant, 'team-sdk');
    assert.equal(record.outcome, 'complete');
    assert.equal(record.input_tokens, 200);
    assert.equal(record.output_tokens, 57);
    assert.equal(record.cached_tokens, 128);
    assert.equal(record.input_audio_tokens, 160);
    assert.equal(record.output_audio_tokens, 45);
    assert.ok(record.ttft_s > 0.02 && record.ttft_s < 5, `TTFT ${record.ttft_s}`);
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tokens_total', { api: 'openai_realtime', type: 'output' }) >= 114);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_realtime', type: 'output' }), 114);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_realtime', type: 'input' }), 400);
  assert.equal(m.value('tokenmeter_parse_errors_total', { api: 'openai_realtime' }), 0);
  rt.close();
  await waitFor(() => rt.socket.readyState === 3, { what: 'the SDK socket to close' });
});

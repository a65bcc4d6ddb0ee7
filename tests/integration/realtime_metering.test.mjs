// OpenAI Realtime sessions metered through the real proxy: a `ws` server on /v1/realtime speaking
// the Realtime events as the upstream, `ws` clients through the proxy. Each response.done is one
// usage record (request id "<x-request-id>:<n>", the model from ?model= or the session, the
// usage with its audio and cached details, TTFT from response.create to the first delta) and
// counts in tokenmeter_tokens_total{api="openai_realtime"}; bad JSON and invalid UTF-8 are
// forwarded unchanged and counted as parse errors; a session cut mid-response bills what it
// streamed; each input transcription is a record of its own (openai_realtime_transcription); the
// Responses API's WebSocket mode is metered per response.create as its SSE form is; a tunnel on
// another path is never read or billed; and through every hostile case the
// proxy stays up and a second client's session is untouched.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { WebSocket, WebSocketServer } from 'ws';

import { makeTempDir, startProxy, stopAll, waitFor, waitMetrics } from './lib/harness.mjs';
import { readRecords, waitRecord } from './lib/usage.mjs';
import { closeWsServer } from './lib/ws_server.mjs';

const MAX_MESSAGE = 256 * 1024;
const servers = [];
let upstream;
let proxy;
let spool;

// The Realtime server: answers session.update with session.updated, response.create with a
// response (created, a transcript delta, an audio delta, done with usage); the test.* events
// ask for the hostile answers.
async function startRealtimeUpstream() {
  const state = { handshakes: [], sockets: [] };
  const server = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: true });
  server.on('upgrade', (req, socket, head) => {
    state.handshakes.push({ url: req.url, headers: { ...req.headers } });
    wss.handleUpgrade(req, socket, head, (ws) => {
      state.sockets.push(ws);
      ws.on('error', () => {});
      let responses = 0;
      let model = new URL(req.url, 'http://x').searchParams.get('model') ?? 'default-model';
      const send = (event) => ws.send(JSON.stringify(event));
      send({ type: 'session.created', event_id: 'ev_0', session: { model } });
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        let event;
        try { event = JSON.parse(data.toString()); } catch { return; }
        const id = `resp_${++responses}`;
        switch (event.type) {
          case 'session.update':
            if (event.session?.model) model = event.session.model;
            send({ type: 'session.updated', session: { model } });
            break;
          case 'response.create': {
            if (req.url.startsWith('/v1/responses')) {
              // The Responses API's WebSocket mode: the events of its SSE form.
              send({ type: 'response.created', sequence_number: 0, response: { id, object: 'response', status: 'in_progress', model: event.model } });
              send({ type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hi' });
              send({ type: 'response.output_text.delta', sequence_number: 2, item_id: 'msg_1', output_index: 0, content_index: 0, delta: ' there' });
              send({
                type: 'response.completed', sequence_number: 3,
                response: { id, object: 'response', status: 'completed', model: event.model, usage: { input_tokens: 11, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 13 } },
              });
              break;
            }
            const delay = event.response?.metadata?.delay_ms ?? 0;
            send({ type: 'response.created', response: { id, status: 'in_progress' } });
            setTimeout(() => {
              send({ type: 'response.output_audio_transcript.delta', response_id: id, item_id: 'i', delta: 'Hello there' });
              send({ type: 'response.output_audio.delta', response_id: id, item_id: 'i', delta: 'AAAAAAAA'.repeat(64) });
              send({
                type: 'response.done',
                response: {
                  id, status: 'completed',
                  usage: {
                    total_tokens: 190, input_tokens: 120, output_tokens: 70,
                    input_token_details: { text_tokens: 20, audio_tokens: 100, cached_tokens: 64 },
                    output_token_details: { text_tokens: 15, audio_tokens: 55 },
                  },
                },
              });
            }, delay);
            break;
          }
          case 'input_audio_buffer.commit': {
            const item = `item_${responses}`;
            send({ type: 'input_audio_buffer.committed', previous_item_id: null, item_id: item });
            setTimeout(() => {
              send({ type: 'conversation.item.input_audio_transcription.delta', item_id: item, content_index: 0, delta: 'Bonjour' });
              send({
                type: 'conversation.item.input_audio_transcription.completed', item_id: item, content_index: 0,
                transcript: 'Bonjour',
                usage: { type: 'tokens', total_tokens: 31, input_tokens: 28, input_token_details: { text_tokens: 0, audio_tokens: 28 }, output_tokens: 3 },
              });
            }, 40);
            break;
          }
          case 'test.bad_json':
            ws.send('{"type":"response.done", this is not json');
            send({ type: 'test.after', n: 1 });
            break;
          case 'test.invalid_utf8':
            ws.send(Buffer.from([0x7b, 0x22, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false });
            send({ type: 'test.after', n: 2 });
            break;
          case 'test.huge': {
            send({ type: 'response.created', response: { id } });
            const filler = 'x'.repeat(MAX_MESSAGE - 200);
            send({ type: 'response.output_text.delta', response_id: id, delta: filler });
            send({ type: 'response.done', response: { id, status: 'completed', usage: { input_tokens: 5, output_tokens: 4000 } } });
            break;
          }
          case 'test.no_usage':
            send({ type: 'response.created', response: { id } });
            send({ type: 'response.output_text.delta', response_id: id, delta: 'Hello there, general Kenobi' });
            send({ type: 'response.done', response: { id, status: 'completed' } });
            break;
          case 'test.cut':
            send({ type: 'response.created', response: { id } });
            send({ type: 'response.output_text.delta', response_id: id, delta: 'Hello there, general Kenobi' });
            setTimeout(() => ws.terminate(), 50);
            break;
          default:
            break;
        }
      });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s = {
    state,
    port: server.address().port,
    close: () => closeWsServer(server, wss, state.sockets),
  };
  servers.push(s);
  return s;
}

// A client session; resolves once open. `seen` holds every message as text (or raw bytes).
async function openSession(path, { headers = {}, ws: options = {} } = {}) {
  const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}${path}`, { headers, ...options });
  const seen = { events: [], raw: [], close: null };
  ws.on('message', (data, isBinary) => {
    const bytes = Buffer.from(data);
    seen.raw.push(bytes);
    if (isBinary) return;
    try { seen.events.push(JSON.parse(bytes.toString())); } catch { seen.events.push({ unparsable: true }); }
  });
  ws.on('close', (code) => { seen.close = code; });
  ws.on('error', () => {});
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const send = (event) => ws.send(JSON.stringify(event));
  const waitEvent = (pred, what) => waitFor(() => seen.events.find(pred), { timeoutMs: 5000, what });
  return { ws, seen, send, waitEvent };
}

before(async () => {
  upstream = await startRealtimeUpstream();
  spool = makeTempDir('tokenmeter-realtime-');
  proxy = await startProxy({
    upstream: upstream.port,
    config: ['threads: 1', 'tenants:', '  source: header', '  header: x-tenant-id',
      'usage:', `  spool_dir: ${spool}`, 'websocket:', `  max_message_bytes: ${MAX_MESSAGE}`, ''].join('\n'),
  });
});

after(async () => {
  await stopAll();
  for (const s of servers) await s.close();
});

const realtime = (m) => m.value('tokenmeter_tokens_total', { api: 'openai_realtime', type: 'output' });

test('each response.done is one usage record with its usage, request id and TTFT', async () => {
  const session = await openSession('/v1/realtime?model=gpt-realtime', {
    headers: { 'x-request-id': 'rt-a', 'x-tenant-id': 'team-rt', Authorization: 'Bearer sk-x' },
  });
  await session.waitEvent((e) => e.type === 'session.created', 'session.created');
  // permessage-deflate was not offered upstream on a metered path: every message is readable.
  assert.equal(upstream.state.handshakes.at(-1).headers['sec-websocket-extensions'], undefined);
  assert.equal(session.ws.extensions, '');
  session.send({ type: 'response.create', response: { metadata: { delay_ms: 30 } } });
  await session.waitEvent((e) => e.type === 'response.done', 'the first response.done');
  session.send({ type: 'session.update', session: { type: 'realtime', model: 'gpt-realtime-mini' } });
  await session.waitEvent((e) => e.type === 'session.updated', 'session.updated');
  session.send({ type: 'response.create' });
  await waitFor(() => session.seen.events.filter((e) => e.type === 'response.done').length === 2,
    { timeoutMs: 5000, what: 'the second response.done' });

  const first = await waitRecord(spool, 'rt-a:1');
  assert.equal(first.api, 'openai_realtime');
  assert.equal(first.route, '/v1/realtime');
  assert.equal(first.model, 'gpt-realtime');
  assert.equal(first.tenant, 'team-rt');
  assert.equal(first.outcome, 'complete');
  assert.equal(first.streamed, true);
  assert.equal(first.input_tokens, 120);
  assert.equal(first.input_source, 'reported');
  assert.equal(first.output_tokens, 70);
  assert.equal(first.cached_tokens, 64);
  assert.equal(first.input_audio_tokens, 100);
  assert.equal(first.output_audio_tokens, 55);
  assert.ok(first.ttft_s >= 0.025 && first.ttft_s < 2, `TTFT from response.create: ${first.ttft_s}`);
  const second = await waitRecord(spool, 'rt-a:2');
  assert.equal(second.model, 'gpt-realtime-mini', 'the model session.update named');
  assert.notEqual(second.id, first.id);

  const m = await waitMetrics(proxy, (x) => realtime(x) >= 140);
  assert.ok(m.value('tokenmeter_tokens_total', { api: 'openai_realtime', type: 'input' }) >= 240);
  assert.ok(m.value('tokenmeter_time_to_first_token_seconds_count', { api: 'openai_realtime' }) >= 2);
  session.ws.close(1000);
  await waitFor(() => session.seen.close, { what: 'the close' });
  assert.equal(readRecords(spool).filter((r) => r.request_id?.startsWith('rt-a')).length, 2,
    'the session\'s end adds no record');
});

test('each input transcription is a record of its own, under the transcription model', async () => {
  const session = await openSession('/v1/realtime?model=gpt-realtime', { headers: { 'x-request-id': 'rt-tr' } });
  session.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: { model: 'gpt-4o-transcribe' } } } } });
  session.send({ type: 'input_audio_buffer.append', audio: 'AAAA' });
  session.send({ type: 'input_audio_buffer.commit' });
  await session.waitEvent((e) => e.type === 'conversation.item.input_audio_transcription.completed', 'the transcription');
  const record = await waitRecord(spool, 'rt-tr:1');
  assert.equal(record.api, 'openai_realtime_transcription');
  assert.equal(record.model, 'gpt-4o-transcribe');
  assert.equal(record.input_tokens, 28);
  assert.equal(record.input_audio_tokens, 28);
  assert.equal(record.output_tokens, 3);
  assert.ok(record.ttft_s >= 0.035 && record.ttft_s < 2, `TTFT from the commit: ${record.ttft_s}`);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tokens_total', { api: 'openai_realtime_transcription', type: 'input' }) >= 28);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_realtime_transcription', type: 'input' }), 28);
  session.ws.close(1000);
  await waitFor(() => session.seen.close, { what: 'the close' });
});

test('hostile events: forwarded unchanged, counted, the proxy and a second session unaffected', async () => {
  const bystander = await openSession('/v1/realtime?model=m2', { headers: { 'x-request-id': 'rt-by' } });
  const session = await openSession('/v1/realtime?model=m1', {
    headers: { 'x-request-id': 'rt-h' },
    ws: { skipUTF8Validation: true },
  });
  const before = await proxy.metrics();
  const invalidJson = before.value('tokenmeter_parse_errors_total', { api: 'openai_realtime', reason: 'invalid_json' });

  session.send({ type: 'test.bad_json' });
  session.send({ type: 'test.invalid_utf8' });
  await waitFor(() => session.seen.events.filter((e) => e.type === 'test.after').length === 2,
    { timeoutMs: 5000, what: 'the events after the hostile ones' });
  assert.ok(session.seen.raw.some((b) => b.toString() === '{"type":"response.done", this is not json'),
    'bad JSON reaches the client unchanged');
  assert.ok(session.seen.raw.some((b) => b.equals(Buffer.from([0x7b, 0x22, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]))),
    'invalid UTF-8 reaches the client unchanged');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_parse_errors_total',
    { api: 'openai_realtime', reason: 'invalid_json' }) >= invalidJson + 2);
  assert.equal(m.value('tokenmeter_parse_errors_total', { api: 'openai_realtime', reason: 'invalid_json' }), invalidJson + 2);

  // An event near websocket.max_message_bytes is read whole.
  session.send({ type: 'test.huge' });
  await session.waitEvent((e) => e.type === 'response.done', 'the huge response');
  const huge = await waitRecord(spool, 'rt-h:1');
  assert.equal(huge.output_tokens, 4000);

  // response.done without usage: the deltas counted (no tokenizer in this proxy: one per delta).
  session.send({ type: 'test.no_usage' });
  const noUsage = await waitRecord(spool, 'rt-h:2');
  assert.equal(noUsage.outcome, 'complete');
  assert.equal(noUsage.output_tokens, 1);
  assert.equal(noUsage.output_source, 'counted');
  assert.equal(noUsage.input_tokens, null);

  // The bystander's session went on untouched throughout.
  bystander.send({ type: 'response.create' });
  await bystander.waitEvent((e) => e.type === 'response.done', 'the bystander\'s response');
  const other = await waitRecord(spool, 'rt-by:1');
  assert.equal(other.model, 'm2');
  assert.equal(other.output_tokens, 70);
  assert.equal(bystander.seen.events.filter((e) => e.unparsable).length, 0);

  // A client's text frame that is not UTF-8 goes up unchanged: the upstream's own `ws` refuses
  // it with 1007, which comes back to the client; the proxy counts it and carries on.
  session.ws.send(Buffer.from([0x7b, 0xc3, 0x28, 0x7d]), { binary: false });
  await waitFor(() => session.seen.close, { timeoutMs: 5000, what: 'the upstream\'s close' });
  assert.equal(session.seen.close, 1007);
  await waitMetrics(proxy, (x) => x.value('tokenmeter_parse_errors_total',
    { api: 'openai_realtime', reason: 'invalid_json' }) === invalidJson + 3);
  assert.equal((await proxy.metrics()).value('tokenmeter_parse_errors_total',
    { api: 'openai_realtime', reason: 'invalid_json' }), invalidJson + 3);
  bystander.send({ type: 'response.create' });
  await waitFor(() => bystander.seen.events.filter((e) => e.type === 'response.done').length === 2,
    { timeoutMs: 5000, what: 'the bystander\'s second response' });
  await waitRecord(spool, 'rt-by:2');
  bystander.ws.close(1000);
  await waitFor(() => bystander.seen.close, { what: 'the bystander\'s close' });
});

test('a session cut mid-response bills what it streamed, as a cut stream', async () => {
  const session = await openSession('/v1/realtime?model=cut-model', { headers: { 'x-request-id': 'rt-cut' } });
  session.send({ type: 'test.cut' });
  await waitFor(() => session.seen.close, { timeoutMs: 5000, what: 'the tunnel to end' });
  const record = await waitRecord(spool, 'rt-cut:1');
  assert.equal(record.outcome, 'upstream_truncated');
  assert.equal(record.output_tokens, 1);
  assert.equal(record.output_source, 'counted');
  assert.equal(record.model, 'cut-model');
});

test('the Responses API over a WebSocket: each response.create is one request, metered as its SSE form', async () => {
  const session = await openSession('/v1/responses', { headers: { 'x-request-id': 'rs-ws' } });
  session.send({ type: 'response.create', model: 'gpt-5', input: 'Say hi', max_output_tokens: 20 });
  await session.waitEvent((e) => e.type === 'response.completed', 'response.completed');
  session.send({ type: 'response.create', model: 'gpt-5-mini', input: 'Again' });
  await waitFor(() => session.seen.events.filter((e) => e.type === 'response.completed').length === 2,
    { timeoutMs: 5000, what: 'the second response.completed' });
  for (const [n, model] of [[1, 'gpt-5'], [2, 'gpt-5-mini']]) {
    const record = await waitRecord(spool, `rs-ws:${n}`);
    assert.equal(record.api, 'openai_responses');
    assert.equal(record.route, '/v1/responses');
    assert.equal(record.model, model);
    assert.equal(record.input_tokens, 11);
    assert.equal(record.output_tokens, 2);
    assert.equal(record.outcome, 'complete');
    assert.ok(record.ttft_s !== null && record.ttft_s >= 0);
  }
  session.ws.close(1000);
  await waitFor(() => session.seen.close, { what: 'the close' });
});

test('a tunnel on a path that is not metered is never read or billed', async () => {
  const beforeRecords = readRecords(spool).length;
  const before = await proxy.metrics();
  const parseErrors = before.value('tokenmeter_parse_errors_total', { api: 'openai_realtime' });
  const output = realtime(before);
  const session = await openSession('/not-metered/realtime?model=x', { headers: { 'x-request-id': 'rt-none' } });
  session.send({ type: 'response.create' });
  session.send({ type: 'test.bad_json' });
  await session.waitEvent((e) => e.type === 'response.done', 'the response');
  await session.waitEvent((e) => e.type === 'test.after', 'the bad JSON behind it');
  session.ws.close(1000);
  await waitFor(() => session.seen.close, { what: 'the close' });
  // The extension offer goes up unchanged where nothing is read.
  assert.match(upstream.state.handshakes.at(-1).headers['sec-websocket-extensions'] ?? '', /permessage-deflate/);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const after = await proxy.metrics();
  assert.equal(readRecords(spool).length, beforeRecords);
  assert.equal(after.value('tokenmeter_parse_errors_total', { api: 'openai_realtime' }), parseErrors);
  assert.equal(realtime(after), output);
});

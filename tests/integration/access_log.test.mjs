// The access log of the real proxy: one record per request, every field at the top level of a
// JSON object (log.format: json) or as escaped key=value pairs (text), whatever the client put
// in the model name, the path or the tenant header.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { chatBody, rawExchange, request, startProxy, stopAll, waitFor, waitMetrics } from './lib/harness.mjs';

after(stopAll);

// Each value chosen to end a line, close a field or the JSON object, and start a forged record.
const MODEL = 'evil"}\n{"time":"x","level":"critical","msg":"forged"}\r\u2028 model=x';
// A tenant name may hold spaces, '=', braces and UTF-8 (the unit tests send bytes that are not).
const TENANT = 'acme level=critical} {msg=forged \u00ff';
const PATH = '/hostile/"},{"msg":"forged"}=x\\y';
const PROMPT_TOKENS = 11;
const CHUNKS = ['Hello', ' there', ' world'];

// The upstream: any POST is answered with a stream of CHUNKS and a usage report.
function sseBody() {
  const lines = CHUNKS.map((text) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`);
  lines.push(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: CHUNKS.length } })}\n\n`);
  lines.push('data: [DONE]\n\n');
  return lines.join('');
}

async function startUpstream() {
  const body = sseBody();
  const traceparents = [];
  const server = http.createServer((req, res) => {
    traceparents.push(req.headers.traceparent);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  return { port: server.address().port, body, traceparents };
}

function config(format) {
  return [
    'log:',
    `  format: ${format}`,
    '  access_log: true',
    'tenants:',
    '  source: header',
    '  header: x-tenant-id',
    'routes:',
    '  - path: "/hostile/*"',
    '    api: openai_chat',
    '',
  ].join('\n');
}

async function hostileRequest(proxy) {
  const body = JSON.stringify({
    model: MODEL, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'hi' }],
  });
  const res = await request({
    port: proxy.port, path: `${PATH}?key=sk-secret`, body,
    headers: { 'x-tenant-id': TENANT, 'x-request-id': 'req-42' },
  });
  assert.equal(res.status, 200, res.error?.message);
  assert.ok(res.complete);
  return { res, bodyBytes: Buffer.byteLength(body) };
}

const accessLines = (stderr) => stderr.split('\n').filter((l) => l.includes('access'));

test('json access log: one object per request, every field at the top level', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const proxy = await startProxy({ upstream: upstream.port, config: config('json') });
  const { res, bodyBytes } = await hostileRequest(proxy);
  await waitFor(() => accessLines(proxy.child.stderrText).length >= 1, { what: 'the access record' });

  const lines = proxy.child.stderrText.split('\n').filter((l) => l !== '');
  const records = lines.map((l) => JSON.parse(l));  // every line is one JSON object
  const access = records.filter((r) => r.msg === 'access');
  assert.equal(access.length, 1, 'one request, one record');
  assert.ok(!records.some((r) => r.msg === 'forged' || r.level === 'critical'), 'no forged record');
  const r = access[0];
  assert.deepEqual(Object.keys(r), ['time', 'level', 'msg', 'method', 'path', 'status', 'outcome',
    'api', 'model', 'tenant', 'request_id', 'trace_id', 'span_id', 'client', 'upstream', 'ttft_s',
    'duration_s',
    'input_tokens', 'output_tokens', 'bytes_in', 'bytes_out']);
  assert.match(r.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  assert.equal(r.level, 'info');
  assert.equal(r.method, 'POST');
  assert.equal(r.path, PATH, 'the path exactly, without its query');
  assert.equal(r.status, 200);
  assert.equal(r.outcome, 'complete');
  assert.equal(r.api, 'openai_chat');
  assert.equal(r.model, MODEL);
  assert.equal(r.tenant, TENANT);
  assert.equal(r.request_id, 'req-42');
  // No traceparent came: the proxy started a trace, and its span is the upstream's parent.
  assert.match(r.trace_id, /^[0-9a-f]{32}$/);
  assert.match(r.span_id, /^[0-9a-f]{16}$/);
  assert.equal(upstream.traceparents.at(-1), `00-${r.trace_id}-${r.span_id}-01`);
  assert.equal(r.client, '127.0.0.1');
  assert.equal(r.upstream, `127.0.0.1:${upstream.port}`);
  assert.equal(typeof r.ttft_s, 'number');
  assert.ok(r.ttft_s >= 0 && r.ttft_s <= r.duration_s, `ttft ${r.ttft_s} within ${r.duration_s}`);
  assert.ok(r.duration_s > 0 && r.duration_s < 10);
  assert.equal(r.input_tokens, PROMPT_TOKENS);
  assert.equal(r.output_tokens, CHUNKS.length);
  assert.equal(r.bytes_in, bodyBytes);
  assert.equal(r.bytes_out, Buffer.byteLength(upstream.body));
  assert.equal(r.bytes_out, res.bytes, 'nothing filtered: the client got what the upstream sent');
  assert.ok(!proxy.child.stderrText.includes('sk-secret'), 'the query is not logged');

  // The counts are the billing rule's: the metrics say the same.
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tokens_total', { type: 'output', source: 'reported' }) >= 1);
  assert.equal(m.value('tokenmeter_tokens_total', { type: 'input', source: 'reported' }), r.input_tokens);
  assert.equal(m.value('tokenmeter_tokens_total', { type: 'output', source: 'reported' }), r.output_tokens);
});

test('text access log: one line, values quoted and escaped', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const proxy = await startProxy({ upstream: upstream.port, config: config('text') });
  const { bodyBytes } = await hostileRequest(proxy);
  await waitFor(() => accessLines(proxy.child.stderrText).some((l) => l.includes('bytes_out=')),
    { what: 'the access record' });
  const lines = proxy.child.stderrText.split('\n');
  const access = lines.filter((l) => / info access method=/.test(l));
  assert.equal(access.length, 1, proxy.child.stderrText);
  assert.ok(!lines.some((l) => l.startsWith('{"time"') || l.includes('"msg":"forged"') && !l.includes('access')),
    'nothing forged a line');
  const line = access[0];
  assert.ok(!/[\r\u2028]/.test(line));
  assert.ok(line.includes(`method=POST path="/hostile/\\"},{\\"msg\\":\\"forged\\"}=x\\\\y" status=200 `), line);
  assert.ok(line.includes(' model="evil\\"}\\x0a{\\"time\\":\\"x\\",\\"level\\":\\"critical\\",\\"msg\\":\\"forged\\"}\\x0d\\u2028 model=x" '), line);
  assert.ok(/ tenant="acme level=critical\} \{msg=forged \u00ff" request_id=req-42 trace_id=[0-9a-f]{32} span_id=[0-9a-f]{16} client=127\.0\.0\.1 /.test(line), line);
  assert.ok(line.includes(`upstream=127.0.0.1:${upstream.port} ttft_s=`), line);
  assert.ok(line.includes(` input_tokens=${PROMPT_TOKENS} output_tokens=${CHUNKS.length} bytes_in=${bodyBytes} bytes_out=${Buffer.byteLength(upstream.body)}`), line);
});

test('requests the proxy refuses before forwarding get an access record too', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const proxy = await startProxy({
    upstream: upstream.port,
    config: config('json') + 'limits:\n  max_request_body_bytes: 100\n',
  });
  // Too large: the head was read, the body refused (413).
  const big = await request({
    port: proxy.port, path: '/v1/chat/completions?key=sk-secret',
    body: chatBody('refused-model', { content: 'x'.repeat(500) }),
    headers: { 'x-request-id': 'req-413' },
  });
  assert.equal(big.status, 413);
  // Not HTTP at all: no head to read (400).
  const garbage = (await rawExchange(proxy.port, Buffer.from('\x01\x02 not http\r\n\r\n'))).response;
  assert.equal(garbage.status, 400);
  await waitFor(() => accessLines(proxy.child.stderrText).length >= 2, { what: 'two access records' });

  const records = proxy.child.stderrText.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    .filter((r) => r.msg === 'access');
  assert.equal(records.length, 2, proxy.child.stderrText);
  const [tooLarge, unreadable] = records;
  assert.equal(tooLarge.method, 'POST');
  assert.equal(tooLarge.path, '/v1/chat/completions');
  assert.equal(tooLarge.status, 413);
  assert.equal(tooLarge.outcome, 'rejected');
  assert.equal(tooLarge.request_id, 'req-413');
  assert.equal(tooLarge.client, '127.0.0.1');
  assert.equal(tooLarge.upstream, null, 'never forwarded');
  assert.equal(tooLarge.input_tokens, 0, 'not served: nothing billed');
  assert.equal(tooLarge.output_tokens, 0);
  assert.equal(tooLarge.bytes_out, null);
  assert.equal(unreadable.status, 400);
  assert.equal(unreadable.method, null, 'no head was read');
  assert.equal(unreadable.path, null);
  assert.equal(unreadable.client, '127.0.0.1');
  assert.equal(upstream.traceparents.length, 0, 'neither reached the upstream');
  assert.ok(!proxy.child.stderrText.includes('sk-secret'), 'the query is not logged');
});

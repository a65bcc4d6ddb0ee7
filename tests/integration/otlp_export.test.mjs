// OTLP/HTTP export through the real proxy: a receiver on 127.0.0.1 decodes what the proxy posts
// with the official opentelemetry-proto definitions (the protobufjs code generated from them
// that @opentelemetry/otlp-transformer ships) and checks the spans' GenAI attributes against
// the traceparent the upstream received, and the GenAI metrics, over http and https. Then the
// faults: a receiver that is down, slow, or answers 429 with Retry-After; the proxy keeps
// answering and counts what it drops. And export stays off without an otel section whatever
// the environment says.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createRequire } from 'node:module';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import { closedPort, request, startProxy, stopAll, waitFor, waitMetrics, writeTempFile } from './lib/harness.mjs';

const require = createRequire(import.meta.url);
const otlp = require('@opentelemetry/otlp-transformer/build/src/generated/root.js').opentelemetry.proto;
const TraceRequest = otlp.collector.trace.v1.ExportTraceServiceRequest;
const MetricsRequest = otlp.collector.metrics.v1.ExportMetricsServiceRequest;

after(stopAll);

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const VALID = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

// An upstream that keeps each traceparent and streams two tokens 20 ms apart with a usage report.
async function startUpstream() {
  const seen = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push(req.headers.traceparent);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // As vLLM writes them: the model that served it, before "choices".
      const chunk = (text) => `data: ${JSON.stringify({ model: 'llama-served', choices: [{ index: 0, delta: { content: text } }] })}\n\n`;
      res.write(chunk('Hello'));
      setTimeout(() => {
        const usage = { prompt_tokens: 30, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 16 } };
        res.end(`${chunk(' world')}data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage })}\n\ndata: [DONE]\n\n`);
      }, 20);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  return { port: server.address().port, seen };
}

// An OTLP/HTTP receiver. `answer(req, kind)` may return { status, headers, delayMs }; the
// default accepts. Every post is kept with its decoded body.
async function startReceiver(answer = () => ({ status: 200 }), tls = null) {
  const posts = [];
  const handler = (req, res) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      const raw = Buffer.concat(parts);
      const kind = req.url.endsWith('/v1/traces') ? 'traces' : req.url.endsWith('/v1/metrics') ? 'metrics' : 'other';
      const type = req.headers['content-type'];
      let decoded;
      if (type === 'application/json') {
        decoded = JSON.parse(raw.toString());
      } else if (kind === 'traces') {
        decoded = TraceRequest.toObject(TraceRequest.decode(raw), { longs: String, bytes: String });
      } else if (kind === 'metrics') {
        decoded = MetricsRequest.toObject(MetricsRequest.decode(raw), { longs: String });
      }
      posts.push({ url: req.url, kind, type, headers: req.headers, decoded });
      const a = answer(req, kind, posts.length) || { status: 200 };
      const reply = () => {
        res.writeHead(a.status, { 'content-type': type || 'application/x-protobuf', ...(a.headers || {}) });
        res.end();
      };
      if (a.delayMs) setTimeout(reply, a.delayMs); else reply();
    });
  };
  const server = tls
    ? https.createServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, handler)
    : http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => { server.closeAllConnections(); server.close(); });
  return { port: server.address().port, posts, server };
}

const body = JSON.stringify({
  model: 'llama', stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'hi' }],
});

async function send(proxy, headers = {}) {
  const res = await request({ port: proxy.port, body, headers, timeoutMs: 10_000 });
  assert.equal(res.status, 200, res.error?.message);
  assert.ok(res.complete);
  return res;
}

const b64hex = (b64) => Buffer.from(b64, 'base64').toString('hex');

function attributesOf(list) {
  const out = {};
  for (const kv of list || []) {
    const v = kv.value;
    out[kv.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue ?? v.boolValue);
  }
  return out;
}

function spansOf(posts) {
  return posts.filter((p) => p.kind === 'traces')
    .flatMap((p) => p.decoded.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: attributesOf(rs.resource?.attributes) })))));
}

function lastMetrics(posts) {
  const m = posts.filter((p) => p.kind === 'metrics').at(-1);
  if (!m) return new Map();
  const out = new Map();
  for (const rm of m.decoded.resourceMetrics) {
    for (const sm of rm.scopeMetrics) {
      for (const metric of sm.metrics) out.set(metric.name, metric);
    }
  }
  return out;
}

test('protobuf: sampled spans carry the GenAI conventions and the trace the upstream saw; metrics are the GenAI histograms', { timeout: 60_000 }, async () => {
  const upstream = await startUpstream();
  const receiver = await startReceiver();
  const headers = writeTempFile('otlp-headers', 'Authorization: Bearer otlp-secret\n# a comment\nX-Tenant: blue\n');
  const proxy = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${receiver.port}\n  export_interval: 300ms\n  headers_file: ${headers}\n`,
  });

  await send(proxy, { traceparent: `00-${TRACE}-${PARENT}-01` });
  await send(proxy, { traceparent: `00-${TRACE}-${PARENT}-00` });  // not sampled: no span
  await send(proxy);  // a new trace, sampled (sampling_ratio 1)
  assert.equal(upstream.seen.length, 3);
  const sent = upstream.seen.map((tp) => VALID.exec(tp));
  assert.ok(sent.every(Boolean), JSON.stringify(upstream.seen));

  await waitFor(() => spansOf(receiver.posts).length >= 2 && lastMetrics(receiver.posts).get('gen_ai.server.request.duration')
    ?.histogram.dataPoints.reduce((n, p) => n + Number(p.count), 0) >= 3, { timeoutMs: 10_000, what: 'two spans and three requests in the metrics' });
  const spans = spansOf(receiver.posts);
  assert.equal(spans.length, 2, 'only the sampled requests');
  for (const p of receiver.posts) {
    assert.equal(p.type, 'application/x-protobuf');
    assert.equal(p.headers.authorization, 'Bearer otlp-secret');
    assert.equal(p.headers['x-tenant'], 'blue');
  }

  // The first span is the client's trace, with the span id the upstream got as its parent.
  const first = spans.find((s) => b64hex(s.traceId) === TRACE);
  assert.ok(first, 'the client\'s trace was exported');
  assert.equal(b64hex(first.spanId), sent[0][2]);
  assert.equal(b64hex(first.parentSpanId), PARENT);
  assert.equal(first.name, 'chat llama');
  assert.equal(first.kind, otlp.trace.v1.Span.SpanKind.SPAN_KIND_CLIENT);
  const a = attributesOf(first.attributes);
  assert.equal(a['gen_ai.operation.name'], 'chat');
  assert.equal(a['gen_ai.provider.name'], 'openai');
  assert.equal(a['gen_ai.request.model'], 'llama');
  assert.equal(a['gen_ai.response.model'], 'llama-served');
  assert.equal(a['gen_ai.usage.input_tokens'], 30);
  assert.equal(a['gen_ai.usage.output_tokens'], 2);
  assert.equal(a['gen_ai.usage.cache_read.input_tokens'], 16);
  assert.equal(a['server.address'], '127.0.0.1');
  assert.equal(a['server.port'], upstream.port);
  assert.equal(a['error.type'], undefined);
  assert.equal(first.resource['service.name'], 'tokenmeter');
  const start = BigInt(first.startTimeUnixNano);
  const end = BigInt(first.endTimeUnixNano);
  assert.ok(end > start && end - start >= 20_000_000n, `span lasts the stream: ${end - start} ns`);
  assert.ok(Math.abs(Number(end / 1_000_000n) - Date.now()) < 60_000, 'wall-clock times');
  assert.equal(first.events.length, 1);
  assert.equal(first.events[0].name, 'gen_ai.first_token');
  const firstToken = BigInt(first.events[0].timeUnixNano);
  assert.ok(firstToken >= start && firstToken <= end);

  // The new trace: its id is the one the upstream received, a root span.
  const fresh = spans.find((s) => b64hex(s.traceId) === sent[2][1]);
  assert.ok(fresh, 'the proxy-started trace was exported');
  assert.equal(b64hex(fresh.spanId), sent[2][2]);
  assert.ok(!fresh.parentSpanId || fresh.parentSpanId.length === 0);

  const metrics = lastMetrics(receiver.posts);
  const cumulative = otlp.metrics.v1.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE;
  for (const [name, unit] of [['gen_ai.server.time_to_first_token', 's'], ['gen_ai.server.time_per_output_token', 's'],
    ['gen_ai.server.request.duration', 's'], ['gen_ai.client.token.usage', '{token}']]) {
    const m = metrics.get(name);
    assert.ok(m, `${name} exported`);
    assert.equal(m.unit, unit, name);
    assert.equal(m.histogram.aggregationTemporality, cumulative, name);
  }
  const ttft = metrics.get('gen_ai.server.time_to_first_token');
  assert.deepEqual(ttft.histogram.dataPoints[0].explicitBounds,
    [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]);
  assert.equal(Number(ttft.histogram.dataPoints[0].count), 3, 'every request, sampled or not');
  const tpot = metrics.get('gen_ai.server.time_per_output_token').histogram.dataPoints[0];
  assert.ok(tpot.sum >= 0.015 * 3, `TPOT about 20 ms each: ${tpot.sum}`);
  const tokens = metrics.get('gen_ai.client.token.usage').histogram.dataPoints;
  const byType = Object.fromEntries(tokens.map((p) => [attributesOf(p.attributes)['gen_ai.token.type'], p]));
  assert.equal(byType.input.sum, 90);
  assert.equal(byType.output.sum, 6);
  assert.equal(attributesOf(byType.input.attributes)['gen_ai.request.model'], 'llama');

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_otel_exported_total', { signal: 'traces' }) >= 2, 5000);
  assert.equal(m.value('tokenmeter_otel_dropped_total'), 0);
});

test('json: OTLP/JSON with hex ids', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const receiver = await startReceiver();
  const proxy = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${receiver.port}/\n  encoding: json\n  export_interval: 200ms\n`,
  });
  await send(proxy, { traceparent: `00-${TRACE}-${PARENT}-01` });
  await waitFor(() => spansOf(receiver.posts).length >= 1 && lastMetrics(receiver.posts).size > 0, { timeoutMs: 10_000, what: 'a span and metrics' });
  const [s] = spansOf(receiver.posts);
  assert.equal(receiver.posts[0].type, 'application/json');
  assert.equal(s.traceId, TRACE);
  assert.equal(s.spanId, VALID.exec(upstream.seen[0])[2]);
  assert.equal(s.parentSpanId, PARENT);
  assert.equal(typeof s.startTimeUnixNano, 'string');
  assert.equal(attributesOf(s.attributes)['gen_ai.usage.output_tokens'], 2);
  const d = lastMetrics(receiver.posts).get('gen_ai.server.request.duration');
  assert.equal(d.histogram.dataPoints[0].count, '1');
});

test('https: a collector whose certificate otel.ca_file trusts gets the spans', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const ca = makeCa('otlp-test-ca');
  const receiver = await startReceiver(undefined, makeLeaf(ca, 'collector'));
  const proxy = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: https://localhost:${receiver.port}\n  ca_file: ${ca.cert}\n  export_interval: 200ms\n`,
  });
  await send(proxy, { traceparent: `00-${TRACE}-${PARENT}-01` });
  await waitFor(() => spansOf(receiver.posts).length >= 1, { timeoutMs: 10_000, what: 'a span over https' });
  assert.equal(b64hex(spansOf(receiver.posts)[0].spanId), VALID.exec(upstream.seen[0])[2]);
});

test('no otel section: OTEL_EXPORTER_OTLP_ENDPOINT alone exports nothing; with the section it fills the endpoint', { timeout: 30_000 }, async () => {
  const upstream = await startUpstream();
  const receiver = await startReceiver();
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${receiver.port}`;
  process.env.OTEL_EXPORTER_OTLP_HEADERS = 'x-api-key=k%20ey';
  let off;
  let on;
  try {
    off = await startProxy({ upstream: upstream.port, config: 'log:\n  level: info\n' });
    on = await startProxy({ upstream: upstream.port, config: 'otel:\n  export_interval: 200ms\n', name: 'proxy-env' });
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_HEADERS;
  }
  await send(off);
  await send(on);
  await waitFor(() => spansOf(receiver.posts).length >= 1, { timeoutMs: 10_000, what: 'the span of the proxy with the section' });
  await new Promise((r) => setTimeout(r, 500));
  const spans = spansOf(receiver.posts);
  assert.equal(spans.length, 1, 'only the proxy with an otel section exports');
  assert.equal(b64hex(spans[0].spanId), VALID.exec(upstream.seen[1])[2]);
  assert.equal(receiver.posts[0].headers['x-api-key'], 'k ey');
  const text = await off.metricsText();
  assert.ok(!text.includes('tokenmeter_otel_'), 'no exporter, no exporter metrics');
});

test('faults: a receiver down, slow, or answering 429 with Retry-After; the proxy keeps answering and counts the drops', { timeout: 90_000 }, async () => {
  const upstream = await startUpstream();

  // Down: nothing listens. Every request is still answered; the export's retries run out.
  const down = await closedPort();
  const a = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${down}\n  export_interval: 100ms\n  max_queue: 4\n`,
    name: 'proxy-down',
  });
  for (let i = 0; i < 6; i += 1) await send(a, { traceparent: `00-${TRACE}-${PARENT}-01` });
  let m = await waitMetrics(a, (x) => x.value('tokenmeter_otel_dropped_total', { signal: 'traces' }) >= 1, 20_000);
  assert.equal(m.value('tokenmeter_otel_exported_total'), 0);

  // Slow: the collector answers after the request timeout; requests are not held up by it.
  const slow = await startReceiver(() => ({ status: 200, delayMs: 3000 }));
  const b = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${slow.port}\n  export_interval: 100ms\n  request_timeout: 300ms\n  max_queue: 2\n`,
    name: 'proxy-slow',
  });
  const started = Date.now();
  for (let i = 0; i < 8; i += 1) await send(b, { traceparent: `00-${TRACE}-${PARENT}-01` });
  assert.ok(Date.now() - started < 5000, `eight requests answered while the collector stalls: ${Date.now() - started} ms`);
  m = await waitMetrics(b, (x) => x.value('tokenmeter_otel_dropped_total') >= 1, 20_000);
  assert.ok(m.value('tokenmeter_otel_dropped_total') >= 1);

  // 429 with Retry-After: 1, twice, then accepted: the retry waits as told and delivers.
  const times = [];
  const limited = await startReceiver((req, kind) => {
    if (kind !== 'traces') return { status: 200 };
    times.push(Date.now());
    return times.length <= 2 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 };
  });
  const c = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${limited.port}\n  export_interval: 100ms\n`,
    name: 'proxy-429',
  });
  await send(c, { traceparent: `00-${TRACE}-${PARENT}-01` });
  m = await waitMetrics(c, (x) => x.value('tokenmeter_otel_exported_total', { signal: 'traces' }) >= 1, 20_000);
  assert.equal(times.length, 3);
  assert.ok(times[1] - times[0] >= 900 && times[2] - times[1] >= 900, `Retry-After honoured: ${times[1] - times[0]}, ${times[2] - times[1]} ms`);
  assert.equal(m.value('tokenmeter_otel_dropped_total', { signal: 'traces' }), 0);
  const bodies = limited.posts.filter((p) => p.kind === 'traces').map((p) => JSON.stringify(p.decoded));
  assert.equal(new Set(bodies).size, 1, 'the same batch each time');

  // A status the specification does not retry (400) is dropped at once and counted.
  const refusing = await startReceiver(() => ({ status: 400 }));
  const d = await startProxy({
    upstream: upstream.port,
    config: `otel:\n  endpoint: http://127.0.0.1:${refusing.port}\n  export_interval: 100ms\n`,
    name: 'proxy-400',
  });
  await send(d, { traceparent: `00-${TRACE}-${PARENT}-01` });
  m = await waitMetrics(d, (x) => x.value('tokenmeter_otel_dropped_total', { signal: 'traces', reason: 'rejected' }) >= 1, 10_000);
  assert.equal(refusing.posts.filter((p) => p.kind === 'traces').length, 1, 'not retried');
});

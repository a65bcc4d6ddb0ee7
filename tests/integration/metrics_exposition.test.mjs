// /metrics as a scraper meets it: the Prometheus text format unless OpenMetrics is asked for,
// gzip when it is accepted, tokenmeter_build_info with the git revision, the counter families
// of a fixed label set present at 0 from start-up, and a real Prometheus (Debian package
// `prometheus`) scraping both formats.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { gunzipSync } from 'node:zlib';

import { chatBody, request, startProxy, startSim, stopAll, waitMetrics } from './lib/harness.mjs';
import { startPrometheus } from './lib/prometheus.mjs';

after(stopAll);

const OPENMETRICS = 'application/openmetrics-text; version=1.0.0; charset=utf-8';
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
// What Prometheus 2.x sends.
const PROMETHEUS_ACCEPT = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';

const scrape = (proxy, headers = {}) => request({ port: proxy.adminPort, method: 'GET', path: '/metrics', headers, timeoutMs: 5000 });

test('a fresh proxy exposes its fixed-reason counters at 0 and its build revision', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const m = await proxy.metrics();
  for (const reason of ['connect_refused', 'connect_timeout', 'timeout', 'connection_closed', 'bad_response',
    'pool_exhausted', 'tls', 'resolve_failed', 'connect_failed', 'io_error', 'idle_timeout', 'truncated']) {
    assert.equal(m.value('tokenmeter_upstream_errors_total', { reason }), 0, reason);
  }
  for (const phase of ['begin', 'admission', 'request_sent', 'answered_locally', 'response_head', 'body',
    'seal', 'end', 'durable_wait', 'unforwarded', 'upstream_error', 'tunnel']) {
    assert.equal(m.value('tokenmeter_metering_failures_total', { phase }), 0, phase);
  }
  for (const api of ['openai_chat', 'openai_completions', 'openai_responses', 'anthropic_messages', 'tgi_generate',
    'llamacpp_completion', 'ollama_chat', 'ollama_generate', 'gemini_generate', 'openai_embeddings', 'rerank', 'score',
    'classify', 'pooling', 'openai_moderations', 'openai_transcriptions', 'openai_translations', 'openai_speech',
    'openai_realtime', 'openai_realtime_transcription']) {
    for (const reason of ['invalid_json', 'unexpected_shape', 'unknown_event', 'oversized_event', 'truncated_event']) {
      const series = m.select('tokenmeter_parse_errors_total', { api, reason });
      assert.equal(series.length, 1, `${api} ${reason}`);
      assert.equal(series[0].value, 0, `${api} ${reason}`);
    }
  }
  const [info] = m.select('tokenmeter_build_info');
  assert.equal(info.value, 1);
  assert.match(info.labels.revision, /^([0-9a-f]{12}|unknown)$/);
  assert.match(info.labels.version, /^\d+\.\d+\.\d+/);
});

test('negotiation: text unless OpenMetrics is asked for; gzip when accepted', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  await request({ port: proxy.port, body: chatBody('exposition-model'), headers: { 'x-sim-output-tokens': '3' } });

  const plain = await scrape(proxy);
  assert.equal(plain.headers['content-type'], PROMETHEUS_TEXT);
  assert.equal(plain.headers['content-encoding'], undefined);
  assert.match(plain.headers.vary, /Accept-Encoding/);
  const text = plain.body.toString();
  assert.match(text, /^# TYPE tokenmeter_requests_total counter$/m);
  assert.ok(!text.includes('# EOF'));

  const om = await scrape(proxy, { accept: PROMETHEUS_ACCEPT });
  assert.equal(om.headers['content-type'], OPENMETRICS);
  const omText = om.body.toString();
  assert.ok(omText.endsWith('\n# EOF\n'), omText.slice(-100));
  assert.match(omText, /^# TYPE tokenmeter_requests counter$/m);
  assert.match(omText, /^tokenmeter_requests_total\{api="openai_chat",code="200",model="exposition-model",outcome="complete"\} 1$/m);
  assert.match(omText, /^# TYPE tokenmeter_request_duration_seconds histogram\n# UNIT tokenmeter_request_duration_seconds seconds$/m);
  assert.match(omText, /^# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds$/m);

  const zipped = await scrape(proxy, { accept: PROMETHEUS_ACCEPT, 'accept-encoding': 'gzip' });
  assert.equal(zipped.headers['content-encoding'], 'gzip');
  assert.match(zipped.headers.vary, /Accept-Encoding/);
  assert.equal(zipped.headers['content-type'], OPENMETRICS);
  const unzipped = gunzipSync(zipped.body).toString();
  assert.ok(unzipped.endsWith('\n# EOF\n'));
  assert.ok(zipped.body.length * 4 < unzipped.length, `${zipped.body.length} of ${unzipped.length} bytes`);

  const refused = await scrape(proxy, { 'accept-encoding': 'gzip;q=0, identity' });
  assert.equal(refused.headers['content-encoding'], undefined);
  const textOnly = await scrape(proxy, { accept: 'application/openmetrics-text;q=0.2, text/plain' });
  assert.equal(textOnly.headers['content-type'], PROMETHEUS_TEXT, 'the higher weight wins');
});

// A forwarder in front of the admin listener: records what the scraper asked and what it got;
// with `accept`, it asks for that instead.
async function startForwarder(adminPort, accept) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    if (accept) headers.accept = accept;
    const upstream = http.request({ host: '127.0.0.1', port: adminPort, path: req.url, method: req.method, headers }, (r) => {
      seen.push({ accept: req.headers.accept, acceptEncoding: req.headers['accept-encoding'],
        contentType: r.headers['content-type'], contentEncoding: r.headers['content-encoding'] });
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  return { port: server.address().port, seen };
}

test('a real Prometheus scrapes OpenMetrics (its default) and the text format, gzipped', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  for (let i = 0; i < 3; i += 1) {
    const res = await request({ port: proxy.port, body: chatBody('scraped-model'), headers: { 'x-sim-output-tokens': '4' } });
    assert.equal(res.status, 200);
  }
  const asIs = await startForwarder(proxy.adminPort);
  const textOnly = await startForwarder(proxy.adminPort, 'text/plain;version=0.0.4');
  const prom = await startPrometheus({ targets: [`127.0.0.1:${asIs.port}`, `127.0.0.1:${textOnly.port}`] });
  try {
    await prom.waitScraped();
    assert.match(asIs.seen[0].accept, /application\/openmetrics-text/);
    assert.equal(asIs.seen.at(-1).contentType, OPENMETRICS);
    assert.equal(asIs.seen.at(-1).contentEncoding, 'gzip');
    assert.equal(textOnly.seen.at(-1).contentType, PROMETHEUS_TEXT);
    assert.equal(textOnly.seen.at(-1).contentEncoding, 'gzip');

    const up = await prom.query('up');
    assert.equal(up.json.data.result.length, 2);
    for (const r of up.json.data.result) assert.equal(r.value[1], '1', JSON.stringify(r.metric));
    // The same series, by the same names, from either format.
    for (const [expr, want] of [
      ['tokenmeter_requests_total{model="scraped-model",outcome="complete"}', '3'],
      ['tokenmeter_tokens_total{model="scraped-model",type="output"}', '12'],
      ['tokenmeter_upstream_errors_total{reason="connect_refused"}', '0'],
      ['tokenmeter_request_duration_seconds_count{model="scraped-model"}', '3'],
      ['tokenmeter_build_info{revision=~"[0-9a-f]{12}|unknown"}', '1'],
    ]) {
      const r = await prom.query(`count by (instance) (${expr})`);
      assert.equal(r.json.data.result.length, 2, `${expr}: ${JSON.stringify(r.json)}`);
      const values = await prom.query(`sum by (instance) (${expr})`);
      for (const v of values.json.data.result) {
        assert.equal(v.value[1], want, `${expr} on ${v.metric.instance}`);
      }
    }
    const samples = await prom.query('scrape_samples_scraped');
    const [a, b] = samples.json.data.result.map((r) => Number(r.value[1]));
    assert.ok(a > 100 && Math.abs(a - b) < 5, `samples: ${a} and ${b}`);
  } finally {
    await prom.stop();
  }
});

test('gauges of the edge: client connections, upstream connections by state, waiters, last config load', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const started = Date.now() / 1000;
  const proxy = await startProxy({
    upstream: sim.port,
    args: ['--threads', '1'],
    config: 'upstream_pool:\n  max_connections: 1\n  acquire_timeout: 10s\n',
  });
  let m = await proxy.metrics();
  const loaded = m.value('tokenmeter_config_last_reload_success_timestamp_seconds');
  assert.ok(loaded >= started - 1 && loaded <= Date.now() / 1000 + 1, `loaded at ${loaded}`);
  assert.equal(m.value('tokenmeter_upstream_connection_waiters'), 0);
  // One slow stream holds the only upstream connection; a second request waits for it.
  const slow = { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '20' };
  const first = request({ port: proxy.port, body: chatBody('m'), headers: slow, timeoutMs: 15_000 });
  await waitMetrics(proxy, (mm) => mm.value('tokenmeter_upstream_connections', { state: 'in_use' }) === 1, 5000);
  const second = request({ port: proxy.port, body: chatBody('m'), headers: slow, timeoutMs: 15_000 });
  m = await waitMetrics(proxy, (mm) => mm.value('tokenmeter_upstream_connection_waiters') === 1, 5000);
  assert.equal(m.value('tokenmeter_upstream_connection_waiters'), 1, 'the second request waits');
  assert.equal(m.value('tokenmeter_upstream_connections', { state: 'in_use' }), 1);
  assert.equal(m.value('tokenmeter_client_connections'), 2);
  for (const res of await Promise.all([first, second])) assert.equal(res.status, 200);
  m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_upstream_connection_waiters'), 0);
  assert.equal(m.value('tokenmeter_upstream_connections', { state: 'in_use' }), 0);
  assert.equal(m.value('tokenmeter_upstream_connections', { state: 'idle' }), 1, 'kept for reuse');
});

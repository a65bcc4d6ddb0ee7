// Upstream failures: a stream cut mid-body, an unreachable upstream, the idle timeout between
// reads and a response head that never comes.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, closedPort, describeResult, nowMs, request, startProxy, startSim, startSimPair, stopAll,
  waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

test('upstream closes mid-stream: the client sees no clean end, counted upstream_truncated', { timeout: 30_000 }, async () => {
  const model = 'fail-truncated';
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  const req = {
    body: chatBody(model, { includeUsage: true }),
    headers: {
      'x-sim-ttft-ms': '5', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '10', 'x-sim-fail': 'close-after:3',
    },
    timeoutMs: 10_000,
  };
  const direct = await request({ port: simA.port, ...req });
  const proxied = await request({ port: proxy.port, ...req });

  // The simulator itself cuts the chunked body: the reference for what the client must see.
  assert.equal(direct.complete, false, describeResult(direct));
  assert.equal(proxied.status, 200, describeResult(proxied));
  // No terminating zero-length chunk: node:http reports an incomplete, aborted message.
  assert.equal(proxied.complete, false, `the client saw a clean end: ${describeResult(proxied)}`);
  assert.equal(proxied.aborted, true, describeResult(proxied));
  assert.ok(proxied.error, 'the response emitted an error');
  assert.notEqual(proxied.error.code, 'TEST_TIMEOUT', 'the proxy closed the connection');
  // Everything up to the cut was forwarded, unchanged.
  assert.ok(proxied.body.equals(direct.body),
    `bytes up to the cut differ:\n${JSON.stringify(direct.body.toString())}\n${JSON.stringify(proxied.body.toString())}`);
  assert.ok(!proxied.body.toString().includes('[DONE]'));
  assert.equal((proxied.body.toString().match(/"delta":\{"content":/g) || []).length, 3);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_truncated', code: '200' }), 1,
    'counted as upstream_truncated');
  assert.equal(m.value('tokenmeter_requests_total', { model }), 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'truncated' }), 1);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model }).count, 1);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
});

test('upstream closes mid-body of a non-streamed response: the client sees a short body', { timeout: 30_000 }, async () => {
  const model = 'fail-truncated-json';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const res = await request({
    port: proxy.port,
    body: chatBody(model, { stream: false }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-fail': 'close-after:20' },
    timeoutMs: 10_000,
  });
  assert.equal(res.status, 200, describeResult(res));
  assert.equal(res.complete, false, describeResult(res));
  assert.ok(res.error, describeResult(res));
  assert.notEqual(res.error.code, 'TEST_TIMEOUT');
  assert.equal(res.body.length, 20);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_truncated' }), 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'truncated' }), 1);
});

test('upstream unreachable: 502 with a JSON error, counted', { timeout: 30_000 }, async () => {
  const model = 'fail-unreachable';
  const port = await closedPort();
  const proxy = await startProxy({ upstream: port });
  const before = await proxy.metrics();
  assert.equal(before.value('tokenmeter_upstream_errors_total'), 0);
  const res = await request({ port: proxy.port, body: chatBody(model), timeoutMs: 10_000 });
  assert.equal(res.status, 502, describeResult(res));
  assert.equal(res.complete, true);
  assert.match(res.headers['content-type'], /^application\/json/);
  const json = JSON.parse(res.body.toString());
  assert.equal(typeof json.error, 'object');
  assert.equal(typeof json.error.code, 'string');
  assert.ok(json.error.code.length > 0);
  assert.equal(typeof json.error.message, 'string');

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total'), 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'connect_refused' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_error', code: '502' }), 1);
  // Not ready either.
  const ready = await proxy.admin('/readyz');
  assert.equal(ready.status, 503);

  // A second request counts again.
  const again = await request({ port: proxy.port, body: chatBody(model), timeoutMs: 10_000 });
  assert.equal(again.status, 502);
  const m2 = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 2);
  assert.equal(m2.value('tokenmeter_upstream_errors_total', { reason: 'connect_refused' }), 2);
});

const IDLE_CONFIG = 'timeouts:\n  upstream_idle: 300ms\n';

test('upstream silent mid-stream for longer than timeouts.upstream_idle: the stream is cut', { timeout: 30_000 }, async () => {
  const model = 'fail-idle';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: IDLE_CONFIG });
  const started = nowMs();
  const res = await request({
    port: proxy.port,
    body: chatBody(model, { includeUsage: true }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '1000', 'x-sim-output-tokens': '5' },
    timeoutMs: 10_000,
  });
  const elapsed = nowMs() - started;
  assert.equal(res.status, 200, describeResult(res));
  assert.equal(res.complete, false, `the client saw a clean end: ${describeResult(res)}`);
  assert.ok(res.error, describeResult(res));
  assert.notEqual(res.error.code, 'TEST_TIMEOUT');
  const text = res.body.toString();
  assert.ok(text.includes('"content":" time"'), 'the first token arrived');
  assert.ok(!text.includes('"content":" woman"'), 'the second token (due at 1 s) did not');
  assert.ok(elapsed >= 290 && elapsed < 900, `cut after ${elapsed.toFixed(0)} ms, expected ≈ 300 ms`);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'idle_timeout' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_error', code: '200' }), 1);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
  // The upstream connection was closed, so the simulator stops generating.
  const stats = await sim.stats();
  assert.equal(stats.streams_aborted, 1, JSON.stringify(stats));
});

test('a stream that keeps producing within upstream_idle is never cut', { timeout: 30_000 }, async () => {
  const model = 'fail-idle-ok';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: IDLE_CONFIG });
  // 8 gaps of 150 ms: 1.2 s in all, far longer than the 300 ms idle timeout.
  const res = await request({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-ttft-ms': '150', 'x-sim-itl-ms': '150', 'x-sim-output-tokens': '9' },
    timeoutMs: 10_000,
  });
  assert.equal(res.status, 200, describeResult(res));
  assert.equal(res.complete, true, describeResult(res));
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total'), 0);
});

test('no response head within timeouts.upstream_idle: 504 with a JSON error', { timeout: 30_000 }, async () => {
  const model = 'fail-slow-headers';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: IDLE_CONFIG });
  const started = nowMs();
  const res = await request({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-fail': 'slow-headers:2000' },
    timeoutMs: 10_000,
  });
  const elapsed = nowMs() - started;
  assert.equal(res.status, 504, describeResult(res));
  assert.equal(res.complete, true);
  assert.match(res.headers['content-type'], /^application\/json/);
  const json = JSON.parse(res.body.toString());
  assert.equal(typeof json.error.code, 'string');
  assert.ok(elapsed >= 290 && elapsed < 1500, `504 after ${elapsed.toFixed(0)} ms, expected ≈ 300 ms`);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'timeout' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_error', code: '504' }), 1);
});

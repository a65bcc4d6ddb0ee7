// Upstream failures: a stream cut mid-body, an unreachable upstream, the idle timeout between
// reads and a response head that never comes.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, describeResult, nowMs, request, startProxy, startProxyWithClosedUpstream, startSim,
  startSimPair, stopAll, waitFor, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

// A model takes its own label only once the upstream has answered it 2xx: the requests the upstream
// never served are counted under "other" (docs/metrics.md, `model` label).
const unserved = 'other';

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

test('upstream closes right behind its last bytes, again and again: every cut is seen at once', { timeout: 60_000 }, async () => {
  // The simulator writes a chunk and closes at once, so the bytes and the close usually reach
  // the proxy together. The relay counts a short read as draining the socket; the close behind
  // it must still end the response at once (the hangup watch, relay/drained_read), not when
  // the idle timeout (300 s by default) runs out.
  const model = 'fail-truncated-repeat';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const rounds = 20;
  const slow = [];
  for (let i = 0; i < rounds; i++) {
    const started = nowMs();
    const res = await request({
      port: proxy.port,
      body: chatBody(model, { includeUsage: true }),
      headers: {
        'x-sim-ttft-ms': '2', 'x-sim-itl-ms': '2', 'x-sim-output-tokens': '10', 'x-sim-fail': `close-after:${1 + (i % 5)}`,
      },
      timeoutMs: 5_000,
    });
    assert.equal(res.status, 200, describeResult(res));
    assert.equal(res.complete, false, describeResult(res));
    assert.notEqual(res.error && res.error.code, 'TEST_TIMEOUT', `round ${i}: the cut was not seen`);
    const took = nowMs() - started;
    if (took > 1_000) slow.push(`round ${i}: ${Math.round(took)} ms`);
  }
  assert.deepEqual(slow, [], 'cuts seen late');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= rounds);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'upstream_truncated', code: '200' }), rounds);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'truncated' }), rounds);
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
  const { proxy } = await startProxyWithClosedUpstream();
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

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: unserved }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total'), 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'connect_refused' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model: unserved, outcome: 'upstream_error', code: '502' }), 1);
  // Not ready either.
  const ready = await proxy.admin('/readyz');
  assert.equal(ready.status, 503);

  // A second request counts again.
  const again = await request({ port: proxy.port, body: chatBody(model), timeoutMs: 10_000 });
  assert.equal(again.status, 502);
  const m2 = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: unserved }) >= 2);
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
  const stats = await waitFor(async () => {
    const s = await sim.stats();
    return s.streams_aborted >= 1 ? s : undefined;
  }, { timeoutMs: 1000, what: 'the simulator to count its stream aborted' });
  assert.equal(stats.streams_aborted, 1, JSON.stringify(stats));
  assert.equal(stats.streams_completed, 0, JSON.stringify(stats));
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
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: unserved }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'timeout' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model: unserved, outcome: 'upstream_error', code: '504' }), 1);
});

test('every upstream connection busy for acquire_timeout: 503 JSON; a waiter is served when one frees', { timeout: 30_000 }, async () => {
  const model = 'fail-pool';
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    args: ['--threads', '1'],
    config: 'upstream_pool:\n  max_connections: 1\n  max_idle_connections: 1\n  acquire_timeout: 300ms\n',
  });
  const long = { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '10' };
  let firstResponse;
  const headersSeen = new Promise((resolve) => { firstResponse = resolve; });
  const first = request({ port: proxy.port, body: chatBody(model), headers: long, onResponse: () => firstResponse() });
  await headersSeen;
  const started = nowMs();
  const second = await request({ port: proxy.port, body: chatBody(model), headers: { 'x-sim-output-tokens': '2' } });
  const waited = nowMs() - started;
  assert.equal(second.status, 503, describeResult(second));
  assert.equal(JSON.parse(second.body.toString()).error.code.length > 0, true);
  assert.ok(waited >= 290 && waited < 1000, `503 after ${waited.toFixed(0)} ms, acquire_timeout is 300 ms`);
  const firstResult = await first;
  assert.equal(firstResult.complete, true, describeResult(firstResult));

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: unserved }) + x.value('tokenmeter_requests_total', { model }) >= 2);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'pool_exhausted' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model: unserved, outcome: 'upstream_error', code: '503' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'complete' }), 1);

  // A request that waits less than acquire_timeout gets the connection when the first frees it.
  const shortStream = { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': '5' };
  const [a, b] = await Promise.all([
    request({ port: proxy.port, body: chatBody(model), headers: shortStream }),
    request({ port: proxy.port, body: chatBody(model), headers: shortStream }),
  ]);
  assert.equal(a.status, 200, describeResult(a));
  assert.equal(b.status, 200, describeResult(b));
  assert.equal(a.complete && b.complete, true);
});

test('upstream resets the connection before answering: 502 JSON, connection_closed', { timeout: 30_000 }, async () => {
  const model = 'fail-reset';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const res = await request({ port: proxy.port, body: chatBody(model), headers: { 'x-sim-fail': 'reset' }, timeoutMs: 10_000 });
  assert.equal(res.status, 502, describeResult(res));
  assert.equal(typeof JSON.parse(res.body.toString()).error.code, 'string');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: unserved }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'connection_closed' }), 1,
    m.select('tokenmeter_upstream_errors_total').map((s) => `${JSON.stringify(s.labels)} ${s.value}`).join('; '));
  assert.equal(m.value('tokenmeter_requests_total', { model: unserved, outcome: 'upstream_error', code: '502' }), 1);
});

// Client disconnects: the proxy counts client_cancel and closes the upstream connection at once,
// so the simulator sees its stream aborted (and stops generating), mid-stream and while the
// model is still "thinking".
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  chatBody, completionBody, nowMs, startProxy, startSim, stopAll, waitFor, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

// Sends a request and destroys the client socket when `when` says so:
//   { afterContent: true }  after the first data that carries a content token
//   { afterMs: N }          N ms after the request was sent, whatever arrived
// Resolves { destroyedAt, received (string), status } once destroyed.
function disconnecting({ port, path = '/v1/chat/completions', body, headers, afterContent, afterMs }) {
  return new Promise((resolve, reject) => {
    let received = '';
    let status;
    let done = false;
    const req = http.request({
      host: '127.0.0.1', port, method: 'POST', path, agent: false,
      headers: { 'content-type': 'application/json', ...headers },
    });
    const destroy = () => {
      if (done) return;
      done = true;
      req.destroy();
      resolve({ destroyedAt: nowMs(), received, status });
    };
    req.on('error', (error) => { if (!done) reject(error); });
    req.on('response', (res) => {
      status = res.statusCode;
      res.on('data', (chunk) => {
        received += chunk.toString();
        if (afterContent && /"(content|text)":"[^"]/.test(received)) destroy();
      });
      res.on('end', () => { if (!done) reject(new Error(`the response ended before the disconnect: ${received}`)); });
      res.on('error', () => { /* our own destroy */ });
    });
    if (afterMs !== undefined) setTimeout(destroy, afterMs);
    req.end(JSON.stringify(body));
  });
}

async function waitAborted(sim, destroyedAt, limitMs) {
  const stats = await waitFor(async () => {
    const s = await sim.stats();
    return s.streams_aborted >= 1 ? s : undefined;
  }, { timeoutMs: 5000, intervalMs: 10, what: 'the simulator to count its stream aborted' });
  const latency = nowMs() - destroyedAt;
  assert.equal(stats.streams_aborted, 1, JSON.stringify(stats));
  assert.equal(stats.streams_completed, 0, JSON.stringify(stats));
  assert.equal(stats.streams_active, 0, JSON.stringify(stats));
  assert.ok(latency < limitMs, `the simulator saw the disconnect ${latency.toFixed(0)} ms after it (limit ${limitMs} ms)`);
  return latency;
}

async function assertCancelled(proxy, model, code, limitMs, destroyedAt) {
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1, limitMs);
  const latency = nowMs() - destroyedAt;
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'client_cancel', code: String(code) }), 1,
    `counted as client_cancel with code ${code}: ${m.select('tokenmeter_requests_total', { model })
      .map((s) => JSON.stringify(s.labels)).join(' ')}`);
  assert.ok(latency < limitMs, `counted ${latency.toFixed(0)} ms after the disconnect`);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
  return m;
}

test('client disconnects mid-stream: client_cancel, upstream stream aborted within a second', { timeout: 30_000 }, async () => {
  const model = 'cancel-mid-stream';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  // 1000 tokens 20 ms apart: a 20 s stream.
  const { destroyedAt, received, status } = await disconnecting({
    port: proxy.port,
    body: chatBody(model, { includeUsage: true }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': '1000' },
    afterContent: true,
  });
  assert.equal(status, 200);
  assert.ok(received.includes('"content":" time"'));
  await waitAborted(sim, destroyedAt, 1000);
  const m = await assertCancelled(proxy, model, 200, 1000, destroyedAt);
  // The first token was seen before the disconnect.
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model }).count, 1);
});

test('client disconnects during a long TTFT (chat): the simulator sees it well before 3 s', { timeout: 30_000 }, async () => {
  const model = 'cancel-thinking-chat';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const sentAt = nowMs();
  const { destroyedAt } = await disconnecting({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-ttft-ms': '3000', 'x-sim-itl-ms': '10', 'x-sim-output-tokens': '5' },
    afterMs: 200,
  });
  const latency = await waitAborted(sim, destroyedAt, 1000);
  assert.ok(destroyedAt + latency - sentAt < 2000, 'well before the first token was due');
  await assertCancelled(proxy, model, 200, 1000, destroyedAt);
  const m = await proxy.metrics();
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model }).count, 0);
});

test('client disconnects during a long TTFT (completions, only headers sent)', { timeout: 30_000 }, async () => {
  const model = 'cancel-thinking-completions';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const { destroyedAt } = await disconnecting({
    port: proxy.port,
    path: '/v1/completions',
    body: completionBody(model),
    headers: { 'x-sim-ttft-ms': '3000', 'x-sim-output-tokens': '5' },
    afterMs: 200,
  });
  await waitAborted(sim, destroyedAt, 1000);
  await assertCancelled(proxy, model, 200, 1000, destroyedAt);
});

test('client disconnects before any response head: upstream connection closed at once', { timeout: 30_000 }, async () => {
  const model = 'cancel-before-head';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'readiness:\n  probe_interval: 1h\n' });
  const { destroyedAt, status } = await disconnecting({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-fail': 'slow-headers:3000', 'x-sim-output-tokens': '5' },
    afterMs: 200,
  });
  assert.equal(status, undefined, 'no response head before the disconnect');
  // The simulator has no stream yet; its connection from the proxy must go away.
  await waitFor(async () => {
    const s = await sim.stats();
    // Only the /sim/stats connection itself is left.
    return s.connections_active === 1 && s.requests >= 2 ? s : undefined;
  }, { timeoutMs: 1000, intervalMs: 10, what: 'the proxy to close its upstream connection' });
  assert.ok(nowMs() - destroyedAt < 1000);
  // Cancelled before any answer: the model was never served, so it counts under "other".
  await assertCancelled(proxy, 'other', 0, 1000, destroyedAt);
});

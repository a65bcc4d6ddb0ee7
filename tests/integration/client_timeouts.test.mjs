// Client-side limits: a client that sends its request head too slowly (slowloris) or sits idle on
// a kept-alive connection is disconnected after the configured time, without reaching the
// upstream; the model label stays bounded by the allowlist.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import {
  chatBody, nowMs, request, startProxy, startSim, stopAll, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

// Resolves with the time (ms since `start`) at which the server closed the connection, and the
// bytes it sent before closing.
function waitForClose(socket, start) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => {});
    socket.on('close', () => resolve({ afterMs: nowMs() - start, bytes: Buffer.concat(chunks) }));
    setTimeout(() => reject(new Error('connection not closed within 10 s')), 10_000).unref();
  });
}

test('a request head trickling in slower than timeouts.request_header is cut off', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  request_header: 400ms\n' });
  const before = await sim.stats();

  const socket = net.connect(proxy.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const start = nowMs();
  const closed = waitForClose(socket, start);
  // One header line every 150 ms: each write is well inside the limit, the whole head is not.
  const lines = ['POST /v1/chat/completions HTTP/1.1\r\n', 'Host: x\r\n', 'X-A: 1\r\n', 'X-B: 2\r\n',
    'X-C: 3\r\n', 'X-D: 4\r\n', 'X-E: 5\r\n'];
  const trickle = (async () => {
    for (const line of lines) {
      if (socket.destroyed) return;
      socket.write(line);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  const { afterMs } = await closed;
  await trickle;
  assert.ok(afterMs >= 350 && afterMs < 2000, `closed after ${afterMs.toFixed(0)} ms, limit 400 ms`);

  const afterStats = await sim.stats();
  // The stats request itself is the only new request the simulator saw.
  assert.equal(afterStats.requests - before.requests, 1, 'nothing of the slow request reached the upstream');
});

test('an idle kept-alive client connection is closed after timeouts.client_idle', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  client_idle: 300ms\n' });

  const socket = net.connect(proxy.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let start = 0;
  const body = JSON.stringify(chatBody('idle-model', { stream: false }));
  const closed = new Promise((resolve) => {
    let received = '';
    socket.on('data', (d) => {
      received += d.toString();
      // The response is complete once the JSON body (Content-Length framed) has arrived.
      const headEnd = received.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(received);
      if (headEnd >= 0 && length && received.length >= headEnd + 4 + Number(length[1]) && start === 0) {
        start = nowMs();
      }
    });
    socket.on('close', () => resolve({ afterMs: nowMs() - start, received }));
  });
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `x-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  const { afterMs, received } = await closed;
  assert.match(received, /^HTTP\/1\.1 200 /);
  assert.ok(start > 0, 'the response completed before the close');
  assert.ok(afterMs >= 250 && afterMs < 2000, `idle connection closed ${afterMs.toFixed(0)} ms after the response`);
});

test('metrics.models.allowlist bounds the model label', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: 'metrics:\n  models:\n    allowlist: ["allowed-model"]\n',
  });
  for (const model of ['allowed-model', 'someone-elses-model', 'yet-another']) {
    const res = await request({
      port: proxy.port, method: 'POST', path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0' },
      body: JSON.stringify(chatBody(model)),
    });
    assert.equal(res.status, 200);
  }
  // A request is counted once its response has ended, which may be just after the client read it.
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { outcome: 'complete' }) >= 3);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'allowed-model', outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'other', outcome: 'complete' }), 2);
  const text = await proxy.metricsText();
  assert.ok(!text.includes('someone-elses-model') && !text.includes('yet-another'),
    'names outside the allowlist never appear as labels');
});

test('a client that stops reading mid-stream is cut after timeouts.client_write', { timeout: 60_000 }, async () => {
  const model = 'stalled-reader';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  client_write: 500ms\n' });
  const socket = net.connect(proxy.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.on('error', () => {});
  // Never read: once the socket buffers on both sides are full, the proxy's write cannot finish.
  socket.pause();
  const body = JSON.stringify(chatBody(model));
  const sentAt = nowMs();
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `x-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\nx-sim-tokens-per-chunk: 64\r\nx-sim-output-tokens: 50000000\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1, 30_000);
  const endedAfter = nowMs() - sentAt;
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'client_cancel', code: '200' }), 1,
    m.select('tokenmeter_requests_total', { model }).map((s) => JSON.stringify(s.labels)).join(' '));
  assert.equal(m.value('tokenmeter_streams_active'), 0);
  const stats = await sim.stats();
  assert.equal(stats.streams_completed, 0, 'the stream was cut, not finished');
  // The buffers fill within a second or two; the cut comes half a second (and a tick) later.
  assert.ok(endedAfter < 20_000, `cut ${endedAfter.toFixed(0)} ms after the request`);
  socket.destroy();
  // The proxy goes on serving.
  const res = await request({
    port: proxy.port, method: 'POST', path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0' },
    body: JSON.stringify(chatBody('after-the-stall')),
  });
  assert.equal(res.status, 200);
});

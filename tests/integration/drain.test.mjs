// Graceful shutdown (README "Shutdown"): on SIGTERM the proxy stops accepting, /readyz fails at
// once, idle connections close, in-flight streams finish for up to timeouts.drain, then it exits 0.
// A second signal exits at once.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';

import {
  chatBody, describeResult, nowMs, request, startProxy, startSim, startSimPair, stopAll, tryConnect, waitFor,
} from './lib/harness.mjs';

after(stopAll);

// Resolves once the response has delivered its first content token.
function firstContent(res) {
  return new Promise((resolve) => {
    let seen = '';
    const onData = (chunk) => {
      seen += chunk.toString();
      if (seen.includes('"delta":{"content":')) {
        res.off('data', onData);
        resolve();
      }
    };
    res.on('data', onData);
  });
}

test('SIGTERM: /readyz 503 at once, no new connections, idle ones closed, the stream completes, exit 0', { timeout: 60_000 }, async () => {
  const model = 'drain-stream';
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({
    upstream: simB.port, config: 'timeouts:\n  drain: 10s\nreadiness:\n  probe_interval: 100ms\n',
  });
  await waitFor(async () => (await proxy.admin('/readyz')).status === 200, { timeoutMs: 3000, what: 'ready' });

  // An idle keep-alive client connection (one finished request on it).
  const idleSocket = net.connect({ host: '127.0.0.1', port: proxy.port });
  let idleClosedAt;
  idleSocket.on('close', () => { idleClosedAt = nowMs(); });
  idleSocket.on('error', () => {});
  await new Promise((resolve) => idleSocket.on('connect', resolve));
  idleSocket.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
  await new Promise((resolve) => idleSocket.once('data', resolve));
  idleSocket.on('data', () => {});
  // The same request to the twin, so the stream below is the second request of both simulators.
  assert.equal((await request({ port: simA.port, method: 'GET', path: '/v1/models' })).status, 200);

  // 20 tokens 100 ms apart: a stream of about 2 s.
  const streamReq = {
    body: chatBody(model, { includeUsage: true }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '20' },
    timeoutMs: 20_000,
  };
  let response;
  const gotResponse = new Promise((resolve) => { streamReq.onResponse = (res) => { response = res; resolve(); }; });
  const proxiedPromise = request({ port: proxy.port, ...streamReq });
  const directPromise = request({ port: simA.port, ...streamReq, onResponse: undefined });
  await gotResponse;
  await firstContent(response);

  const signalledAt = nowMs();
  proxy.child.signal('SIGTERM');

  // /readyz fails at once; the admin listener still answers while draining.
  const ready = await waitFor(async () => {
    const r = await proxy.admin('/readyz');
    return r.status === 503 ? r : undefined;
  }, { timeoutMs: 1000, intervalMs: 5, what: '/readyz 503 after SIGTERM' });
  assert.equal(ready.status, 503);
  assert.ok(nowMs() - signalledAt < 300, `/readyz failed ${(nowMs() - signalledAt).toFixed(0)} ms after SIGTERM`);
  assert.match(ready.body.toString(), /drain/i);
  assert.equal((await proxy.admin('/healthz')).status, 200);

  // New connections are refused.
  const connect = await waitFor(async () => ((await tryConnect(proxy.port)) === 'refused' ? 'refused' : undefined),
    { timeoutMs: 1000, intervalMs: 5, what: 'new connections to the proxy port to be refused' });
  assert.equal(connect, 'refused');

  // The idle keep-alive connection is closed.
  await waitFor(() => idleClosedAt !== undefined, { timeoutMs: 1000, what: 'the idle client connection to close' });

  assert.equal(proxy.child.running, true, 'still running while the stream is in flight');

  const [proxied, direct] = await Promise.all([proxiedPromise, directPromise]);
  const streamEndedAt = nowMs();
  assert.equal(proxied.status, 200, describeResult(proxied));
  assert.equal(proxied.complete, true, `the in-flight stream was cut: ${describeResult(proxied)}`);
  assert.ok(proxied.body.equals(direct.body), 'the in-flight stream arrived whole');
  assert.ok(streamEndedAt - signalledAt > 1000, 'the stream really was in flight for a while after SIGTERM');

  const exit = await proxy.child.waitExit(10_000);
  assert.equal(exit.code, 0, `exit ${JSON.stringify(exit)}`);
  assert.ok(nowMs() - streamEndedAt < 1000, `exited ${(nowMs() - streamEndedAt).toFixed(0)} ms after the last stream ended`);
  idleSocket.destroy();
});

test('SIGTERM with an idle proxy: exits 0 at once', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  drain: 10s\n' });
  const res = await request({ port: proxy.port, body: chatBody('drain-idle'), headers: { 'x-sim-output-tokens': '2' } });
  assert.equal(res.status, 200);
  const signalledAt = nowMs();
  proxy.child.signal('SIGTERM');
  const exit = await proxy.child.waitExit(5000);
  assert.equal(exit.code, 0);
  assert.ok(nowMs() - signalledAt < 1000, `exit took ${(nowMs() - signalledAt).toFixed(0)} ms`);
});

test('drain timeout: a stream longer than timeouts.drain is cut and the proxy exits 0', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  drain: 500ms\n' });
  let response;
  const gotResponse = new Promise((resolve) => { response = resolve; });
  const proxiedPromise = request({
    port: proxy.port,
    body: chatBody('drain-timeout'),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '100' },
    onResponse: (res) => response(res),
    timeoutMs: 20_000,
  });
  await firstContent(await gotResponse);
  const signalledAt = nowMs();
  proxy.child.signal('SIGTERM');
  const exit = await proxy.child.waitExit(5000);
  const exitAfter = nowMs() - signalledAt;
  assert.equal(exit.code, 0, `exit ${JSON.stringify(exit)}`);
  assert.ok(exitAfter >= 450 && exitAfter < 2000, `exited ${exitAfter.toFixed(0)} ms after SIGTERM, drain is 500 ms`);
  const proxied = await proxiedPromise;
  assert.equal(proxied.complete, false, `a stream cut by the drain timeout must not look whole: ${describeResult(proxied)}`);
  assert.notEqual(proxied.error && proxied.error.code, 'TEST_TIMEOUT');
  // The simulator's stream was abandoned too.
  await waitFor(async () => (await sim.stats()).streams_aborted === 1, { timeoutMs: 2000, what: 'upstream stream aborted' });
});

test('a second signal during the drain exits at once', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  drain: 30s\n' });
  const agent = new http.Agent({ keepAlive: false });
  let response;
  const gotResponse = new Promise((resolve) => { response = resolve; });
  const proxiedPromise = request({
    port: proxy.port,
    agent,
    body: chatBody('drain-twice'),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '100' },
    onResponse: (res) => response(res),
    timeoutMs: 20_000,
  });
  await firstContent(await gotResponse);
  proxy.child.signal('SIGTERM');
  await waitFor(async () => (await proxy.admin('/readyz')).status === 503, { timeoutMs: 1000, what: 'draining' });
  const secondAt = nowMs();
  proxy.child.signal('SIGINT');
  const exit = await proxy.child.waitExit(3000);
  assert.ok(nowMs() - secondAt < 1000, `exited ${(nowMs() - secondAt).toFixed(0)} ms after the second signal`);
  assert.equal(exit.signal, null, 'exited by itself, not killed by the signal');
  const proxied = await proxiedPromise;
  assert.equal(proxied.complete, false, describeResult(proxied));
  agent.destroy();
});

// The drain that works with native sidecars (deploy/README.md, "Shutdown"), replayed on loopback
// in Kubernetes' termination order. Kubernetes runs the model container's preStop first; here
// that is GET /drain on tokenmeter's admin port (as the httpGet hook does). Only when it has
// answered does the model server get SIGTERM; only when the model server has exited does the
// sidecar get its SIGTERM. No stream in flight may be cut.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, describeResult, nowMs, request, startProxy, startSim, stopAll, waitFor, waitReady,
} from './lib/harness.mjs';

after(stopAll);

const TOKENS = 25;
const ITL_MS = 60;  // streams of about 1.5 s
const streamRequest = (proxy, i) => request({
  port: proxy.port,
  body: chatBody(`drain-${i}`, { includeUsage: true }),
  headers: { 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': String(ITL_MS), 'x-sim-output-tokens': String(TOKENS) },
  timeoutMs: 20_000,
});
const drainCall = (proxy, wait) => request({
  port: proxy.adminPort, method: 'GET', path: `/drain?wait=${wait}`, timeoutMs: 30_000,
});
const tokensIn = (res) => (res.body.toString().match(/"delta":\{"content":/g) || []).length;

async function started(proxy, count) {
  await waitFor(async () => {
    const m = await proxy.metrics();
    return m.value('tokenmeter_streams_active') >= count;
  }, { timeoutMs: 3000, what: `${count} streams relaying` });
}

test('preStop /drain, then the model server stops, then the sidecar: no stream is cut', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: 'timeouts:\n  drain: 10s\nreadiness:\n  probe_interval: 100ms\nlog:\n  level: error\n',
  });
  await waitReady(proxy);
  const streams = [0, 1, 2].map((i) => streamRequest(proxy, i));
  await started(proxy, 3);

  // 1. The model container's preStop.
  const drainStart = nowMs();
  const drain = drainCall(proxy, '20s');
  // Readiness flips at once, while /drain is still waiting: the pod leaves the Service.
  await waitFor(async () => (await proxy.admin('/readyz')).status === 503,
    { timeoutMs: 1000, what: '/readyz 503 during /drain' });
  assert.equal((await proxy.admin('/healthz')).status, 200, 'still alive');
  const drained = await drain;
  const drainedAt = nowMs();
  assert.equal(drained.status, 200, describeResult(drained));
  assert.equal(drained.body.toString(), 'drained\n');
  assert.ok(drainedAt - drainStart > 500, `/drain waited for the streams (${(drainedAt - drainStart).toFixed(0)} ms)`);

  // Every stream ended, whole, before /drain answered.
  const results = await Promise.all(streams);
  for (const res of results) {
    assert.equal(res.status, 200, describeResult(res));
    assert.equal(res.complete, true, describeResult(res));
    assert.ok(res.endedAt <= drainedAt, 'the stream ended before the preStop returned');
    assert.equal(tokensIn(res), TOKENS, 'every token arrived');
    assert.match(res.body.toString(), /data: \[DONE\]/);
  }

  // 2. Kubelet sends the model server SIGTERM, and it exits.
  await sim.stop('SIGTERM');
  // 3. Then the sidecar: nothing is in flight, so it exits at once and cleanly.
  const stopAt = nowMs();
  proxy.child.proc.kill('SIGTERM');
  const exit = await proxy.child.waitExit(5000);
  assert.equal(exit.code, 0, JSON.stringify(exit));
  assert.ok(nowMs() - stopAt < 2000, 'no drain left to wait for');
});

test('without the preStop /drain the same stop cuts the streams (the test can tell)', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'log:\n  level: error\n' });
  await waitReady(proxy);
  const stream = streamRequest(proxy, 9);
  await started(proxy, 1);
  // What Kubernetes does with a native sidecar when the model container has no drain: SIGTERM
  // to the model server right away.
  await sim.stop('SIGTERM');
  const res = await stream;
  assert.ok(tokensIn(res) < TOKENS, `the stream was cut (${tokensIn(res)} of ${TOKENS} tokens)`);
  assert.doesNotMatch(res.body.toString(), /data: \[DONE\]/);
});

test('/drain answers 503 with the count when its wait runs out, and refuses a bad wait', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'log:\n  level: error\n' });
  await waitReady(proxy);
  const stream = streamRequest(proxy, 7);
  await started(proxy, 1);
  const waitFrom = nowMs();
  const short = await drainCall(proxy, '200ms');
  assert.equal(short.status, 503, describeResult(short));
  assert.equal(short.body.toString(), '1 requests still in flight\n');
  assert.ok(nowMs() - waitFrom >= 180, 'it waited');
  const bad = await drainCall(proxy, 'soon');
  assert.equal(bad.status, 400);
  // The stream is not disturbed by draining.
  const res = await stream;
  assert.equal(res.complete, true, describeResult(res));
  assert.equal(tokensIn(res), TOKENS);
});

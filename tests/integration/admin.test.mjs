// Admin listener: /healthz, /readyz following the upstream, /metrics in Prometheus text.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { nowMs, parseProm, request, startProxy, startSim, stopAll, waitFor, waitReady } from './lib/harness.mjs';

after(stopAll);

const PROBE_MS = 100;

test('/healthz, /readyz and /metrics; /readyz turns 503 when the upstream dies', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: `readiness:\n  probe_interval: ${PROBE_MS}ms\n` });

  const health = await proxy.admin('/healthz');
  assert.equal(health.status, 200);
  await waitReady(proxy, 2000);

  const metrics = await proxy.admin('/metrics');
  assert.equal(metrics.status, 200);
  assert.match(metrics.headers['content-type'], /^text\/plain/);
  const m = parseProm(metrics.body.toString());
  assert.equal(m.value('tokenmeter_build_info'), 1);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
  assert.ok(m.types.get('tokenmeter_streams_active') === 'gauge');

  const missing = await proxy.admin('/nope');
  assert.equal(missing.status, 404);
  const post = await request({ port: proxy.adminPort, method: 'POST', path: '/metrics', body: 'x' });
  assert.equal(post.status, 405);

  // Kill the upstream: within a few probe intervals /readyz must fail; /healthz stays 200.
  await sim.stop('SIGKILL');
  const killedAt = nowMs();
  const notReady = await waitFor(async () => {
    const r = await proxy.admin('/readyz');
    return r.status === 503 ? r : undefined;
  }, { timeoutMs: 5000, intervalMs: 10, what: '/readyz 503 after the upstream died' });
  const latency = nowMs() - killedAt;
  assert.ok(latency <= 4 * PROBE_MS + 200, `/readyz failed ${latency.toFixed(0)} ms after the upstream died`);
  assert.equal(notReady.status, 503);
  assert.equal((await proxy.admin('/healthz')).status, 200);

  // Stays 503 while the upstream is down.
  await new Promise((resolve) => setTimeout(resolve, 3 * PROBE_MS));
  assert.equal((await proxy.admin('/readyz')).status, 503);
});

test('/readyz recovers when an upstream appears on the port', { timeout: 30_000 }, async () => {
  // Start a simulator, note its port, stop it, start the proxy against the dead port, then
  // start a new simulator on the same port.
  const first = await startSim();
  const port = first.port;
  await first.stop('SIGKILL');
  const proxy = await startProxy({ upstream: port, config: `readiness:\n  probe_interval: ${PROBE_MS}ms\n` });
  await new Promise((resolve) => setTimeout(resolve, 2 * PROBE_MS));
  assert.equal((await proxy.admin('/readyz')).status, 503);
  // (A port freed a moment ago is very unlikely to be taken again in between.)
  const second = await startSim(['--listen', `127.0.0.1:${port}`]);
  assert.equal(second.port, port);
  await waitReady(proxy, 4 * PROBE_MS + 1000);
});

// tenants.shared_limits.redis: one tenant limit for several proxies, kept in a real redis-server
// the test starts on a loopback port. Two proxies share one limit (the aggregate admitted rate is
// the limit; the same load without the store gets about twice it); a Redis slowed by a delaying relay makes admission wait at most the
// timeout. Failures of Redis: shared_limits_failover.test.mjs.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { nowMs, sleep, startProxy, startSim, stopAll, waitMetrics } from './lib/harness.mjs';
import { send, sharedConfig, startDelayRelay, startRedis } from './lib/redis.mjs';

after(stopAll);

async function tenantTokens(proxy) {
  const m = await proxy.metrics();
  let sum = 0;
  for (const s of m.select('tokenmeter_tenant_tokens_total')) {
    if (s.labels.tenant === 'team' && (s.labels.type === 'input' || s.labels.type === 'output')) {
      sum += s.value;
    }
  }
  return sum;
}

// Drives both proxies far beyond the limit (four clients each, asking again 40 ms after a 429)
// and returns the tenant's admitted input + output tokens per second over `seconds`, after
// `warmUpSeconds` that spend the full buckets.
async function aggregateRate(proxies, { warmUpSeconds, seconds }) {
  let running = true;
  const counts = { admitted: 0, refused: 0, other: 0 };
  const loops = [];
  for (const proxy of proxies) {
    for (let i = 0; i < 4; ++i) {
      loops.push((async () => {
        while (running) {
          const res = await send(proxy);
          if (res.status === 200 && res.complete) {
            ++counts.admitted;
          } else if (res.status === 429) {
            ++counts.refused;
            await sleep(40);
          } else {
            ++counts.other;
            await sleep(20);
          }
        }
      })());
    }
  }
  await sleep(warmUpSeconds * 1000);
  const total = async () => (await Promise.all(proxies.map(tenantTokens))).reduce((a, b) => a + b, 0);
  const t0 = nowMs();
  const start = await total();
  await sleep(seconds * 1000);
  const end = await total();
  const elapsed = (nowMs() - t0) / 1000;
  running = false;
  await Promise.all(loops);
  return { perSecond: (end - start) / elapsed, elapsed, counts };
}

test('two proxies share one tenant limit: aggregate admitted tokens/s within 10 % of it', { timeout: 90_000 }, async () => {
  const redis = await startRedis();
  const sim = await startSim();
  const rate = 1000;
  const config = sharedConfig(redis.url, { rate, burst: '500ms' });
  const proxies = await Promise.all([
    startProxy({ upstream: sim.port, config, name: 'proxy-a' }),
    startProxy({ upstream: sim.port, config, name: 'proxy-b' }),
  ]);
  const { perSecond, elapsed, counts } = await aggregateRate(proxies, { warmUpSeconds: 3, seconds: 20 });
  console.log(`shared limit ${rate} tokens/s: admitted ${perSecond.toFixed(1)} tokens/s over ` +
    `${elapsed.toFixed(1)} s; ${JSON.stringify(counts)}`);
  assert.equal(counts.other, 0, 'every answer is 200 or 429');
  assert.ok(counts.refused > 0, 'the limit refused requests');
  assert.ok(Math.abs(perSecond - rate) <= 0.1 * rate,
    `aggregate ${perSecond.toFixed(1)} tokens/s is not within 10 % of ${rate}`);
  // Each proxy had its share decided by the store: both were admitted, both were refused.
  for (const proxy of proxies) {
    const m = await proxy.metrics();
    assert.equal(m.value('tokenmeter_tenant_shared_limit_store_in_use'), 1);
    assert.ok(m.value('tokenmeter_tenant_shared_limit_decisions_total', { decision: 'admitted', store: 'shared' }) > 0);
    assert.ok(m.value('tokenmeter_tenant_shared_limit_decisions_total', { decision: 'refused', store: 'shared' }) > 0);
    assert.equal(m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'connection' }), 0);
  }
  assert.match(redis.cli('HGET', 'tokenmeter:{team}:tokens', 'level'), /^-?\d+\.\d+$/);
});

// The same load without the shared store: each process limits on its own, so the tenant gets
// about twice its limit. This is what the test above would see if the store were not shared.
test('without the shared store the same two proxies admit about twice the limit', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const rate = 1000;
  const config = sharedConfig('""', { rate, burst: '500ms' });
  const proxies = await Promise.all([
    startProxy({ upstream: sim.port, config, name: 'proxy-a-alone' }),
    startProxy({ upstream: sim.port, config, name: 'proxy-b-alone' }),
  ]);
  const { perSecond, elapsed, counts } = await aggregateRate(proxies, { warmUpSeconds: 2, seconds: 8 });
  console.log(`per-process limits of ${rate} tokens/s: admitted ${perSecond.toFixed(1)} tokens/s ` +
    `over ${elapsed.toFixed(1)} s; ${JSON.stringify(counts)}`);
  assert.ok(counts.refused > 0, 'each process refused requests');
  assert.ok(perSecond > 1.5 * rate, `aggregate ${perSecond.toFixed(1)} tokens/s`);
});

// Median time to first byte of `n` requests, one after another.
async function medianTtft(proxy, n) {
  const times = [];
  for (let i = 0; i < n; ++i) {
    const res = await send(proxy, { tokens: 3 });
    assert.equal(res.status, 200);
    times.push(res.firstDataAt - res.startedAt);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)];
}

test('a slow Redis: admission waits at most the timeout, then on_error decides', { timeout: 60_000 }, async () => {
  const redis = await startRedis();
  const sim = await startSim();
  const timeoutMs = 100;
  const relay = await startDelayRelay(redis.port, 400);
  const direct = await startProxy({ upstream: sim.port, name: 'proxy-direct',
    config: sharedConfig(redis.url, { rate: 100_000, timeout: `${timeoutMs}ms` }) });
  const slow = await startProxy({ upstream: sim.port, name: 'proxy-slow',
    config: sharedConfig(`redis://127.0.0.1:${relay.port}`, { rate: 100_000, timeout: `${timeoutMs}ms` }) });
  // Let the slow proxy's connections through the relay come up.
  await sleep(1500);
  const base = await medianTtft(direct, 9);
  const delayed = await medianTtft(slow, 9);
  console.log(`TTFT median: direct ${base.toFixed(1)} ms, through a 400 ms relay ${delayed.toFixed(1)} ms ` +
    `(timeout ${timeoutMs} ms)`);
  // The bound, with room for a loaded machine: never the relay's 800 ms round trip.
  assert.ok(delayed - base <= timeoutMs + 150,
    `TTFT grew by ${(delayed - base).toFixed(1)} ms, more than the ${timeoutMs} ms timeout allows`);
  // A call that times out closes its connection (an answer that late may never come); calls
  // while it reconnects fail `connection` at once. Either way on_error decided each admission.
  const failed = (x) => x.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'timeout' }) +
    x.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'connection' });
  const m = await waitMetrics(slow, (x) => failed(x) >= 9);
  console.log(`slow Redis: ${m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'timeout' })} timeouts, ` +
    `${m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'connection' })} connection failures`);
  assert.ok(failed(m) >= 9);
  assert.ok(m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'timeout' }) >= 1);
  assert.ok(m.value('tokenmeter_tenant_shared_limit_round_trip_seconds_count') >= 9);
  const d = await direct.metrics();
  assert.equal(d.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'timeout' }), 0);
  await relay.stop();
});

// tenants.shared_limits.redis when Redis fails: a real redis-server the test starts on a loopback
// port is killed under running streams (they go on; allow/deny apply as configured; errors are
// counted; the tokens admitted meanwhile are the visible divergence), then started again on the
// same port (both proxies go back to the shared bucket without a restart).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { sleep, startProxy, startSim, stopAll, waitFor } from './lib/harness.mjs';
import { send, sharedConfig, startRedis } from './lib/redis.mjs';

after(stopAll);

test('Redis killed mid-run: streams finish, allow and deny apply, errors counted; Redis back: shared again', { timeout: 60_000 }, async () => {
  const redis = await startRedis();
  const sim = await startSim();
  // A limit far above what the test uses: every refusal here comes from on_error: deny.
  const allow = await startProxy({ upstream: sim.port, name: 'proxy-allow',
    config: sharedConfig(redis.url, { rate: 100_000, onError: 'allow' }) });
  const deny = await startProxy({ upstream: sim.port, name: 'proxy-deny',
    config: sharedConfig(redis.url, { rate: 100_000, onError: 'deny' }) });
  for (const proxy of [allow, deny]) {
    assert.equal((await send(proxy, { tokens: 5 })).status, 200);
  }
  // Two-second streams, admitted while Redis is up; Redis dies under them.
  const streams = [allow, deny].map((proxy) => send(proxy, { tokens: 100, itl: 20 }));
  await sleep(500);
  await redis.stop('SIGKILL');
  for (const res of await Promise.all(streams)) {
    assert.equal(res.status, 200);
    assert.ok(res.complete, 'an admitted stream runs to its end');
    assert.match(res.body.toString(), /data: \[DONE\]/);
  }
  // allow: the local bucket admits; deny: 429 with Retry-After and a JSON error.
  assert.equal((await send(allow, { tokens: 5 })).status, 200);
  const refused = await send(deny, { tokens: 5 });
  assert.equal(refused.status, 429);
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  assert.equal(JSON.parse(refused.body.toString()).error.code, 'provisioned_throughput_exceeded');
  for (const proxy of [allow, deny]) {
    const m = await proxy.metrics();
    const errors = m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'connection' }) +
      m.value('tokenmeter_tenant_shared_limit_errors_total', { reason: 'timeout' });
    assert.ok(errors >= 1, 'store errors are counted');
    assert.equal(m.value('tokenmeter_tenant_shared_limit_store_in_use'), 0);
  }
  const local = await allow.metrics();
  assert.ok(local.value('tokenmeter_tenant_shared_limit_decisions_total', { decision: 'admitted', store: 'local' }) >= 1);
  // What was charged and given back locally is the divergence, waiting for the store: the local
  // admissions' reservations and the settlements the store missed (negative when more was
  // given back than charged).
  assert.notEqual(local.value('tokenmeter_tenant_shared_limit_unsynced_tokens'), 0);

  // The same port again, an empty Redis: the proxies reconnect on their own.
  const again = await startRedis(redis.port);
  await waitFor(async () => (await send(deny, { tokens: 5 })).status === 200,
    { timeoutMs: 15_000, intervalMs: 100, what: 'the deny proxy admitting through Redis again' });
  await waitFor(async () => {
    await send(allow, { tokens: 5 });
    const m = await allow.metrics();
    return m.value('tokenmeter_tenant_shared_limit_store_in_use') === 1 &&
      m.value('tokenmeter_tenant_shared_limit_unsynced_tokens') === 0;
  }, { timeoutMs: 15_000, intervalMs: 100, what: 'the allow proxy back on the shared store, divergence sent' });
  // The bucket lives in the new Redis again.
  assert.match(again.cli('HGET', 'tokenmeter:{team}:tokens', 'level'), /^-?\d+\.\d+$/);
  // A new Redis has no script cache: EVALSHA was answered NOSCRIPT, EVAL loaded it, and from
  // then on EVALSHA alone.
  const stats = again.cli('INFO', 'commandstats');
  const calls = (name) => Number((new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats) || [])[1] || 0);
  assert.ok(calls('eval') >= 1, stats);
  assert.ok(calls('evalsha') > calls('eval'), stats);
  // A clean stop with the Redis connections open (under ASan the leak check runs at exit).
  for (const proxy of [allow, deny]) {
    proxy.child.signal('SIGTERM');
    assert.deepEqual(await proxy.child.waitExit(20_000), { code: 0, signal: null });
  }
});


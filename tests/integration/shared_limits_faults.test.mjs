// tenants.shared_limits.redis against a Redis that misbehaves: a scripted RESP server (and a
// real redis-server over TLS) on loopback ports the OS chose. In every case the proxy stays up
// and answers, and on_error decides the admissions Redis could not: allow admits locally, deny
// answers 429. The unsolicited reply, the command answered twice, the huge headers (RSS stays
// small), the silent server, the wrong reply types, the wrong password (never in the log, nor
// the server's text; a few reconnects over 3 s), and rediss:// with a wrong host name (refused,
// logged) and working.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import { redisLike, startFakeRedis } from './lib/fake_redis.mjs';
import { sleep, startChild, startProxy, startSim, stopAll, waitFor, writeTempFile } from './lib/harness.mjs';
import { freePort, send, sharedConfig } from './lib/redis.mjs';

after(stopAll);

const sim = await startSim();

// A proxy with on_error `onError` in front of `url`; `extra` adds keys under redis:.
function proxyFor(url, onError, extra = [], name = `proxy-${onError}`) {
  const config = sharedConfig(url, { rate: 100_000, onError, timeout: '200ms' }) +
    extra.map((line) => `      ${line}\n`).join('');
  return startProxy({ upstream: sim.port, name, config });
}

const rssMiB = (proxy) => {
  const status = readFileSync(`/proc/${proxy.child.proc.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
};

const failures = async (proxy, reason) =>
  (await proxy.metrics()).value('tokenmeter_tenant_shared_limit_errors_total', { reason });

// The proxies are up, answer, and on_error decided: allow admits (200), deny refuses (429).
async function assertOnErrorApplied(allow, deny) {
  assert.equal((await send(allow, { tokens: 3 })).status, 200, 'allow: admitted locally');
  const refused = await send(deny, { tokens: 3 });
  assert.equal(refused.status, 429, 'deny: refused');
  assert.equal(JSON.parse(refused.body.toString()).error.code, 'provisioned_throughput_exceeded');
  for (const proxy of [allow, deny]) {
    assert.ok(proxy.child.running, `${proxy.child.name} is alive`);
    assert.equal((await proxy.admin('/healthz')).status, 200);
  }
}

test('a reply on connect nobody asked for closes the connection; the proxy goes on', { timeout: 30_000 }, async () => {
  const redis = await startFakeRedis({ greeting: '+OK\r\n' });
  const [allow, deny] = await Promise.all([proxyFor(redis.url, 'allow'), proxyFor(redis.url, 'deny')]);
  await sleep(500);
  await assertOnErrorApplied(allow, deny);
  assert.equal(redis.count('EVALSHA'), 0, 'no call is sent on a connection out of step');
  assert.ok(redis.stats.connections >= 4, 'each proxy reconnects');
  assert.match(deny.child.stderrText, /out of step/);
  await redis.stop();
});

test('a command answered twice closes the connection; the proxy goes on', { timeout: 30_000 }, async () => {
  const redis = await startFakeRedis({
    answer: (command) => (command[0] === 'EVALSHA' ? redisLike(command).repeat(2) : redisLike(command)),
  });
  const deny = await proxyFor(redis.url, 'deny');
  await waitFor(async () => (await send(deny, { tokens: 3 })).status === 200,
    { timeoutMs: 5000, intervalMs: 50, what: 'an admission through the fake Redis' });
  await waitFor(async () => /nobody asked for|another call's tag/.test(deny.child.stderrText),
    { timeoutMs: 5000, intervalMs: 50, what: 'the extra reply noticed' });
  await waitFor(() => redis.stats.connections >= 3,
    { timeoutMs: 5000, intervalMs: 50, what: 'the connection closed and made again' });
  const res = await send(deny, { tokens: 3 });
  assert.ok(res.status === 200 || res.status === 429, `answered ${res.status}`);
  assert.ok(deny.child.running);
  await redis.stop();
});

for (const [what, header] of [['array header *20000000', '*20000000\r\n'], ['bulk header $2000000000', '$2000000000\r\n']]) {
  test(`a huge ${what} is refused on the header: RSS stays small`, { timeout: 30_000 }, async () => {
    // The header, then megabytes of filler behind it, as a hostile server would send.
    const redis = await startFakeRedis({
      answer: (command) => (command[0] === 'EVALSHA' ? header + ':1\r\n'.repeat(1 << 18) : redisLike(command)),
    });
    const [allow, deny] = await Promise.all([proxyFor(redis.url, 'allow'), proxyFor(redis.url, 'deny')]);
    const before = rssMiB(allow);
    for (let i = 0; i < 10; ++i) {
      assert.equal((await send(allow, { tokens: 3 })).status, 200);
      await sleep(30);
    }
    await assertOnErrorApplied(allow, deny);
    const peak = Math.max(rssMiB(allow), rssMiB(deny));
    console.log(`${what}: proxy RSS ${before.toFixed(1)} MiB before, ${peak.toFixed(1)} MiB after ` +
      `${redis.count('EVALSHA')} hostile replies`);
    assert.ok(redis.count('EVALSHA') >= 2, 'the hostile replies were sent');
    assert.ok(peak < before + 64, `RSS grew from ${before.toFixed(1)} to ${peak.toFixed(1)} MiB`);
    assert.ok(await failures(allow, 'connection') >= 1);
    assert.match(allow.child.stderrText, /max_reply_(bytes|elements)/);
    await redis.stop();
  });
}

test('a silent Redis: each call times out, on_error decides within the timeout', { timeout: 30_000 }, async () => {
  const redis = await startFakeRedis({ answer: (command) => (command[0] === 'EVALSHA' ? null : redisLike(command)) });
  const [allow, deny] = await Promise.all([proxyFor(redis.url, 'allow'), proxyFor(redis.url, 'deny')]);
  await sleep(300);
  const started = Date.now();
  await assertOnErrorApplied(allow, deny);
  assert.ok(Date.now() - started < 2000);
  await waitFor(async () => (await failures(allow, 'timeout')) >= 1 && (await failures(deny, 'timeout')) >= 1,
    { timeoutMs: 3000, intervalMs: 50, what: 'timeouts counted' });
  await redis.stop();
});

test('wrong reply types fail the call; on_error decides', { timeout: 30_000 }, async () => {
  const wrong = [':1\r\n', '+OK\r\n', '$-1\r\n', '*1\r\n:1\r\n', '*2\r\n$1\r\nx\r\n:1\r\n', '-ERR no\r\n'];
  let n = 0;
  const redis = await startFakeRedis({
    answer: (command) => (command[0] === 'EVALSHA' ? wrong[n++ % wrong.length] : redisLike(command)),
  });
  const [allow, deny] = await Promise.all([proxyFor(redis.url, 'allow'), proxyFor(redis.url, 'deny')]);
  await sleep(300);
  for (let i = 0; i < wrong.length; ++i) {
    await assertOnErrorApplied(allow, deny);
  }
  assert.ok(await failures(allow, 'reply') >= 1);
  assert.ok(await failures(deny, 'reply') + await failures(deny, 'script') >= 1);
  await redis.stop();
});

test('a wrong password: never logged, nor the server\'s text; reconnects back off', { timeout: 30_000 }, async () => {
  const password = 'p4ssw0rd-that-must-not-leak';
  const redis = await startFakeRedis({
    answer: (command) => (command[0] === 'AUTH'
      ? `-WRONGPASS invalid username-password pair or user is disabled (got ${command.at(-1)})\r\n`
      : '-NOAUTH Authentication required.\r\n'),
  });
  const passwordFile = writeTempFile('redis-password', `${password}\n`);
  const extra = ['username: meter', `password_file: ${passwordFile}`];
  const [allow, deny] = await Promise.all([
    proxyFor(redis.url, 'allow', extra), proxyFor(redis.url, 'deny', extra)]);
  const start = Date.now();
  await sleep(3000);
  const attempts = redis.count('AUTH');
  console.log(`wrong password: ${attempts} AUTH attempts from 2 proxies (2 connections each) in ` +
    `${((Date.now() - start) / 1000).toFixed(1)} s`);
  // Backoff from 100 ms doubling, full jitter: about 6 per connection in 3 s. A backoff that
  // starts over on each TCP connect makes about 20 per connection per second.
  assert.ok(attempts >= 4 && attempts <= 40, `${attempts} AUTH attempts`);
  await assertOnErrorApplied(allow, deny);
  for (const proxy of [allow, deny]) {
    const log = proxy.child.stderrText + proxy.child.stdoutText;
    assert.ok(!log.includes(password), 'the password is never logged');
    assert.ok(!log.includes('invalid username-password'), 'nor the server\'s text');
    assert.match(log, /refused AUTH \(WRONGPASS\)/);
  }
  await redis.stop();
});

// A real redis-server with TLS only, its certificate for localhost and 127.0.0.1.
async function startTlsRedis(ca) {
  const leaf = makeLeaf(ca, 'redis-server');
  const port = await freePort();
  const child = startChild(`redis-tls-${port}`, 'redis-server',
    ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--tls-cert-file', leaf.cert,
      '--tls-key-file', leaf.key, '--tls-ca-cert-file', ca.cert, '--tls-auth-clients', 'no',
      '--save', '', '--appendonly', 'no', '--protected-mode', 'no']);
  await child.waitForStdout(/Ready to accept connections/);
  return {
    port,
    child,
    cli: (...args) => (spawnSync('redis-cli', ['--tls', '--cacert', ca.cert, '-h', '127.0.0.1',
      '-p', String(port), ...args], { encoding: 'utf8', timeout: 5000 }).stdout || '').trim(),
  };
}

test('rediss://: a certificate for another name is refused and logged; the right one works', { timeout: 60_000 }, async () => {
  const ca = makeCa();
  const redis = await startTlsRedis(ca);
  const url = `rediss://127.0.0.1:${redis.port}`;
  const wrongName = await proxyFor(url, 'deny', [`ca_file: ${ca.cert}`, 'server_name: redis.example.com'],
    'proxy-wrong-name');
  const allow = await proxyFor(url, 'allow', [`ca_file: ${ca.cert}`, 'server_name: redis.example.com'],
    'proxy-wrong-name-allow');
  await waitFor(async () => /TLS handshake failed: .*(Hostname mismatch|certificate verify failed)/.test(wrongName.child.stderrText),
    { timeoutMs: 5000, intervalMs: 50, what: 'the refused certificate logged' });
  await assertOnErrorApplied(allow, wrongName);

  // Verified against the CA, the name being the URL's address (in the certificate's SANs).
  const good = await proxyFor(url, 'deny', [`ca_file: ${ca.cert}`], 'proxy-tls');
  await waitFor(async () => (await send(good, { tokens: 3 })).status === 200,
    { timeoutMs: 5000, intervalMs: 50, what: 'admitted through Redis over TLS' });
  const m = await good.metrics();
  assert.ok(m.value('tokenmeter_tenant_shared_limit_decisions_total', { decision: 'admitted', store: 'shared' }) >= 1);
  assert.match(redis.cli('HGET', 'tokenmeter:{team}:tokens', 'level'), /^-?\d+(\.\d+)?$/);
  assert.match(good.child.stderrText, /TLS, timeout/);
});

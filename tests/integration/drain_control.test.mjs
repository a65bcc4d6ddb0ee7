// Draining as an SRE drives it: GET /drain takes the proxy out of readiness (/readyz 503, the
// gauge tokenmeter_draining 1, a log line naming the caller's address), POST /undrain puts it
// back (/readyz 200, gauge 0); a drain request a web page sends (Origin or Referer) is refused
// with 403 cross_site, and with admin_auth.token_file both need the bearer token (401 without).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  describeResult, request, startProxy, startSim, stopAll, waitFor, waitForLog, waitReady, writeTempFile,
} from './lib/harness.mjs';

after(stopAll);

const call = (proxy, method, path, headers = {}) => request({
  port: proxy.adminPort, method, path, headers, timeoutMs: 5000,
});
const draining = async (proxy) => (await proxy.metrics()).value('tokenmeter_draining');
const json = (res) => JSON.parse(res.body.toString());

test('drain, then undrain: /readyz, the gauge and the log follow', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'readiness:\n  probe_interval: 100ms\n' });
  await waitReady(proxy);
  assert.equal(await draining(proxy), 0, 'the gauge exists from the start');

  const drained = await call(proxy, 'GET', '/drain?wait=1s');
  assert.equal(drained.status, 200, describeResult(drained));
  assert.equal((await proxy.admin('/readyz')).status, 503);
  assert.equal(await draining(proxy), 1);
  await waitForLog(proxy.child, /drain started by GET \/drain from 127\.0\.0\.1:\d+/);

  // Undrain takes POST only: a GET (a link, a prefetch) changes nothing.
  const get = await call(proxy, 'GET', '/undrain');
  assert.equal(get.status, 405);
  assert.equal(get.headers.allow, 'POST');
  assert.equal((await proxy.admin('/readyz')).status, 503);

  const undrained = await call(proxy, 'POST', '/undrain');
  assert.equal(undrained.status, 200, describeResult(undrained));
  assert.equal(undrained.body.toString(), 'undrained\n');
  assert.equal((await proxy.admin('/readyz')).status, 200);
  assert.equal(await draining(proxy), 0);
  await waitForLog(proxy.child, /drain ended by POST \/undrain from 127\.0\.0\.1:\d+/);
});

test('a drain request a web page sent (Origin or Referer) is refused', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'readiness:\n  probe_interval: 100ms\n' });
  await waitReady(proxy);
  for (const headers of [{ origin: 'https://evil.example' }, { referer: 'https://evil.example/page' }]) {
    const res = await call(proxy, 'GET', '/drain?wait=1s', headers);
    assert.equal(res.status, 403, describeResult(res));
    assert.equal(json(res).error.code, 'cross_site');
    assert.equal((await proxy.admin('/readyz')).status, 200, 'not drained');
    assert.equal(await draining(proxy), 0);
  }
  await call(proxy, 'GET', '/drain?wait=1s');
  const res = await call(proxy, 'POST', '/undrain', { origin: 'https://evil.example' });
  assert.equal(res.status, 403);
  assert.equal((await proxy.admin('/readyz')).status, 503, 'still drained');
  await waitForLog(proxy.child, /GET \/drain from 127\.0\.0\.1:\d+ refused: sent by a web page/);
});

test('admin_auth.token_file: /drain and /undrain need the bearer token; probes do not', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const tokenFile = writeTempFile('admin-token', 's3cret-token-value\n');
  const proxy = await startProxy({
    upstream: sim.port,
    config: `readiness:\n  probe_interval: 100ms\nadmin_auth:\n  token_file: ${tokenFile}\n`,
  });
  await waitReady(proxy);
  for (const headers of [{}, { authorization: 'Bearer wrong-token-value!' }, { authorization: 'Basic s3cret-token-value' },
    { authorization: 'Bearer s3cret-token-valu' }]) {
    const res = await call(proxy, 'GET', '/drain?wait=1s', headers);
    assert.equal(res.status, 401, `${JSON.stringify(headers)}: ${describeResult(res)}`);
    assert.equal(json(res).error.code, 'unauthorized');
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal((await proxy.admin('/readyz')).status, 200, 'not drained');
  }
  const auth = { authorization: 'Bearer s3cret-token-value' };
  assert.equal((await call(proxy, 'GET', '/drain?wait=1s', auth)).status, 200);
  assert.equal((await proxy.admin('/readyz')).status, 503);
  assert.equal((await call(proxy, 'POST', '/undrain')).status, 401);
  assert.equal((await proxy.admin('/readyz')).status, 503);
  assert.equal((await call(proxy, 'POST', '/undrain', { authorization: 'bearer s3cret-token-value' })).status, 200);
  assert.equal((await proxy.admin('/readyz')).status, 200);
  assert.equal((await proxy.admin('/metrics')).status, 200, 'scrapes need no token');
  assert.ok(!proxy.child.stderrText.includes('s3cret'), 'the token is never logged');
});

test('a signal\'s drain cannot be undone', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  // A stream keeps the proxy draining (not exited) while /undrain is tried.
  const proxy = await startProxy({ upstream: sim.port, config: 'timeouts:\n  drain: 10s\nreadiness:\n  probe_interval: 100ms\n' });
  await waitReady(proxy);
  const stream = request({
    port: proxy.port,
    body: { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] },
    headers: { 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '100', 'x-sim-output-tokens': '30' },
    timeoutMs: 20_000,
  });
  await waitFor(async () => (await proxy.metrics()).value('tokenmeter_streams_active') >= 1,
    { timeoutMs: 3000, what: 'a stream relaying' });
  proxy.child.proc.kill('SIGTERM');
  await waitForLog(proxy.child, /drain started by signal 15 \(SIGTERM\)/);
  const res = await call(proxy, 'POST', '/undrain');
  assert.equal(res.status, 409, describeResult(res));
  assert.equal(json(res).error.code, 'shutting_down');
  assert.equal(await draining(proxy), 1);
  assert.equal((await stream).status, 200);
});

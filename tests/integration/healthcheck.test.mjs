// tokenmeter healthcheck: one GET of a running proxy's admin /healthz (or /readyz with --ready),
// exit 0 on 200 and 1 on anything else, within its --timeout; an unspecified admin address in
// the config is probed on loopback.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';

import { binaries, closedPort, startProxyWithClosedUpstream, stopAll, writeTempFile } from './lib/harness.mjs';

after(stopAll);

function healthcheck(args) {
  const { bin } = binaries();
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(bin, ['healthcheck', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (status) => {
      resolve({ status, stdout, stderr, ms: Number(process.hrtime.bigint() - started) / 1e6 });
    });
  });
}

test('a live proxy: /healthz 200 is exit 0; /readyz 503 (upstream down) is exit 1', { timeout: 30_000 }, async () => {
  const { proxy } = await startProxyWithClosedUpstream();
  const live = await healthcheck(['--admin', `127.0.0.1:${proxy.adminPort}`]);
  assert.equal(live.status, 0, live.stdout + live.stderr);
  assert.equal(live.stdout, `127.0.0.1:${proxy.adminPort}/healthz: 200\n`);

  const ready = await healthcheck(['--admin', `127.0.0.1:${proxy.adminPort}`, '--ready']);
  assert.equal(ready.status, 1, ready.stdout + ready.stderr);
  assert.match(ready.stderr, /\/readyz answered 503/);

  // The image's way: the config's admin 0.0.0.0:PORT is probed on 127.0.0.1.
  const config = writeTempFile('healthcheck.yaml', `admin: "0.0.0.0:${proxy.adminPort}"\n`);
  const fromConfig = await healthcheck(['--config', config]);
  assert.equal(fromConfig.status, 0, fromConfig.stdout + fromConfig.stderr);
  assert.equal(fromConfig.stdout, `127.0.0.1:${proxy.adminPort}/healthz: 200\n`);
});

test('nothing listening: exit 1, saying it could not connect', { timeout: 20_000 }, async () => {
  const port = await closedPort();
  const r = await healthcheck(['--admin', `127.0.0.1:${port}`]);
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /cannot connect to 127\.0\.0\.1:\d+: Connection refused/);
});

test('a listener that never answers: exit 1 once --timeout has passed', { timeout: 20_000 }, async () => {
  const sockets = [];
  const server = net.createServer((s) => { sockets.push(s); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const r = await healthcheck(['--admin', `127.0.0.1:${server.address().port}`, '--timeout', '300ms']);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /no answer from .* within 300 ms/);
    assert.ok(r.ms >= 250 && r.ms < 5000, `took ${r.ms} ms`);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
});

test('an answer that is not HTTP, and an unknown flag: exit 1', { timeout: 20_000 }, async () => {
  const server = net.createServer((s) => { s.end('SSH-2.0-OpenSSH_9.2\r\n'); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const r = await healthcheck(['--admin', `127.0.0.1:${server.address().port}`]);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /did not answer with HTTP/);
  } finally {
    server.close();
  }
  const bad = await healthcheck(['--port', '9090']);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /unknown argument '--port'/);
  assert.match(bad.stderr, /usage: tokenmeter healthcheck/);
});

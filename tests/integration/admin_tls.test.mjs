// TLS on the admin listener (`admin_tls`, the same keys as `tls`): /metrics,
// /healthz, /readyz and /status.json over HTTPS trusting the test CA, the proxy listener's own
// certificate kept apart, mutual TLS required, plain HTTP answered with a 400 JSON body, the
// handshake deadline, rotation by SIGHUP and by the file watch (a bad new file keeps the old
// certificate), and bad files at start naming admin_tls.<key>. Certificates are made here with
// the openssl CLI.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import { httpsRequest } from './lib/https.mjs';
import {
  binaries, chatBody, parseProm, rawExchange, request, startProxy, startSim, stopAll, waitFor,
} from './lib/harness.mjs';

after(stopAll);

let ca;
let adminCert;
let proxyCert;
let client;
let dir;

before(() => {
  ca = makeCa();
  dir = ca.dir;
  adminCert = makeLeaf(ca, 'admin', { serial: '4001' });
  proxyCert = makeLeaf(ca, 'proxy', { serial: '5001' });
  client = makeLeaf(ca, 'scraper', { client: true, hosts: [] });
});

// Copies of the admin certificate and key under names of their own, for tests that rotate.
function liveFiles(tag) {
  const cert = path.join(dir, `admin-live-${tag}.pem`);
  const key = path.join(dir, `admin-live-${tag}.key`);
  copyFileSync(adminCert.cert, cert);
  copyFileSync(adminCert.key, key);
  return { cert, key };
}

function adminTlsConfig(files, extra = '') {
  return `admin_tls:\n  cert_file: ${files.cert}\n  key_file: ${files.key}\n${extra}`;
}

// One GET over HTTPS (lib/https.mjs) trusting the test CA; rejects with the TLS or socket error.
function adminGet(port, pathName, options = {}) {
  return httpsRequest(port, { caFile: ca.cert, method: 'GET', pathName, timeoutMs: 10_000, ...options });
}

async function adminMetrics(port, options) {
  const res = await adminGet(port, '/metrics', options);
  assert.equal(res.status, 200, `/metrics over https: ${res.body}`);
  return parseProm(res.body);
}

// Scrapes over HTTPS until predicate(metrics) holds; returns the last scrape either way.
async function waitAdminMetrics(port, predicate, { timeoutMs = 5000, ...options } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await adminMetrics(port, options);
    if (predicate(m) || Date.now() >= deadline) return m;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The serial of the certificate a handshake with the admin port sees.
function servedSerial(port) {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: readFileSync(ca.cert) });
    socket.once('secureConnect', () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

test('/metrics, /healthz, /readyz and /status.json over HTTPS; the proxy listener keeps its own certificate', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: `tls:\n  cert_file: ${proxyCert.cert}\n  key_file: ${proxyCert.key}\n${adminTlsConfig(liveFiles('paths'))}`,
  });
  const healthz = await adminGet(proxy.adminPort, '/healthz');
  assert.equal(healthz.status, 200);
  assert.equal(healthz.body, 'ok\n');
  assert.equal(healthz.peerSerial, '0FA1', 'the admin port serves admin_tls.cert_file (serial 4001)');
  assert.equal(healthz.protocol, 'TLSv1.3');
  const ready = await waitFor(async () => {
    const r = await adminGet(proxy.adminPort, '/readyz');
    return r.status === 200 ? r : undefined;
  }, { timeoutMs: 5000, what: '/readyz 200 over https' });
  assert.equal(ready.body, 'ready\n');
  const status = await adminGet(proxy.adminPort, '/status.json');
  assert.equal(status.status, 200);
  assert.match(status.headers['content-type'], /application\/json/);
  assert.equal(typeof JSON.parse(status.body), 'object');
  // A whole exchange (not a bare handshake) on the proxy port, so its handshake is counted.
  const viaProxy = await adminGet(proxy.port, '/v1/models');
  assert.equal(viaProxy.peerSerial, '1389', 'the proxy port serves tls.cert_file (serial 5001)');

  const m = await waitAdminMetrics(proxy.adminPort, (x) =>
    x.value('tokenmeter_tls_handshakes_total', { listener: 'admin' }) >= 4 &&
    x.value('tokenmeter_tls_handshakes_total', { listener: 'proxy' }) >= 1);
  assert.ok(m.value('tokenmeter_tls_handshakes_total', { listener: 'admin' }) >= 4, 'admin handshakes counted as admin');
  assert.equal(m.value('tokenmeter_tls_handshakes_total', { listener: 'proxy' }), 1, 'the one proxy handshake, counted apart');
  assert.ok(m.value('tokenmeter_tls_certificate_not_after_seconds', { listener: 'admin' }) > Date.now() / 1000);
  assert.ok(m.value('tokenmeter_tls_certificate_not_after_seconds', { listener: 'proxy' }) > Date.now() / 1000);

  // A keep-alive client reuses its TLS connection for several scrapes.
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: readFileSync(ca.cert), servername: 'localhost' });
  try {
    for (let i = 0; i < 3; i += 1) {
      const r = await new Promise((resolve, reject) => {
        https.get({ host: '127.0.0.1', port: proxy.adminPort, path: '/healthz', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode, reused: res.req.reusedSocket }));
        }).on('error', reject);
      });
      assert.equal(r.status, 200);
      assert.equal(r.reused, i > 0, `request ${i} on one connection`);
    }
  } finally {
    agent.destroy();
  }
});

test('mutual TLS required: a client with a certificate scrapes, one without is refused and counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: adminTlsConfig(liveFiles('mtls'), `  client_ca_file: ${ca.cert}\n  client_auth: require\n`),
  });
  const mtls = { cert: client.cert, key: client.key };
  assert.equal((await adminGet(proxy.adminPort, '/healthz', mtls)).status, 200);
  await assert.rejects(adminGet(proxy.adminPort, '/metrics'), 'no client certificate: no answer');
  const m = await waitAdminMetrics(proxy.adminPort, (x) =>
    x.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'no_client_certificate' }) >= 1, mtls);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'no_client_certificate' }), 1);
  // The proxy listener is untouched by admin_tls: still plain HTTP.
  const res = await request({ port: proxy.port, body: chatBody('m', { stream: false }) });
  assert.equal(res.status, 200, `plain proxy listener: ${res.error ?? res.status}`);
});

test('plain HTTP sent to the TLS admin port gets a plain 400 with a JSON body, and is counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: adminTlsConfig(liveFiles('plain')) });
  const { response: res, closed } = await rawExchange(proxy.adminPort,
    Buffer.from('GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n'), { timeoutMs: 5000 });
  assert.ok(res, 'an HTTP response came back');
  assert.equal(res.status, 400);
  assert.match(res.headers['content-type'], /application\/json/);
  const body = JSON.parse(res.body.toString());
  assert.equal(body.error.code, 'plain_http_on_tls_port');
  assert.match(body.error.message, /https:\/\//);
  assert.equal(closed, true, 'the connection closes after the answer');
  const m = await waitAdminMetrics(proxy.adminPort, (x) =>
    x.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'plaintext_http' }) >= 1);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'plaintext_http' }), 1);
});

test('a client that connects and never handshakes is closed after the deadline, and counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: adminTlsConfig(liveFiles('silent')) });
  const started = Date.now();
  const closedAfter = await new Promise((resolve, reject) => {
    const socket = net.connect(proxy.adminPort, '127.0.0.1');
    socket.on('error', () => {});
    socket.on('close', () => resolve(Date.now() - started));
    socket.setTimeout(30_000, () => reject(new Error('still open after 30 s')));
  });
  assert.ok(closedAfter >= 9000 && closedAfter < 20_000, `closed after ${closedAfter} ms (deadline 10 s)`);
  const m = await waitAdminMetrics(proxy.adminPort, (x) =>
    x.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'timeout' }) >= 1);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { listener: 'admin', reason: 'timeout' }), 1);
});

test('rotation by SIGHUP changes the served certificate; a bad new one is logged and the old kept', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const files = liveFiles('rotate');
  const proxy = await startProxy({ upstream: sim.port, config: adminTlsConfig(files, '  watch_interval: 0s\n') });
  assert.equal(await servedSerial(proxy.adminPort), '0FA1', 'serial 4001 at start');

  // 1. Files replaced in place, then SIGHUP (the watch is off: only the signal can do it).
  const second = makeLeaf(ca, 'admin2', { serial: '4002' });
  copyFileSync(second.key, files.key);
  copyFileSync(second.cert, files.cert);
  proxy.child.signal('SIGHUP');
  await waitFor(async () => (await servedSerial(proxy.adminPort)) === '0FA2', { timeoutMs: 5000, what: 'serial 4002 after SIGHUP' });

  // 2. A broken new certificate: logged naming admin_tls.cert_file, counted, the old one stays.
  writeFileSync(files.cert, 'not a certificate\n');
  proxy.child.signal('SIGHUP');
  const m = await waitAdminMetrics(proxy.adminPort, (x) =>
    x.value('tokenmeter_tls_certificate_reloads_total', { listener: 'admin', result: 'rejected' }) >= 1);
  assert.equal(m.value('tokenmeter_tls_certificate_reloads_total', { listener: 'admin', result: 'rejected' }), 1);
  assert.equal(m.value('tokenmeter_tls_certificate_reloads_total', { listener: 'admin', result: 'ok' }), 1);
  assert.equal(await servedSerial(proxy.adminPort), '0FA2', 'the last good certificate stays');
  await waitFor(() => /admin TLS: reload after SIGHUP failed.*admin_tls\.cert_file: not a PEM certificate chain/.test(proxy.child.stderrText),
    { what: 'the reload error naming admin_tls.cert_file' });
});

test('rotation by the file watch: renamed files are picked up without a signal', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const files = liveFiles('watch');
  const proxy = await startProxy({ upstream: sim.port, config: adminTlsConfig(files, '  watch_interval: 200ms\n') });
  assert.equal(await servedSerial(proxy.adminPort), '0FA1');
  const third = makeLeaf(ca, 'admin3', { serial: '4003' });
  copyFileSync(third.cert, `${files.cert}.new`);
  copyFileSync(third.key, `${files.key}.new`);
  renameSync(`${files.key}.new`, files.key);
  renameSync(`${files.cert}.new`, files.cert);
  await waitFor(async () => (await servedSerial(proxy.adminPort)) === '0FA3', { timeoutMs: 5000, what: 'serial 4003 from the watch' });
});

test('bad admin_tls files at start stop the proxy with an error naming admin_tls.<key>', { timeout: 60_000 }, () => {
  const { bin } = binaries();
  const cases = [
    ['missing certificate', adminTlsConfig({ cert: path.join(dir, 'nope.pem'), key: adminCert.key }),
      /admin_tls\.cert_file: cannot read .*nope\.pem/],
    ['garbage as the certificate', adminTlsConfig({ cert: adminCert.key, key: adminCert.key }),
      /admin_tls\.cert_file: not a PEM certificate chain/],
    ['a key for another certificate', adminTlsConfig({ cert: adminCert.cert, key: client.key }),
      /admin_tls\.key_file: does not match the certificate in admin_tls\.cert_file/],
    ['garbage as the key', adminTlsConfig({ cert: adminCert.cert, key: adminCert.cert }),
      /admin_tls\.key_file: not a PEM private key/],
    ['a certificate without a key', `admin_tls:\n  cert_file: ${adminCert.cert}\n`,
      /admin_tls\.key_file: is required/],
  ];
  for (const [what, tlsText, pattern] of cases) {
    const config = path.join(dir, `bad-admin-${what.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(config, `listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nreference_tokenizer: none\n${tlsText}`);
    const r = spawnSync(bin, ['--config', config], { timeout: 20_000, encoding: 'utf8' });
    assert.notEqual(r.status, 0, what);
    assert.match(r.stderr, pattern, `${what}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /(^|[^_])tls\.(cert|key)_file/, `${what}: names admin_tls, not tls`);
  }
});

// TLS to an https:// upstream: streams arrive whole through a verified TLS
// connection with SNI, pooled connections resume the worker's session, /readyz needs a handshake;
// a certificate for another host, an expired one and one from an unknown CA each get a 502 with a
// JSON body naming the reason and count as tokenmeter_upstream_errors_total{reason="tls"};
// insecure_skip_verify, a client certificate and server_name; config errors naming the key.
// The upstream is the simulator behind a Node TLS terminator; certificates come from the
// openssl CLI (lib/certs.mjs).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import {
  binaries, chatBody, describeResult, expectedText, request, sseText, startProxy, startSim,
  stopAll, waitFor, waitMetrics, waitReady,
} from './lib/harness.mjs';
import { startTlsFront } from './lib/tls_front.mjs';

let ca;
let good;
let otherHost;
let expired;
let clientCert;
let internalName;
const fronts = [];

before(() => {
  ca = makeCa();
  good = makeLeaf(ca, 'model-server');
  otherHost = makeLeaf(ca, 'other-host', { hosts: ['other.example'] });
  expired = makeLeaf(ca, 'expired', { expired: true });
  clientCert = makeLeaf(ca, 'tokenmeter-client', { client: true, hosts: [] });
  internalName = makeLeaf(ca, 'internal', { hosts: ['model.internal'] });
});

after(async () => {
  await stopAll();
  for (const front of fronts) await front.close();
});

async function front(leaf, extra = {}) {
  const sim = await startSim();
  const f = await startTlsFront({ cert: leaf.cert, key: leaf.key, targetPort: sim.port, ...extra });
  fronts.push(f);
  return f;
}

function stream(proxy, { tokens = 20, itlMs = 2, model = 'tls-up' } = {}) {
  return request({
    port: proxy.port, body: chatBody(model),
    headers: { 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': String(itlMs) },
  });
}

test('streams arrive whole over a verified https upstream; pooled connections resume the session',
  { timeout: 60_000 }, async () => {
    const f = await front(good);
    const proxy = await startProxy({
      upstream: `https://localhost:${f.port}`,
      config: `threads: 1\nupstream_tls:\n  ca_file: ${ca.cert}\n`,
    });
    assert.match(proxy.upstreamText, /^https:\/\/localhost:\d+$/);
    // /readyz is ready only after a whole handshake with the upstream.
    await waitReady(proxy);
    // The probe's side of the handshake ends first (it sends its Finished and closes); the front
    // records the connection when it has read that Finished, which can come a moment after
    // /readyz turned ready (seen under ThreadSanitizer). Waited for, not assumed.
    await waitFor(() => f.connections.length >= 1, { what: 'the readiness probe\'s TLS handshake' });

    const first = await stream(proxy);
    assert.equal(first.status, 200, describeResult(first));
    assert.equal(sseText(first.body.toString()), expectedText(20));

    // Four at once need three more connections. The first connection's server sent two TLS 1.3
    // tickets, each offered once: two of the three resume.
    const more = await Promise.all([0, 1, 2, 3].map(() => stream(proxy, { tokens: 30, itlMs: 20 })));
    for (const r of more) {
      assert.equal(r.status, 200, describeResult(r));
      assert.equal(sseText(r.body.toString()), expectedText(30));
    }
    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total') >= 5);
    assert.equal(m.value('tokenmeter_tokens_total', { model: 'tls-up', type: 'output' }), 20 + 4 * 30,
      'metered as over TCP');
    const resumedByServer = f.connections.filter((c) => c.resumed).length;
    const resumed = m.value('tokenmeter_upstream_tls_handshakes_total', { session: 'resumed' });
    const fresh = m.value('tokenmeter_upstream_tls_handshakes_total', { session: 'new' });
    assert.ok(resumed >= 2, `resumed ${resumed}, new ${fresh}`);
    assert.equal(resumed, resumedByServer, 'the server saw the same resumptions');
    assert.ok(fresh >= 1);
    assert.equal(m.value('tokenmeter_upstream_tls_insecure_skip_verify'), 0);
    assert.equal(m.value('tokenmeter_upstream_errors_total'), 0);
    for (const c of f.connections) {
      assert.equal(c.servername, 'localhost', 'SNI is the URL host');
      assert.equal(c.alpn, 'http/1.1');
      assert.match(c.protocol, /^TLSv1\.[23]$/);
    }
    await proxy.stop();
  });

test('a certificate for another host, an expired one and an unknown CA get a 502 naming the reason',
  { timeout: 90_000 }, async () => {
    const cases = [
      ['another host', otherHost, `upstream_tls:\n  ca_file: ${ca.cert}\n`, /hostname mismatch/i],
      ['expired', expired, `upstream_tls:\n  ca_file: ${ca.cert}\n`, /certificate has expired/i],
      ['unknown CA (the system bundle)', good, '', /unable to get local issuer certificate|self.signed/i],
    ];
    for (const [what, leaf, config, pattern] of cases) {
      const f = await front(leaf);
      const proxy = await startProxy({ upstream: `https://localhost:${f.port}`, config });
      const r = await stream(proxy);
      assert.equal(r.status, 502, `${what}: ${describeResult(r)}`);
      assert.match(r.headers['content-type'], /application\/json/);
      const body = JSON.parse(r.body.toString());
      assert.equal(body.error.code, 'upstream_tls_failed', what);
      assert.match(body.error.message, /^TLS with the upstream failed: /, what);
      assert.match(body.error.message, pattern, `${what}: ${body.error.message}`);
      const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_upstream_errors_total', { reason: 'tls' }) >= 1);
      assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'tls' }), 1, what);
      assert.equal(m.value('tokenmeter_upstream_tls_handshakes_total'), 0, what);
      // The probe's handshake fails the same way: not ready.
      const ready = await proxy.admin('/readyz');
      assert.equal(ready.status, 503, `${what}: /readyz ${ready.status}`);
      await proxy.stop();
    }
  });

test('insecure_skip_verify takes the expired certificate, warns at start and says so in /metrics',
  { timeout: 60_000 }, async () => {
    const f = await front(expired);
    const proxy = await startProxy({
      upstream: `https://localhost:${f.port}`, config: 'upstream_tls:\n  insecure_skip_verify: true\n',
    });
    const r = await stream(proxy);
    assert.equal(r.status, 200, describeResult(r));
    assert.equal(sseText(r.body.toString()), expectedText(20));
    const m = await proxy.metrics();
    assert.equal(m.value('tokenmeter_upstream_tls_insecure_skip_verify'), 1);
    await waitFor(() => /insecure_skip_verify is on: the upstream's certificate is NOT verified/.test(proxy.child.stderrText),
      { what: 'the warning' });
    await proxy.stop();
  });

test('a client certificate for an upstream that requires one; without it, a 502', { timeout: 60_000 }, async () => {
  const f = await front(good, { clientCa: ca.cert });
  const withCert = await startProxy({
    upstream: `https://localhost:${f.port}`,
    config: `upstream_tls:\n  ca_file: ${ca.cert}\n  cert_file: ${clientCert.cert}\n  key_file: ${clientCert.key}\n`,
  });
  const r = await stream(withCert);
  assert.equal(r.status, 200, describeResult(r));
  assert.equal(sseText(r.body.toString()), expectedText(20));
  assert.ok(f.connections.some((c) => c.authorized && c.peerSubject === 'tokenmeter-client'));
  await withCert.stop();

  const without = await startProxy({
    upstream: `https://localhost:${f.port}`, config: `upstream_tls:\n  ca_file: ${ca.cert}\n`,
  });
  const refused = await stream(without);
  assert.equal(refused.status, 502, describeResult(refused));
  assert.equal(JSON.parse(refused.body.toString()).error.code, 'upstream_tls_failed');
  const m = await waitMetrics(without, (x) => x.value('tokenmeter_upstream_errors_total', { reason: 'tls' }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'tls' }), 1);
  await without.stop();
});

test('server_name: an address in the URL, a DNS name in SNI and in the certificate check', { timeout: 60_000 }, async () => {
  const f = await front(internalName);
  const proxy = await startProxy({
    upstream: `https://127.0.0.1:${f.port}`,
    config: `upstream_tls:\n  ca_file: ${ca.cert}\n  server_name: model.internal\n`,
  });
  const r = await stream(proxy);
  assert.equal(r.status, 200, describeResult(r));
  await waitFor(() => f.connections.some((c) => c.servername === 'model.internal'), { what: 'SNI model.internal' });
  await proxy.stop();

  // Without it the address is checked against the certificate, which does not carry it.
  const plain = await startProxy({ upstream: `https://127.0.0.1:${f.port}`, config: `upstream_tls:\n  ca_file: ${ca.cert}\n` });
  const refused = await stream(plain);
  assert.equal(refused.status, 502, describeResult(refused));
  assert.match(JSON.parse(refused.body.toString()).error.message, /IP address mismatch/i);
  await plain.stop();
});

test('upstream_tls with an http upstream is a warning at start: the keys are not used', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: `upstream_tls:\n  ca_file: ${ca.cert}\n` });
  await waitFor(() => /upstream_tls is set but the upstream is http:\/\/; it is not used/.test(proxy.child.stderrText),
    { what: 'the warning' });
  const r = await stream(proxy);
  assert.equal(r.status, 200, describeResult(r));
  await proxy.stop();
});

test('config errors name the upstream_tls key', { timeout: 60_000 }, () => {
  const { bin } = binaries();
  const dir = ca.dir;
  const cases = [
    ['a missing CA file', 'https://127.0.0.1:9', `upstream_tls:\n  ca_file: ${path.join(dir, 'nope.pem')}\n`,
      /upstream_tls\.ca_file: cannot read .*nope\.pem/],
    ['a certificate without its key', 'https://127.0.0.1:9', `upstream_tls:\n  cert_file: ${clientCert.cert}\n`,
      /upstream_tls\.key_file: must be set together with upstream_tls\.cert_file/],
    ['a key of another certificate', 'https://127.0.0.1:9',
      `upstream_tls:\n  cert_file: ${clientCert.cert}\n  key_file: ${good.key}\n`,
      /upstream_tls\.key_file: .* is not the key of upstream_tls\.cert_file/],
    ['no key at all in the key file', 'https://127.0.0.1:9',
      `upstream_tls:\n  cert_file: ${clientCert.cert}\n  key_file: ${clientCert.cert}\n`,
      /upstream_tls\.key_file: no PEM private key in /],
    ['an unknown scheme', 'ftp://127.0.0.1:9', '', /upstream: .*ftp/],
  ];
  for (const [what, upstream, yaml, pattern] of cases) {
    const config = path.join(dir, `bad-${what.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(config, `listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nreference_tokenizer: none\nupstream: ${upstream}\n${yaml}`);
    const r = spawnSync(bin, ['--config', config], { timeout: 20_000, encoding: 'utf8' });
    assert.notEqual(r.status, 0, what);
    assert.match(r.stderr, pattern, `${what}: ${r.stderr}`);
  }
});

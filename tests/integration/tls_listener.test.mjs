// TLS on the proxy listener: streams through it byte for byte, mutual
// TLS required / optional, the intermediate profile (TLS 1.0/1.1, non-ECDHE ciphers and an
// h2-only ALPN refused, probed with `openssl s_client`), certificate rotation under live streams
// (files swapped, then SIGHUP or the file watch), bad files at start and on reload, and the
// forwarding headers a TLS client gets upstream. Certificates are made here with the openssl CLI.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import {
  binaries, chatBody, expectedText, parseSse, rawExchange, sleep, startProxy,
  startSim, stopAll, waitFor,
  waitMetrics,
} from './lib/harness.mjs';
import { httpsRequest as httpsRequestTrusting } from './lib/https.mjs';
import { startRecordingUpstream } from './lib/recording_upstream.mjs';

after(stopAll);

let ca;
let server;
let client;
let stranger;  // a client certificate from a CA the proxy does not trust
let dir;

before(() => {
  ca = makeCa();
  dir = ca.dir;
  server = makeLeaf(ca, 'server', { serial: '1001' });
  client = makeLeaf(ca, 'client', { client: true, hosts: [] });
  const otherCa = makeCa('other-ca');
  stranger = makeLeaf(otherCa, 'stranger', { client: true, hosts: [] });
});

// The files the proxy is configured with; tests that rotate swap what is behind these names.
function liveFiles(tag) {
  const cert = path.join(dir, `live-${tag}.pem`);
  const key = path.join(dir, `live-${tag}.key`);
  copyFileSync(server.cert, cert);
  copyFileSync(server.key, key);
  return { cert, key };
}

function tlsConfig(files, extra = '') {
  return `tls:\n  cert_file: ${files.cert}\n  key_file: ${files.key}\n${extra}`;
}

// One HTTPS request trusting the test CA (lib/https.mjs).
function httpsRequest(port, options = {}) {
  return httpsRequestTrusting(port, { caFile: ca.cert, ...options });
}

// A TLS handshake alone: {ok, serial, error}.
function handshake(port, options = {}) {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: '127.0.0.1', port, servername: 'localhost', ca: readFileSync(ca.cert), ...options,
    });
    socket.once('secureConnect', () => {
      const serial = socket.getPeerCertificate().serialNumber;
      // TLS 1.3: a refused client certificate shows as an alert after the handshake, so wait for
      // the first read to tell.
      socket.once('error', (error) => resolve({ ok: false, error: error.message }));
      socket.once('close', () => resolve({ ok: false, error: 'closed' }));
      socket.write('GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
      socket.once('data', () => {
        resolve({ ok: true, serial, alpn: socket.alpnProtocol, resumed: socket.isSessionReused() });
        socket.destroy();
      });
    });
    socket.once('error', (error) => resolve({ ok: false, error: error.message }));
  });
}

// `openssl s_client` with extra arguments; returns {ok, output}: ok when a session was set up.
function sClient(port, args) {
  const r = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost',
    '-CAfile', ca.cert, ...args], { input: '', timeout: 10_000, encoding: 'utf8' });
  const output = `${r.stdout}\n${r.stderr}`;
  // A negotiated session names its cipher; a refused one prints "Cipher is (NONE)" or an alert.
  const ok = /Cipher is (?!\(NONE\))/.test(output) && !/alert|handshake failure/i.test(r.stderr);
  return { ok, output };
}

// A close the proxy chooses (Connection: close) ends with close_notify, so the client knows the
// response was not cut and keeps the session: the next connection resumes it.
test('a Connection: close answer ends with close_notify, and the session resumes', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: tlsConfig(liveFiles('close')) });
  const session = path.join(dir, 'close-session.pem');
  const ask = (args) => {
    const r = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${proxy.port}`, '-servername', 'localhost',
      '-CAfile', ca.cert, '-ign_eof', ...args],
    { input: 'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', timeout: 10_000, encoding: 'utf8' });
    return `${r.stdout}\n${r.stderr}`;
  };
  const first = ask(['-sess_out', session]);
  assert.match(first, /HTTP\/1\.1 200/);
  assert.doesNotMatch(first, /unexpected eof/i, 'the proxy sent close_notify before closing');
  assert.match(first, /^New, TLSv1\.3/m);
  const second = ask(['-sess_in', session]);
  assert.match(second, /^Reused, TLSv1\.3/m, second);
  assert.doesNotMatch(second, /unexpected eof/i);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tls_handshakes_total', { session: 'resumed' }) >= 1);
  assert.equal(m.value('tokenmeter_tls_handshakes_total', { listener: 'proxy', session: 'resumed' }), 1);
  await proxy.stop();
});

test('a stream through the TLS listener arrives whole, and the handshake is TLS 1.3 with ALPN http/1.1', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: tlsConfig(liveFiles('stream')) });
  const res = await httpsRequest(proxy.port, {
    body: chatBody('tls-model'),
    headers: { 'x-sim-output-tokens': '20', 'x-sim-itl-ms': '2' },
  });
  assert.equal(res.status, 200);
  assert.equal(res.protocol, 'TLSv1.3');
  const text = parseSse(res.body).map((e) => e.data).filter((d) => d && d !== '[DONE]')
    .map((d) => JSON.parse(d)).map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
  assert.equal(text, expectedText(20));
  const alpn = await handshake(proxy.port, { ALPNProtocols: ['h2', 'http/1.1'] });
  assert.equal(alpn.ok, true);
  assert.equal(alpn.alpn, 'http/1.1', 'the proxy chooses http/1.1 from a list that has it');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tls_handshakes_total') >= 2);
  assert.ok(m.value('tokenmeter_tls_handshakes_total', { listener: 'proxy' }) >= 2);
  assert.equal(m.value('tokenmeter_tokens_total', { model: 'tls-model', type: 'output' }), 20, 'metered as over TCP');
  assert.ok(m.value('tokenmeter_tls_certificate_not_after_seconds', { listener: 'proxy' }) > Date.now() / 1000);
});

test('the intermediate profile: TLS 1.0/1.1, a non-ECDHE cipher and an h2-only ALPN are refused and counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: tlsConfig(liveFiles('profile')) });
  assert.equal(sClient(proxy.port, ['-tls1_2']).ok, true, 'TLS 1.2 with the defaults works');
  for (const [what, args] of [
    ['TLS 1.0', ['-tls1', '-cipher', 'DEFAULT@SECLEVEL=0']],
    ['TLS 1.1', ['-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0']],
    ['RSA key exchange', ['-tls1_2', '-cipher', 'AES128-GCM-SHA256']],
    ['CBC with SHA-1', ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-SHA']],
  ]) {
    const r = sClient(proxy.port, args);
    assert.equal(r.ok, false, `${what} must be refused:\n${r.output}`);
  }
  const h2 = await handshake(proxy.port, { ALPNProtocols: ['h2'] });
  assert.equal(h2.ok, false, 'an h2-only client gets a clean handshake failure');
  assert.match(h2.error, /no.application.protocol|alert 120/i);
  // Plain HTTP sent to the TLS port is not answered as HTTP.
  const m = await waitMetrics(proxy, (x) =>
    x.value('tokenmeter_tls_handshake_errors_total', { reason: 'no_application_protocol' }) >= 1 &&
    x.value('tokenmeter_tls_handshake_errors_total', { reason: 'protocol_version' }) >= 2, 5000);
  assert.ok(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'protocol_version' }) >= 2);
  assert.ok(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'no_shared_cipher' }) >= 2);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'no_application_protocol' }), 1);
});

test('mutual TLS required: a client without a certificate or with an untrusted one is refused', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: tlsConfig(liveFiles('mtls'), `  client_ca_file: ${ca.cert}\n  client_auth: require\n`),
  });
  const good = await httpsRequest(proxy.port, { body: chatBody('m'), cert: client.cert, key: client.key });
  assert.equal(good.status, 200);
  const none = await handshake(proxy.port);
  assert.equal(none.ok, false, 'no certificate');
  const untrusted = await handshake(proxy.port, { cert: readFileSync(stranger.cert), key: readFileSync(stranger.key) });
  assert.equal(untrusted.ok, false, 'a certificate from another CA');
  const m = await waitMetrics(proxy, (x) =>
    x.value('tokenmeter_tls_handshake_errors_total', { reason: 'no_client_certificate' }) >= 1 &&
    x.value('tokenmeter_tls_handshake_errors_total', { reason: 'bad_client_certificate' }) >= 1, 5000);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'no_client_certificate' }), 1);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'bad_client_certificate' }), 1);
});

test('mutual TLS optional: no certificate is fine, an untrusted one is refused', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: tlsConfig(liveFiles('optional'), `  client_ca_file: ${ca.cert}\n  client_auth: optional\n`),
  });
  assert.equal((await httpsRequest(proxy.port, { body: chatBody('m') })).status, 200);
  assert.equal((await httpsRequest(proxy.port, { body: chatBody('m'), cert: client.cert, key: client.key })).status, 200);
  const untrusted = await handshake(proxy.port, { cert: readFileSync(stranger.cert), key: readFileSync(stranger.key) });
  assert.equal(untrusted.ok, false);
});

test('rotation under live streams: no stream breaks, new handshakes see the new certificate (SIGHUP and file watch)', { timeout: 90_000 }, async () => {
  const sim = await startSim();
  const files = liveFiles('rotate');
  const proxy = await startProxy({ upstream: sim.port, config: tlsConfig(files, '  watch_interval: 200ms\n') });
  assert.equal((await handshake(proxy.port)).serial, '03E9', 'serial 1001 at start');

  // Streams of about 1.5 s, started before each rotation.
  const streams = [];
  const startStreams = (n) => {
    for (let i = 0; i < n; i += 1) {
      streams.push(httpsRequest(proxy.port, {
        body: chatBody('rot'), headers: { 'x-sim-output-tokens': '60', 'x-sim-itl-ms': '25' },
      }));
    }
  };
  startStreams(4);
  await sleep(200);

  // 1. SIGHUP after the files were replaced in place (watch would catch it too; either is fine).
  const second = makeLeaf(ca, 'server2', { serial: '2002' });
  copyFileSync(second.key, files.key);
  copyFileSync(second.cert, files.cert);
  proxy.child.signal('SIGHUP');
  await waitFor(async () => (await handshake(proxy.port)).serial === '07D2', { timeoutMs: 5000, what: 'serial 2002' });

  // 2. The Kubernetes way: new files renamed over the old names, no signal; the watch sees it.
  startStreams(4);
  await sleep(200);
  const third = makeLeaf(ca, 'server3', { serial: '3003' });
  copyFileSync(third.cert, `${files.cert}.new`);
  copyFileSync(third.key, `${files.key}.new`);
  renameSync(`${files.key}.new`, files.key);
  renameSync(`${files.cert}.new`, files.cert);
  await waitFor(async () => (await handshake(proxy.port)).serial === '0BBB', { timeoutMs: 5000, what: 'serial 3003' });

  // 3. A broken new certificate: logged and counted, the one in use stays.
  startStreams(2);
  writeFileSync(files.cert, 'not a certificate\n');
  proxy.child.signal('SIGHUP');
  await waitMetrics(proxy, (x) => x.value('tokenmeter_tls_certificate_reloads_total', { result: 'rejected' }) >= 1, 5000);
  assert.equal((await handshake(proxy.port)).serial, '0BBB', 'the last good certificate stays');

  const results = await Promise.all(streams);
  for (const r of results) {
    assert.equal(r.status, 200);
    assert.match(r.body, /data: \[DONE\]/, 'every stream that was running finished whole');
  }
  // A request is counted when its exchange ends, which can be a moment after its client read the
  // last byte (a slow sanitized build on a busy machine shows it): wait for the tenth.
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { outcome: 'complete', model: 'rot' }) >= 10, 5000);
  assert.ok(m.value('tokenmeter_tls_certificate_reloads_total', { result: 'ok' }) >= 2);
  assert.equal(m.value('tokenmeter_requests_total', { outcome: 'complete', model: 'rot' }), 10);
  await waitFor(() => /tls\.cert_file: not a PEM certificate chain/.test(proxy.child.stderrText), { what: 'the reload error naming tls.cert_file' });
});

test('bad files at start stop the proxy with an error naming the key', { timeout: 60_000 }, () => {
  const { bin } = binaries();
  const cases = [
    ['missing certificate', { cert: path.join(dir, 'nope.pem'), key: server.key }, /tls\.cert_file: cannot read .*nope\.pem/],
    ['a key for another certificate', { cert: server.cert, key: client.key }, /tls\.key_file: does not match/],
    ['garbage as the key', { cert: server.cert, key: server.cert }, /tls\.key_file: not a PEM private key/],
  ];
  for (const [what, files, pattern] of cases) {
    const config = path.join(dir, `bad-${what.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(config, `listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nreference_tokenizer: none\n${tlsConfig(files)}`);
    const r = spawnSync(bin, ['--config', config], { timeout: 20_000, encoding: 'utf8' });
    assert.notEqual(r.status, 0, what);
    assert.match(r.stderr, pattern, `${what}: ${r.stderr}`);
  }
});

test('forwarding headers: a TLS client gets X-Forwarded-Proto https, Forwarded and (append) X-Forwarded-For upstream', { timeout: 60_000 }, async () => {
  const upstream = await startRecordingUpstream();
  const proxy = await startProxy({
    upstream: upstream.port,
    config: `forwarded_for: append\n${tlsConfig(liveFiles('fwd'))}`,
  });
  const res = await httpsRequest(proxy.port, {
    method: 'GET', pathName: '/v1/models', headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'http' },
  });
  assert.equal(res.status, 200);
  const seen = upstream.requests()[0].bytes.toString();
  assert.match(seen, /\r\nx-forwarded-for: 203\.0\.113\.9, 127\.0\.0\.1\r\n/i);
  assert.match(seen, /\r\nx-forwarded-proto: https\r\n/i);
  assert.doesNotMatch(seen, /x-forwarded-proto: http\r\n/i);
  assert.match(seen, /\r\nforwarded: for=127\.0\.0\.1;proto=https\r\n/i);
  // The proxy first: its readiness probe's connections would hold the upstream's close.
  await proxy.stop();
  await upstream.close();
});

test('plain HTTP sent to the TLS port gets a plain 400 with a JSON body, and is counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: tlsConfig(liveFiles('plain')) });
  const { response: res } = await rawExchange(proxy.port, Buffer.from('GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n'), { untilComplete: true });
  assert.ok(res, 'an HTTP response came back');
  assert.equal(res.status, 400);
  assert.equal(JSON.parse(res.body.toString()).error.code, 'plain_http_on_tls_port');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tls_handshake_errors_total', { reason: 'plaintext_http' }) >= 1);
  assert.equal(m.value('tokenmeter_tls_handshake_errors_total', { reason: 'plaintext_http' }), 1);
  assert.equal((await sim.stats()).requests, 1, 'nothing reached the upstream but the stats request');
});

// The usage shipper over https to a billing receiver that requires a bearer token:
// records arrive exactly once as CloudEvents batches with the token from token_file
// and from token_env, over one kept-alive TLS connection with SNI (and a new one once the
// receiver closes it); a certificate for another
// host or from an untrusted CA gets nothing and is counted as `tls`; a refused token (401) is
// counted as `unauthorized` and retried until the rotated token file is accepted; bad CA and
// token settings stop the start (and a bad CA file on SIGHUP is refused) naming the key. The
// token never appears in the proxy's output. Certificates are made here with the openssl CLI.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import {
  binaries, chatBody, makeTempDir, request, startProxy, startSim, stopAll, waitFor, waitForLog,
  waitMetrics,
} from './lib/harness.mjs';
import { readRecords, takeCloudEventsBatch } from './lib/usage.mjs';

after(stopAll);

let ca;
let good;        // localhost and 127.0.0.1, signed by ca
let otherHost;   // signed by ca, but for other.example only
let untrusted;   // for localhost, signed by a CA the proxy does not trust

before(() => {
  ca = makeCa('sink-test-ca');
  good = makeLeaf(ca, 'sink');
  otherHost = makeLeaf(ca, 'sink-other-host', { hosts: ['other.example'] });
  const stranger = makeCa('sink-stranger-ca');
  untrusted = makeLeaf(stranger, 'sink-untrusted');
});

// A billing receiver over https that wants `Authorization: Bearer <token>`. Counts events by
// id, TLS connections and the SNI each one sent. A refused request gets a 401 whose body echoes
// the Authorization header it saw (the proxy must not log that echo with the token in it).
class Receiver {
  constructor(token, leaf = good) {
    this.token = token;
    this.received = new Map();
    this.posts = 0;
    this.refused = 0;
    this.connections = 0;
    this.servernames = [];
    this.problems = [];
    this.leaf = leaf;
  }

  async start() {
    this.server = https.createServer({ ...this.context(this.leaf), keepAliveTimeout: 30_000 }, (req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        this.posts += 1;
        if (req.headers.authorization !== `Bearer ${this.token}`) {
          this.refused += 1;
          res.writeHead(401, { 'content-type': 'text/plain' });
          res.end(`no: ${req.headers.authorization}`);
          return;
        }
        takeCloudEventsBatch(req, Buffer.concat(chunks), this.received, this.problems);
        res.writeHead(202);
        res.end();
      });
    });
    this.server.on('secureConnection', (socket) => {
      this.connections += 1;
      this.servernames.push(socket.servername);
    });
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', resolve);
    });
    this.port = this.server.address().port;
  }

  context(leaf) {
    return { cert: readFileSync(leaf.cert), key: readFileSync(leaf.key) };
  }

  // Serve another certificate to new connections.
  use(leaf) {
    this.server.setSecureContext(this.context(leaf));
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function sinkConfig(spool, receiver, extra) {
  return [
    'tenants:',
    '  source: header',
    'usage:',
    `  spool_dir: ${spool}`,
    '  sink:',
    `    url: https://localhost:${receiver.port}/api/v1/events`,
    `    ca_file: ${ca.cert}`,
    '    batch_size: 5',
    '    backoff_initial: 50ms',
    '    backoff_max: 300ms',
    '    request_timeout: 2s',
    ...extra.map((line) => `    ${line}`),
    '',
  ].join('\n');
}

// A proxy whose sink token comes from an environment variable only it sees.
async function startWithTokenEnv(sim, spool, receiver, token) {
  process.env.TM_TEST_SINK_TOKEN = token;
  try {
    return await startProxy({
      upstream: sim.port, config: sinkConfig(spool, receiver, ['token_env: TM_TEST_SINK_TOKEN']),
    });
  } finally {
    delete process.env.TM_TEST_SINK_TOKEN;
  }
}

async function send(proxy, n, prefix) {
  for (let i = 0; i < n; i++) {
    const res = await request({ port: proxy.port, body: chatBody('sink-model', { includeUsage: true }),
      headers: { 'x-tenant-id': `tenant-${i % 2}`, 'x-request-id': `${prefix}-${i}`,
        'x-sim-output-tokens': '2', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0' } });
    assert.equal(res.status, 200);
  }
}

async function allArrivedOnce(receiver, spool, count) {
  const ids = readRecords(spool).map((r) => r.id);
  assert.equal(ids.length, count);
  await waitFor(() => ids.every((id) => receiver.received.has(id)),
    { timeoutMs: 15_000, what: `all ${count} records at the receiver` });
  assert.deepEqual(receiver.problems, []);
  assert.deepEqual([...receiver.received].filter(([, n]) => n !== 1), [], 'records received more than once');
  assert.equal(receiver.received.size, count);
}

function assertNoToken(proxy, token) {
  assert.ok(!proxy.child.stderrText.includes(token), 'the token is in the proxy\'s stderr');
  assert.ok(!proxy.child.stdoutText.includes(token), 'the token is in the proxy\'s stdout');
}

test('https sink: token from token_file, one kept-alive TLS connection with SNI, reconnection after the receiver closes it, every record once; a bad CA file on SIGHUP is refused', { timeout: 60_000 }, async () => {
  const token = 'tm-file-token-5f1c0a9e';
  const receiver = new Receiver(token);
  await receiver.start();
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const tokenFile = path.join(ca.dir, 'token-file-test');
  writeFileSync(tokenFile, `${token}\n`);  // as `echo` writes it
  const caCopy = path.join(ca.dir, 'ca-copy.pem');
  copyFileSync(ca.cert, caCopy);
  const proxy = await startProxy({
    upstream: sim.port,
    config: sinkConfig(spool, receiver, [`token_file: ${tokenFile}`]).replace(ca.cert, caCopy),
  });
  // Three rounds, each shipped before the next starts: several batches over one connection.
  await send(proxy, 7, 'a');
  await waitFor(() => receiver.received.size >= 7, { timeoutMs: 10_000, what: 'round 1' });
  await send(proxy, 6, 'b');
  await waitFor(() => receiver.received.size >= 13, { timeoutMs: 10_000, what: 'round 2' });

  // A CA file that no longer holds a certificate: SIGHUP logs the key, the CAs in use stay.
  writeFileSync(caCopy, 'not a certificate\n');
  proxy.child.signal('SIGHUP');
  await waitFor(() => /usage\.sink\.ca_file: no PEM CA certificate/.test(proxy.child.stderrText),
    { timeoutMs: 5000, what: 'the reload error naming usage.sink.ca_file' });
  // The receiver closes the idle connection: the next batch reconnects (with the CAs loaded at
  // start), silently, without an error.
  assert.equal(receiver.connections, 1, 'batches share one TLS connection');
  receiver.server.closeIdleConnections();
  await send(proxy, 4, 'c');
  await allArrivedOnce(receiver, spool, 17);

  assert.ok(receiver.posts >= 4, `${receiver.posts} posts`);
  assert.equal(receiver.refused, 0);
  assert.equal(receiver.connections, 2, 'one reconnection after the receiver closed');
  assert.deepEqual(receiver.servernames, ['localhost', 'localhost'], 'SNI is the URL\'s host');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_records') === 0, 5000);
  assert.equal(m.value('tokenmeter_usage_ship_errors_total'), 0);
  assert.ok(!(await proxy.metricsText()).includes(token), 'the token is in /metrics');
  await proxy.stop();
  assertNoToken(proxy, token);
  await receiver.stop();
});

test('https sink: token from token_env; a 401 is counted as unauthorized and retried until the rotated token file is accepted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  {
    const token = 'tm-env-token-77d2e4b1';
    const receiver = new Receiver(token);
    await receiver.start();
    const spool = makeTempDir('tokenmeter-spool-');
    const proxy = await startWithTokenEnv(sim, spool, receiver, token);
    await send(proxy, 6, 'env');
    await allArrivedOnce(receiver, spool, 6);
    assert.equal(receiver.refused, 0);
    await proxy.stop();
    assertNoToken(proxy, token);
    await receiver.stop();
  }
  {
    const wrong = 'tm-old-token-0b9a3c11';
    const right = 'tm-new-token-e3f4a5b6';
    const receiver = new Receiver(right);
    await receiver.start();
    const spool = makeTempDir('tokenmeter-spool-');
    const tokenFile = path.join(ca.dir, 'token-rotated');
    writeFileSync(tokenFile, wrong);
    const proxy = await startProxy({
      upstream: sim.port, config: sinkConfig(spool, receiver, [`token_file: ${tokenFile}`]),
    });
    await send(proxy, 8, 'rot');
    const m = await waitMetrics(proxy, (x) =>
      x.value('tokenmeter_usage_ship_errors_total', { reason: 'unauthorized' }) >= 2, 10_000);
    assert.equal(m.value('tokenmeter_usage_spool_records'), 8);
    assert.equal(receiver.received.size, 0);
    await waitForLog(proxy.child, /did not accept \d+ records \(unauthorized: HTTP 401: no: Bearer \[token\]\)/);
    // The secret is rotated on disk; the next attempt reads it.
    writeFileSync(tokenFile, `${right}\n`);
    await allArrivedOnce(receiver, spool, 8);
    assert.ok(receiver.refused >= 2);
    await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_records') === 0, 5000);
    await proxy.stop();
    assertNoToken(proxy, wrong);
    assertNoToken(proxy, right);
    await receiver.stop();
  }
});

test('https sink: a certificate for another host or from an untrusted CA gets nothing and is counted as tls; the right one then gets every record once', { timeout: 60_000 }, async () => {
  const token = 'tm-tls-token-4c4c21aa';
  const receiver = new Receiver(token, otherHost);
  await receiver.start();
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startWithTokenEnv(sim, spool, receiver, token);
  await send(proxy, 6, 'tls');
  let m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_ship_errors_total', { reason: 'tls' }) >= 2, 10_000);
  await waitForLog(proxy.child, /\(tls: TLS handshake: .*hostname mismatch/i);
  const hostFailures = m.value('tokenmeter_usage_ship_errors_total', { reason: 'tls' });

  receiver.use(untrusted);
  m = await waitMetrics(proxy, (x) =>
    x.value('tokenmeter_usage_ship_errors_total', { reason: 'tls' }) >= hostFailures + 2, 10_000);
  // The log has the first failure in a row and every tenth.
  await waitFor(() => /unable to get local issuer certificate/.test(proxy.child.stderrText),
    { timeoutMs: 15_000, what: 'an untrusted-CA failure in the log' });
  assert.equal(receiver.posts, 0, 'no request went over an unverified connection');
  assert.equal(m.value('tokenmeter_usage_spool_records'), 6);

  receiver.use(good);
  await allArrivedOnce(receiver, spool, 6);
  await proxy.stop();
  assertNoToken(proxy, token);
  await receiver.stop();
});

test('bad sink settings at start stop the proxy with an error naming the key', { timeout: 60_000 }, () => {
  const { bin } = binaries();
  const spool = makeTempDir('tokenmeter-spool-');
  const base = (extra) => [
    'listen: 127.0.0.1:0', 'admin: 127.0.0.1:0', 'reference_tokenizer: none', 'usage:',
    `  spool_dir: ${spool}`, '  sink:', '    url: https://localhost:9/e',
    ...extra.map((line) => `    ${line}`), ''].join('\n');
  const cases = [
    ['missing CA file', [`ca_file: ${path.join(ca.dir, 'nope.pem')}`], /usage\.sink\.ca_file: cannot read .*nope\.pem/],
    ['a key as the CA file', [`ca_file: ${good.key}`], /usage\.sink\.ca_file: no PEM CA certificate/],
    ['missing token file', [`token_file: ${path.join(ca.dir, 'no-token')}`], /usage\.sink\.token_file: cannot read .*no-token/],
    ['unset token variable', ['token_env: TM_TEST_UNSET_VARIABLE'], /usage\.sink\.token_env: environment variable TM_TEST_UNSET_VARIABLE is not set or empty/],
  ];
  for (const [what, extra, pattern] of cases) {
    const config = path.join(ca.dir, `bad-sink-${what.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(config, base(extra));
    const r = spawnSync(bin, ['--config', config], { timeout: 20_000, encoding: 'utf8' });
    assert.notEqual(r.status, 0, what);
    assert.match(r.stderr, pattern, `${what}: ${r.stderr}`);
  }
});

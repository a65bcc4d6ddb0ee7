// The usage shipper against a local receiver standing in for the billing system: records go
// out as CloudEvents batches; while the receiver is down (and while it answers 503) the backlog
// grows and is visible in the metrics, nothing is dropped, the backlog survives a SIGKILL of the
// proxy, and once the receiver is back every record arrives exactly once by id.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  chatBody, makeTempDir, request, startProxy, startSim, stopAll, waitFor, waitMetrics,
} from './lib/harness.mjs';
import { readRecords, takeCloudEventsBatch } from './lib/usage.mjs';

after(stopAll);

// A receiver on a fixed port that can be stopped and started again. Counts every event by id.
class Receiver {
  constructor() {
    this.received = new Map();  // id -> times
    this.posts = 0;
    this.failNext = 0;          // answer 503 to this many posts
    this.problems = [];
  }

  async start(port = 0) {
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        this.posts += 1;
        if (this.failNext > 0) {
          this.failNext -= 1;
          res.writeHead(503, { 'content-type': 'application/json' });
          res.end('{"error":"try later"}');
          return;
        }
        takeCloudEventsBatch(req, Buffer.concat(chunks), this.received, this.problems);
        res.writeHead(202);
        res.end();
      });
    });
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', resolve);
    });
    this.port = this.server.address().port;
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

test('shipper: receiver down, backlog grows, proxy killed, receiver back: every record once', { timeout: 60_000 }, async () => {
  const receiver = new Receiver();
  await receiver.start();
  after(() => receiver.server.listening && receiver.stop());
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = [
    'tenants:',
    '  source: header',
    'usage:',
    `  spool_dir: ${spool}`,
    '  sink:',
    `    url: http://127.0.0.1:${receiver.port}/api/v1/events`,
    '    batch_size: 7',
    '    backoff_initial: 50ms',
    '    backoff_max: 400ms',
    '    request_timeout: 2s',
    '',
  ].join('\n');
  let proxy = await startProxy({ upstream: sim.port, config });
  const send = async (n, prefix) => {
    for (let i = 0; i < n; i++) {
      const res = await request({ port: proxy.port, body: chatBody('ship-model', { includeUsage: true }),
        headers: { 'x-tenant-id': `tenant-${i % 2}`, 'x-request-id': `${prefix}-${i}`,
          'x-sim-output-tokens': '3', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0' } });
      assert.equal(res.status, 200);
    }
  };

  await send(20, 'up');
  await waitFor(() => receiver.received.size >= 20, { timeoutMs: 10_000, what: '20 events received' });

  // Receiver down: records pile up in the spool and in the gauges, and errors are counted.
  await receiver.stop();
  await send(30, 'down');
  let m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_records') >= 30 &&
    x.value('tokenmeter_usage_ship_errors_total') >= 2, 10_000);
  assert.equal(m.value('tokenmeter_usage_spool_records'), 30);
  assert.ok(m.value('tokenmeter_usage_ship_errors_total') >= 2);
  m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_oldest_age_seconds') > 0.2, 5000);
  assert.ok(m.value('tokenmeter_usage_spool_oldest_age_seconds') > 0.2);

  // The proxy dies with the backlog unshipped; its successor still knows about it.
  await proxy.stop('SIGKILL');
  proxy = await startProxy({ upstream: sim.port, config, name: 'proxy-2' });
  m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_records') >= 30, 5000);
  assert.equal(m.value('tokenmeter_usage_spool_records'), 30);
  await send(5, 'after');

  // Back, but answering 503 twice first: those batches are retried, not lost.
  receiver.failNext = 2;
  await receiver.start(receiver.port);
  const ids = readRecords(spool).map((r) => r.id);
  assert.equal(ids.length, 55);
  await waitFor(() => ids.every((id) => receiver.received.has(id)),
    { timeoutMs: 20_000, what: 'every spooled record at the receiver' });
  assert.deepEqual(receiver.problems, []);
  assert.equal(receiver.failNext, 0, 'the two 503 answers were not exercised');
  const twice = [...receiver.received].filter(([, n]) => n !== 1);
  assert.deepEqual(twice, [], 'records received more than once');
  assert.equal(receiver.received.size, 55);
  m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_records') === 0, 5000);
  assert.equal(m.value('tokenmeter_usage_spool_records'), 0);
  assert.equal(m.value('tokenmeter_usage_spool_oldest_age_seconds'), 0);
});

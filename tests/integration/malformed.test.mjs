// Malformed and ambiguous requests over raw TCP: each gets its error status with a JSON body,
// the ambiguous ones also a closed connection, and nothing reaches the upstream.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  rawExchange, startProxy, startSim, stopAll, waitMetrics, waitReady,
} from './lib/harness.mjs';

after(stopAll);

let sim;
let proxy;
before(async () => {
  sim = await startSim();
  // A small body limit, and no readiness probe during the test (it would connect upstream).
  proxy = await startProxy({
    upstream: sim.port,
    config: 'limits:\n  max_request_body_bytes: 1KiB\nreadiness:\n  probe_interval: 1h\n',
  });
  await waitReady(proxy);
});

const HEAD = 'POST /v1/chat/completions HTTP/1.1\r\nHost: tokenmeter.test\r\nContent-Type: application/json\r\n';
const BODY = '{"model":"malformed","messages":[{"role":"user","content":"hi"}],"stream":true}';

// Sends raw bytes; asserts the status, a JSON error body, the connection closing when required,
// a rejected request counted, and the simulator untouched.
async function expectRejected(raw, status, { closes = true } = {}) {
  const statsBefore = await sim.stats();
  const metricsBefore = await proxy.metrics();
  const rejectedBefore = metricsBefore.value('tokenmeter_requests_total', { outcome: 'rejected', code: String(status) });

  const result = await rawExchange(proxy.port, raw, { timeoutMs: 3000 });
  const res = result.response;
  assert.ok(res, `no HTTP response; got ${JSON.stringify(result.data.toString().slice(0, 300))}`);
  assert.equal(res.status, status, `status line: ${JSON.stringify(result.data.toString().split('\r\n')[0])}`);
  assert.match(res.headers['content-type'] || '', /^application\/json/);
  assert.ok(res.complete, 'the whole error body arrived');
  assert.ok(res.json && typeof res.json.error === 'object', `JSON error body: ${res.body.toString()}`);
  assert.equal(typeof res.json.error.code, 'string');
  assert.equal(typeof res.json.error.message, 'string');
  if (closes) {
    assert.equal(result.closed, true, 'the proxy closed the connection');
    assert.match(res.headers.connection || 'close', /close/i);
  }

  const m = await waitMetrics(proxy, (x) =>
    x.value('tokenmeter_requests_total', { outcome: 'rejected', code: String(status) }) > rejectedBefore);
  assert.equal(m.value('tokenmeter_requests_total', { outcome: 'rejected', code: String(status) }),
    rejectedBefore + 1, 'counted once as rejected');

  const statsAfter = await sim.stats();
  // The /sim/stats request itself adds one request and one connection.
  assert.equal(statsAfter.requests - statsBefore.requests, 1, 'no request reached the simulator');
  assert.equal(statsAfter.connections_accepted - statsBefore.connections_accepted, 1,
    'the proxy opened no upstream connection');
  return result;
}

test('a garbage request line: 400 JSON, connection closed', { timeout: 20_000 }, async () => {
  await expectRejected('THIS IS NOT HTTP AT ALL\r\n\r\n', 400);
});

test('Content-Length together with Transfer-Encoding: 400, connection closed', { timeout: 20_000 }, async () => {
  const chunked = `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`;
  await expectRejected(`${HEAD}Content-Length: ${BODY.length}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`, 400);
});

test('two differing Content-Length headers: 400, connection closed', { timeout: 20_000 }, async () => {
  await expectRejected(`${HEAD}Content-Length: ${BODY.length}\r\nContent-Length: ${BODY.length + 1}\r\n\r\n${BODY}`, 400);
});

test('Transfer-Encoding: gzip (not chunked): 400, connection closed', { timeout: 20_000 }, async () => {
  await expectRejected(`${HEAD}Transfer-Encoding: gzip\r\n\r\n${BODY}`, 400);
});

test('a body over limits.max_request_body_bytes: 413 JSON', { timeout: 20_000 }, async () => {
  const big = JSON.stringify({ model: 'malformed-big', messages: [{ role: 'user', content: 'x'.repeat(4096) }] });
  await expectRejected(`${HEAD}Content-Length: ${big.length}\r\n\r\n${big}`, 413);
});

test('a chunked body over limits.max_request_body_bytes: 413 JSON', { timeout: 20_000 }, async () => {
  const big = JSON.stringify({ model: 'malformed-big', messages: [{ role: 'user', content: 'y'.repeat(4096) }] });
  const chunked = `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`;
  await expectRejected(`${HEAD}Transfer-Encoding: chunked\r\n\r\n${chunked}`, 413);
});

test('a request head over limits.max_request_header_bytes: 431 JSON', { timeout: 20_000 }, async () => {
  await expectRejected(`${HEAD}X-Huge: ${'h'.repeat(70 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`, 431);
});

test('a well-formed request on the same proxy still goes through', { timeout: 20_000 }, async () => {
  const statsBefore = await sim.stats();
  const raw = `${HEAD}Content-Length: ${BODY.length}\r\nConnection: close\r\nX-Sim-Output-Tokens: 3\r\n\r\n${BODY}`;
  const result = await rawExchange(proxy.port, raw, { timeoutMs: 5000 });
  assert.equal(result.response && result.response.status, 200, result.data.toString().slice(0, 300));
  assert.ok(result.response.complete, 'the chunked stream ended with its last chunk');
  assert.ok(result.response.body.toString().includes('data: [DONE]'));
  const statsAfter = await sim.stats();
  assert.equal(statsAfter.requests - statsBefore.requests, 2, 'one proxied request plus /sim/stats');
});
